"""``twinflow attest``: what a publisher adds to a run beyond its signed checkpoint.

``attest`` writes an in-toto Statement v1 about a run in a DSSE envelope signed with Ed25519
(`twinflow.trace.attest`): the trace file and its accepted output as subjects, the checkpoint,
config, spec, model and tool modules in the predicate. ``attest --check`` checks one, as the
stdlib leaf's ``twinflow-trace attest-check`` does.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output
from twinflow.cli._traces import check_trace_head, read_published, read_small_file, squash
from twinflow.trace import TraceCorruptError, read_regular, write_new
from twinflow.trace import attest as attestation
from twinflow.trace import note as _note
from twinflow.vocab import UserError

__all__ = ["COMMANDS"]


def _configure_attest(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "make one:   twinflow attest TRACE --key SKEY --out run.intoto.json\n"
        "check one:  twinflow attest [TRACE] --check run.intoto.json --key VKEY\n"
        "                [--checkpoint cp.note]   (TRACE: the trace it must name)\n"
        "The spec and code record beside the trace (spec.yaml, code.json) are read when present."
    )
    p.add_argument("trace", type=Path, nargs="?", help="the trace of the run (JSONL)")
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        metavar="KEY",
        help="to make one: the signer key file (from `twinflow keygen`); to check one: the "
        "verifier key(s) that must have signed it",
    )
    p.add_argument(
        "--out", type=Path, help="write the attestation (DSSE envelope) to this new file"
    )
    p.add_argument(
        "--origin",
        help="the log origin its checkpoint is published under (default: the key's name)",
    )
    p.add_argument(
        "--spec", type=Path, help="the spec the run ran from (default: the one beside it)"
    )
    p.add_argument("--check", type=Path, metavar="ATTESTATION", help="check this attestation")
    p.add_argument("--checkpoint", type=Path, help="with --check: the checkpoint note it must name")


def _spec_and_tools(
    trace: Path, spec_path: Path | None
) -> tuple[dict[str, Any] | None, dict[str, Any], list[dict[str, Any]]]:
    """The spec's digest, the model it names and the code record's modules, from beside the trace."""
    from twinflow.cli._run import code_beside, spec_beside
    from twinflow.cli._spec import SpecError, parse_spec, read_code_record

    path = spec_path if spec_path is not None else spec_beside(trace)
    if spec_path is None and not path.exists():
        return None, {}, []
    data = read_small_file(path, "spec")
    try:
        spec = parse_spec(data.decode("utf-8", "replace"), str(path))
        record = read_code_record(code_beside(trace))
    except SpecError as exc:
        raise UserError(squash(exc)) from None

    digest = {"name": path.name, "sha256": hashlib.sha256(data).hexdigest()}
    model = {"kind": spec.model.kind, "name": spec.model.name}
    tools = [] if record is None else [m.model_dump(mode="json") for m in record.modules]
    return digest, model, tools


def _attest(args: argparse.Namespace, out: Output) -> int:
    if args.check is not None:
        return _check(args, out)
    if args.trace is None or not args.key or args.out is None:
        raise UserError("give TRACE --key SKEY --out FILE to make an attestation, or --check FILE")
    if len(args.key) != 1 or args.checkpoint is not None:
        raise UserError(
            "an attestation is made with one --key SKEY; --checkpoint goes with --check"
        )
    check_trace_head(args.trace)
    try:
        signer = _note.parse_signer_key(read_small_file(args.key[0], "key"))
    except _note.NoteError as exc:
        raise UserError(f"{args.key[0]}: not a signer key ({squash(exc)})") from None
    data = read_regular(args.trace)
    try:
        facts = attestation.run_facts(data)
    except TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}") from None
    except attestation.MalformedAttestationError as exc:
        raise UserError(f"{args.trace}: {exc}") from None
    spec, model, tools = _spec_and_tools(args.trace, args.spec)
    statement = attestation.statement(
        facts,
        trace_name=args.trace.name,
        origin=args.origin or signer.name,
        spec=spec,
        model=model,
        tools=tools,
    )
    envelope = attestation.sign_attestation(statement, [signer])
    write_new(args.out, envelope, mode=0o644)
    out.document({"ok": True, "attestation": str(args.out), "statement": statement})
    out.line(f"attestation signed by {attestation.key_id(signer.verifier)} written to {args.out}")
    out.line(f"  subject {args.trace.name}: sha256 {facts.sha256}")
    if facts.output_digest is not None:
        out.line(f"  subject output (seq {facts.output_seq}): sha256 {facts.output_digest}")
    out.line(f"  checkpoint: size {facts.size}, root (hex) {facts.root.hex()}")
    if spec is None:
        out.line("  (no spec beside the trace: the predicate names none; give --spec)")
    return EXIT_OK


def _check(args: argparse.Namespace, out: Output) -> int:
    if args.trace is None and args.checkpoint is None and not args.key:
        raise UserError("--check needs --key VKEY (and TRACE, --checkpoint to match)")
    if not args.key:
        raise UserError("--check needs the verifier key(s) that signed it: --key VKEY")
    try:
        keys = [_note.parse_verifier_key(read_small_file(k, "key")) for k in args.key]
    except _note.NoteError as exc:
        raise UserError(f"not a verifier key ({squash(exc)})") from None
    data = read_regular(args.check, attestation.MAX_ENVELOPE_BYTES)
    try:
        opened = attestation.open_attestation(data, keys)
        facts = None
        if args.trace is not None:
            check_trace_head(args.trace)
            facts = attestation.run_facts(read_regular(args.trace))
        checkpoint = None
        if args.checkpoint is not None:
            published = read_published(args.checkpoint, args.key, args.origin)
            root = bytes.fromhex(published.checkpoint.root)
            checkpoint = (published.origin, published.checkpoint.size, root)
        attestation.check_statement(opened.statement, facts=facts, checkpoint=checkpoint)
    except attestation.MalformedAttestationError as exc:
        raise UserError(f"{args.check}: not an attestation ({squash(exc)})") from None
    except (attestation.AttestationMismatchError, TraceCorruptError) as exc:
        raise CheckFailed(f"{args.check}: {squash(exc)}") from None
    signers = [attestation.key_id(k) for k in opened.signed_by]
    matched = [w for w, given in (("trace", facts), ("checkpoint", checkpoint)) if given]
    out.document({"ok": True, "signed_by": signers, "matches": matched, **opened.statement})
    line = f"ok: {args.check}: attestation signed by {', '.join(signers)}"
    out.line(line + (f"; matches the {' and the '.join(matched)}" if matched else ""))
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "attest": (_configure_attest, _attest),
}
