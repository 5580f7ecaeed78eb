"""``twinflow-trace verify TRACE [--checkpoint CP [--key VKEY]...]`` and ``twinflow-trace
prove-check PROOF [--key VKEY]... [--digest HEX | --event FILE | --old-checkpoint OLD]``: the
auditor's verifier.

``twinflow-trace attest-check ATTESTATION --key VKEY [--trace TRACE] [--checkpoint CP]`` checks
a run attestation (an in-toto statement in a DSSE envelope): its signature by every key given,
and that it names the trace file, its output and its checkpoint (``twinflow.trace._attest``).
Given an eval attestation, ``--trace CASE --proof PROOF`` checks that one case trace is a case of
the attested run; given a reproduction, ``--names ATTESTATION`` that it names that eval
attestation (``twinflow.trace._evidence``).

Checks the format, digests, chain and completeness, and a checkpoint (a C2SP checkpoint note,
signed and checked against the verifier keys given, every one of which must have signed, for the
origin expected; or unsigned), with nothing but the standard library (the event bodies' typed
schema is the agent's, checked by ``twinflow verify --typed``; plain ``twinflow verify`` runs this
very verifier). A checkpoint that covers fewer events
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

from twinflow._base._errors import TwinflowError, UserError
from twinflow._base._files import refuse_linked
from twinflow._base._open import read_regular
from twinflow.trace._errors import (
    InvalidProofError,
    SignatureError,
    TraceCorruptError,
    TraceFormatError,
)
from twinflow.trace._format import Limits
from twinflow.trace._published import PublishedCheckpoint, read_published_checkpoint
from twinflow.trace._tlog import check_proof_file, event_file_digest
from twinflow.trace._tree import CHAIN_HEADER, check_chain
from twinflow.trace._verify import verify_trace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from twinflow.trace._attest import VerifiedAttestation
    from twinflow.trace._witness import Cosignature

__all__ = ["main"]

_MAX_FILE = 1024 * 1024


def _fail(exc: Exception, code: int) -> int:
    """Say why on one stderr line (a file error as ``NAME: reason``, no errno); return ``code``."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc)
    print(f"twinflow-trace: {' '.join(text.split())}", file=sys.stderr)
    return code


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
    data = _read(args.proof, "proof")
    if data.startswith(CHAIN_HEADER.encode()):
        return check_chain(
            data,
            [_read(k) for k in args.key or ()],
            where=str(args.proof),
            origin=args.origin,
            digest=digest,
        )
    checked = check_proof_file(
        data,
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
    args = _parser().parse_args(argv)
    if args.command == "vector":
        return _vector(args)
    if args.command == "attest-check":
        return _attest_check(args)
    if args.command == "prove-check":
        try:
            print(_prove_check(args))
        except (SignatureError, InvalidProofError) as exc:
            return _fail(exc, 1)
        except (OSError, TwinflowError) as exc:
            return _fail(exc, 2)
        return 0
    return _verify(args)


def _parser() -> argparse.ArgumentParser:
    """The three commands and their arguments."""
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
    _add_verify(sub.add_parser("verify", help="verify a trace file"))
    attest = sub.add_parser("attest-check", help="check a run attestation (DSSE envelope)")
    attest.add_argument("attestation", type=Path)
    attest.add_argument(
        "--key", type=Path, action="append", required=True, help="a verifier key that signed it"
    )
    attest.add_argument(
        "--trace",
        type=Path,
        help="the trace it must name (a run's: file and output; an eval's: one case, with --proof)",
    )
    attest.add_argument(
        "--proof",
        type=Path,
        help="an eval attestation: the tlog-proof placing the --trace case in the attested run",
    )
    attest.add_argument(
        "--names",
        type=Path,
        metavar="ATTESTATION",
        help="a reproduction statement: the eval attestation it must name",
    )
    attest.add_argument("--checkpoint", type=Path, help="the checkpoint note it must name")
    attest.add_argument("--origin", help="the log the checkpoint is for (default: its key's)")
    vector = sub.add_parser(
        "vector", help="this verifier's verdict on one conformance vector (JSON on stdout)"
    )
    vector.add_argument("check", help="trace, checkpoint, inclusion or attestation")
    vector.add_argument("files", nargs="*", type=Path)
    return parser


def _vector(args: argparse.Namespace) -> int:
    """``vector CHECK FILE...``: this verifier's verdict on one conformance vector, as JSON."""
    import json

    from twinflow.trace import _conformance

    try:
        said = _conformance.check_vector(args.check, [str(f) for f in args.files])
    except (OSError, TwinflowError) as exc:
        return _fail(exc, 2)
    print(json.dumps(said, sort_keys=True))
    return 0


def _add_verify(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("trace", type=Path)
    verify.add_argument("--checkpoint", type=Path, help="the C2SP checkpoint note to match")
    _add_keys(verify)
    verify.add_argument(
        "--allow-unsigned-tail",
        action="store_true",
        help="accept events past the checkpoint's size (they are not vouched for)",
    )
    verify.add_argument("--allow-incomplete", action="store_true")
    verify.add_argument(
        "--witness",
        type=Path,
        action="append",
        help="a witness's cosigner verifier key; repeat (the checkpoint must be cosigned by "
        "--quorum of them)",
    )
    verify.add_argument(
        "--quorum", type=int, help="witnesses that must have cosigned (default: all)"
    )
    verify.add_argument(
        "--now",
        type=int,
        metavar="SECONDS",
        help="the time now (POSIX seconds, `date +%%s`): a cosignature dated more than 10 minutes "
        "later does not count (this verifier reads no clock of its own)",
    )


def _verify(args: argparse.Namespace) -> int:
    """``verify``: the trace, against its checkpoint and witnesses if given; the exit code."""
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
        cosigned = _witness_policy(args, published)
        # A linked trace gets the one planted-link refusal the twinflow commands give.
        refuse_linked(args.trace, "the trace")
        report = verify_trace(
            args.trace,
            checkpoint=None if published is None else published.checkpoint,
            require_complete=not args.allow_incomplete,
            limits=Limits(),
            allow_tail=args.allow_unsigned_tail,
        )
    except SignatureError as exc:
        return _fail(exc, 1)
    except (OSError, TwinflowError) as exc:
        return _fail(exc, 2)
    if report.problem is not None:
        print(f"twinflow-trace: {args.trace}: {report.problem}", file=sys.stderr)
        return 1
    line = f"ok: {args.trace}: {report.events} events verify; root (hex) {report.checkpoint.root}"
    if published is not None:
        line += f"; {_vouched(published)}: {report.coverage()}"
    if report.redacted:
        line += f"; {report.redaction()}"
    if cosigned is not None:
        line += "; cosigned by " + ", ".join(
            f"{c.key.label} ({_utc(c.timestamp)})" for c in cosigned
        )
        if args.now is None:
            line += " (cosignature times not compared with a clock: give --now)"
    print(line)
    return 0


def _utc(timestamp: int) -> str:
    from datetime import UTC, datetime

    return f"{datetime.fromtimestamp(timestamp, UTC):%Y-%m-%dT%H:%M:%SZ}"


def _witness_policy(
    args: argparse.Namespace, published: PublishedCheckpoint | None
) -> tuple[Cosignature, ...] | None:
    """The cosignatures meeting ``--witness``/``--quorum`` (None: no policy was given).

    Raises:
        UserError: The policy cannot be applied (exit 2).
        SignatureError: It is not met, or a known witness's cosignature is forged (exit 1).
    """
    from twinflow.trace import _note, _witness

    if not args.witness:
        if args.quorum is not None or args.now is not None:
            raise UserError("--quorum and --now go with --witness")
        return None
    if not args.checkpoint or published is None:
        raise UserError("--witness checks the cosignatures on a --checkpoint note: give one")
    quorum = len(args.witness) if args.quorum is None else args.quorum
    if not 1 <= quorum <= len(args.witness):
        raise UserError(f"--quorum {quorum}: between 1 and the {len(args.witness)} witness key(s)")
    data = _read(args.checkpoint)
    try:
        keys = [_witness.parse_cosigner_key(_read(k)) for k in args.witness]
        cosigned = _witness.verify_cosignatures(data, keys, quorum=quorum, now=args.now)
        body = _note.parse_checkpoint_body(_note.parse_note(data).text)
    except SignatureError as exc:
        if exc.reason != "cosignature":  # a malformed key or note, two keys of one name
            raise UserError(f"--witness: {exc}") from None
        raise SignatureError(
            f"{args.checkpoint}: the witness policy is not met: {exc}", reason="cosignature"
        ) from None
    # The file was read twice (signatures, then cosignatures): both reads must be one note.
    seen = (published.origin, published.checkpoint.size, published.checkpoint.root)
    if (body.origin, body.size, body.root_hash.hex()) != seen:
        raise SignatureError(
            f"{args.checkpoint}: the file changed while it was read", reason="unverified"
        )
    return cosigned


def _attest_check(args: argparse.Namespace) -> int:
    from twinflow.trace import _attest, _keys

    try:
        try:
            keys = [_keys.parse_verifier_key(_read(k)) for k in args.key]
        except SignatureError as exc:  # malformed_key: nothing else
            raise UserError(f"not a verifier key ({exc})") from None
        opened = _attest.open_attestation(
            read_regular(args.attestation, _attest.MAX_ENVELOPE_BYTES), keys
        )
        kind = opened.statement["predicateType"]
        if kind != _attest.PREDICATE_TYPE:
            return _evidence_check(args, opened)
        if args.proof is not None or args.names is not None:
            raise UserError("--proof and --names check an eval attestation or a reproduction")
        facts = None
        if args.trace is not None:
            facts = _attest.run_facts(read_regular(args.trace))
        checkpoint = None
        if args.checkpoint is not None:
            published = read_published_checkpoint(
                _read(args.checkpoint),
                [_read(k) for k in args.key],
                where=str(args.checkpoint),
                origin=args.origin,
            )
            root = bytes.fromhex(published.checkpoint.root)
            checkpoint = (published.origin, published.checkpoint.size, root)
        _attest.check_statement(opened.statement, facts=facts, checkpoint=checkpoint)
    except (SignatureError, TraceFormatError) as exc:
        if exc.reason in ("attestation_mismatch", "attestation"):
            print(
                f"twinflow-trace: {args.attestation}: {' '.join(str(exc).split())}",
                file=sys.stderr,
            )
            return 1 if exc.reason == "attestation_mismatch" else 2
        return _fail(exc, 1 if isinstance(exc, SignatureError) else 2)
    except TraceCorruptError as exc:
        return _fail(exc, 1)
    except (OSError, TwinflowError) as exc:
        return _fail(exc, 2)
    signers = ", ".join(_attest.key_id(k) for k in opened.signed_by)
    checked = [w for w, given in (("trace", facts), ("checkpoint", checkpoint)) if given]
    line = f"ok: {args.attestation}: attestation signed by {signers}"
    print(line + (f"; matches the {' and the '.join(checked)}" if checked else ""))
    return 0


def _evidence_check(args: argparse.Namespace, opened: VerifiedAttestation) -> int:
    """``attest-check`` of an eval attestation (and one case) or a reproduction statement."""
    from twinflow.trace import _attest, _evidence

    statement = opened.statement
    predicate = statement["predicate"]
    signers = ", ".join(_attest.key_id(k) for k in opened.signed_by)
    if args.checkpoint is not None:
        raise UserError("--checkpoint checks a run attestation; an eval's cases are its --proof")
    if statement["predicateType"] == _evidence.REPRODUCTION_PREDICATE_TYPE:
        if args.trace is not None or args.proof is not None:
            raise UserError("a reproduction statement is checked with --names, not a case trace")
        line = f"ok: {args.attestation}: reproduction signed by {signers}"
        if args.names is not None:
            data = read_regular(args.names, _attest.MAX_ENVELOPE_BYTES)
            _evidence.check_names(statement, data, where=str(args.names))
            line += f"; names {args.names}"
        outcomes = [c["outcome"] for c in predicate["cases"]]
        same = outcomes.count("reproduced")
        print(f"{line}; {same} of {len(outcomes)} case(s) reproduced ({predicate['mode']})")
        return 0
    if args.names is not None:
        raise UserError("--names checks a reproduction statement; this is an eval attestation")
    if (args.trace is None) != (args.proof is None):
        raise UserError("a case is checked with both --trace CASE_TRACE and --proof PROOF")
    line = (
        f"ok: {args.attestation}: eval attestation signed by {signers}; "
        f"{predicate['sampleSize']} case(s) of {predicate['suite']['name']!r}, "
        f"case root (hex) {predicate['cases']['rootHex']}"
    )
    if args.trace is not None:
        key = _evidence.check_case(
            statement, read_regular(args.trace), _read(args.proof, "proof"), where=str(args.proof)
        )
        line += f"; {args.trace} is case {key!r} of it"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
