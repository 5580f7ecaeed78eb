"""The trace subcommands of ``twinflow``: each a (configure, handler) pair (``prove``:
`twinflow.cli._prove`).

verify, checkpoint and prove stream the trace through `twinflow.trace` (memory independent of
its length, bounded lines and nesting), the very verifier the stdlib leaf's
``python -m twinflow.trace verify`` runs; ``verify --typed`` adds the agent's typed check as its
hook. The agent (and pydantic) is imported only where a command reads typed events, the
signed-note codec only where one is read or written, so these commands and their ``--help``
start without them (ADR 0130).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from twinflow import trace as _trace
from twinflow._base._files import write_new
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output, say
from twinflow.cli._publish import add_witness_policy, check_witness_policy, cosigned_line
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
from twinflow.trace import UserError, _format, _merkle
from twinflow.trace._format import encode_redacted
from twinflow.trace._keys import parse_signer_key
from twinflow.trace._merkle import Frontier
from twinflow.trace._note import CheckpointBody, sign_checkpoint_note
from twinflow.trace._repair import repair_trace

__all__ = ["COMMANDS", "THREAT_MODEL"]

_HEX64 = re.compile(r"[0-9a-f]{64}")

THREAT_MODEL = """\
what verification proves:
  on its own, the hash chain proves the file was not edited by accident or in part: a
  changed, removed, inserted, reordered or torn event is named at its seq. It cannot prove
  the file is the one that was published: whoever rewrites every event and recomputes every
  digest and prev gets a trace that verifies, and a trace cut at a line boundary after a
  terminal event looks complete.
  --checkpoint CP: only a checkpoint the publisher put out (a C2SP note: log, size, Merkle
  root) catches a full rewrite or a truncation, and only if you got CP from the publisher, not
  beside the file. Its Ed25519 signature (`twinflow keygen`, `checkpoint --sign`, `verify
  --key`) says who put it out; an unsigned note says nothing about who did.
to publish a run so a stranger can check it:
  `twinflow keygen example.org/lab --out lab` once; publish lab.pub where strangers trust it;
  for each run publish the trace and `twinflow checkpoint TRACE --sign lab.key --out cp.note`;
  the stranger runs `twinflow verify TRACE --checkpoint cp.note --key lab.pub`. One event is
  shown to be in a run, without the trace, by a C2SP tlog-proof: `twinflow prove TRACE --seq N
  --checkpoint cp.note --out e.tlog-proof`, checked by `twinflow prove --check e.tlog-proof
  --key lab.pub`; a later checkpoint of a growing trace is tied to an earlier one by `twinflow
  prove TRACE --from-size N --checkpoint new.note --out c.tlog-consistency`, checked by `twinflow
  prove --check c.tlog-consistency --old-checkpoint old.note --key lab.pub`.
"""


_HMAC_RETIRED = (
    "--key-file: HMAC-signed checkpoints are retired (a shared key lets every checker forge "
    "one); sign a C2SP note: `twinflow keygen NAME --out lab` once, then "
    "`checkpoint TRACE --sign lab.key --out cp.note` and `verify TRACE --checkpoint cp.note "
    "--key lab.pub`"
)


def _add_retired_key_file(p: argparse.ArgumentParser) -> None:
    """--key-file stays only to say what replaced it (one line, exit 2), not as an option."""
    p.add_argument("--key-file", type=Path, help=argparse.SUPPRESS)


def _refuse_key_file(args: argparse.Namespace) -> None:
    if args.key_file is not None:
        raise UserError(_HMAC_RETIRED)


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


def _write_out(path: Path, data: bytes) -> None:
    """Write a proof, checkpoint or event file: exclusively, never through a link, synced."""
    write_new(path, data, mode=0o644)


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
    _add_retired_key_file(p)
    add_checkpoint_keys(p)
    add_witness_policy(p)
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
    p.add_argument(
        "--tree",
        action="store_true",
        help="also verify every sub-agent run the trace links (each child's trace beside it, "
        "and theirs): each file must verify and hold exactly the events and root its link "
        "records; the first missing, edited or swapped child fails, naming the link",
    )
    _add_limits(p)


def _verify_decisions(args: argparse.Namespace, out: Output) -> int:
    """``verify --key`` without a checkpoint: the keys check the signed decisions in the trace,
    which are read as typed events (the typed check runs whatever ``--typed`` says)."""
    from twinflow.agent import verify_agent_trace

    report = verify_agent_trace(args.trace, require_complete=not args.allow_incomplete)
    if report.problem is not None:
        raise CheckFailed(f"{args.trace}: {report.problem}")
    from twinflow.cli._decisions import verify_signed_decisions

    checked = verify_signed_decisions(load_trace(args.trace), args.trace, args.key)
    if not checked:
        raise UserError(f"{args.trace}: no decisions on waiting calls to check with --key")
    out.document({"ok": True, "trace": str(args.trace), "signed_decisions": checked})
    out.line(f"ok: {args.trace}: {report.events} events verify; {checked} signed decision(s)")
    return EXIT_OK


def _verify(args: argparse.Namespace, out: Output) -> int:
    _refuse_key_file(args)
    check_trace_head(args.trace)
    if args.key and not (args.checkpoint or args.origin):
        return _verify_decisions(args, out)
    if args.origin and not args.checkpoint:
        raise UserError("--origin needs --checkpoint: it names the log the checkpoint is for")
    published = read_published(args.checkpoint, args.key, args.origin) if args.checkpoint else None
    cosigned = check_witness_policy(args, args.checkpoint, published)
    check = None
    if args.typed:
        from twinflow.agent import typed_event

        check = typed_event
    report = _trace.verify_trace(
        args.trace,
        checkpoint=None if published is None else published.checkpoint,
        require_complete=not args.allow_incomplete,
        limits=_limits(args),
        check=check,
        allow_tail=args.allow_unsigned_tail,
    )
    signer = None if published is None else vouched(published)
    payload = {
        "ok": report.ok,
        "trace": str(args.trace),
        "events": report.events,
        "checkpoint": report.checkpoint.to_json(),
        "root_encoding": "hex",
        "covered": report.covered,
        "coverage": report.coverage(),
        "origin": None if published is None else published.origin,
        "signed_by": [] if published is None else list(published.signed_by),
        "vouched": signer,
        "cosigned_by": [{"witness": c.key.label, "timestamp": c.timestamp} for c in cosigned or ()],
        "redacted": list(report.redacted),
        "problem": None if report.problem is None else report.problem.to_json(),
    }
    if report.problem is not None:
        raise CheckFailed(f"{args.trace}: {report.problem}", payload)
    tree = _verify_tree(args, payload) if args.tree else None
    out.document(payload)
    line = f"ok: {args.trace}: {report.events} events verify"
    line = line if signer is None else f"{line}; {signer}: {report.coverage()}"
    out.line(line if not report.redacted else f"{line}; {report.redaction()}")
    if cosigned:
        out.line(cosigned_line(cosigned))
    out.line(f"root (hex) {report.checkpoint.root} (size {report.checkpoint.size})")
    for depth, text in tree or ():
        out.line(f"{'  ' * depth}{text}")
    if published is None:
        out.line("(a hash chain alone does not catch a full rewrite: check a published checkpoint)")
    elif report.covered is not None and report.covered < report.events:
        out.line(
            f"(events {report.covered}-{report.events - 1} are NOT vouched for by the checkpoint)"
        )
    return EXIT_OK


def _verify_tree(args: argparse.Namespace, payload: dict[str, Any]) -> list[tuple[int, str]]:
    """``verify --tree``: every descendant run and link; each run's line, nested by depth."""
    from twinflow.trace._tree import iter_links, verify_tree

    tree = verify_tree(args.trace, limits=_limits(args))
    payload["tree"] = [
        {
            "depth": node.depth,
            "trace": str(node.path),
            "events": node.checkpoint.size,
            "root": node.checkpoint.root,
            "link": None
            if node.link is None
            else {"event": node.link.seq, "tool": node.link.tool, "run_id": node.link.run_id},
        }
        for node in tree.nodes
    ]
    if tree.problem is not None:
        payload["ok"] = False
        payload["problem"] = {"kind": "tree", "message": tree.problem}
        raise CheckFailed(f"{args.trace}: tree: {tree.problem}", payload)
    # The top run's own line is the verify line already.
    return list(iter_links(tree))[1:]


# -- checkpoint -----------------------------------------------------------------------------


def _configure_checkpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument("--size", type=int, help="cover only the first SIZE events (default: all)")
    p.add_argument("--out", type=Path, help="write the checkpoint note to this new file (cp.note)")
    p.add_argument(
        "--sign",
        type=Path,
        action="append",
        metavar="SKEY",
        help="sign the C2SP checkpoint note with this signer key file (from `twinflow keygen`); "
        "repeat to cosign",
    )
    p.add_argument(
        "--origin",
        help="the log's origin line (default with --sign: the first key's name); without "
        "--sign, the note is written unsigned (its body alone)",
    )
    _add_retired_key_file(p)
    _add_limits(p)


def _checkpoint_note(
    checkpoint: _trace.Checkpoint, keys: list[Path] | None, origin: str | None
) -> bytes:
    """The C2SP checkpoint note of ``checkpoint``: signed by ``keys``, or the body alone."""

    try:
        signers = [parse_signer_key(read_small_file(k, "key")) for k in keys or ()]
        if origin is None and not signers:
            raise UserError(
                "a checkpoint note names its log: give --sign SKEY (its name is the log) or "
                "--origin ORIGIN (unsigned)"
            )
        body = CheckpointBody(
            origin or signers[0].name, checkpoint.size, bytes.fromhex(checkpoint.root)
        )
        return sign_checkpoint_note(body, signers) if signers else body.text.encode()
    except _trace.SignatureError as exc:
        raise UserError(f"cannot make the checkpoint note: {squash(exc)}") from None


def _trace_checkpoint(args: argparse.Namespace, size: int | None) -> _trace.Checkpoint:
    """The checkpoint of the trace's first ``size`` events (all: None), the trace verified."""
    if size is not None and size < 0:
        raise UserError(f"--size {size}: a size is 0 or more")
    try:
        return _trace.read_checkpoint(args.trace, size, limits=_limits(args))
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}", corrupt_payload(args.trace, exc)) from None
    except UserError as exc:
        raise UserError(f"--size: {exc}") from None


def _checkpoint(args: argparse.Namespace, out: Output) -> int:
    _refuse_key_file(args)
    check_trace_head(args.trace)
    checkpoint = _trace_checkpoint(args, args.size)
    named = bool(args.sign or args.origin)
    if args.out and not named:
        raise UserError(
            "--out writes a C2SP checkpoint note, which names its log: add --sign SKEY or "
            "--origin ORIGIN"
        )
    note = _checkpoint_note(checkpoint, args.sign, args.origin) if named else None
    if note is not None and args.out:
        _write_out(args.out, note)
    text = None if note is None else note.decode()
    out.document(
        {
            "ok": True,
            "size": checkpoint.size,
            "root": checkpoint.root,
            "head": checkpoint.head,
            "root_encoding": "hex",
            "note": text,
            "signed": bool(args.sign),
        }
    )
    # Stdout holds the data alone (the note, or size, root and head), so `> cp.note` writes a
    # valid note; what is said about it goes to stderr.
    notes = []
    if text is not None:
        for line in text.rstrip("\n").split("\n"):
            out.line(line)
        notes.append(f"(root (hex) {checkpoint.root}; the note's third line is it in base64)")
    else:
        out.line(f"size {checkpoint.size}")
        out.line(f"root (hex) {checkpoint.root}")
        out.line(f"head (hex) {checkpoint.head}")
        notes.append("(to write the checkpoint note: --sign SKEY, or --origin ORIGIN unsigned)")
    if args.out:
        notes.append(f"written to {args.out}")
    if not out.as_json:
        for line in notes:
            say(line)
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
    p.add_argument(
        "--cosigner",
        action="store_true",
        help="a witness's key: PREFIX.pub is its C2SP cosignature/v1 verifier key (type 0x04), "
        "what `verify --witness` reads",
    )


def _keygen(args: argparse.Namespace, out: Output) -> int:
    from twinflow.kernel import SystemIds  # the one source of real entropy
    from twinflow.trace._keys import generate_key

    try:
        signer = generate_key(args.name, SystemIds().secret(32))
    except _trace.SignatureError as exc:
        raise UserError(f"cannot make a key named {args.name!r}: {squash(exc)}") from None
    secret, public = Path(f"{args.out}.key"), Path(f"{args.out}.pub")
    for path in (secret, public):
        if os.path.lexists(path):
            raise UserError(f"{path} already exists; keys are never overwritten")
    verifier = signer.verifier.text
    if args.cosigner:
        from twinflow.trace._witness import CosignerKey

        verifier = CosignerKey.of_signer(signer).text
    write_new(secret, signer.text.encode() + b"\n", mode=0o600)
    write_new(public, verifier.encode() + b"\n", mode=0o644)
    out.document({"ok": True, "signer_key_file": str(secret), "verifier_key": verifier})
    out.line(f"signer key (secret): {secret}")
    out.line(f"{'cosigner ' if args.cosigner else ''}verifier key (publish it): {public}")
    out.line(verifier)
    return EXIT_OK


# -- repair ---------------------------------------------------------------------------------


def _configure_repair(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")


def _repair(args: argparse.Namespace, out: Output) -> int:
    if args.trace.is_symlink():
        raise UserError(f"{args.trace}: is a symbolic link; repair the file it points to")
    check_trace_head(args.trace)
    result = repair_trace(args.trace)
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


# -- redact ---------------------------------------------------------------------------------


def _configure_redact(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument(
        "--seq",
        type=int,
        action="append",
        required=True,
        metavar="N",
        help="an event to replace by its digest (repeat for more)",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="the new trace file to publish (PUBLIC.jsonl)"
    )
    _add_limits(p)


def _redact(args: argparse.Namespace, out: Output) -> int:
    check_trace_head(args.trace)
    chosen = sorted(set(args.seq))
    limits = _limits(args)
    lines: list[bytes] = []
    kinds: dict[int, str] = {}
    try:
        for event in _trace.walk_trace(args.trace, limits=limits, allow_redacted=True):
            value = event.value
            kind = "redacted" if value is None else str(value["body"]["kind"])
            kinds[event.seq] = kind
            if event.seq in chosen or value is None:
                lines.append(encode_redacted(event.digest))
            else:
                lines.append(_format.encode_line(event.event)[0])
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}", corrupt_payload(args.trace, exc)) from None
    for seq in chosen:
        if seq not in kinds:
            raise UserError(f"--seq {seq}: the trace holds events 0..{len(kinds) - 1}")
        if kinds[seq] in _format.TERMINAL_KINDS:
            raise UserError(
                f"--seq {seq}: the run's last event ({kinds[seq]}) shows the run is whole, so "
                "it is never redacted"
            )
    data = b"".join(lines)
    before, after = (
        _trace.read_checkpoint(args.trace, limits=limits),
        _trace.verify_trace(data, limits=limits),
    )
    # A redaction that changed what the checkpoint commits to is a bug to report, not a file.
    if not after.ok or (after.checkpoint.root, after.events) != (before.root, before.size):
        raise CheckFailed(f"{args.trace}: the redacted trace would not keep its Merkle root")
    _write_out(args.out, data)
    out.document(
        {
            "ok": True,
            "trace": str(args.out),
            "events": after.events,
            "redacted": list(after.redacted),
            "root": after.checkpoint.root,
            "root_encoding": "hex",
        }
    )
    out.line(f"{args.out}: {after.events} events; {after.redaction()}")
    out.line(f"root (hex) {after.checkpoint.root}: unchanged, so every checkpoint and proof holds")
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
    p.add_argument(
        "--config",
        action="store_true",
        help="also show where the runs' configuration and environment differ (the imported "
        "distributions, the model server's URL: where a run ran is not behaviour)",
    )


def _diff(args: argparse.Namespace, out: Output) -> int:
    if not args.exact:
        from twinflow.cli._diff_cmd import behaviour_diff

        return behaviour_diff(args, out)
    # Both traces are read in step, each event verified as it is read: the first difference
    # ends the comparison, and neither file is read past it (ADR 0131).
    a, b = walk_typed(args.a), walk_typed(args.b)
    root = Frontier()
    size = 0
    for left in a:
        right = next(b, None)
        if right is None:
            return _longer(args.a, args.b, size + 1 + sum(1 for _ in a), size)
        if left.digest != right.digest:
            _differ(left, right)
        root.append_hash(_merkle.leaf_hash(bytes.fromhex(left.digest)))
        size += 1
    if next(b, None) is not None:
        return _longer(args.b, args.a, size + 1 + sum(1 for _ in b), size)
    hex_root = root.root().hex()
    out.document(
        {"ok": True, "same": True, "events": size, "root": hex_root, "root_encoding": "hex"}
    )
    out.line(f"same: {size} events, root (hex) {hex_root}")
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
        f"{shorter} stops at {seq} events; {longer} goes on to {total}",
        {"same": False, "seq": seq},
    )


COMMANDS: dict[str, Command] = {
    "verify": (_configure_verify, _verify),
    "checkpoint": (_configure_checkpoint, _checkpoint),
    "keygen": (_configure_keygen, _keygen),
    "repair": (_configure_repair, _repair),
    "redact": (_configure_redact, _redact),
    "diff": (_configure_diff, _diff),
}
