"""What an eval run directory attests, and the check of an attestation against one.

`eval_statement` reads a finished run directory (``run.json``, ``results.json``, every case's
trace, ``plan.note`` when the run was pre-registered) and builds the in-toto statement whose
predicate `twinflow.trace._evidence` documents and checks; `check_run_dir` holds a verified
statement against a directory, naming the first thing that differs (docs/adr/0185).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path
from typing import Any

from twinflow._base._files import read_inside
from twinflow.eval._details import _plan_of
from twinflow.eval._errors import RunDirError, TraceMismatchError
from twinflow.eval._plan import judge_plan
from twinflow.eval._rescore import load_run
from twinflow.eval._results import EvalResults, RunManifest
from twinflow.eval._stats import wilson_interval
from twinflow.trace import SignatureError, walk_trace
from twinflow.trace._attest import STATEMENT_TYPE
from twinflow.trace._evidence import EVAL_PREDICATE_TYPE, cases_root, trace_root

__all__ = ["SUBJECTS", "case_roots", "check_run_dir", "eval_statement"]

SUBJECTS = ("run.json", "results.json")
"""The run directory's files an eval attestation names as its subjects, by sha256."""


def case_roots(run_dir: Path, results: EvalResults) -> list[bytes]:
    """Each case's trace root, in case order, from its trace (which must match its result).

    Raises:
        TraceMismatchError: A case is flagged, or its trace is missing, does not verify or is
            not the trace its result recorded.
    """
    roots = []
    for result in results.cases:
        if result.status == "flagged":
            raise TraceMismatchError(
                f"{run_dir}: case {result.key!r} is flagged (its trace does not verify): a run "
                "is attested only when every trace verifies"
            )
        try:
            data = read_inside(run_dir, result.trace, what="results.json")
        except FileNotFoundError:
            raise TraceMismatchError(f"{run_dir}/{result.trace}: no such trace") from None
        try:
            size, root = trace_root(data)
        except SignatureError as exc:
            raise TraceMismatchError(f"{run_dir}/{result.trace}: {exc}") from None
        if (size, root.hex()) != (result.checkpoint.size, result.checkpoint.root):
            raise TraceMismatchError(
                f"{run_dir}/{result.trace} has {size} events, root (hex) {root.hex()}; "
                f"results.json records {result.checkpoint.size}, root (hex) "
                f"{result.checkpoint.root}"
            )
        roots.append(root)
    return roots


def _first_start(run_dir: Path, results: EvalResults) -> datetime | None:
    """When the run's earliest case started (its ``run_started`` event's time)."""
    starts = []
    for result in results.cases:
        data = read_inside(run_dir, result.trace, what="results.json")
        first = next(iter(walk_trace(data, allow_redacted=True)), None)
        at = None if first is None or first.value is None else first.value.get("at")
        if type(at) is str:
            starts.append(datetime.fromisoformat(at))
    return min(starts, default=None)


def _pre_registration(
    run_dir: Path, manifest: RunManifest, results: EvalResults
) -> dict[str, Any] | None:
    """The predicate's ``preRegistration``: the plan's digest, rule, outcome and whether the run
    kept to it (its dataset, spec and trials, and the plan made before the first trace)."""
    plan, _, problem = _plan_of(run_dir)
    if problem is not None:
        raise RunDirError(f"{run_dir}: {problem}")
    if plan is None:
        return None
    data = read_inside(run_dir, "plan.note", what="plan.note")
    outcome = judge_plan(plan, results, _first_start(run_dir, results))
    spec = None if manifest.identity is None else manifest.identity.spec_digest
    kept = (plan.dataset_digest, plan.spec_digest, plan.trials) == (
        manifest.dataset_digest,
        spec,
        manifest.trials,
    )
    return {
        "digest": {"sha256": hashlib.sha256(data).hexdigest()},
        "metric": plan.metric,
        "rule": plan.rule,
        "met": outcome.met,
        "kept": kept and outcome.before_run is True,
        "madeBeforeRun": outcome.before_run,
    }


def eval_statement(run_dir: Path, version: str) -> tuple[dict[str, Any], list[bytes]]:
    """The in-toto statement an eval run directory attests, and its case roots in case order.

    Raises:
        RunDirError: The directory is not a finished run (or its plan cannot be read).
        TraceMismatchError: A trace does not verify or is not the one its result recorded.
    """
    manifest, results = load_run(run_dir)
    if not results.complete:
        raise RunDirError(f"{run_dir}: the run is not finished; resume it, then attest it")
    roots = case_roots(run_dir, results)
    plan = _pre_registration(run_dir, manifest, results)
    s = results.summary
    low, high = wilson_interval(s.passed, s.total)
    identity = manifest.identity
    spec = None if identity is None or identity.spec_digest is None else identity.spec_digest
    predicate = {
        "assuranceLevel": "self_attested",
        "suite": {"name": manifest.dataset.name, "digest": {"sha256": manifest.dataset_digest}},
        "sampleSize": len(results.cases),
        "spec": None if spec is None else {"digest": {"sha256": spec}},
        "model": None if identity is None else {"identity": identity.model},
        "harness": {"name": "twinflow", "version": version},
        "preRegistration": plan,
        "claims": [
            {
                "metric": "rate",
                "value": s.passed / s.total if s.total else 0.0,
                "passed": None if plan is None else plan["met"],
                "interval": {"low": low, "high": high, "level": 0.95, "method": "wilson"},
            }
        ],
        "cases": {
            "size": len(roots),
            "rootHex": cases_root(roots).hex(),
            "results": [
                {"key": r.key, "status": r.status, "size": r.checkpoint.size, "rootHex": root.hex()}
                for r, root in zip(results.cases, roots, strict=True)
            ],
        },
    }
    subjects = [
        {"name": name, "digest": {"sha256": _file_sha256(run_dir, name)}} for name in SUBJECTS
    ]
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": EVAL_PREDICATE_TYPE,
        "predicate": predicate,
    }
    return statement, roots


def _file_sha256(run_dir: Path, name: str) -> str:
    return hashlib.sha256(read_inside(run_dir, name, what=name)).hexdigest()


def check_run_dir(statement: dict[str, Any], run_dir: Path) -> None:
    """Hold a verified eval statement against a run directory: dataset, plan, each case's
    trace root, then the subject files, the first difference named.

    Raises:
        TraceMismatchError: They differ; the message names what, as stated and as found.
        RunDirError: The directory is not a run directory.
    """
    if statement["predicateType"] != EVAL_PREDICATE_TYPE:
        raise TraceMismatchError("not an eval attestation: check it with `twinflow attest --check`")
    predicate = statement["predicate"]
    manifest, results = load_run(run_dir)

    def differ(what: str, stated: object, found: object) -> None:
        if stated != found:
            raise TraceMismatchError(
                f"the attestation states {what} {str(stated)[:80]}, {run_dir} has "
                f"{str(found)[:80]}: it is not an attestation of this run directory"
            )

    differ("dataset digest", predicate["suite"]["digest"]["sha256"], manifest.dataset_digest)
    differ("dataset digest", predicate["suite"]["digest"]["sha256"], manifest.dataset.digest)
    plan = predicate["preRegistration"]
    try:
        found = _file_sha256(run_dir, "plan.note")
    except FileNotFoundError:
        found = None
    differ("plan digest", None if plan is None else plan["digest"]["sha256"], found)
    stated = {c["key"]: c for c in predicate["cases"]["results"]}
    differ("case keys", list(stated), [r.key for r in results.cases])
    for result, root in zip(results.cases, case_roots(run_dir, results), strict=True):
        differ(f"case {result.key!r} root (hex)", stated[result.key]["rootHex"], root.hex())
    for subject in statement["subject"]:
        name = subject["name"]
        if name not in SUBJECTS:
            raise TraceMismatchError(f"the attestation names a subject {name[:80]!r} no run has")
        differ(f"{name} sha256", subject["digest"]["sha256"], _file_sha256(run_dir, name))
