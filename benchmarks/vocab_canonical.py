"""Benchmark twinflow.vocab's canonical encoding and import time against their named peers.

1. For a 50-message transcript: canonical encode + sha256 digest, as a ratio to
   `json.dumps(sort_keys=True)` + sha256 of the same data (target: at most 3x). Measured twice:
   from the JSON dump (the encoders alone) and from the model (`digest(transcript)`, which
   includes pydantic's `model_dump`).
2. `import twinflow.vocab` in a fresh interpreter vs `import pydantic` (target: within 25 ms),
   best of N; `from pydantic import BaseModel` shown too, since `import pydantic` alone is lazy.

Run: .venv/bin/python benchmarks/vocab_canonical.py
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import timeit

from twinflow.vocab import (
    CallId,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
    canonical_bytes,
    digest,
)


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
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number  # type: ignore[arg-type]


def import_time(statement: str, runs: int) -> float:
    """Best wall time of a fresh interpreter running `statement`, minus an empty interpreter."""

    def once(code: str) -> float:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import time; t=time.perf_counter(); {code}; print(time.perf_counter()-t)",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return float(out.stdout)

    return min(once(statement) for _ in range(runs))


def main() -> None:
    """Print the figures and ratios."""
    t = transcript_of_50()
    data = t.model_dump(mode="json")
    assert canonical_bytes(data) == canonical_bytes(t)

    peer = best(lambda: hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest(), 300)
    ours_dump = best(lambda: hashlib.sha256(canonical_bytes(data)).hexdigest(), 300)
    ours_model = best(lambda: digest(t), 300)
    print(f"50-message transcript: {len(canonical_bytes(t))} canonical bytes")
    print(f"  peer   json.dumps(sort_keys=True)+sha256 : {peer * 1e6:8.1f} us")
    print(
        f"  ours   canonical_bytes(dump)+sha256      : {ours_dump * 1e6:8.1f} us  ratio {ours_dump / peer:.2f}x (target <= 3x)"
    )
    print(
        f"  ours   digest(transcript) incl. model_dump: {ours_model * 1e6:8.1f} us  ratio {ours_model / peer:.2f}x"
    )

    runs = 15
    pyd = import_time("import pydantic", runs)
    base = import_time("from pydantic import BaseModel", runs)
    vocab = import_time("import twinflow.vocab", runs)
    print(f"import time, best of {runs} fresh interpreters:")
    print(f"  import pydantic                 : {pyd * 1e3:6.1f} ms")
    print(f"  from pydantic import BaseModel  : {base * 1e3:6.1f} ms")
    print(
        f"  import twinflow.vocab           : {vocab * 1e3:6.1f} ms  (+{(vocab - pyd) * 1e3:.1f} ms vs import pydantic, target <= 25 ms; +{(vocab - base) * 1e3:.1f} ms vs BaseModel)"
    )


if __name__ == "__main__":
    main()
