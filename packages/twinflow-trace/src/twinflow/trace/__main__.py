"""``python -m twinflow.trace verify TRACE [--checkpoint CP]``: the auditor's verifier.

Checks the format, digests, chain and completeness with nothing but the standard library (the
event bodies' typed schema is the agent's, checked by ``twinflow verify``). Exit 0 when the
trace verifies, 1 when a check fails, 2 for a usage error or unreadable input; one line on
stderr for every failure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from twinflow.trace._checkpoint import Checkpoint
from twinflow.trace._errors import TwinflowError
from twinflow.trace._format import Limits
from twinflow.trace._verify import verify_trace

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the verifier and return its exit code."""
    parser = argparse.ArgumentParser(prog="twinflow-trace", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="verify a trace file")
    verify.add_argument("trace", type=Path)
    verify.add_argument("--checkpoint", type=Path, help="a checkpoint JSON file to match")
    verify.add_argument("--key-file", type=Path, help="the HMAC key the checkpoint is signed with")
    verify.add_argument("--allow-incomplete", action="store_true")
    args = parser.parse_args(argv)
    try:
        checkpoint = Checkpoint.from_json(args.checkpoint.read_bytes()) if args.checkpoint else None
        key = args.key_file.read_bytes() if args.key_file else None
        report = verify_trace(
            args.trace,
            checkpoint=checkpoint,
            key=key,
            require_complete=not args.allow_incomplete,
            limits=Limits(),
        )
    except (OSError, TwinflowError) as exc:
        print(f"twinflow-trace: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if report.problem is not None:
        print(f"twinflow-trace: {args.trace}: {report.problem}", file=sys.stderr)
        return 1
    print(f"ok: {args.trace}: {report.events} events verify; root {report.checkpoint.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
