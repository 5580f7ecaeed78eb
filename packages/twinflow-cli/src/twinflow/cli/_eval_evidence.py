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
from typing import TYPE_CHECKING, Any

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

__all__ = [
    "ATTESTATION_NAME",
    "compare_reproduction",
    "configure_attest",
    "configure_reproduce",
    "eval_attest",
    "eval_reproduce",
    "is_reproduction",
    "open_checked",
]

ATTESTATION_NAME = "eval.intoto.json"
"""The attestation's file name in its run directory when no ``--out`` is given."""
REPRODUCTION_ATTESTATION = "reproduction.intoto.json"
"""A reproduction's attestation's file name in its directory when no ``--out`` is given."""


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
    if is_reproduction(args.run_dir):
        return _sign_reproduction(args, out, signer)
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


def _sign_reproduction(args: argparse.Namespace, out: Output, signer: Any) -> int:
    """``eval attest`` of a reproduction directory: its statement, naming the run's attestation."""
    statement = _reproduction_statement(args.run_dir)
    target = args.out if args.out is not None else args.run_dir / REPRODUCTION_ATTESTATION
    write_new(target, sign_attestation(statement, [signer]), mode=0o644)
    out.document({"ok": True, "attestation": str(target), "statement": statement})
    out.line(f"reproduction attestation signed by {key_id(signer.verifier)} written to {target}")
    named = statement["predicate"]["attestation"]["digest"]["sha256"]
    out.line(f"  it names the eval attestation with sha256 {named}")
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
    if is_reproduction(args.run_dir):
        if statement != _reproduction_statement(args.run_dir):
            raise _failed(
                f"{args.check}: not the attestation of the reproduction in {args.run_dir}"
            )
        out.document({"ok": True, **statement})
        out.line(f"ok: {args.check}: signed, and the attestation of {args.run_dir} as it is")
        return EXIT_OK
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


# -- eval reproduce ---------------------------------------------------------------------------

REPRODUCTION_NAME = "reproduction.json"
"""The reproduction's predicate, as ``eval reproduce`` writes it in its directory."""


def configure_reproduce(p: argparse.ArgumentParser) -> None:
    """``eval reproduce``'s arguments."""
    p.add_argument("run_dir", type=Path, help="the attested run directory to reproduce")
    p.add_argument(
        "--spec",
        type=Path,
        required=True,
        help="the run spec to rebuild the agent from (one you trust: its tools are imported)",
    )
    p.add_argument("--out", type=Path, required=True, help="the reproduction's new directory")
    p.add_argument(
        "--attestation",
        type=Path,
        help=f"the run's eval attestation it names (default: RUN_DIR/{ATTESTATION_NAME})",
    )
    p.add_argument(
        "--key",
        type=Path,
        metavar="SKEY",
        help=f"also sign it (as `eval attest OUT --key SKEY`): OUT/{REPRODUCTION_ATTESTATION}",
    )
    p.add_argument(
        "--mode",
        choices=("recorded", "live"),
        default="recorded",
        help="recorded: replay each case trace, the model's replies and tool results from it (no "
        "model); live: replay it so, then run the case again against the model at its recorded "
        "settings (model, structured-output mode, temperature, max tokens, seed) and compare the "
        f"new trace (OUT/{_FRESH}/KEY.jsonl) by behaviour (default: recorded)",
    )
    p.add_argument(
        "--model",
        metavar="MODEL",
        help="with --mode live: an equivalent model to run against instead of the recorded one "
        "(a server's URL, PROVIDER:MODEL[@URL] or embedded); the statement names the difference",
    )


_FRESH = "traces"
"""Where ``eval reproduce --mode live`` writes each case's new trace in its directory."""


def eval_reproduce(args: argparse.Namespace, out: Output) -> int:
    """Re-run every case trace of an attested run against a spec and write which cases
    reproduced exactly, which diverged and where (seq, turn, step), and how this machine's
    environment differs: recorded (no model: does the code still produce the trace?) or live
    (also against the model at the recorded settings); `eval attest OUT --key SKEY` signs it,
    naming the run's attestation, and `eval compare RUN_DIR OUT` reads both."""
    import contextlib
    import os

    from twinflow._base._files import read_inside
    from twinflow.agent import load_spec
    from twinflow.cli._eval_live import LiveModels

    if args.model is not None and args.mode != "live":
        raise UserError("--model names the model of a live reproduction: add --mode live")
    attestation = args.attestation or args.run_dir / ATTESTATION_NAME
    envelope = read_regular(attestation, MAX_ENVELOPE_BYTES)
    manifest, results = load_run(args.run_dir)
    if os.path.lexists(args.out):
        raise UserError(f"{args.out} already exists; a reproduction is written to a new directory")
    signer = _signer(args.key)
    spec = load_spec(args.spec)
    statement, _ = _attested_statement(args.run_dir, attestation, envelope)
    traces: list[tuple[str, Path]] = []
    for result in results.cases:
        read_inside(args.run_dir, result.trace, what="results.json")  # a path that stays inside
        traces.append((result.key, args.run_dir / result.trace))
    environment: dict[str, None] = {}
    with contextlib.ExitStack() as stack:
        live = LiveModels(spec, args.model, stack, args.out)
        # Every model is checked reachable before anything is written or replayed.
        models = live.models([t for _, t in traces]) if args.mode == "live" else None
        args.out.mkdir(parents=True)
        cases = [
            _reproduce_case(trace, key, spec, environment)
            if models is None
            else _live_case(trace, key, spec, environment, live, models[i], args.out / _FRESH)
            for i, (key, trace) in enumerate(traces)
        ]
    return _write_reproduction(args, out, signer, statement, envelope, cases, environment, manifest)


def _write_reproduction(
    args: argparse.Namespace,
    out: Output,
    signer: Any,
    statement: dict[str, Any],
    envelope: bytes,
    cases: list[dict[str, object]],
    environment: dict[str, None],
    manifest: Any,
) -> int:
    """Write (and with --key sign) the reproduction predicate of ``cases``."""
    from twinflow.trace._canonical import canonical_bytes
    from twinflow.trace._evidence import check_reproduction_predicate, envelope_digest

    predicate = {
        "assuranceLevel": "reproduced",
        "attestation": {
            "digest": {"sha256": envelope_digest(envelope)},
            "casesRootHex": statement["predicate"]["cases"]["rootHex"],
        },
        "suite": statement["predicate"]["suite"],
        "mode": args.mode,
        "cases": cases,
        "environment": list(environment),
    }
    check_reproduction_predicate(predicate)
    write_new(args.out / REPRODUCTION_NAME, canonical_bytes(predicate) + b"\n", mode=0o644)
    same = [c["key"] for c in cases if c["outcome"] == "reproduced"]
    out.document({"ok": True, "reproduction": str(args.out / REPRODUCTION_NAME), **predicate})
    out.line(
        f"{len(same)} of {len(cases)} case(s) of {_clean(manifest.dataset.name)} reproduced "
        f"exactly ({args.mode}); {len(cases) - len(same)} diverged"
    )
    _print_divergences(out, cases, environment)
    if signer is None:
        out.line(f"sign it: twinflow eval attest {args.out} --key SKEY")
        return EXIT_OK
    target = args.out / REPRODUCTION_ATTESTATION
    write_new(target, sign_attestation(_reproduction_statement(args.out), [signer]), mode=0o644)
    out.line(f"reproduction attestation signed by {key_id(signer.verifier)} written to {target}")
    return EXIT_OK


def _attested_statement(
    run_dir: Path, attestation: Path, envelope: bytes
) -> tuple[dict[str, Any], list[bytes]]:
    """The run's statement and case roots, refused unless ``envelope`` attests this run."""
    try:
        statement, roots = eval_statement(run_dir, _version())
    except TraceMismatchError as exc:
        raise _failed(str(exc)) from None
    named = _stated_cases_root(envelope)
    if named != statement["predicate"]["cases"]["rootHex"]:
        raise _failed(
            f"{attestation} is not an attestation of {run_dir}: it states case root (hex) "
            f"{str(named)[:64]}, the run has {statement['predicate']['cases']['rootHex']}"
        )
    return statement, roots


def _print_divergences(
    out: Output, cases: list[dict[str, object]], environment: dict[str, None]
) -> None:
    """Each case that did not reproduce, where it diverged, and the first environment lines."""
    for case in cases:
        if case["outcome"] != "reproduced":
            out.line(f"  {_where(case)}")
    for line in list(environment)[:5]:
        out.line(f"  environment: {_clean(line)}")


def _where(case: dict[str, Any]) -> str:
    """One case's divergence on one line: its key and mode, seq, turn and step, what differs."""
    mode = f" ({case['mode']})" if "mode" in case else ""
    place = f" (turn {case['turn']}, step {case['step']})" if case.get("step") is not None else ""
    return (
        f"{_clean(str(case['key']))}{mode}: at seq {case['seq']}{place}: "
        f"{_clean(str(case['detail']))}"
    )


def _stated_cases_root(envelope: bytes) -> object:
    """The case root an eval attestation states (its signature is the reader's to check:
    a reproducer may not hold the lab's key), or None where it states none."""
    import base64
    import binascii
    import json

    try:
        statement = json.loads(base64.b64decode(json.loads(envelope)["payload"], validate=True))
        return statement["predicate"]["cases"]["rootHex"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None


if TYPE_CHECKING:
    from twinflow.agent import RunSpec


def _reproduce_case(
    trace: Path, key: str, spec: RunSpec, environment: dict[str, None]
) -> dict[str, object]:
    """One case replayed (recorded): ``reproduced``, or ``diverged`` at the first differing
    seq (with its turn and step)."""
    from twinflow.cli._eval_live import place_of
    from twinflow.cli._replay_cli import _replay_file

    try:
        payload = _replay_file(
            trace, lambda: spec, "recorded"
        )  # the spec is read once, served per case
    except CheckFailed as exc:
        seq = exc.payload.get("seq")
        seq = seq if type(seq) is int else None
        detail = exc.payload.get("difference") or str(exc).split(": ", 1)[-1]
        turn, step = place_of(trace, seq)
        return _case(key, "recorded", seq, turn, step, " ".join(str(detail).split())[:500])
    for line in payload["environment_differences"]:
        environment.setdefault(str(line), None)
    return _case(key, "recorded")


def _case(
    key: str,
    mode: str,
    seq: int | None = None,
    turn: int | None = None,
    step: int | None = None,
    detail: str | None = None,
) -> dict[str, object]:
    """A case of the reproduction predicate: ``diverged`` when it has a ``detail``."""
    outcome = "reproduced" if detail is None else "diverged"
    return {
        "key": key,
        "mode": mode,
        "outcome": outcome,
        "seq": seq,
        "turn": turn,
        "step": step,
        "detail": detail,
    }


def _live_case(
    trace: Path,
    key: str,
    spec: RunSpec,
    environment: dict[str, None],
    live: Any,
    recorded: tuple[Any, Any, tuple[str, ...]],
    fresh_dir: Path,
) -> dict[str, object]:
    """One case replayed, then (if the code still produces its trace) run against the model
    and compared by behaviour; the environment lines are the live run's."""
    from twinflow.cli._eval_live import first_divergence

    replayed = _reproduce_case(trace, key, spec, {})
    if replayed["outcome"] != "reproduced":
        return replayed  # the code no longer produces the trace: a live run would say no more
    started, model, turns = recorded
    fresh_dir.mkdir(exist_ok=True)
    fresh = fresh_dir / trace.name
    ran = live.run(fresh, started, model, turns)
    if started.environment is not None:
        for line in started.environment.differences(ran, imports=False):
            environment.setdefault(line, None)
    found = first_divergence(trace, fresh)
    if found is None:
        return _case(key, "live")
    seq, turn, step, detail = found
    return _case(key, "live", seq, turn, step, detail[:500])


def _reproduction(directory: Path) -> dict[str, Any]:
    """The reproduction predicate ``eval reproduce`` wrote in ``directory``, its shape checked.

    Raises:
        UserError: It is not one.
    """
    from twinflow._base._files import read_inside
    from twinflow.trace._canonical import parse_json
    from twinflow.trace._evidence import check_reproduction_predicate

    data = read_inside(
        directory, REPRODUCTION_NAME, what=REPRODUCTION_NAME, max_bytes=MAX_ENVELOPE_BYTES
    )
    try:
        return check_reproduction_predicate(parse_json(data, max_depth=16))
    except (TraceFormatError, ValueError) as exc:
        raise UserError(
            f"{directory / REPRODUCTION_NAME}: not a reproduction ({squash(exc)})"
        ) from None


def is_reproduction(directory: Path) -> bool:
    """Whether ``directory`` holds a reproduction (``eval reproduce``'s) rather than a run."""
    return (directory / REPRODUCTION_NAME).is_file()


def _reproduction_statement(directory: Path) -> dict[str, Any]:
    """The in-toto statement of the reproduction in ``directory``."""
    from twinflow._base._files import read_inside
    from twinflow.trace._attest import STATEMENT_TYPE
    from twinflow.trace._evidence import REPRODUCTION_PREDICATE_TYPE, envelope_digest

    data = read_inside(directory, REPRODUCTION_NAME, what=REPRODUCTION_NAME)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": REPRODUCTION_NAME, "digest": {"sha256": envelope_digest(data)}}],
        "predicateType": REPRODUCTION_PREDICATE_TYPE,
        "predicate": _reproduction(directory),
    }


def compare_reproduction(run_dir: Path, reproduction: Path, out: Output) -> int:
    """``eval compare RUN_DIR REPRODUCTION``: which cases reproduced, once the reproduction is
    shown to be of this run (its attestation's digest and its case root).

    Raises:
        CheckFailed: The reproduction names another run's attestation or case root.
    """
    from twinflow.trace._evidence import envelope_digest

    predicate = _reproduction(reproduction)
    named = predicate["attestation"]
    attestation = run_dir / ATTESTATION_NAME
    try:
        statement, _ = eval_statement(run_dir, _version())
    except TraceMismatchError as exc:
        raise _failed(str(exc)) from None
    found = {
        "case root (hex)": statement["predicate"]["cases"]["rootHex"],
        "attestation sha256": envelope_digest(read_regular(attestation, MAX_ENVELOPE_BYTES))
        if attestation.is_file()
        else named["digest"]["sha256"],
    }
    stated = {
        "case root (hex)": named["casesRootHex"],
        "attestation sha256": named["digest"]["sha256"],
    }
    for what, value in stated.items():
        if value != found[what]:
            raise _failed(
                f"{reproduction} is a reproduction of another run: it names {what} {value}, "
                f"{run_dir} has {found[what]}"
            )
    cases = predicate["cases"]
    same = [c for c in cases if c["outcome"] == "reproduced"]
    out.document({"ok": True, "reproduction": predicate})
    out.line(
        f"{reproduction} reproduces {run_dir} ({predicate['mode']}): {len(same)} of "
        f"{len(cases)} case(s) exactly"
    )
    for case in cases:
        if case["outcome"] != "reproduced":
            out.line(f"  diverged {_where(case)}")
    for line in predicate["environment"][:20]:
        out.line(f"  environment differs: {_clean(line)}")
    return EXIT_OK
