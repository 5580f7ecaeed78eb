"""Hostile-input classes for hosted models: model strings, Gemini replies, fallback lists.

Three attacks, each counted:

1. **Model strings.** Generated strings built from the characters a model string is made of
   (``:``, ``@``, ``/``, a provider's name or a near miss, a URL, a non-ASCII letter, a NUL),
   read from a run spec's ``model:``: each is the long form or a one-line `SpecError`, never
   another exception, and no string is taken for a provider it does not name.
2. **Gemini replies.** The recorded ``generateContent`` answers, each value in turn replaced by
   one of the wrong shapes (null, a number, a string, an empty list or object, a deep list),
   read plain and streamed (cut at a random byte): a reply or a `MalformedResponseError` (reason
   ``malformed`` or ``refused``), never another exception.
3. **Every model down.** ``twinflow run`` on a fallback list whose servers answer 503 and 429:
   exit 2 in one line, the trace holds the switch and ``run_failed``, and replay reproduces it
   without a server.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import Figures, twinflow

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.models import MalformedResponseError
from twinflow.models._gemini_wire import gemini_chunks, parse_gemini
from twinflow.trace import TwinflowError

ROOT = Path(__file__).resolve().parents[1]
STREAMS = ROOT / "packages/twinflow-models/tests/fixtures/streams"
PIECES = (
    "openai", "opnai", "gemini", "anthropic", "ollama", "vllm", "llama.cpp", "embedded", ":",
    "::", "@", "@@", "http://127.0.0.1:9", "https://", "ftp://h", "gpt-4o-mini", "qwen2.5:0.5b",
    "/", " ", "é", "\x00", "\n", "", "user:pw@", "?key=k",
)  # fmt: skip
WRONG: tuple[Any, ...] = (None, 7, "x", [], {}, [[[[[]]]]], True)


def _strings(rng: random.Random, count: int) -> Iterator[str]:
    for _ in range(count):
        yield "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 5)))


def model_strings(figures: Figures, count: int, rng: random.Random) -> None:
    """Each generated string, read from a spec file, is the long form or a one-line SpecError."""
    from twinflow.agent import RunSpec

    read = refused = 0
    for text in _strings(rng, count):
        try:
            spec = RunSpec.parse(f"prompt: p\nmodel: {json.dumps(text)}\n", "spec.yaml")
        except TwinflowError as exc:
            refused += 1
            if "\n" in str(exc).strip():
                figures.fail(f"model {text!r}: a multi-line error: {exc}")
            continue
        except Exception as exc:  # the invariant: nothing but a typed error
            figures.fail(f"model {text!r}: {type(exc).__name__}: {exc}")
            continue
        read += 1
        prefix = text.partition(":")[0]
        if spec.model.kind != "openai-compatible" and prefix not in (
            "anthropic",
            "gemini",
            "ollama",
        ):
            figures.fail(f"model {text!r} was read as kind {spec.model.kind}")
    figures.values["model strings: read / refused in one line"] = f"{read} / {refused}"


def _mutations(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, wrong value) pair of `value`'s members."""
    members = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, member in members:
        for wrong in WRONG:
            yield (*path, key), wrong
        yield from _mutations(member, (*path, key))


def _replaced(value: Any, path: tuple[Any, ...], wrong: Any) -> Any:
    copy = json.loads(json.dumps(value))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = wrong
    return copy


def gemini_replies(figures: Figures, rng: random.Random) -> None:
    """Each mutated answer, plain and streamed: a reply or a MalformedResponseError."""
    plain: dict[str, Any] = json.loads((STREAMS / "gemini_plain.json").read_text())
    url = "http://127.0.0.1:9/v1beta/models/m:generateContent"
    replies = typed = 0
    for answer in plain.values():
        for path, wrong in _mutations(answer):
            mutated = _replaced(answer, path, wrong)
            data = b"data: " + json.dumps(mutated).encode() + b"\n\n"
            cut = rng.randint(0, len(data))
            for streamed in (False, True):
                try:
                    if streamed:
                        list(gemini_chunks([data[:cut], data[cut:]], url))
                    else:
                        parse_gemini(mutated, url)
                    replies += 1
                except MalformedResponseError:
                    typed += 1
                except Exception as exc:  # the invariant: nothing but the typed error
                    figures.fail(f"gemini {path} = {wrong!r}: {type(exc).__name__}: {exc}")
    figures.values["gemini mutated replies: read / typed error"] = f"{replies} / {typed}"


def every_model_down(figures: Figures, work: Path) -> None:
    """503 then 429: exit 2 in one line, the switch and run_failed traced, replay passes."""
    root = work / "every-model-down"
    root.mkdir()

    def busy(status: int) -> Any:
        def answer(request: LoopbackRequest) -> LoopbackResponse:
            return LoopbackResponse.json_body({"error": "busy"}, status=status)

        return answer

    with LoopbackServer(busy(503)) as one, LoopbackServer(busy(429)) as two:
        (root / "spec.yaml").write_text(
            f"prompt: hi\nmodel: [vllm:a@{one.url}, vllm:b@{two.url}]\nmax_steps: 2\n"
        )
        ran = twinflow("run", "spec.yaml", "--out", "out", "--quiet", cwd=root)
    kinds = [
        json.loads(line)["event"]["body"]["kind"]
        for line in (root / "out/trace.jsonl").read_text().splitlines()
    ]
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml", cwd=root)
    checks = {
        "exit 2": ran.returncode == 2,
        "one line": len(ran.stderr.strip().splitlines()) == 1,
        "switch traced": kinds.count("model_fell_back") == 1,
        "run_failed": kinds[-1] == "run_failed",
        "replay passes": replayed.returncode == 0,
    }
    for name, held in checks.items():
        if not held:
            figures.fail(f"every model down: not {name} ({ran.stderr.strip()} {replayed.stderr})")
    figures.values["every model down: invariants held"] = f"{sum(checks.values())} of {len(checks)}"


def hosted_models(figures: Figures, work: Path, full: bool) -> None:
    """The three classes of the module docstring."""
    rng = random.Random(20261205)
    model_strings(figures, 2000 if full else 300, rng)
    gemini_replies(figures, rng)
    every_model_down(figures, work)
