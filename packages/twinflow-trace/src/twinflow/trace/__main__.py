"""``python -m twinflow.trace verify TRACE [--checkpoint CP [--key VKEY]...]``: the auditor's verifier.

Checks the format, digests, chain and completeness, and a checkpoint (a JSON one, or a C2SP
signed note checked against the verifier keys given, every one of which must have signed), with
nothing but the standard library (the event bodies' typed schema is the agent's, checked by
``twinflow verify``). Exit 0 when the trace verifies, 1 when a check fails, 2 for a usage error or
unreadable input; one line on stderr for every failure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from twinflow.trace import _note
from twinflow.trace._checkpoint import Checkpoint
from twinflow.trace._errors import TwinflowError, UserError
from twinflow.trace._format import GENESIS, Limits
from twinflow.trace._open import read_regular
from twinflow.trace._verify import verify_trace

__all__ = ["main"]

_MAX_FILE = 1024 * 1024


class _Refused(Exception):
    """Internal: a checkpoint's signature does not verify (exit 1)."""


def _read(path: Path) -> bytes:
    data = read_regular(path, _MAX_FILE)
    if len(data) > _MAX_FILE:
        raise UserError(f"{path}: larger than {_MAX_FILE} bytes; not a checkpoint or key file")
    return data


def _checkpoint(path: Path, keys: list[Path] | None) -> Checkpoint:
    """A JSON checkpoint, or the checkpoint a C2SP note names once every key given verified it."""
    data = _read(path)
    if data.lstrip()[:1] == b"{":
        if keys:
            raise UserError(f"{path} is a JSON checkpoint: --key checks C2SP signed notes")
        return Checkpoint.from_json(data)
    if not keys:
        raise UserError(f"{path} is a signed checkpoint: give its signer's verifier key with --key")
    try:
        verifiers = [_note.parse_verifier_key(_read(k)) for k in keys]
        body = _note.open_checkpoint(data, verifiers, required=len(verifiers)).body
    except _note.NoteError as exc:
        raise _Refused(f"{path}: the signed checkpoint does not verify: {exc}") from None
    # The note carries size and root; the head digest is implied by the root and not compared.
    return Checkpoint(size=body.size, root=body.root_hash.hex(), head=GENESIS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the verifier and return its exit code."""
    parser = argparse.ArgumentParser(prog="twinflow-trace", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="verify a trace file")
    verify.add_argument("trace", type=Path)
    verify.add_argument("--checkpoint", type=Path, help="a JSON or C2SP checkpoint to match")
    verify.add_argument(
        "--key", type=Path, action="append", help="a verifier key that signed the C2SP checkpoint"
    )
    verify.add_argument(
        "--key-file", type=Path, help="the HMAC key a JSON checkpoint is signed with"
    )
    verify.add_argument("--allow-incomplete", action="store_true")
    args = parser.parse_args(argv)
    try:
        checkpoint = _checkpoint(args.checkpoint, args.key) if args.checkpoint else None
        key = _read(args.key_file) if args.key_file else None
        report = verify_trace(
            args.trace,
            checkpoint=checkpoint,
            key=key,
            require_complete=not args.allow_incomplete,
            limits=Limits(),
        )
    except _Refused as exc:
        print(f"twinflow-trace: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
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
