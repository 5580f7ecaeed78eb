"""``twinflow export otel``: a verified trace as OpenTelemetry spans (OTLP/JSON).

The trace is verified first (a trace that does not verify exports nothing, exit 1); a
redacted event stays redacted. The document goes to stdout, or to ``--out FILE`` (created
exclusively, never over a file or through a link), so ``> spans.json`` is a valid file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from twinflow._base._files import write_new
from twinflow.cli._output import CheckFailed, Command, Output, say
from twinflow.cli._traces import check_trace_head, corrupt_payload
from twinflow.trace import TraceCorruptError, walk_trace

__all__ = ["COMMANDS"]


def _configure_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["otel"], help="otel: OTLP/JSON spans, GenAI conventions")
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument(
        "--out", type=Path, metavar="FILE", help="write FILE (a new file) instead of stdout"
    )
    p.add_argument(
        "--content",
        action="store_true",
        help="also export tool arguments, results and the policy's reasons (left out by "
        "default: they may hold what the run saw)",
    )


def _export(args: argparse.Namespace, out: Output) -> int:
    from twinflow.agent import TraceEvent, typed_event
    from twinflow.views._otel import otlp_json

    check_trace_head(args.trace)
    events: list[tuple[int, str, TraceEvent | None]] = []
    walk = walk_trace(args.trace, check=typed_event, allow_redacted=True)
    try:
        while True:
            try:
                event = next(walk)
            except StopIteration as done:
                checkpoint = done.value
                break
            typed: Any = event.value
            events.append((event.seq, event.digest, typed))
    except TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}", corrupt_payload(args.trace, exc)) from None
    document = otlp_json(events, checkpoint.root, content=args.content)
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    if args.out is None:
        print(text, end="")
    else:
        write_new(args.out, text.encode("ascii"), mode=0o644)
        say(f"{len(events)} events exported as OTLP/JSON spans to {args.out}")
    return 0


COMMANDS: dict[str, Command] = {"export": (_configure_export, _export)}
