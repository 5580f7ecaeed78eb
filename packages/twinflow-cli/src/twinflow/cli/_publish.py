"""``twinflow attest`` and ``twinflow witness``: what a run gets beyond its signed checkpoint.

``attest`` writes an in-toto Statement v1 about a run in a DSSE envelope signed with Ed25519
(`twinflow.trace._attest`): the trace file and its accepted output as subjects, the checkpoint,
config, spec, model and tool modules in the predicate. ``attest --check`` checks one, as the
stdlib leaf's ``twinflow-trace attest-check`` does.

``witness`` is a C2SP witness run from the command line: given a consistency proof file (the
tlog-witness ``add-checkpoint`` body ``twinflow prove --from-size`` writes), it cosigns the
checkpoint only if it extends the last one it cosigned for that log (`twinflow.trace._witness`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path
from typing import Any

from twinflow import trace as _trace
from twinflow._base._files import write_new
from twinflow._base._open import read_regular
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output
from twinflow.cli._traces import check_trace_head, read_published, read_small_file, squash
from twinflow.trace import TwinflowError, UserError
from twinflow.trace._attest import key_id, run_facts, sign_attestation
from twinflow.trace._attest import statement as attestation_statement
from twinflow.trace._keys import parse_signer_key, parse_verifier_key
from twinflow.trace._note import parse_checkpoint_body, parse_note
from twinflow.trace._published import PublishedCheckpoint
from twinflow.trace._witness import Cosignature, parse_cosigner_key, verify_cosignatures

__all__ = ["COMMANDS", "add_witness_policy", "check_witness_policy", "cosigned_line"]


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
    from twinflow.agent import RunSpec, SpecError
    from twinflow.cli._run import code_beside, spec_beside

    path = spec_path if spec_path is not None else spec_beside(trace)
    if spec_path is None and not path.exists():
        return None, {}, []
    data = read_small_file(path, "spec")
    try:
        spec = RunSpec.parse(data.decode("utf-8", "replace"), str(path))
        record = RunSpec.read_code_record(code_beside(trace))
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
        signer = parse_signer_key(read_small_file(args.key[0], "key"))
    except _trace.SignatureError as exc:
        raise UserError(f"{args.key[0]}: not a signer key ({squash(exc)})") from None
    data = read_regular(args.trace)
    try:
        facts = run_facts(data)
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}") from None
    except _trace.TraceFormatError as exc:  # the trace does not start a run
        raise UserError(f"{args.trace}: {exc}") from None
    spec, model, tools = _spec_and_tools(args.trace, args.spec)
    statement = attestation_statement(
        facts,
        trace_name=args.trace.name,
        origin=args.origin or signer.name,
        spec=spec,
        model=model,
        tools=tools,
    )
    envelope = sign_attestation(statement, [signer])
    write_new(args.out, envelope, mode=0o644)
    out.document({"ok": True, "attestation": str(args.out), "statement": statement})
    out.line(f"attestation signed by {key_id(signer.verifier)} written to {args.out}")
    out.line(f"  subject {args.trace.name}: sha256 {facts.sha256}")
    if facts.output_digest is not None:
        out.line(f"  subject output (seq {facts.output_seq}): sha256 {facts.output_digest}")
    out.line(f"  checkpoint: size {facts.size}, root (hex) {facts.root.hex()}")
    if spec is None:
        out.line("  (no spec beside the trace: the predicate names none; give --spec)")
    return EXIT_OK


def _check(args: argparse.Namespace, out: Output) -> int:
    from twinflow.trace._attest import (
        MAX_ENVELOPE_BYTES,
        check_statement,
        key_id,
        open_attestation,
        run_facts,
    )

    if args.out is not None or args.spec is not None:
        raise UserError("--out and --spec make an attestation; --check checks one")
    if not args.key:
        raise UserError("--check needs the verifier key(s) that signed it: --key VKEY")
    try:
        keys = [parse_verifier_key(read_small_file(k, "key")) for k in args.key]
    except _trace.SignatureError as exc:
        raise UserError(f"not a verifier key ({squash(exc)})") from None
    data = read_regular(args.check, MAX_ENVELOPE_BYTES)
    try:
        opened = open_attestation(data, keys)
        facts = None
        if args.trace is not None:
            check_trace_head(args.trace)
            facts = run_facts(read_regular(args.trace))
        checkpoint = None
        if args.checkpoint is not None:
            published = read_published(args.checkpoint, args.key, args.origin)
            root = bytes.fromhex(published.checkpoint.root)
            checkpoint = (published.origin, published.checkpoint.size, root)
        check_statement(opened.statement, facts=facts, checkpoint=checkpoint)
    except _trace.TraceFormatError as exc:
        if exc.reason != "attestation":
            raise
        raise UserError(f"{args.check}: not an attestation ({squash(exc)})") from None
    except _trace.SignatureError as exc:
        if exc.reason != "attestation_mismatch":
            raise
        raise CheckFailed(f"{args.check}: {squash(exc)}") from None
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{args.check}: {squash(exc)}") from None
    signers = [key_id(k) for k in opened.signed_by]
    matched = [w for w, given in (("trace", facts), ("checkpoint", checkpoint)) if given]
    out.document({"ok": True, "signed_by": signers, "matches": matched, **opened.statement})
    line = f"ok: {args.check}: attestation signed by {', '.join(signers)}"
    out.line(line + (f"; matches the {' and the '.join(matched)}" if matched else ""))
    return EXIT_OK


# -- a witness policy for verify --------------------------------------------------------------


def add_witness_policy(p: argparse.ArgumentParser) -> None:
    """``--witness VKEY`` (repeated) and ``--quorum N``: who must have cosigned the checkpoint."""
    p.add_argument(
        "--witness",
        type=Path,
        action="append",
        metavar="VKEY",
        help="a witness's cosigner verifier key (`keygen --cosigner`); repeat. The checkpoint "
        "must carry C2SP cosignatures by --quorum of them",
    )
    p.add_argument(
        "--quorum",
        type=int,
        metavar="N",
        help="how many of the --witness keys must have cosigned (default: all of them)",
    )


def check_witness_policy(
    args: argparse.Namespace, checkpoint: Path | None, published: PublishedCheckpoint | None
) -> tuple[Cosignature, ...] | None:
    """The cosignatures that meet the policy ``--witness``/``--quorum`` asks for (None: none asked).

    A cosignature dated more than `DEFAULT_CLOCK_SKEW` seconds after this machine's clock does
    not count (docs/adr/0115-witness-cosignatures.md).

    Raises:
        UserError: The policy is not one (no checkpoint, a quorum out of range, a bad key).
        CheckFailed: Too few witnesses cosigned, or a known witness's cosignature is forged.
    """

    if not args.witness:
        if args.quorum is not None:
            raise UserError("--quorum counts --witness keys: give the witnesses' keys")
        return None
    if checkpoint is None or published is None:
        raise UserError("--witness checks the cosignatures on a --checkpoint note: give one")
    quorum = len(args.witness) if args.quorum is None else args.quorum
    if not 1 <= quorum <= len(args.witness):
        raise UserError(f"--quorum {quorum}: between 1 and the {len(args.witness)} witness key(s)")
    from twinflow.kernel import SystemClock  # the one real clock

    try:
        keys = [parse_cosigner_key(read_small_file(k, "key")) for k in args.witness]
    except _trace.SignatureError as exc:
        raise UserError(f"--witness: not a cosigner verifier key ({squash(exc)})") from None
    data = read_small_file(checkpoint, "checkpoint")
    try:
        cosigned = verify_cosignatures(
            data, keys, quorum=quorum, now=int(SystemClock().now().timestamp())
        )
        body = parse_checkpoint_body(parse_note(data).text)
    except _trace.SignatureError as exc:
        if exc.reason in ("malformed_note", "malformed_checkpoint"):
            raise UserError(
                f"{checkpoint}: not a cosigned checkpoint note ({squash(exc)})"
            ) from None
        if exc.reason != "cosignature":  # two witness keys of one name
            raise UserError(f"--witness: {squash(exc)}") from None
        raise CheckFailed(
            f"{checkpoint}: the witness policy is not met: {squash(exc)}",
            {"problem": {"kind": "cosignature", "message": squash(exc)}},
        ) from None
    # The file was read twice (signatures, then cosignatures): both reads must be one note.
    if (body.origin, body.size, body.root_hash.hex()) != (
        published.origin,
        published.checkpoint.size,
        published.checkpoint.root,
    ):
        raise CheckFailed(f"{checkpoint}: the file changed while it was read; verify again")
    return cosigned


def cosigned_line(cosigned: tuple[Cosignature, ...]) -> str:
    """``cosigned by W (time T UTC), ...`` for an ok line."""
    from datetime import UTC, datetime

    return "cosigned by " + ", ".join(
        f"{c.key.label} ({datetime.fromtimestamp(c.timestamp, UTC):%Y-%m-%dT%H:%M:%SZ})"
        for c in cosigned
    )


# -- witness --------------------------------------------------------------------------------


def _configure_witness(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "once:      twinflow keygen example.org/witness --cosigner --out witness\n"
        "per log checkpoint (the log sends a consistency proof from the size the witness\n"
        "last cosigned; 0 the first time):\n"
        "           twinflow prove TRACE --from-size N --checkpoint cp.note --out cp.tlog-consistency\n"
        "           twinflow witness cp.tlog-consistency --state witness.state --key witness.key \\\n"
        "               --log lab.pub --out cp.cosigned.note\n"
        "A checkpoint that does not extend the last one cosigned (a fork) is refused, exit 1."
    )
    p.add_argument(
        "request",
        type=Path,
        help="the consistency proof file (old size, proof hashes, blank line, the log's note)",
    )
    p.add_argument(
        "--state",
        type=Path,
        required=True,
        help="the witness's state file: per log, the last checkpoint it cosigned (created)",
    )
    p.add_argument("--key", type=Path, required=True, help="the witness's signer key file")
    p.add_argument(
        "--log",
        type=Path,
        action="append",
        required=True,
        metavar="VKEY",
        help="a log's verifier key the witness follows (its name is the log's origin); repeat",
    )
    p.add_argument("--out", type=Path, help="write the cosigned checkpoint note to this new file")
    p.add_argument(
        "--adopt-unsigned-state",
        action="store_true",
        help="read a state written before witness states were signed (check its sizes first); "
        "the state written back is signed with --key",
    )


def _witness_command(args: argparse.Namespace, out: Output) -> int:
    from twinflow.kernel import SystemClock  # the one real clock
    from twinflow.trace._keys import parse_signer_key, parse_verifier_key
    from twinflow.trace._witness import (
        CosignerKey,
        add_checkpoint,
    )

    try:
        signer = parse_signer_key(read_small_file(args.key, "key"))
        logs = [parse_verifier_key(read_small_file(k, "key")) for k in args.log]
    except _trace.SignatureError as exc:
        raise UserError(f"not a key for the witness ({squash(exc)})") from None
    request = read_small_file(args.request, "consistency proof")
    if args.out:
        _refuse_output(args.out)
    now = int(SystemClock().now().timestamp())
    try:
        note, body, old = add_checkpoint(
            request,
            state=args.state,
            signer=signer,
            logs=logs,
            now=now,
            adopt_unsigned=args.adopt_unsigned_state,
        )
    except _trace.SignatureError as exc:
        if exc.reason != "witness_refused":
            raise
        raise CheckFailed(
            f"{args.request}: not cosigned: {squash(exc)}",
            {"reason": exc.problem, "cosigned_size": exc.size},
        ) from None
    except _trace.TraceFormatError as exc:  # the request, or the witness's state file
        raise UserError(squash(exc)) from None
    line = note.decode().rstrip("\n").rsplit("\n", 1)[-1]
    key = CosignerKey.of_signer(signer)
    out.document(
        {
            "ok": True,
            "origin": body.origin,
            "size": body.size,
            "old_size": old,
            "witness": key.label,
            "timestamp": now,
            "cosignature": line,
            "note": note.decode(),
        }
    )
    out.line(
        f"cosigned {body.origin} at size {body.size} (extends size {old}) as {key.label}, "
        f"time {now}"
    )
    out.line(line)
    if args.out:
        # The state is written first and durably (a cosignature is never out before the state
        # that forbids a fork of it); the note is printed above, so a failed write loses nothing.
        try:
            write_new(args.out, note, mode=0o644)
        except (TwinflowError, OSError) as exc:
            out.line(note.decode().rstrip("\n"))
            raise UserError(
                f"{args.out}: not written ({squash(exc)}); the witness state has advanced and "
                "the cosigned note is printed on stdout: save it from there"
            ) from None
        out.line(f"(the cosigned checkpoint written to {args.out})")
    return EXIT_OK


def _refuse_output(path: Path) -> None:
    """Refuse an ``--out`` that cannot be written, before the witness state changes."""
    if os.path.lexists(path):
        raise UserError(
            f"{path} already exists; it was left as it is, nothing was cosigned and the witness "
            "state is unchanged: pick a new --out"
        )
    directory = path.parent
    if directory.is_symlink() or not directory.is_dir() or not os.access(directory, os.W_OK):
        raise UserError(
            f"{path}: its directory {directory} is not a writable directory (or is a link); "
            "nothing was cosigned and the witness state is unchanged"
        )


COMMANDS: dict[str, Command] = {
    "attest": (_configure_attest, _attest),
    "witness": (_configure_witness, _witness_command),
}
