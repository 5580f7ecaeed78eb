"""The subcommands of ``twinflow``: each a (summary, configure, handler) triple."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twinflow.agent import Checkpoint, Trace, TraceCorruptError, verify_trace
from twinflow.cli._main import EXIT_OK, CheckFailed, Output
from twinflow.vocab import UserError, canonical_bytes, diff

__all__ = ["COMMANDS", "parse_trace", "read_trace_bytes"]

# How every trace line starts (the writer's fixed layout); used only to tell "not a trace at
# all" (exit 2) from "a damaged trace" (exit 1, with verification's diagnosis).
LINE_PREFIX_BYTES = b'{"digest":"'


class UnreadableTrace(UserError):
    """The file is not a twinflow trace at all (missing, empty, another format)."""


def read_trace_bytes(path: Path) -> bytes:
    """Read a trace file, refusing what is not a trace at all (exit 2, not a failed check).

    A file that starts like a trace but is damaged further on is returned: verification, not
    this function, reports where and how it was damaged.

    Raises:
        UnreadableTrace: the file is empty or does not start with a trace line.
        OSError: the file cannot be read.
    """
    data = path.read_bytes()
    if not data:
        raise UnreadableTrace(f"{path}: the file is empty, not a twinflow trace")
    if not data.startswith(LINE_PREFIX_BYTES):
        raise UnreadableTrace(
            f"{path}: not a twinflow trace (a trace is JSON lines starting with "
            f"{LINE_PREFIX_BYTES.decode()!r}); check the path"
        )
    return data


def parse_trace(path: Path, data: bytes) -> Trace:
    """Load the bytes `read_trace_bytes` read from ``path``; a damaged trace fails the check.

    Raises:
        CheckFailed: the trace does not load (exit 1, naming ``path``).
    """
    try:
        return Trace.load(data)
    except TraceCorruptError as exc:
        raise CheckFailed(f"{path}: {exc}", {"trace": str(path)}) from None


def _load(path: Path) -> Trace:
    return parse_trace(path, read_trace_bytes(path))


def _checkpoint_payload(checkpoint: Checkpoint) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(canonical_bytes(checkpoint))
    return payload


# -- verify ---------------------------------------------------------------------------------


def _configure_verify(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="a checkpoint JSON file (from `twinflow checkpoint --json`) the trace must match",
    )
    p.add_argument(
        "--key-file",
        type=Path,
        help="file holding the HMAC key the checkpoint must be signed with",
    )
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="accept a trace without run_finished / run_failed (a run still in progress)",
    )


def _read_checkpoint(path: Path) -> Checkpoint:
    try:
        data = json.loads(path.read_bytes())
        if isinstance(data, dict):
            data.pop("ok", None)  # `twinflow checkpoint --json` output is accepted as is
        return Checkpoint.model_validate(data)
    except ValueError as exc:
        raise UserError(
            f"{path}: not a checkpoint file ({' '.join(str(exc).split())[:200]})"
        ) from None


def _verify(args: argparse.Namespace, out: Output) -> int:
    data = read_trace_bytes(args.trace)
    checkpoint = _read_checkpoint(args.checkpoint) if args.checkpoint else None
    key = args.key_file.read_bytes().strip() if args.key_file else None
    if key is not None and checkpoint is None:
        raise UserError("--key-file needs --checkpoint: the key checks a checkpoint's signature")
    report = verify_trace(
        data, checkpoint=checkpoint, key=key, require_complete=not args.allow_incomplete
    )
    payload = {
        "ok": report.ok,
        "trace": str(args.trace),
        "events": report.events,
        "checkpoint": _checkpoint_payload(report.checkpoint),
        "problem": None if report.problem is None else report.problem.model_dump(),
    }
    if report.problem is not None:
        problem = report.problem
        raise CheckFailed(f"{args.trace}: {problem}", payload)
    out.document(payload)
    out.line(f"ok: {args.trace}: {report.events} events verify")
    out.line(f"root {report.checkpoint.root} (size {report.checkpoint.size})")
    return EXIT_OK


# -- checkpoint -----------------------------------------------------------------------------


def _configure_checkpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument("--size", type=int, help="cover only the first SIZE events (default: all)")
    p.add_argument(
        "--key-file", type=Path, help="sign the checkpoint with the HMAC key in this file"
    )


def _checkpoint(args: argparse.Namespace, out: Output) -> int:
    trace = _load(args.trace)
    if args.size is not None and not 0 <= args.size <= trace.size:
        raise UserError(f"--size {args.size}: the trace holds {trace.size} events")
    key = args.key_file.read_bytes().strip() if args.key_file else None
    checkpoint = trace.checkpoint(args.size, key=key)
    out.document({"ok": True, **_checkpoint_payload(checkpoint)})
    out.line(f"size {checkpoint.size}")
    out.line(f"root {checkpoint.root}")
    out.line(f"head {checkpoint.head}")
    if checkpoint.signature:
        out.line(f"signature {checkpoint.signature}")
    return EXIT_OK


# -- prove ----------------------------------------------------------------------------------


def _configure_prove(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument("--seq", type=int, required=True, help="the event's sequence number")
    p.add_argument("--size", type=int, help="prove against the first SIZE events (default: all)")


def _prove(args: argparse.Namespace, out: Output) -> int:
    from twinflow.agent import check_inclusion

    trace = _load(args.trace)
    size = trace.size if args.size is None else args.size
    if not 1 <= size <= trace.size:
        raise UserError(f"--size {size}: the trace holds {trace.size} events")
    if not 0 <= args.seq < size:
        raise UserError(f"--seq {args.seq}: events are numbered 0 to {size - 1}")
    proof = trace.inclusion_proof(args.seq, size)
    checkpoint = trace.checkpoint(size)
    # Check our own output before printing it: a proof we cannot verify is a bug to report.
    check_inclusion(proof, checkpoint)
    out.document(
        {
            "ok": True,
            "proof": json.loads(canonical_bytes(proof)),
            "checkpoint": _checkpoint_payload(checkpoint),
        }
    )
    out.line(f"event {args.seq} (digest {proof.event_digest}) is in the trace of size {size}")
    out.line(f"root {checkpoint.root}")
    for index, node in enumerate(proof.path):
        out.line(f"  path[{index}] {node}")
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


def _event_json(trace: Trace, seq: int) -> Any:
    return json.loads(canonical_bytes(trace.events[seq]))


def _diff(args: argparse.Namespace, out: Output) -> int:
    if not args.exact:
        from twinflow.cli._show import behaviour_diff

        return behaviour_diff(args, out)
    a, b = _load(args.a), _load(args.b)
    for seq in range(min(a.size, b.size)):
        if a.digests[seq] == b.digests[seq]:
            continue
        # Events embed their predecessor's digest, so after the first difference every
        # later event differs too; the first one is the one worth reading.
        difference = diff(_event_json(a, seq), _event_json(b, seq))
        payload = {
            "same": False,
            "seq": seq,
            "pointer": None if difference is None else difference.pointer,
            "a": _event_json(a, seq),
            "b": _event_json(b, seq),
            "difference": None if difference is None else str(difference),
        }
        raise CheckFailed(f"the traces differ first at seq {seq}: {difference}", payload)
    if a.size != b.size:
        longer, shorter = (args.a, args.b) if a.size > b.size else (args.b, args.a)
        seq = min(a.size, b.size)
        raise CheckFailed(
            f"{shorter} stops at {seq} events; {longer} goes on to {max(a.size, b.size)}",
            {"same": False, "seq": seq},
        )
    out.document({"ok": True, "same": True, "events": a.size, "root": a.checkpoint().root})
    out.line(f"same: {a.size} events, root {a.checkpoint().root}")
    return EXIT_OK


Configure = Callable[[argparse.ArgumentParser], None]
Handler = Callable[[argparse.Namespace, Output], int]

COMMANDS: dict[str, tuple[str, Configure, Handler]] = {
    "verify": (
        "verify a trace: hash chain, digests, completeness (and a checkpoint)",
        _configure_verify,
        _verify,
    ),
    "checkpoint": (
        "print a trace's checkpoint: size, Merkle root, head (optionally signed)",
        _configure_checkpoint,
        _checkpoint,
    ),
    "prove": ("print an RFC 9162 inclusion proof for one event", _configure_prove, _prove),
    "diff": (
        "show where two runs' behaviour differs (--exact: the first differing event's bytes)",
        _configure_diff,
        _diff,
    ),
}
