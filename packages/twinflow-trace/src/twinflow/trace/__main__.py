"""``twinflow-trace verify TRACE [--checkpoint CP [--key VKEY]...]``: the auditor's verifier.

Checks the format, digests, chain and completeness, and a checkpoint (a C2SP checkpoint note,
signed and checked against the verifier keys given, every one of which must have signed, for the
origin expected; or unsigned), with nothing but the standard library (the event bodies' typed
schema is the agent's, checked by ``twinflow verify --typed``; plain ``twinflow verify`` runs this
very verifier). A checkpoint that covers fewer events
than the trace holds fails unless ``--allow-unsigned-tail``; the ok line says which events it
covers. Exit 0 when the trace verifies, 1 when a check fails, 2 for a usage error or unreadable
input; one line on stderr for every failure.

Run it as the ``twinflow-trace`` console script, or as ``python -P -m twinflow.trace``: plain
``python -m`` puts the current directory first on ``sys.path``, so a received bundle holding a
``twinflow/`` or ``argparse.py`` would run its own code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from twinflow.trace._errors import SignatureError, TwinflowError, UserError
from twinflow.trace._format import Limits
from twinflow.trace._open import read_regular
from twinflow.trace._published import PublishedCheckpoint, read_published_checkpoint
from twinflow.trace._verify import verify_trace

__all__ = ["main"]

_MAX_FILE = 1024 * 1024


def _read(path: Path) -> bytes:
    data = read_regular(path, _MAX_FILE)
    if len(data) > _MAX_FILE:
        raise UserError(f"{path}: larger than {_MAX_FILE} bytes; not a checkpoint or key file")
    return data


def _vouched(published: PublishedCheckpoint, hmac: bool) -> str:
    """Who vouches for the checkpoint: ``signed by KEY...``, or how it is not signed."""
    if published.signed_by:
        return f"signed by {', '.join(published.signed_by)}"
    return "checkpoint (HMAC-signed)" if hmac else "checkpoint (unsigned)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the verifier and return its exit code."""
    parser = argparse.ArgumentParser(prog="twinflow-trace", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="verify a trace file")
    verify.add_argument("trace", type=Path)
    verify.add_argument("--checkpoint", type=Path, help="the C2SP checkpoint note to match")
    verify.add_argument(
        "--key", type=Path, action="append", help="a verifier key that signed the C2SP checkpoint"
    )
    verify.add_argument(
        "--origin", help="the log the checkpoint must be for (default: the first key's name)"
    )
    verify.add_argument(
        "--allow-unsigned-tail",
        action="store_true",
        help="accept events past the checkpoint's size (they are not vouched for)",
    )
    verify.add_argument(
        "--key-file", type=Path, help="the HMAC key a JSON checkpoint is signed with"
    )
    verify.add_argument("--allow-incomplete", action="store_true")
    args = parser.parse_args(argv)
    try:
        if (args.key or args.origin) and not args.checkpoint:
            raise UserError("--key and --origin need --checkpoint: they check a checkpoint")
        published: PublishedCheckpoint | None = None
        if args.checkpoint:
            published = read_published_checkpoint(
                _read(args.checkpoint),
                [_read(k) for k in args.key or ()],
                where=str(args.checkpoint),
                origin=args.origin,
            )
        key = _read(args.key_file) if args.key_file else None
        report = verify_trace(
            args.trace,
            checkpoint=None if published is None else published.checkpoint,
            key=key,
            require_complete=not args.allow_incomplete,
            limits=Limits(),
            allow_tail=args.allow_unsigned_tail,
        )
    except SignatureError as exc:
        print(f"twinflow-trace: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except (OSError, TwinflowError) as exc:
        print(f"twinflow-trace: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if report.problem is not None:
        print(f"twinflow-trace: {args.trace}: {report.problem}", file=sys.stderr)
        return 1
    line = f"ok: {args.trace}: {report.events} events verify; root (hex) {report.checkpoint.root}"
    if published is not None:
        line += f"; {_vouched(published, key is not None)}: {report.coverage()}"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
