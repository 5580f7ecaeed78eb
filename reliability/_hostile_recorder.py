"""Hostile-input campaign, recordings and collectors: what a forged pydantic-ai recording can
make a replay do, and what a hostile OTLP collector can make an export do.

Two attacks, each counted (`recorder` runs both; `hostile.py` calls it):

1. **Forged recordings.** A pydantic-ai run recorded with `RecordingModel`, then each event's
   body changed and the chain recomputed so the trace verifies, and each event's bytes changed
   without recomputing it, and the trace cut before its end: `ReplayModel` refuses a trace that
   does not verify (`TraceCorruptError`), fails a changed request, tool call or result at
   exactly its seq (`ReplayDivergenceError`), and serves a changed response as recorded (the
   recording is what it replays); never another exception.
2. **Hostile collectors.** ``twinflow export otel --endpoint`` against a collector that resets
   mid-answer, answers garbage, errors, redirects, stalls or answers a huge body: exit 2 with
   one line naming the endpoint, nothing on stdout, no traceback, the trace untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from _common import Figures
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from twinflow.cli._main import main as twinflow_main
from twinflow.kernel import LoopbackServer, ReplayDivergenceError
from twinflow.kernel._loopback import LoopbackResponse
from twinflow.pydantic_ai import RecordingModel, ReplayModel
from twinflow.trace import TraceCorruptError, canonical_bytes
from twinflow.trace._format import GENESIS, encode_line

PROMPT = "What is 2 + 3?"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("add", {"a": 2, "b": 3}, "call_1")])
    return ModelResponse(parts=[TextPart("The sum is 5.")])


def _run(model: Any) -> str:
    async def go() -> str:
        return (await Agent(model, tools=[add]).run(PROMPT)).output

    return asyncio.run(go())


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line)["event"] for line in path.read_bytes().splitlines()]


def _rechained(events: list[dict[str, Any]]) -> bytes:
    """The events as a trace that verifies: each ``prev`` and digest recomputed."""
    out, prev = b"", GENESIS
    for seq, event in enumerate(events):
        line, prev = encode_line(canonical_bytes({**event, "seq": seq, "prev": prev}))
        out += line
    return out


def _forge(body: dict[str, Any]) -> dict[str, Any] | None:
    """The body with one value a replay must notice (or serve), or None if it has none."""
    forged = json.loads(json.dumps(body))
    if body["kind"] == "run_started":
        forged["prompt"] = "What is 2 + 4?"
    elif body["kind"] == "model_requested":
        forged["settings"] = {"temperature": 0.5}
    elif body["kind"] == "tool_called":
        forged["arguments"] = {"a": 2, "b": 4}
    elif body["kind"] == "tool_returned":
        forged["result"]["content"] = "6"
    elif body["kind"] == "model_responded":
        forged["response"]["model_name"] = "forged"
    else:
        return None
    return forged


def _replay(path: Path) -> tuple[str, int | None]:
    """What a replay of the file did: ok, diverged (with its seq), corrupt, or another error."""
    try:
        _run(ReplayModel(path))
    except ReplayDivergenceError as exc:
        return "diverged", exc.seq
    except TraceCorruptError:
        return "corrupt", None
    except Exception as exc:  # the invariant: nothing else escapes
        return f"unexpected {type(exc).__name__}: {exc}", None
    return "ok", None


def forged_recordings(figures: Figures, work: Path) -> None:
    """Every event forged in the chain, in its bytes, and every cut: refused or served."""
    original = work / "recorded.jsonl"
    with RecordingModel(FunctionModel(_reply), original) as model:
        _run(model)
    events = _events(original)
    checked = diverged = served = corrupt = 0
    for seq, event in enumerate(events):
        forged_body = _forge(event["body"])
        if forged_body is not None:
            path = work / f"forged-{seq}.jsonl"
            path.write_bytes(
                _rechained([*events[:seq], {**event, "body": forged_body}, *events[seq + 1 :]])
            )
            what, at = _replay(path)
            responded = event["body"]["kind"] == "model_responded"
            expected = ("ok", None) if responded else ("diverged", seq)
            if (what, at) != expected:
                figures.fail(f"forged {event['body']['kind']} at seq {seq}: {what} at {at}")
            diverged += not responded
            served += responded
            checked += 1
        lines = original.read_bytes().splitlines(keepends=True)
        tampered = work / f"tampered-{seq}.jsonl"
        tampered.write_bytes(
            b"".join([*lines[:seq], lines[seq].replace(b'"seq"', b'"Seq"'), *lines[seq + 1 :]])
        )
        cut = work / f"cut-{seq}.jsonl"
        cut.write_bytes(
            b"".join(lines[: seq + 1]) if seq + 1 < len(lines) else b"".join(lines[:-1])
        )
        for path in (tampered, cut):
            what, _ = _replay(path)
            if what != "corrupt":
                figures.fail(f"{path.name}: replay {what}, not refused as corrupt")
            corrupt += 1
            checked += 1
    figures.values["recorder: forged recordings checked"] = checked
    figures.values["recorder: diverged at the forged seq"] = diverged
    figures.values["recorder: forged responses served as recorded"] = served
    figures.values["recorder: tampered or cut, refused"] = corrupt


COLLECTORS: dict[str, LoopbackResponse] = {
    "reset mid-answer": LoopbackResponse(body=b"x" * 64, behaviour="reset_mid_body"),
    "garbage instead of HTTP": LoopbackResponse(
        body=b"\x00\xffnot http\r\n\r\n", behaviour="garbage"
    ),
    "500": LoopbackResponse(status=500, body=b"collector down"),
    "400": LoopbackResponse(status=400, body=b'{"message":"bad"}'),
    "redirect": LoopbackResponse(status=307, headers=(("Location", "http://127.0.0.1:9/"),)),
    "stall": LoopbackResponse(delay=30),
    "huge answer": LoopbackResponse(body=b"0" * (1 << 20), repeat=40),
}


def hostile_collectors(figures: Figures, work: Path) -> None:
    """Each hostile collector: exit 2, one line naming it, nothing on stdout, trace untouched."""
    trace = work / "recorded.jsonl"
    before = hashlib.sha256(trace.read_bytes()).hexdigest()
    refused = 0
    for name, answer in COLLECTORS.items():
        with LoopbackServer(lambda _request, answer=answer: answer) as server:
            err, out = io.StringIO(), io.StringIO()
            argv = ["export", "otel", str(trace), "--endpoint", server.url, "--timeout", "1"]
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                code = twinflow_main(argv)
        said = err.getvalue()
        ok = (
            code == 2
            and out.getvalue() == ""
            and server.url in said
            and "Traceback" not in said
            and len(said.strip().splitlines()) == 1
        )
        if not ok:
            figures.fail(f"collector {name}: exit {code}, stderr {said[:300]!r}")
        refused += ok
    if hashlib.sha256(trace.read_bytes()).hexdigest() != before:
        figures.fail("an export to a hostile collector changed the trace")
    figures.values["recorder: hostile collectors refused"] = f"{refused}/{len(COLLECTORS)}"


def recorder(figures: Figures, work: Path) -> None:
    """Both attacks."""
    directory = work / "recorder"
    directory.mkdir()
    forged_recordings(figures, directory)
    hostile_collectors(figures, directory)
