"""``twinflow-trace verify TRACE [--checkpoint CP [--key VKEY]...]`` and ``twinflow-trace
prove-check PROOF [--key VKEY]... [--digest HEX | --event FILE | --old-checkpoint OLD]``: the
auditor's verifier.

Checks the format, digests, chain and completeness, and a checkpoint (a C2SP checkpoint note,
signed and checked against the verifier keys given, every one of which must have signed, for the
origin expected; or unsigned), with nothing but the standard library (the event bodies' typed
schema is the agent's, checked by ``twinflow verify``). A checkpoint that covers fewer events
than the trace holds fails unless ``--allow-unsigned-tail``; the ok line says which events it
covers. ``prove-check`` checks a C2SP tlog-proof (an event is in the log: the event's digest is
given, read from the event's file, or taken from the proof's ``extra`` line) or a consistency
proof (the log at the proof's checkpoint extends the one at ``--old-checkpoint``), with nothing
else. Exit 0 when the check passes, 1 when it fails, 2 for a usage error or unreadable input;
one line on stderr for every failure.

Run it as the ``twinflow-trace`` console script, or as ``python -P -m twinflow.trace``: plain
``python -m`` puts the current directory first on ``sys.path``, so a received bundle holding a
``twinflow/`` or ``argparse.py`` would run its own code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from twinflow.trace._errors import InvalidProofError, SignatureError, TwinflowError, UserError
from twinflow.trace._format import Limits
from twinflow.trace._open import read_regular
from twinflow.trace._published import PublishedCheckpoint, read_published_checkpoint
from twinflow.trace._tlog import check_proof_file, event_file_digest
from twinflow.trace._verify import verify_trace

__all__ = ["main"]

_MAX_FILE = 1024 * 1024


def _read(path: Path, what: str = "checkpoint or key") -> bytes:
    data = read_regular(path, _MAX_FILE)
    if len(data) > _MAX_FILE:
        raise UserError(f"{path}: larger than {_MAX_FILE} bytes; not a {what} file")
    return data


def _vouched(published: PublishedCheckpoint) -> str:
    """Who vouches for the checkpoint: ``signed by KEY...``, or that nobody signed it."""
    if published.signed_by:
        return f"signed by {', '.join(published.signed_by)}"
    return "checkpoint (unsigned)"


def _digest(text: str) -> bytes:
    try:
        raw = bytes.fromhex(text) if len(text) == 64 and text == text.lower() else b""
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise UserError(f"--digest {text[:80]!r}: an event digest is 64 lowercase hex digits")
    return raw


def _prove_check(args: argparse.Namespace) -> str:
    if args.digest and args.event:
        raise UserError("--digest and --event both name the event: give one")
    digest = _digest(args.digest) if args.digest else None
    if args.event:
        digest = event_file_digest(args.event)
    checked = check_proof_file(
        _read(args.proof, "proof"),
        [_read(k) for k in args.key or ()],
        where=str(args.proof),
        origin=args.origin,
        digest=digest,
        old_checkpoint=_read(args.old_checkpoint) if args.old_checkpoint else None,
        old_where=str(args.old_checkpoint),
    )
    return checked.summary()


def _add_keys(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        help="a verifier key that must have signed the C2SP checkpoint (repeat: every one)",
    )
    p.add_argument(
        "--origin", help="the log the checkpoint must be for (default: the first key's name)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the verifier and return its exit code."""
    parser = argparse.ArgumentParser(prog="twinflow-trace", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("prove-check", help="check a tlog-proof or a consistency proof")
    check.add_argument("proof", type=Path, help="the .tlog-proof or .tlog-consistency file")
    _add_keys(check)
    check.add_argument("--digest", help="the event's digest (64 hex digits) the proof is for")
    check.add_argument(
        "--event", type=Path, help="the event's file (its canonical JSON bytes), to hash"
    )
    check.add_argument(
        "--old-checkpoint", type=Path, help="the earlier checkpoint a consistency proof extends"
    )
    verify = sub.add_parser("verify", help="verify a trace file")
    verify.add_argument("trace", type=Path)
    verify.add_argument("--checkpoint", type=Path, help="the C2SP checkpoint note to match")
    _add_keys(verify)
    verify.add_argument(
        "--allow-unsigned-tail",
        action="store_true",
        help="accept events past the checkpoint's size (they are not vouched for)",
    )
    verify.add_argument("--allow-incomplete", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "prove-check":
        try:
            print(_prove_check(args))
        except (SignatureError, InvalidProofError) as exc:
            print(f"twinflow-trace: {' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        except (OSError, TwinflowError) as exc:
            print(f"twinflow-trace: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        return 0
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
        report = verify_trace(
            args.trace,
            checkpoint=None if published is None else published.checkpoint,
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
        line += f"; {_vouched(published)}: {report.coverage()}"
    if report.redacted:
        line += f"; {report.redaction()}"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
