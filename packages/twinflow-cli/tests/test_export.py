"""`twinflow export otel`: a verified trace as OTLP/JSON spans in the GenAI conventions."""

from __future__ import annotations

import base64
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from twinflow.agent import Agent, FunctionModel, Policy, Trace
from twinflow.cli._main import main
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.kernel._process import run_process
from twinflow.trace import FileTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart

SECRET_ARGUMENT = 41


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def reply(request: ModelRequest) -> Message:
    """Call `add` (and a denied `rm`), then answer."""
    if not any(m.role == "tool" for m in request.transcript.messages):
        return Message(
            role="assistant",
            parts=(
                ToolCallPart(id=CallId("k1"), name="add", arguments={"a": SECRET_ARGUMENT, "b": 1}),
                ToolCallPart(id=CallId("k2"), name="rm", arguments={"path": "/"}),
            ),
        )
    return Message.assistant("the sum is 42")


def record(path: Path) -> Path:
    """One scripted run with a tool call and a denial."""
    with Agent(
        FunctionModel(reply),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        tools=[add],
        policy=Policy(allow=frozenset({"add"})),
        trace=FileTraceSink(path),
    ) as agent:
        agent.run("add 41 and 1")
    return path


def parsed(text: str) -> ExportTraceServiceRequest:
    """Parse OTLP/JSON as a collector does: its ids are hex (protobuf's JSON says base64)."""
    document = json.loads(text)
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.Parse(json.dumps(document), ExportTraceServiceRequest())


def attributes(span: Any) -> dict[str, Any]:
    """A span's attributes as plain values."""
    return {a.key: json_format.MessageToDict(a.value).popitem()[1] for a in span.attributes}


def export(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run `twinflow export` in process; its exit code and stdout."""
    code = main(["export", *argv])
    return code, capsys.readouterr().out


def test_spans_follow_the_conventions_and_check_against_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run, chat and tool spans; each names its event, whose digest is the trace's."""
    trace = record(tmp_path / "t.jsonl")
    code, out = export(capsys, "otel", str(trace))
    spans = parsed(out).resource_spans[0].scope_spans[0].spans
    loaded = Trace.load(trace)
    root = loaded.checkpoint().root
    by_name = {s.name: s for s in spans}
    run = by_name["invoke_agent twinflow"]
    tool = by_name["execute_tool add"]
    expected = (
        0,
        ["invoke_agent twinflow", "chat FunctionModel", "execute_tool add", "chat FunctionModel"],
        {bytes.fromhex(loaded.digests[0][:32])},
        {run.span_id},
        ("invoke_agent", "chat", "execute_tool"),
        ("add", "k1"),
        True,
        ["allow", "deny"],
    )
    actual = (
        code,
        [s.name for s in spans],
        {s.trace_id for s in spans},
        {s.parent_span_id for s in spans if s is not run},
        tuple(attributes(s)["gen_ai.operation.name"] for s in (run, spans[1], tool)),
        (attributes(tool)["gen_ai.tool.name"], attributes(tool)["gen_ai.tool.call.id"]),
        all(
            attributes(s)["twinflow.event.digest"]
            == loaded.digests[int(attributes(s)["twinflow.event.seq"])]
            and s.span_id == bytes.fromhex(attributes(s)["twinflow.event.digest"][:16])
            and attributes(s)["twinflow.trace.root"] == root
            for s in spans
        ),
        [
            {a.key: a.value.string_value for a in e.attributes}["twinflow.decision"]
            for e in run.events
            if e.name == "gen_ai.guardrail.decision"
        ],
    )
    assert expected == actual


def test_content_leaves_the_trace_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --content no argument or result is exported; with it, both are."""
    trace = record(tmp_path / "t.jsonl")
    _, plain = export(capsys, "otel", str(trace))
    _, full = export(capsys, "otel", str(trace), "--content")
    tool = next(s for s in parsed(full).resource_spans[0].scope_spans[0].spans if "add" in s.name)
    expected = (False, '{"a": 41, "b": 1}', "42")
    actual = (
        f'"a": {SECRET_ARGUMENT}' in plain,
        attributes(tool)["gen_ai.tool.call.arguments"],
        attributes(tool)["gen_ai.tool.call.result"],
    )
    assert expected == actual


def test_a_trace_that_does_not_verify_exports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited event: exit 1, nothing on stdout, no file written."""
    trace = record(tmp_path / "t.jsonl")
    lines = trace.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"a":41', b'"a":40')
    trace.write_bytes(b"".join(lines))
    out_file = tmp_path / "spans.json"
    code, out = export(capsys, "otel", str(trace), "--out", str(out_file))
    assert (1, "", False) == (code, out, out_file.exists())


def test_out_never_writes_over_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--out names a new file: an existing one is kept as it was, exit 2."""
    trace = record(tmp_path / "t.jsonl")
    taken = tmp_path / "spans.json"
    taken.write_text("mine")
    code, _ = export(capsys, "otel", str(trace), "--out", str(taken))
    assert (2, "mine") == (code, taken.read_text())


def test_a_redacted_event_stays_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`twinflow redact` then export: the hidden call has no span, only its seq and digest."""
    trace = record(tmp_path / "t.jsonl")
    seq = next(i for i, kind in enumerate(Trace.load(trace).kinds) if kind == "tool_called")
    published = tmp_path / "published.jsonl"
    assert 0 == main(["redact", str(trace), "--seq", str(seq), "--out", str(published)])
    capsys.readouterr()
    code, out = export(capsys, "otel", str(published), "--content")
    spans = parsed(out).resource_spans[0].scope_spans[0].spans
    notes = [e for e in spans[0].events if e.name == "twinflow.redacted"]
    expected = (0, False, 1, False)
    actual = (
        code,
        any("execute_tool" in s.name for s in spans),
        len(notes),
        f'"a": {SECRET_ARGUMENT}' in out,
    )
    assert expected == actual


def test_stdout_redirected_is_the_document(tmp_path: Path) -> None:
    """As a user types it: `uv run --frozen twinflow export otel T > spans.json` parses."""
    uv = shutil.which("uv") or os.environ["UV"]
    trace = record(tmp_path / "t.jsonl")
    done = run_process(
        [uv, "run", "--frozen", "twinflow", "export", "otel", str(trace)],
        cwd=Path(__file__).resolve().parents[3],
    )
    spans = parsed(done.stdout).resource_spans[0].scope_spans[0].spans
    assert (0, 4) == (done.returncode, len(spans))
