"""The trace subcommands of ``twinflow``: each a (configure, handler) pair.

verify, checkpoint and prove stream the trace through `twinflow.trace` (memory independent of
its length, bounded lines and nesting), the very verifier the stdlib leaf's
``python -m twinflow.trace verify`` runs; ``verify --typed`` adds the agent's typed check as its
hook. The agent (and pydantic) is imported only where a command reads typed events, so these
commands and their ``--help`` start without it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from twinflow import trace as _trace
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output
from twinflow.cli._traces import (
    add_checkpoint_keys,
    check_trace_head,
    corrupt_payload,
    load_trace,
    read_published,
    read_small_file,
    squash,
    vouched,
    walk_typed,
)
from twinflow.vocab import UserError

__all__ = ["COMMANDS", "THREAT_MODEL"]


THREAT_MODEL = """\
what verification proves:
  on its own, the hash chain proves the file was not edited by accident or in part: a
  changed, removed, inserted, reordered or torn event is named at its seq. It cannot prove
  the file is the one that was published: whoever rewrites every event and recomputes every
  digest and prev gets a trace that verifies, and a trace cut at a line boundary after a
  terminal event looks complete.
  --checkpoint CP: only a checkpoint the publisher put out (size, Merkle root, head) catches a
  full rewrite or a truncation, and only if you got CP from the publisher, not beside the file.
  A signature on CP says who put it out: an HMAC key (--key-file) is shared, so anyone who can
  check it can forge it; use it for your own runs. A stranger needs a public-key signature:
  a C2SP signed note with Ed25519 (`twinflow keygen`, `checkpoint --sign`, `verify --key`).
to publish a run so a stranger can check it:
  `twinflow keygen example.org/lab --out lab` once; publish lab.pub where strangers trust it;
  for each run publish the trace and `twinflow checkpoint TRACE --sign lab.key --out cp.note`;
  the stranger runs `twinflow verify TRACE --checkpoint cp.note --key lab.pub`. Later checkpoints of a
  growing trace are tied to earlier ones by `twinflow prove TRACE --from-size N` and
  `twinflow prove --check PROOF --checkpoint NEW --old-checkpoint OLD`; one event is shown to be
  in a run by `twinflow prove TRACE --seq N` and `twinflow prove --check PROOF --checkpoint CP`.
"""


def _read_key(path: Path | None) -> bytes | None:
    """An HMAC key file's bytes, exactly as written (a trailing newline is part of the key)."""
    if path is None:
        return None
    key = read_small_file(path, "key")
    if not key:
        raise UserError(f"{path}: the key file is empty; an empty key signs nothing")
    return key


def _limits(args: argparse.Namespace) -> _trace.Limits:
    return _trace.Limits(max_line_bytes=args.max_line_bytes, max_depth=args.max_depth)


def _add_limits(p: argparse.ArgumentParser) -> None:
    defaults = _trace.Limits()
    p.add_argument(
        "--max-line-bytes",
        type=int,
        default=defaults.max_line_bytes,
        metavar="N",
        help=f"longest trace line accepted (default {defaults.max_line_bytes}, 16 MiB)",
    )
    p.add_argument(
        "--max-depth",
        type=int,
        default=defaults.max_depth,
        metavar="N",
        help=f"deepest nesting of objects and arrays in an event (default {defaults.max_depth})",
    )


def _write_out(path: Path, payload: dict[str, Any]) -> None:
    """Write a proof or checkpoint file: exclusively, never through a link, synced."""
    _trace.write_new(
        path, json.dumps(payload, indent=2, sort_keys=True).encode() + b"\n", mode=0o644
    )


# -- verify ---------------------------------------------------------------------------------


def _configure_verify(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = THREAT_MODEL
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="the checkpoint the trace must match: the C2SP note `twinflow checkpoint --out` "
        "writes (signed ones are checked with --key)",
    )
    p.add_argument(
        "--key-file",
        type=Path,
        help="file holding the HMAC key the checkpoint must be signed with (bytes as written)",
    )
    add_checkpoint_keys(p)
    p.add_argument(
        "--allow-unsigned-tail",
        action="store_true",
        help="accept events past the checkpoint's size: they verify as a chain, but the "
        "checkpoint does not vouch for them (by default such a trace fails)",
    )
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="accept a trace without run_finished / run_failed (a run still in progress)",
    )
    p.add_argument(
        "--typed",
        action="store_true",
        help="also build every event as the agent's typed event and refuse one no twinflow "
        "writer could produce, even where its digest and chain hold (slower; replay, diff "
        "and show always do)",
    )
    _add_limits(p)


def _check_signed_decisions(path: Path, keys: list[Path]) -> int:
    """Check every decision on a waiting call is signed by one of ``keys`` over that call.

    Returns:
        The number of decisions checked.

    Raises:
        CheckFailed: A decision is unsigned, signed by another key, or signs another call or
            verdict than the one recorded.
        UserError: The trace holds no decisions, or a key file is not a verifier key.
    """
    from twinflow.trace import note as _note  # the signed-note codec: only where used

    try:
        verifiers = [_note.parse_verifier_key(read_small_file(k, "key")) for k in keys]
    except _note.NoteError as exc:
        raise UserError(f"not a verifier key: {squash(exc)}") from None
    from twinflow.agent import approval_statement

    trace = load_trace(path)
    digests: dict[str, str] = {}
    checked = 0
    for event in trace.events:
        body = event.body
        if body.kind == "approval_requested":
            digests[body.call_id] = body.digest
        if body.kind != "approval_decided":
            continue
        where = f"{path}: the decision at seq {event.seq} (call {body.call_id!a})"
        if body.signed_note is None:
            raise CheckFailed(f"{where} is not signed")
        try:
            opened = _note.open_note(body.signed_note.encode(), verifiers)
        except _note.NoteError as exc:
            raise CheckFailed(f"{where}: its signature does not verify: {squash(exc)}") from None
        expected = approval_statement(digests.get(body.call_id, ""), body.decision)
        if opened.text != expected:
            raise CheckFailed(f"{where}: the signed note is for another call or verdict")
        checked += 1
    if not checked:
        raise UserError(f"{path}: no decisions on waiting calls to check with --key")
    return checked


def _verify(args: argparse.Namespace, out: Output) -> int:
    check_trace_head(args.trace)
    if args.key and not (args.checkpoint or args.key_file or args.origin):
        # Without a checkpoint, verifier keys check the signed decisions in the trace, which
        # are read as typed events: the typed check runs here whatever --typed says.
        from twinflow.agent import verify_agent_trace

        report = verify_agent_trace(args.trace, require_complete=not args.allow_incomplete)
        if report.problem is not None:
            raise CheckFailed(f"{args.trace}: {report.problem}")
        checked = _check_signed_decisions(args.trace, args.key)
        out.document({"ok": True, "trace": str(args.trace), "signed_decisions": checked})
        out.line(f"ok: {args.trace}: {report.events} events verify; {checked} signed decision(s)")
        return EXIT_OK
    if (args.key or args.key_file or args.origin) and not args.checkpoint:
        raise UserError("--key, --key-file and --origin need --checkpoint: they check a checkpoint")
    if args.key and args.key_file:
        raise UserError("--key checks a signed C2SP note, --key-file an HMAC JSON checkpoint: one")
    published = read_published(args.checkpoint, args.key, args.origin) if args.checkpoint else None
    if published is not None and args.key_file and published.form != "json":
        raise UserError("a C2SP checkpoint is checked with --key VKEY, not --key-file")
    key = _read_key(args.key_file)
    check = None
    if args.typed:
        from twinflow.agent import typed_event

        check = typed_event
    report = _trace.verify_trace(
        args.trace,
        checkpoint=None if published is None else published.checkpoint,
        key=key,
        require_complete=not args.allow_incomplete,
        limits=_limits(args),
        check=check,
        allow_tail=args.allow_unsigned_tail,
    )
    signer = None if published is None else vouched(published, key is not None)
    payload = {
        "ok": report.ok,
        "trace": str(args.trace),
        "events": report.events,
        "checkpoint": report.checkpoint.to_json(),
        "root_encoding": "hex",
        "covered": report.covered,
        "coverage": report.coverage(),
        "signed_by": [] if published is None else list(published.signed_by),
        "vouched": signer,
        "problem": None if report.problem is None else report.problem.to_json(),
    }
    if report.problem is not None:
        raise CheckFailed(f"{args.trace}: {report.problem}", payload)
    out.document(payload)
    line = f"ok: {args.trace}: {report.events} events verify"
    out.line(line if signer is None else f"{line}; {signer}: {report.coverage()}")
    out.line(f"root (hex) {report.checkpoint.root} (size {report.checkpoint.size})")
    if published is None:
        out.line("(a hash chain alone does not catch a full rewrite: check a published checkpoint)")
    elif report.covered is not None and report.covered < report.events:
        out.line(
            f"(events {report.covered}-{report.events - 1} are NOT vouched for by the checkpoint)"
        )
    return EXIT_OK


# -- checkpoint -----------------------------------------------------------------------------


def _configure_checkpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument("--size", type=int, help="cover only the first SIZE events (default: all)")
    p.add_argument(
        "--key-file", type=Path, help="sign the checkpoint with the HMAC key in this file"
    )
    p.add_argument("--out", type=Path, help="also write the checkpoint to this new file")
    p.add_argument(
        "--sign",
        type=Path,
        action="append",
        metavar="SKEY",
        help="sign a C2SP checkpoint note with this signer key file (from `twinflow keygen`); "
        "repeat to cosign",
    )
    p.add_argument(
        "--origin",
        help="the log's origin line of the C2SP checkpoint (default with --sign: the first key's name)",
    )
    _add_limits(p)


def _signed_note(checkpoint: _trace.Checkpoint, keys: list[Path], origin: str | None) -> bytes:
    from twinflow.trace import note as _note  # the signed-note codec: only where used

    try:
        signers = [_note.parse_signer_key(read_small_file(k, "key")) for k in keys]
        body = _note.CheckpointBody(
            origin or signers[0].name, checkpoint.size, bytes.fromhex(checkpoint.root)
        )
        return _note.sign_checkpoint_note(body, signers)
    except _note.NoteError as exc:
        raise UserError(f"cannot sign the checkpoint: {squash(exc)}") from None


def _checkpoint(args: argparse.Namespace, out: Output) -> int:
    check_trace_head(args.trace)
    key = _read_key(args.key_file)
    if args.size is not None and args.size < 0:
        raise UserError(f"--size {args.size}: a size is 0 or more")
    try:
        checkpoint = _trace.read_checkpoint(args.trace, args.size, limits=_limits(args))
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}", corrupt_payload(args.trace, exc)) from None
    except UserError as exc:
        raise UserError(f"--size: {exc}") from None
    if key is not None:
        checkpoint = _trace.sign_checkpoint(checkpoint, key)
    if args.sign:
        if key is not None:
            raise UserError(
                "--sign (Ed25519, C2SP) and --key-file (HMAC) are two formats: pick one"
            )
        note = _signed_note(checkpoint, args.sign, args.origin)
        if args.out:
            _trace.write_new(args.out, note, mode=0o644)
        out.document({"ok": True, **checkpoint.to_json(), "note": note.decode()})
        out.line(note.decode().rstrip("\n"))
        if args.out:
            out.line(f"(written to {args.out})")
        return EXIT_OK
    body = checkpoint.note_body(args.origin) if args.origin else None
    if args.out:
        _write_out(args.out, checkpoint.to_json())
    out.document({"ok": True, **checkpoint.to_json(), **({"note_body": body} if body else {})})
    out.line(f"size {checkpoint.size}")
    out.line(f"root {checkpoint.root}")
    out.line(f"head {checkpoint.head}")
    if checkpoint.signature:
        out.line(f"signature {checkpoint.signature}")
    if body:
        out.line("C2SP checkpoint body:")
        for line in body.splitlines():
            out.line(f"  {line}")
    if args.out:
        out.line(f"written to {args.out}")
    return EXIT_OK


# -- prove ----------------------------------------------------------------------------------


def _configure_prove(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "make a proof:   twinflow prove TRACE --seq N [--size S] [--out PROOF]\n"
        "                twinflow prove TRACE --from-size N [--size S] [--out PROOF]\n"
        "check a proof:  twinflow prove --check PROOF --checkpoint CP\n"
        "                twinflow prove --check PROOF --checkpoint NEW --old-checkpoint OLD\n"
        "Checking needs no trace: the checkpoints (from the publisher) are enough."
    )
    p.add_argument("trace", type=Path, nargs="?", help="the trace file (JSONL), to make a proof")
    p.add_argument("--seq", type=int, help="prove this event is included")
    p.add_argument(
        "--from-size",
        type=int,
        metavar="N",
        help="prove the trace (or its first --size events) extends its first N events",
    )
    p.add_argument("--size", type=int, help="prove against the first SIZE events (default: all)")
    p.add_argument("--out", type=Path, help="write the proof to this new file")
    p.add_argument("--check", type=Path, metavar="PROOF", help="check this proof file")
    p.add_argument("--checkpoint", type=Path, help="the checkpoint a proof is checked against")
    p.add_argument(
        "--old-checkpoint", type=Path, help="the earlier checkpoint a consistency proof extends"
    )
    add_checkpoint_keys(p)
    _add_limits(p)


def _prove(args: argparse.Namespace, out: Output) -> int:
    if args.check is not None:
        return _check_proof(args, out)
    if args.trace is None:
        raise UserError("give a TRACE to make a proof, or --check PROOF --checkpoint CP")
    if (args.seq is None) == (args.from_size is None):
        raise UserError("give exactly one of --seq N (inclusion) or --from-size N (consistency)")
    if args.checkpoint or args.old_checkpoint or args.key or args.origin:
        raise UserError("--checkpoint, --old-checkpoint, --key and --origin go with --check")
    check_trace_head(args.trace)
    limits = _limits(args)
    try:
        if args.seq is not None:
            if args.seq < 0:
                raise UserError(f"--seq {args.seq}: events are numbered from 0")
            try:
                proof, checkpoint = _trace.prove_inclusion(
                    args.trace, args.seq, args.size, limits=limits
                )
            except UserError as exc:
                raise UserError(f"--seq {args.seq}: {exc}") from None
            _trace.check_inclusion(proof, checkpoint)  # a proof we cannot verify is a bug to report
            checkpoints = {"checkpoint": checkpoint.to_json()}
            summary = f"event {args.seq} (digest {proof.event_digest}) is in the first {proof.size}"
            proof_json = proof.to_json()
        else:
            try:
                consistency, old, new = _trace.prove_consistency(
                    args.trace, args.from_size, args.size, limits=limits
                )
            except UserError as exc:
                raise UserError(f"--from-size {args.from_size}: {exc}") from None
            _trace.check_consistency(consistency, old, new)
            checkpoints = {"old_checkpoint": old.to_json(), "checkpoint": new.to_json()}
            summary = f"the first {new.size} events extend the first {old.size}"
            proof_json = consistency.to_json()
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}", corrupt_payload(args.trace, exc)) from None
    if args.out:
        _write_out(args.out, proof_json)
    out.document({"ok": True, "proof": proof_json, **checkpoints})
    out.line(summary)
    out.line(f"root (hex) {checkpoints['checkpoint']['root']}")
    for index, node in enumerate(proof_json["path"]):
        out.line(f"  path[{index}] {node}")
    if args.out:
        out.line(f"proof written to {args.out}")
    return EXIT_OK


def _check_proof(args: argparse.Namespace, out: Output) -> int:
    if args.trace is not None or args.seq is not None or args.from_size is not None:
        raise UserError("--check takes no TRACE, --seq or --from-size: the proof holds them")
    if args.checkpoint is None:
        raise UserError("--check needs --checkpoint CP (the checkpoint the proof leads to)")
    try:
        proof = _trace.load_proof(read_small_file(args.check, "proof"))
    except _trace.TraceFormatError as exc:
        raise UserError(f"{args.check}: not a proof file ({squash(exc)})") from None
    published = read_published(args.checkpoint, args.key, args.origin)
    checkpoint = published.checkpoint
    signed = f" ({vouched(published, False)})"
    try:
        if isinstance(proof, _trace.InclusionProof):
            if args.old_checkpoint:
                raise UserError("an inclusion proof is checked against one --checkpoint")
            _trace.check_inclusion(proof, checkpoint)
            summary = (
                f"ok: event {proof.seq} (digest (hex) {proof.event_digest}) is in the checkpoint "
                f"of size {checkpoint.size}{signed}"
            )
        else:
            assert isinstance(proof, _trace.ConsistencyProof)
            if args.old_checkpoint is None:
                raise UserError("a consistency proof needs --old-checkpoint OLD as well")
            old = read_published(args.old_checkpoint, args.key, args.origin).checkpoint
            _trace.check_consistency(proof, old, checkpoint)
            summary = (
                f"ok: the checkpoint of size {checkpoint.size}{signed} extends the one of size "
                f"{old.size}"
            )
    except _trace.InvalidProofError as exc:
        raise CheckFailed(
            f"{args.check}: the proof does not hold: {exc}",
            {"proof": str(args.check), "reason": str(exc)},
        ) from None
    out.document({"ok": True, "proof": proof.to_json(), "signed_by": list(published.signed_by)})
    out.line(summary)
    return EXIT_OK


# -- keygen ---------------------------------------------------------------------------------


def _configure_keygen(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "name", help="the key's name (C2SP: usually the log's origin, e.g. example.org/lab)"
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="PREFIX",
        help="write PREFIX.key (the signer key, mode 0600: keep it secret) and PREFIX.pub "
        "(the verifier key: publish it)",
    )


def _keygen(args: argparse.Namespace, out: Output) -> int:
    from twinflow.kernel import SystemIds  # the one source of real entropy
    from twinflow.trace import note as _note  # the signed-note codec: only where used

    try:
        signer = _note.generate_key(args.name, SystemIds().secret(32))
    except _note.NoteError as exc:
        raise UserError(f"cannot make a key named {args.name!r}: {squash(exc)}") from None
    secret, public = Path(f"{args.out}.key"), Path(f"{args.out}.pub")
    for path in (secret, public):
        if os.path.lexists(path):
            raise UserError(f"{path} already exists; keys are never overwritten")
    _trace.write_new(secret, signer.text.encode() + b"\n", mode=0o600)
    _trace.write_new(public, signer.verifier.text.encode() + b"\n", mode=0o644)
    out.document({"ok": True, "signer_key_file": str(secret), "verifier_key": signer.verifier.text})
    out.line(f"signer key (secret): {secret}")
    out.line(f"verifier key (publish it): {public}")
    out.line(signer.verifier.text)
    return EXIT_OK


# -- repair ---------------------------------------------------------------------------------


def _configure_repair(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")


def _repair(args: argparse.Namespace, out: Output) -> int:
    if args.trace.is_symlink():
        raise UserError(f"{args.trace}: is a symbolic link; repair the file it points to")
    check_trace_head(args.trace)
    result = _trace.repair_trace(args.trace)
    moved = {"moved_to": result.moved_to, "moved_bytes": result.moved_bytes}
    from twinflow.agent import verify_agent_trace

    report = verify_agent_trace(args.trace, require_complete=False)
    if report.problem is not None:
        raise CheckFailed(
            f"{args.trace}: "
            + (
                f"moved {result.moved_bytes} torn bytes to {result.moved_to}, but "
                if result.moved_to
                else ""
            )
            + f"the trace does not verify: {report.problem}",
            {"trace": str(args.trace), **moved, "problem": report.problem.to_json()},
        )
    out.document({"ok": True, **moved, "events": report.events})
    if result.moved_to is None:
        out.line(f"{args.trace}: ends with a complete line; nothing to repair")
    else:
        out.line(f"moved the torn last line ({result.moved_bytes} bytes) to {result.moved_to}")
    out.line(f"{report.events} events verify")
    return EXIT_OK


# -- diff -----------------------------------------------------------------------------------


def _configure_diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=Path, help="the first trace")
    p.add_argument("b", type=Path, help="the second trace")
    p.add_argument(
        "--exact",
        action="store_true",
        help="compare bytes: the first differing event (default: behaviour, every divergence)",
    )


def _diff(args: argparse.Namespace, out: Output) -> int:
    if not args.exact:
        from twinflow.cli._show import behaviour_diff

        return behaviour_diff(args, out)
    # Both traces are read in step, each event verified as it is read: the first difference
    # ends the comparison, and neither file is read past it (a long trace that differs at
    # seq 0 costs one event of each).
    a, b = walk_typed(args.a), walk_typed(args.b)
    root = _trace.Frontier()
    size = 0
    for left in a:
        right = next(b, None)
        if right is None:
            return _longer(args.a, args.b, size + 1 + sum(1 for _ in a), size)
        if left.digest != right.digest:
            _differ(left, right)
        root.append_hash(_trace.leaf_hash(bytes.fromhex(left.digest)))
        size += 1
    if next(b, None) is not None:
        return _longer(args.b, args.a, size + 1 + sum(1 for _ in b), size)
    out.document({"ok": True, "same": True, "events": size, "root": root.root().hex()})
    out.line(f"same: {size} events, root {root.root().hex()}")
    return EXIT_OK


def _differ(left: _trace.VerifiedEvent, right: _trace.VerifiedEvent) -> None:
    """Fail naming the first differing event (events embed their predecessor's digest, so
    every later event differs too: the first is the one worth reading)."""
    from twinflow.vocab import diff

    seq = left.seq
    difference = diff(json.loads(left.event), json.loads(right.event))
    payload = {
        "same": False,
        "seq": seq,
        "pointer": None if difference is None else difference.pointer,
        "a": json.loads(left.event),
        "b": json.loads(right.event),
        "difference": None if difference is None else str(difference),
    }
    raise CheckFailed(f"the traces differ first at seq {seq}: {difference}", payload)


def _longer(longer: Path, shorter: Path, total: int, seq: int) -> int:
    """Fail: ``shorter`` is a prefix of ``longer``, which holds ``total`` events."""
    raise CheckFailed(
        f"{shorter} stops at {seq} events; {longer} goes on to {total}", {"same": False, "seq": seq}
    )


COMMANDS: dict[str, Command] = {
    "verify": (_configure_verify, _verify),
    "checkpoint": (_configure_checkpoint, _checkpoint),
    "prove": (_configure_prove, _prove),
    "keygen": (_configure_keygen, _keygen),
    "repair": (_configure_repair, _repair),
    "diff": (_configure_diff, _diff),
}
