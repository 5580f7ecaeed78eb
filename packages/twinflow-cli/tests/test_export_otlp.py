"""`twinflow export otel --endpoint`: OTLP/HTTP protobuf to a collector; eval scores as events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import EVAL_PROMPT, SUMS, calc_project
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from test_export import attributes, export, parsed, record

from twinflow.agent import Trace, typed_event
from twinflow.cli._main import main
from twinflow.kernel import LoopbackResponse, LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.kernel._netpolicy import free_port
from twinflow.trace import walk_trace
from twinflow.views._otel import EvalScore, otlp_json
from twinflow.views._otlp_proto import otlp_protobuf


def collector(request: LoopbackRequest) -> LoopbackResponse:
    """An OTLP/HTTP receiver: takes protobuf, answers an empty export response."""
    ExportTraceServiceRequest.FromString(request.body)  # refuses what is not the message
    return LoopbackResponse(
        headers=(("Content-Type", "application/x-protobuf"),),
        body=ExportTraceServiceResponse().SerializeToString(),
    )


def received(server: LoopbackServer) -> ExportTraceServiceRequest:
    """The one request the collector got, decoded with opentelemetry-proto."""
    (request,) = server.requests
    return ExportTraceServiceRequest.FromString(request.body)


def test_the_protobuf_is_byte_equal_to_opentelemetry_protos(tmp_path: Path) -> None:
    """The standard-library encoder writes what the official classes serialise, scores too."""
    trace = record(tmp_path / "t.jsonl")
    events = [(e.seq, e.digest, e.value) for e in walk_trace(trace, check=typed_event)]
    root = Trace.load(trace).checkpoint().root
    scores = [EvalScore("exact", 1.0, "passed", "matched", "s1@1"), EvalScore("f", 0.0, "failed")]
    for content in (False, True):
        document = otlp_json(events, root, content=content, version="0.1.0", scores=scores)
        assert parsed(json.dumps(document)).SerializeToString() == otlp_protobuf(document)


def test_endpoint_sends_the_spans_as_protobuf_to_a_collector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The collector decodes the same spans the JSON export holds, at /v1/traces, as protobuf."""
    trace = record(tmp_path / "t.jsonl")
    _, text = export(capsys, "otel", str(trace))
    with LoopbackServer(collector) as server:
        code, out = export(capsys, "otel", str(trace), "--endpoint", server.url)
        got = received(server)
        (request,) = server.requests
    headers = {k.lower(): v for k, v in request.headers}
    expected = (0, "", "/v1/traces", "application/x-protobuf", parsed(text))
    actual = (code, out, request.path, headers["content-type"], got)
    assert expected == actual


def test_every_sent_span_checks_against_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each span and span event names the trace's root, its event's seq and that digest."""
    trace = record(tmp_path / "t.jsonl")
    loaded = Trace.load(trace)
    with LoopbackServer(collector) as server:
        assert 0 == export(capsys, "otel", str(trace), "--endpoint", server.url + "/v1/traces")[0]
        spans = received(server).resource_spans[0].scope_spans[0].spans
    marked = [attributes(s) for s in spans] + [
        {a.key: a.value.string_value or a.value.int_value for a in e.attributes}
        for s in spans
        for e in s.events
    ]
    assert all(
        m["twinflow.trace.root"] == loaded.checkpoint().root
        and m["twinflow.event.digest"] == loaded.digests[int(m["twinflow.event.seq"])]
        for m in marked
    )
    assert len(marked) > len(spans)


def test_an_endpoint_that_is_down_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens: exit 2 naming the endpoint, nothing on stdout, the trace unchanged."""
    trace = record(tmp_path / "t.jsonl")
    before = trace.read_bytes()
    url = f"http://127.0.0.1:{free_port()}"
    code = main(["export", "otel", str(trace), "--endpoint", url])
    captured = capsys.readouterr()
    expected = (2, "", True, before)
    actual = (code, captured.out, url in captured.err, trace.read_bytes())
    assert expected == actual


def test_a_collector_that_never_answers_costs_the_timeout_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stalled collector: the export gives up at --timeout with a timeout error, exit 2."""
    trace = record(tmp_path / "t.jsonl")
    stalled = LoopbackResponse(delay=60)  # cut short when the server stops

    with LoopbackServer(lambda _: stalled) as server:
        code = main(["export", "otel", str(trace), "--endpoint", server.url, "--timeout", "0.2"])
    err = capsys.readouterr().err
    assert (2, True) == (code, "timed out" in err or "timeout" in err)


@pytest.mark.parametrize("argv", [["--timeout", "0"], ["--case", "s1@1"]])
def test_bad_export_arguments_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A zero timeout, or --case on a single trace: exit 2 with the reason, nothing exported."""
    trace = record(tmp_path / "t.jsonl")
    code, out = export(capsys, "otel", str(trace), *argv)
    assert (2, "") == (code, out)


@pytest.fixture
def run_dir(tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]) -> Path:
    """An eval run of two cases on the scripted server."""
    project = calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=SUMS)
    argv = ["eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml")]
    assert 0 == main([*argv, "--out", str(project / "out")])
    capsys.readouterr()
    return project / "out"


def _evaluations(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    spans = request.resource_spans[0].scope_spans[0].spans
    return [
        {a.key: a.value.string_value or a.value.double_value for a in e.attributes}
        for s in spans
        for e in s.events
        if e.name == "gen_ai.evaluation.result"
    ]


def test_an_eval_run_exports_each_case_with_its_scores(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every case's run span carries its scores, marked with the case's trace root."""
    results = json.loads((run_dir / "results.json").read_text())
    _, text = export(capsys, "otel", str(run_dir))
    evaluations = _evaluations(parsed(text))
    expected = sorted(
        (c["key"], s["scorer"], s["outcome"], s["value"], c["checkpoint"]["root"])
        for c in results["cases"]
        for s in c["scores"]
    )
    actual = sorted(
        (
            e["twinflow.eval.case"],
            e["gen_ai.evaluation.name"],
            e["gen_ai.evaluation.score.label"],
            e["gen_ai.evaluation.score.value"],
            e["twinflow.trace.root"],
        )
        for e in evaluations
    )
    assert (True, expected) == (len(expected) == 2, actual)


def test_one_case_of_an_eval_run_goes_to_a_collector(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--case picks one case repeat; the collector gets its spans and its score only."""
    with LoopbackServer(collector) as server:
        code, _ = export(capsys, "otel", str(run_dir), "--case", "s2@1", "--endpoint", server.url)
        evaluations = _evaluations(received(server))
    assert (0, ["s2@1"]) == (code, [e["twinflow.eval.case"] for e in evaluations])


def test_scores_for_another_trace_export_nothing(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case's trace swapped for another case's: exit 1, nothing on stdout."""
    traces = run_dir / "traces"
    first, second = sorted(traces.glob("*.jsonl"))
    first.write_bytes(second.read_bytes())
    code, out = export(capsys, "otel", str(run_dir))
    assert (1, "") == (code, out)


def _live_run(project: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """`twinflow run` of the project's spec with ``argv``; its exit code and stderr."""
    code = main(
        ["run", str(project / "spec.yaml"), "--out", str(project / "out"), "--quiet", *argv]
    )
    return code, capsys.readouterr().err


def _identities(spans: Any) -> list[tuple[str, bytes, bytes, bytes, dict[str, Any]]]:
    """Each span's name, ids and attributes but the checkpoint it names (root and size)."""
    return sorted(
        (
            s.name,
            s.trace_id,
            s.span_id,
            s.parent_span_id,
            {
                k: v
                for k, v in attributes(s).items()
                if k not in ("twinflow.trace.root", "twinflow.trace.size")
            },
        )
        for s in spans
    )


def test_a_live_run_sends_the_spans_the_export_makes(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """--otel-endpoint: the collector gets the export's spans, each naming a prefix's root."""
    project = calc_project(tmp_path, server.url)
    with LoopbackServer(collector) as otel:
        code, err = _live_run(project, capsys, "--otel-endpoint", otel.url)
        live = [
            span
            for request in otel.requests
            for span in ExportTraceServiceRequest.FromString(request.body)
            .resource_spans[0]
            .scope_spans[0]
            .spans
        ]
    trace = project / "out" / "trace.jsonl"
    _, text = export(capsys, "otel", str(trace))
    exported = parsed(text).resource_spans[0].scope_spans[0].spans
    loaded = Trace.load(trace)
    prefixes = {
        (attributes(s)["twinflow.trace.root"], int(attributes(s)["twinflow.trace.size"]))
        for s in live
    }
    expected = (0, _identities(exported), True, True)
    actual = (
        code,
        _identities(live),
        all(loaded.checkpoint(size).root == root for root, size in prefixes),
        f"otel: {len(exported)} of {len(exported)} span(s) sent" in err,
    )
    assert expected == actual


@pytest.mark.parametrize("stalled", [False, True])
def test_a_collector_down_or_stalled_never_fails_the_run(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str], stalled: bool
) -> None:
    """Nothing listens, or nothing answers: the run ends as without it, and says what was lost."""
    project = calc_project(tmp_path, server.url)
    if stalled:
        with LoopbackServer(lambda _: LoopbackResponse(delay=60)) as otel:
            argv = ("--otel-endpoint", otel.url, "--otel-timeout", "0.3")
            code, err = _live_run(project, capsys, *argv)
    else:
        code, err = _live_run(project, capsys, "--otel-endpoint", f"http://127.0.0.1:{free_port()}")
    said = next(line for line in err.splitlines() if line.startswith("otel:"))
    trace = Trace.load(project / "out" / "trace.jsonl")
    expected = (0, "run_finished", True, True)
    actual = (code, trace.kinds[-1], " 0 of " in said, "not sent" in said)
    assert expected == actual, said
