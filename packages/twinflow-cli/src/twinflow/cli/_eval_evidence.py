"""``twinflow eval attest``: evidence of an eval run that leaves the lab.

- ``eval attest DIR --key SKEY [--out FILE]``: sign an in-toto statement of the run (DSSE,
  Ed25519; predicate `twinflow.trace._evidence.EVAL_PREDICATE_TYPE`), by default to
  ``DIR/eval.intoto.json``
- ``eval attest DIR --check FILE --key VKEY``: check one against the run directory (its
  signature, dataset digest, plan digest, every case's trace root, the subject files)
- ``eval attest DIR --case KEY --out FILE``: the C2SP tlog-proof placing one case's trace in
  the attested run, for ``twinflow-trace attest-check FILE --trace CASE --proof PROOF``
"""

from __future__ import annotations

import argparse
from pathlib import Path

from twinflow._base._files import write_new
from twinflow._base._open import read_regular
from twinflow.cli._continue import _signer
from twinflow.cli._eval_statement import check_run_dir, eval_statement
from twinflow.cli._output import EXIT_OK, CheckFailed, Output
from twinflow.cli._show import _clean
from twinflow.cli._traces import read_small_file, squash
from twinflow.eval._errors import TraceMismatchError
from twinflow.eval._rescore import load_run
from twinflow.trace import SignatureError, TraceFormatError, UserError
from twinflow.trace._attest import MAX_ENVELOPE_BYTES, key_id, open_attestation, sign_attestation
from twinflow.trace._evidence import prove_case
from twinflow.trace._keys import parse_verifier_key

__all__ = ["ATTESTATION_NAME", "configure_attest", "eval_attest", "open_checked"]

ATTESTATION_NAME = "eval.intoto.json"
"""The attestation's file name in its run directory when no ``--out`` is given."""


def _version() -> str:
    """This twinflow's version (the predicate's ``harness.version``)."""
    from importlib.metadata import version

    return version("twinflow-cli")


def _failed(message: str) -> CheckFailed:
    """A failed check (exit 1), its one line also the ``--json`` document's ``error``."""
    return CheckFailed(message, {"ok": False, "error": " ".join(message.split())})


def configure_attest(p: argparse.ArgumentParser) -> None:
    """``eval attest``'s arguments."""
    p.add_argument("run_dir", type=Path, help="the run directory (of `eval run`)")
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        metavar="KEY",
        help="to make one: the signer key (`twinflow keygen`); with --check: the verifier key(s)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help=f"the new file to write (default: RUN_DIR/{ATTESTATION_NAME}; with --case: required)",
    )
    p.add_argument("--check", type=Path, metavar="ATTESTATION", help="check this attestation")
    p.add_argument(
        "--case",
        metavar="KEY",
        help="write the tlog-proof placing this case (its key, e.g. s1@1) in the attested run",
    )


def eval_attest(args: argparse.Namespace, out: Output) -> int:
    """Sign an in-toto statement of an eval run (dataset, spec and model, plan, each case's
    verdict and trace root, the rate with its interval, a Merkle root over the case roots);
    with --check, hold one against the run directory; with --case, prove one case in it."""
    if sum(x is not None for x in (args.check, args.case)) > 1:
        raise UserError("--check and --case are two modes of eval attest: give one")
    if args.case is not None:
        return _prove(args, out)
    if args.check is not None:
        return _check(args, out)
    if not args.key or len(args.key) != 1:
        raise UserError("an eval attestation is made with one --key SKEY (`twinflow keygen`)")
    signer = _signer(args.key[0])
    try:
        statement, _ = eval_statement(args.run_dir, _version())
    except TraceMismatchError as exc:
        raise _failed(str(exc)) from None
    target = args.out if args.out is not None else args.run_dir / ATTESTATION_NAME
    write_new(target, sign_attestation(statement, [signer]), mode=0o644)
    predicate = statement["predicate"]
    out.document({"ok": True, "attestation": str(target), "statement": statement})
    out.line(f"eval attestation signed by {key_id(signer.verifier)} written to {target}")
    out.line(
        f"  {predicate['sampleSize']} case(s) of {_clean(predicate['suite']['name'])}, case "
        f"root (hex) {predicate['cases']['rootHex']}"
    )
    plan = predicate["preRegistration"]
    if plan is not None:
        kept = "kept to" if plan["kept"] else "did NOT keep to"
        out.line(
            f"  pre-registered: the run {kept} its plan; rule {'met' if plan['met'] else 'NOT met'}"
        )
    out.line(f"check: twinflow eval attest {args.run_dir} --check {target} --key VKEY")
    return EXIT_OK


def open_checked(path: Path, keys: list[Path] | None) -> dict[str, object]:
    """The statement of the attestation at ``path``, its signatures by ``keys`` verified.

    Raises:
        UserError: No key, not a key, or not an attestation (exit 2).
        CheckFailed: A signature does not verify (exit 1).
    """
    if not keys:
        raise UserError("checking an attestation needs the verifier key(s) that signed it: --key")
    try:
        ring = [parse_verifier_key(read_small_file(k, "key")) for k in keys]
    except SignatureError as exc:
        raise UserError(f"not a verifier key ({squash(exc)})") from None
    try:
        return open_attestation(read_regular(path, MAX_ENVELOPE_BYTES), ring).statement
    except TraceFormatError as exc:
        raise UserError(f"{path}: not an attestation ({squash(exc)})") from None
    except SignatureError as exc:
        raise _failed(f"{path}: {squash(exc)}") from None


def _check(args: argparse.Namespace, out: Output) -> int:
    if args.out is not None:
        raise UserError("--out makes an attestation or a proof; --check checks one")
    statement = open_checked(args.check, args.key)
    try:
        check_run_dir(statement, args.run_dir)
    except TraceMismatchError as exc:
        raise _failed(f"{args.check}: {squash(exc)}") from None
    out.document({"ok": True, **statement})
    out.line(f"ok: {args.check}: signed, and an attestation of {args.run_dir} as it is")
    return EXIT_OK


def _prove(args: argparse.Namespace, out: Output) -> int:
    if args.out is None or args.key:
        raise UserError(
            "--case KEY writes a proof: give --out FILE (no key: a proof is not signed)"
        )
    _, results = load_run(args.run_dir)
    keys = [r.key for r in results.cases]
    if args.case not in keys:
        raise UserError(
            f"{args.run_dir} has no case {args.case!r}; its cases: {', '.join(keys[:10])}"
        )
    try:
        _, roots = eval_statement(args.run_dir, _version())
    except TraceMismatchError as exc:
        raise _failed(str(exc)) from None
    index = keys.index(args.case)
    write_new(args.out, prove_case(roots, index), mode=0o644)
    trace = results.cases[index].trace
    out.document({"ok": True, "proof": str(args.out), "case": args.case, "index": index})
    out.line(f"case {_clean(args.case)} (index {index}) proof written to {args.out}")
    out.line(
        f"hand over {args.run_dir / trace}, {args.out} and the attestation; check: "
        f"twinflow-trace attest-check ATTESTATION --key VKEY --trace {args.run_dir / trace} "
        f"--proof {args.out}"
    )
    return EXIT_OK
