"""``twinflow export otel``: a verified trace as OpenTelemetry spans (OTLP/JSON or OTLP/HTTP).

The trace is verified first (a trace that does not verify exports nothing, exit 1); a
redacted event stays redacted. The document goes to stdout, or to ``--out FILE`` (created
exclusively, never over a file or through a link), so ``> spans.json`` is a valid file; or,
with ``--endpoint URL``, to a collector as OTLP/HTTP protobuf, once, within ``--timeout``.

Given an eval run directory instead of a trace, every case's trace is exported with its
scores as ``gen_ai.evaluation.result`` events (``--case KEY``: one case); a case whose
recorded checkpoint is not its trace's exports nothing (exit 1).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from twinflow._base._files import write_new
from twinflow.cli._output import CheckFailed, Command, Output, say
from twinflow.cli._traces import check_trace_head, corrupt_payload
from twinflow.trace import TraceCorruptError, UserError, walk_trace

__all__ = ["COMMANDS"]

# OTLP/HTTP's path for traces on a collector (the specification's default).
TRACES_PATH = "/v1/traces"


def _configure_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["otel"], help="otel: OTLP spans, GenAI conventions")
    p.add_argument(
        "trace",
        type=Path,
        help="the trace file (JSONL), or an eval run directory (every case, with its scores)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--out", type=Path, metavar="FILE", help="write FILE (a new file) instead of stdout"
    )
    where.add_argument(
        "--endpoint",
        metavar="URL",
        help="send the spans to this OTLP/HTTP collector as protobuf instead (a base URL gets "
        f"{TRACES_PATH}); nothing is printed but a summary on stderr",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="with --endpoint: how long the collector has to answer (default 10)",
    )
    p.add_argument(
        "--case",
        metavar="KEY",
        help="with an eval run directory: export only this case repeat (`<case id>@<repeat>`)",
    )
    p.add_argument(
        "--content",
        action="store_true",
        help="also export tool arguments, results, the policy's reasons and the scorers' "
        "explanations (left out by default: they may hold what the run saw)",
    )


def _verified(path: Path, data: bytes | None = None) -> tuple[list[tuple[int, str, Any]], str]:
    """A trace's events, typed, and its root (``data``: its bytes, read already); CheckFailed
    if it does not verify."""
    from twinflow.agent import typed_event

    if data is None:
        check_trace_head(path)
    events: list[tuple[int, str, Any]] = []
    walk = walk_trace(path if data is None else data, check=typed_event, allow_redacted=True)
    try:
        while True:
            try:
                event = next(walk)
            except StopIteration as done:
                checkpoint = done.value
                break
            events.append((event.seq, event.digest, event.value))
    except TraceCorruptError as exc:
        raise CheckFailed(f"{path}: {exc}", corrupt_payload(path, exc)) from None
    return events, checkpoint.root


def _run_directory(args: argparse.Namespace) -> tuple[list[dict[str, Any]], int]:
    """Each case's spans (with its scores) of an eval run directory, and how many events."""
    from twinflow._base._files import read_inside
    from twinflow.eval._results import EvalResults, read_json_model
    from twinflow.views._otel import EvalScore, otlp_json

    results = read_json_model(args.trace / "results.json", EvalResults)
    cases = [c for c in results.cases if args.case is None or c.key == args.case]
    if not cases:
        raise UserError(
            f"{args.trace}: no case {args.case!r} in results.json "
            f"(cases: {', '.join(c.key for c in results.cases[:10]) or 'none'})"
        )
    spans: list[dict[str, Any]] = []
    count = 0
    for case in cases:
        # A path results.json names: a regular file inside the directory, never through a link.
        data = read_inside(args.trace, case.trace, what="results.json")
        events, root = _verified(args.trace / case.trace, data)
        if root != case.checkpoint.root or len(events) != case.checkpoint.size:
            raise CheckFailed(
                f"{args.trace / case.trace}: is not the trace case {case.key} was scored on "
                f"(results.json records {case.checkpoint.size} events, root {case.checkpoint.root}; "
                f"the file has {len(events)}, root {root}); nothing was exported",
                {"trace": str(args.trace / case.trace), "case": case.key},
            )
        scores = [EvalScore(s.scorer, s.value, s.outcome, s.detail, case.key) for s in case.scores]
        document = otlp_json(events, root, content=args.content, scores=scores)
        spans += document["resourceSpans"][0]["scopeSpans"][0]["spans"]
        count += len(events)
    document["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    return [document], count


def _send(url: str, document: dict[str, Any], timeout: float) -> int:
    """POST the document as OTLP/HTTP protobuf; the bytes sent."""
    from twinflow.kernel import HttpTransport
    from twinflow.views._otlp_proto import otlp_protobuf

    if not url.rstrip("/").endswith(TRACES_PATH):
        url = url.rstrip("/") + TRACES_PATH
    payload = otlp_protobuf(document)
    headers = {"Content-Type": "application/x-protobuf", "Accept": "application/x-protobuf"}
    with HttpTransport() as transport:
        transport.post_message(url, payload, timeout=timeout, headers=headers)
    return len(payload)


def _export(args: argparse.Namespace, out: Output) -> int:
    from twinflow.views._otel import otlp_json

    if not args.timeout > 0:
        raise UserError(f"--timeout {args.timeout}: give a number of seconds above 0")
    if args.trace.is_dir():
        (document,), count = _run_directory(args)
    elif args.case is not None:
        raise UserError("--case picks a case of an eval run directory: give the directory")
    else:
        events, root = _verified(args.trace)
        document, count = otlp_json(events, root, content=args.content), len(events)
    if args.endpoint is not None:
        sent = _send(args.endpoint, document, args.timeout)
        say(f"{count} events exported as OTLP/HTTP protobuf ({sent} bytes) to {args.endpoint}")
        return 0
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    if args.out is None:
        print(text, end="")
    else:
        write_new(args.out, text.encode("ascii"), mode=0o644)
        say(f"{count} events exported as OTLP/JSON spans to {args.out}")
    return 0


COMMANDS: dict[str, Command] = {"export": (_configure_export, _export)}
