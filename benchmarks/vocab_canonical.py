"""Benchmark twinflow.vocab's canonical encoding and import time against their named peers.

1. For a 50-message transcript: canonical encode + sha256 digest, as a ratio to
   `json.dumps(sort_keys=True)` + sha256 of the same data (target: at most 3x). Measured twice:
   from the JSON dump (the encoders alone) and from the model (`digest(transcript)`, which
   includes pydantic's `model_dump`).
2. Import time in fresh interpreters, best of N: `import pydantic`, `from pydantic import
   BaseModel`, `import twinflow.vocab` (target: within 25 ms of `import pydantic`),
   `from twinflow.vocab import Message` (the first use of a model name, which pays pydantic's
   model machinery) and `import twinflow.models` (target: within 40 ms).

Run: .venv/bin/python benchmarks/vocab_canonical.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import timeit

from _bench import add_smoke  # this folder: sys.path[0]

from twinflow.vocab import (
    CallId,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes


def transcript_of_50() -> Transcript:
    """A realistic agent transcript: system, then user / assistant-with-tool-call / tool rounds."""
    messages = [Message.system("You are a careful assistant. Use the tools when they help.")]
    i = 0
    while len(messages) < 50:
        messages.append(
            Message.user(f"Question {i}: what is the weather in città numero {i}? Réponds vite.")
        )
        messages.append(
            Message(
                role="assistant",
                parts=(
                    ReasoningPart(text=f"I should call get_weather for city {i}."),
                    TextPart(text="Let me check."),
                    ToolCallPart(
                        id=CallId(f"call_{i}"),
                        name="get_weather",
                        arguments={
                            "city": f"città {i}",
                            "units": "metric",
                            "days": 3,
                            "detail": 0.5,
                        },
                    ),
                ),
            )
        )
        messages.append(
            Message(
                role="tool",
                parts=(
                    ToolResultPart(
                        call_id=CallId(f"call_{i}"),
                        name="get_weather",
                        content=f'{{"temp": {20 + i % 7}}}',
                    ),
                ),
            )
        )
        i += 1
    return Transcript(messages=tuple(messages[:50]))


def best(stmt: object, number: int, repeat: int = 7) -> float:
    """Best per-call time in seconds."""
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number


# The least a pydantic user with JSON fields pays: BaseModel, JsonValue and one class built.
ONE_MODEL = (
    "from pydantic import BaseModel, JsonValue; "
    "type('A', (BaseModel,), {'__annotations__': {'x': JsonValue}})"
)
IMPORTS = (
    "import pydantic",
    "from pydantic import BaseModel",
    ONE_MODEL,
    "import twinflow.vocab",
    "from twinflow.vocab import Message",
    "import twinflow.models",
)


def import_times(
    statements: tuple[str, ...] = IMPORTS, runs: int = 15, env: dict[str, str] | None = None
) -> dict[str, float]:
    """Best-of-`runs` seconds each statement takes in a fresh interpreter (startup excluded).

    Rounds interleave the statements, so a busy moment on the machine hits all of them alike.
    ``env`` replaces the children's environment (default: this process's).
    """
    code = "import time; t=time.perf_counter(); {}; print(time.perf_counter()-t)"
    best = dict.fromkeys(statements, float("inf"))
    for _ in range(runs):
        for statement in statements:
            out = subprocess.run(
                [sys.executable, "-c", code.format(statement)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            best[statement] = min(best[statement], float(out.stdout))
    return best


def print_import_times(times: dict[str, float], runs: int) -> None:
    """Print each import with its difference to `import pydantic` and to `BaseModel`.

    `import pydantic` is itself lazy: the first model class pulls pydantic's model machinery
    (`from pydantic import BaseModel`). A package that resolves its names on first use imports
    in less than that, so the honest cost of using it is the first name that is a model.
    """
    pyd, base = times["import pydantic"], times["from pydantic import BaseModel"]
    print(f"import time, best of {runs} fresh interpreters (interleaved; startup excluded):")
    for statement, t in times.items():
        label = "one model with a JsonValue field" if statement == ONE_MODEL else statement
        print(
            f"  {label:36}: {t * 1e3:6.1f} ms  ({(t - pyd) * 1e3:+6.1f} ms vs import pydantic, "
            f"{(t - base) * 1e3:+6.1f} ms vs BaseModel; ratio {t / pyd:.2f}x pydantic)"
        )
    for statement, target in (("import twinflow.vocab", 25), ("import twinflow.models", 40)):
        if statement in times:
            delta = (times[statement] - pyd) * 1e3
            verdict = "met" if delta <= target else "NOT met"
            print(
                f"  {statement}: {delta:+.1f} ms vs import pydantic, target <= {target} ms: {verdict}"
            )
    if "from twinflow.vocab import Message" in times:
        first_use = (times["from twinflow.vocab import Message"] - base) * 1e3
        print(
            f"  first model name (Message) costs {first_use:+.1f} ms over BaseModel: the import "
            "target is met by deferring, the model machinery is still paid on first use"
        )
    if ONE_MODEL in times and "from twinflow.vocab import Message" in times:
        ours = (times["from twinflow.vocab import Message"] - times[ONE_MODEL]) * 1e3
        print(f"  ... of which {ours:+.1f} ms over one pydantic model with a JsonValue field")


def main() -> None:
    """Print the figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_smoke(parser)
    smoke = parser.parse_args().smoke
    number = 3 if smoke else 300
    t = transcript_of_50()
    data = t.model_dump(mode="json")
    assert canonical_bytes(data) == canonical_bytes(t)

    peer = best(
        lambda: hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest(), number
    )
    ours_dump = best(lambda: hashlib.sha256(canonical_bytes(data)).hexdigest(), number)
    ours_model = best(lambda: digest(t), number)
    print(f"50-message transcript: {len(canonical_bytes(t))} canonical bytes")
    print(f"  peer   json.dumps(sort_keys=True)+sha256 : {peer * 1e6:8.1f} us")
    print(
        f"  ours   canonical_bytes(dump)+sha256      : {ours_dump * 1e6:8.1f} us  ratio {ours_dump / peer:.2f}x (target <= 3x)"
    )
    print(
        f"  ours   digest(transcript) incl. model_dump: {ours_model * 1e6:8.1f} us  ratio {ours_model / peer:.2f}x"
    )

    runs = 1 if smoke else 15
    print_import_times(import_times(runs=runs), runs)


if __name__ == "__main__":
    main()
