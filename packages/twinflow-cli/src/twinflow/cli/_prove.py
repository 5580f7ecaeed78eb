"""``twinflow prove``: make or check a C2SP tlog-proof (inclusion) or a consistency proof.

Like the other trace subcommands (`twinflow.cli._commands`), it streams the trace through
`twinflow.trace`, and imports neither the agent nor pydantic.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from twinflow import trace as _trace
from twinflow.cli._commands import (
    _HEX64,
    _add_limits,
    _checkpoint_note,
    _limits,
    _trace_checkpoint,
    _write_out,
)
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output
from twinflow.cli._traces import (
    add_checkpoint_keys,
    check_trace_head,
    corrupt_payload,
    read_published,
    read_small_file,
    squash,
)
from twinflow.trace import UserError, _tlog
from twinflow.trace._tlog import check_proof_file, event_file_digest
from twinflow.trace._tree import CHAIN_HEADER, check_chain, make_chain

__all__ = ["COMMANDS"]


_PROVE_EPILOG = (
    "make a proof (the checkpoint note it is for: --checkpoint CP, the one published; or\n"
    "a new one: --sign SKEY, or --origin ORIGIN unsigned):\n"
    "  twinflow prove TRACE --seq N --checkpoint CP --out e.tlog-proof [--event-out e.json]\n"
    "  twinflow prove TRACE --from-size N --checkpoint CP --out c.tlog-consistency\n"
    "check a proof, with nothing else (the proof carries its checkpoint):\n"
    "  twinflow prove --check e.tlog-proof --key VKEY [--event e.json | --digest HEX]\n"
    "  twinflow prove --check c.tlog-consistency --old-checkpoint OLD --key VKEY\n"
    "An inclusion proof is a C2SP tlog-proof; a consistency proof is the body of a C2SP\n"
    "tlog-witness add-checkpoint request (docs/adr/0111-proofs-are-c2sp-text.md)."
)
"""How ``twinflow prove --help`` shows making and checking each kind of proof."""


def _configure_prove(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = _PROVE_EPILOG
    p.add_argument("trace", type=Path, nargs="?", help="the trace file (JSONL), to make a proof")
    p.add_argument("--seq", type=int, help="prove this event is included")
    p.add_argument(
        "--from-size",
        type=int,
        metavar="N",
        help="prove the trace at the checkpoint's size extends its first N events",
    )
    p.add_argument(
        "--size",
        type=int,
        help="with --sign or --origin: the size of the new checkpoint (default: all events)",
    )
    p.add_argument("--out", type=Path, help="write the proof to this new file")
    p.add_argument(
        "--event-out",
        type=Path,
        metavar="FILE",
        help="with --seq: also write the event's canonical bytes (what its digest hashes)",
    )
    p.add_argument(
        "--sign",
        type=Path,
        action="append",
        metavar="SKEY",
        help="make and sign a new checkpoint note for the proof (repeat to cosign)",
    )
    p.add_argument(
        "--child",
        action="append",
        metavar="NAME",
        help="with --seq: the event is in this sub-agent's or simulated user's trace (a file "
        "name the trace links; repeat to go further down): writes a proof chain from the "
        "parent's checkpoint",
    )
    p.add_argument("--check", type=Path, metavar="PROOF", help="check this proof file")
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="making a proof: the checkpoint note it is for, copied into it verbatim",
    )
    p.add_argument("--digest", help="checking: the event's digest (64 hex digits)")
    p.add_argument(
        "--event", type=Path, help="checking: the event's file (its canonical bytes), to hash"
    )
    p.add_argument(
        "--old-checkpoint",
        type=Path,
        help="checking: the earlier checkpoint a consistency proof extends",
    )
    add_checkpoint_keys(p)
    _add_limits(p)


def _proof_checkpoint(args: argparse.Namespace) -> bytes:
    """The checkpoint note a proof being made is for: the one named, or a new one."""
    if args.checkpoint is not None:
        if args.sign or args.size is not None:
            raise UserError(
                "--checkpoint names the note the proof is for (its size is the tree's): "
                "no --sign or --size with it"
            )
        data = read_small_file(args.checkpoint, "checkpoint")
        if args.key:
            read_published(args.checkpoint, args.key, args.origin)
        return data
    if args.key:
        raise UserError("--key checks the --checkpoint a proof is made for; there is none")
    if not (args.sign or args.origin):
        raise UserError(
            "name the checkpoint the proof is for: --checkpoint CP (the published note), "
            "--sign SKEY (a new signed one) or --origin ORIGIN (a new unsigned one)"
        )
    return _checkpoint_note(_trace_checkpoint(args, args.size), args.sign, args.origin)


def _check_make_arguments(args: argparse.Namespace) -> None:
    """Refuse arguments that do not make one proof (exit 2)."""
    if args.trace is None:
        raise UserError("give a TRACE to make a proof, or --check PROOF")
    if (args.seq is None) == (args.from_size is None):
        raise UserError("give exactly one of --seq N (inclusion) or --from-size N (consistency)")
    if args.old_checkpoint or args.digest or args.event:
        raise UserError("--old-checkpoint, --digest and --event go with --check")
    if args.event_out and args.seq is None:
        raise UserError("--event-out writes the event an inclusion proof (--seq) is for")


def _prove(args: argparse.Namespace, out: Output) -> int:
    if args.check is not None:
        return _check_proof(args, out)
    _check_make_arguments(args)
    check_trace_head(args.trace)
    note = _proof_checkpoint(args)
    where = str(args.checkpoint or "the new checkpoint")
    limits = _limits(args)
    event: bytes | None = None
    payload: dict[str, Any]
    try:
        if args.child:
            if args.seq is None or args.seq < 0 or args.event_out:
                raise UserError("--child proves an event of a linked run: give --seq N (from 0)")
            data = make_chain(args.trace, list(args.child), args.seq, note, limits=limits)
            payload = {"kind": "chain", "index": args.seq, "children": list(args.child)}
            summary = (
                f"event {args.seq} of {' / '.join(args.child)} is vouched for by the checkpoint "
                "below, through each link"
            )
        elif args.seq is not None:
            if args.seq < 0:
                raise UserError(f"--seq {args.seq}: events are numbered from 0")
            try:
                proof = _tlog.prove_tlog_inclusion(
                    args.trace, args.seq, note, where=where, limits=limits
                )
            except UserError as exc:
                raise UserError(f"--seq {args.seq}: {exc}") from None
            data = proof.to_bytes()
            assert proof.extra is not None
            digest = proof.extra.hex()
            if args.event_out:
                event = _event_bytes(args.trace, args.seq, digest)
            payload = {"kind": "inclusion", "index": proof.index, "digest": digest}
            summary = f"event {args.seq} (digest (hex) {digest}) is in the checkpoint below"
        else:
            try:
                consistency = _tlog.prove_tlog_consistency(
                    args.trace, args.from_size, note, where=where, limits=limits
                )
            except UserError as exc:
                raise UserError(f"--from-size {args.from_size}: {exc}") from None
            data = consistency.to_bytes()
            payload = {"kind": "consistency", "old_size": consistency.old_size}
            summary = f"the checkpoint below extends the first {consistency.old_size} events"
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}", corrupt_payload(args.trace, exc)) from None
    except _trace.InvalidProofError as exc:
        raise CheckFailed(
            squash(exc), {"problem": {"kind": "checkpoint", "message": squash(exc)}}
        ) from None
    _write_proof(args, out, data, event, payload, summary)
    return EXIT_OK


def _write_proof(
    args: argparse.Namespace,
    out: Output,
    data: bytes,
    event: bytes | None,
    payload: dict[str, Any],
    summary: str,
) -> None:
    """Write the proof made (and its event's bytes) where asked, and report them."""
    if args.out:
        _write_out(args.out, data)
    if event is not None:
        _write_out(args.event_out, event)
    text = data.decode()
    out.document({"ok": True, **payload, "proof": text})
    out.line(summary)
    if not args.out:
        for line in text.rstrip("\n").split("\n"):
            out.line(line)
    else:
        out.line(f"proof written to {args.out}")
    if event is not None:
        out.line(f"event written to {args.event_out}")


def _event_bytes(trace: Path, seq: int, digest: str) -> bytes:
    """Event ``seq``'s canonical bytes, the ones its digest is the sha256 of."""
    for event in _trace.walk_trace(trace, allow_redacted=True):
        if event.seq == seq:
            if event.value is None:
                raise UserError(
                    f"--event-out: event {seq} is redacted in {trace}: its bytes are not there "
                    "(the proof holds its digest)"
                )
            if event.digest != digest:  # the file changed between two reads of it
                raise CheckFailed(f"{trace}: event {seq} changed while it was read")
            return event.event
    raise CheckFailed(f"{trace}: event {seq} is gone (the file changed while it was read)")


def _check_check_arguments(args: argparse.Namespace) -> bytes | None:
    """Refuse arguments that do not check one proof (exit 2); return the ``--digest`` given."""
    if args.trace is not None or args.seq is not None or args.from_size is not None:
        raise UserError("--check takes no TRACE, --seq or --from-size: the proof holds them")
    if args.checkpoint or args.sign or args.out or args.event_out:
        raise UserError(
            "--check reads the checkpoint from the proof (a tlog-proof carries it): check its "
            "signature with --key VKEY; --checkpoint, --sign and --out make proofs"
        )
    if args.digest and args.event:
        raise UserError("--digest and --event both name the event: give one")
    digest = None
    if args.digest:
        digest = bytes.fromhex(args.digest) if _HEX64.fullmatch(args.digest) else None
        if digest is None:
            raise UserError(f"--digest {args.digest[:80]!r}: 64 lowercase hex digits")
    return digest


def _check_proof(args: argparse.Namespace, out: Output) -> int:
    digest = _check_check_arguments(args)
    try:
        if args.event:
            digest = event_file_digest(args.event)
        data = read_small_file(args.check, "proof")
        if data.startswith(CHAIN_HEADER.encode()):
            if args.old_checkpoint:
                raise UserError("a proof chain is an inclusion proof: no --old-checkpoint")
            line = check_chain(
                data,
                [read_small_file(k, "key") for k in args.key or ()],
                where=str(args.check),
                origin=args.origin,
                digest=digest,
            )
            out.document({"ok": True, "kind": "chain", "summary": line})
            out.line(line)
            return EXIT_OK
        checked = check_proof_file(
            read_small_file(args.check, "proof"),
            [read_small_file(k, "key") for k in args.key or ()],
            where=str(args.check),
            origin=args.origin,
            digest=digest,
            old_checkpoint=None
            if args.old_checkpoint is None
            else read_small_file(args.old_checkpoint, "checkpoint"),
            old_where=str(args.old_checkpoint),
        )
    except _trace.TraceFormatError as exc:
        raise UserError(squash(exc)) from None
    except (_trace.InvalidProofError, _trace.SignatureError) as exc:
        raise CheckFailed(
            f"{args.check}: the proof does not hold: {squash(exc)}",
            {"proof": str(args.check), "problem": {"kind": "proof", "message": squash(exc)}},
        ) from None
    cp = checked.checkpoint
    out.document(
        {
            "ok": True,
            "kind": checked.kind,
            "index": checked.index,
            "digest": checked.digest,
            "digest_from": checked.digest_from,
            "origin": cp.origin,
            "size": cp.checkpoint.size,
            "root": cp.checkpoint.root,
            "root_encoding": "hex",
            "signed_by": list(cp.signed_by),
            "old_size": None if checked.old is None else checked.old.checkpoint.size,
            "old_root": None if checked.old is None else checked.old.checkpoint.root,
        }
    )
    out.line(checked.summary())
    return EXIT_OK


COMMANDS: dict[str, Command] = {"prove": (_configure_prove, _prove)}
"""The command this module defines, as `twinflow.cli._main.COMMAND_TABLE` looks it up."""
