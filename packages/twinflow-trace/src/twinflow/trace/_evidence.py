"""Eval attestations and reproduction statements: what an auditor checks of an eval run.

An eval attestation is an in-toto Statement v1 in a DSSE envelope (`twinflow.trace._attest`)
whose predicate (`EVAL_PREDICATE_TYPE`) states an eval run: the dataset's digest, the spec and
model identity, the pre-registered plan's digest and whether the run kept to it, each case's
verdict and trace root, the metric with its interval, and the RFC 9162 Merkle root over the
case trace roots, in case order (docs/adr/0185-eval-attestations.md)::

    "predicate": {
      "assuranceLevel": "self_attested",
      "suite": {"name": "sums", "digest": {"sha256": "<dataset digest>"}},
      "sampleSize": 2,
      "spec": {"digest": {"sha256": "<spec digest>"}},      (or null: not recorded)
      "model": {"identity": "<model identity>"},           (or null)
      "harness": {"name": "twinflow", "version": "..."},
      "preRegistration": null | {"digest": {"sha256": "<plan.note sha256>"}, "metric": "rate",
          "rule": "rate >= 0.5", "met": true, "kept": true, "madeBeforeRun": true},
      "claims": [{"metric": "rate", "value": 1.0, "passed": true | null,
          "interval": {"low": ..., "high": ..., "level": 0.95, "method": "wilson"}}],
      "cases": {"size": 2, "rootHex": "<root over the case roots>",
          "results": [{"key": "s1@1", "status": "passed", "size": 7, "rootHex": "..."}, ...]}
    }

Case ``i``'s Merkle leaf is its trace root (32 bytes), so one case is shown to belong to the
attested run by a C2SP tlog-proof (`twinflow.trace._tlog`) whose checkpoint is the unsigned
note ``CASES_ORIGIN / size / root``: the signed statement vouches for that root.

A reproduction statement (`REPRODUCTION_PREDICATE_TYPE`) names an eval attestation (the
sha256 of its envelope) and says, case by case, whether re-running the recorded trace gave the
same events (``reproduced``) or where it diverged (``diverged``, with the first differing seq
of the recorded trace, its user turn and model step), and in which mode: ``recorded`` (the trace
replayed, no model) or ``live`` (run again against the model at the recorded settings and
compared by behaviour)::

    "cases": [{"key": "s1@1", "mode": "live", "outcome": "diverged", "seq": 4, "turn": 1,
        "step": 1, "detail": "changed: model_responded: ..."}, ...]

A case written before cases named their mode and place holds ``key``, ``outcome``, ``seq`` and
``detail`` alone, and is read as such.

Shapes are checked strictly (`check_eval_predicate`, `check_reproduction_predicate`): a member
missing, unknown or of the wrong type, or case roots whose Merkle root is not the stated one,
is `TraceFormatError` (``attestation``). A case trace or proof that does not match the statement
is `SignatureError` (``attestation_mismatch``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from twinflow.trace._checkpoint import Checkpoint
from twinflow.trace._errors import InvalidProofError
from twinflow.trace._format import GENESIS
from twinflow.trace._merkle import MerkleTree
from twinflow.trace._shape import _hex64, _malformed, _mismatch, _object, _text
from twinflow.trace._tlog import TlogProof, check_tlog_proof, parse_tlog_proof
from twinflow.trace._verify import verify_trace

EVAL_PREDICATE_TYPE = "https://twinflow.dev/attestation/eval/v1"
"""The predicate type of an eval run's attestation."""
REPRODUCTION_PREDICATE_TYPE = "https://twinflow.dev/attestation/reproduction/v1"
"""The predicate type of a reproduction of an attested eval run."""
CASES_ORIGIN = "twinflow.dev/eval-cases"
"""The origin line of the (unsigned) checkpoint of an eval run's case tree."""

_STATUSES = frozenset({"passed", "failed", "errored", "flagged"})
_ASSURANCE = frozenset({"self_attested", "reproduced"})
_OUTCOMES = frozenset({"reproduced", "diverged", "missing"})
_MAX_CASES = 100_000
_MODES = frozenset({"recorded", "live"})
_CASE_MEMBERS = ("key", "outcome", "seq", "detail", "mode", "turn", "step")


def cases_root(roots: Sequence[bytes]) -> bytes:
    """The RFC 9162 Merkle root over case trace roots, in case order (leaf ``i``: root ``i``)."""
    tree = MerkleTree()
    for root in roots:
        tree.append(root)
    return tree.root()


def cases_checkpoint(roots: Sequence[bytes]) -> bytes:
    """The unsigned checkpoint note of the case tree (what a case's tlog-proof leads to)."""
    root = cases_root(roots).hex()
    return Checkpoint(len(roots), root, GENESIS).note_body(CASES_ORIGIN).encode("ascii")


def prove_case(roots: Sequence[bytes], index: int) -> bytes:
    """The C2SP tlog-proof that case ``index`` (its trace root) is in the case tree."""
    tree = MerkleTree()
    for root in roots:
        tree.append(root)
    hashes = tree.inclusion_proof(index)
    return TlogProof(index, hashes, cases_checkpoint(roots), roots[index]).to_bytes()


def trace_root(data: bytes) -> tuple[int, bytes]:
    """A trace's event count and Merkle root, once it verifies (redacted events allowed).

    Raises:
        SignatureError (``attestation_mismatch``): The trace does not verify.
    """
    report = verify_trace(data)
    if report.problem is not None:
        raise _mismatch(f"the case trace does not verify: {report.problem}")
    return report.checkpoint.size, bytes.fromhex(report.checkpoint.root)


def _one_of(value: object, allowed: frozenset[str], where: str) -> str:
    if type(value) is not str or value not in allowed:
        raise _malformed(f"{where} is not one of {sorted(allowed)}")
    return value


def _int(value: object, where: str, minimum: int = 0) -> int:
    if type(value) is not int or value < minimum:
        raise _malformed(f"{where} must be an integer >= {minimum}")
    return value


def _number(value: object, where: str) -> float:
    if type(value) not in (int, float):
        raise _malformed(f"{where} must be a number")
    return float(value)  # type: ignore[arg-type]  # int or float, checked above


def _bool(value: object, where: str, *, nullable: bool = False) -> None:
    if not (type(value) is bool or (nullable and value is None)):
        raise _malformed(f"{where} must be true or false" + (" or null" if nullable else ""))


def _digest(value: object, where: str, *, nullable: bool = False) -> str | None:
    if nullable and value is None:
        return None
    return _hex64(_object(value, where, {"sha256"})["sha256"], f"{where}.sha256")


def _optional_text(value: object, where: str) -> None:
    if value is not None:
        _text(value, where)


def _claim(value: object, where: str) -> None:
    claim = _object(value, where, {"metric", "value", "passed", "interval"})
    _text(claim["metric"], f"{where}.metric")
    _number(claim["value"], f"{where}.value")
    _bool(claim["passed"], f"{where}.passed", nullable=True)
    if claim["interval"] is not None:
        interval = _object(
            claim["interval"], f"{where}.interval", {"low", "high", "level", "method"}
        )
        low = _number(interval["low"], f"{where}.interval.low")
        high = _number(interval["high"], f"{where}.interval.high")
        _number(interval["level"], f"{where}.interval.level")
        _text(interval["method"], f"{where}.interval.method")
        if low > high:
            raise _malformed(f"{where}.interval: low is above high")


def check_eval_predicate(value: object) -> dict[str, Any]:
    """Refuse an eval predicate not of its documented shape, or whose case roots do not lead to
    its stated case root; return it.

    Raises:
        TraceFormatError (``attestation``): naming the first member that is wrong.
    """
    members = {
        "assuranceLevel", "suite", "sampleSize", "spec", "model", "harness",
        "preRegistration", "claims", "cases",
    }  # fmt: skip
    predicate = _object(value, "the predicate", members)
    _one_of(predicate["assuranceLevel"], _ASSURANCE, "predicate.assuranceLevel")
    suite = _object(predicate["suite"], "predicate.suite", {"name", "digest"})
    _text(suite["name"], "predicate.suite.name")
    _digest(suite["digest"], "predicate.suite.digest")
    spec = predicate["spec"]
    if spec is not None:
        _digest(_object(spec, "predicate.spec", {"digest"})["digest"], "predicate.spec.digest")
    model = predicate["model"]
    if model is not None:
        _optional_text(_object(model, "predicate.model", {"identity"})["identity"], "model")
    harness = _object(predicate["harness"], "predicate.harness", {"name", "version"})
    _text(harness["name"], "predicate.harness.name")
    _text(harness["version"], "predicate.harness.version")
    plan = predicate["preRegistration"]
    if plan is not None:
        where = "predicate.preRegistration"
        plan = _object(plan, where, {"digest", "metric", "rule", "met", "kept", "madeBeforeRun"})
        _digest(plan["digest"], f"{where}.digest")
        _text(plan["metric"], f"{where}.metric")
        _text(plan["rule"], f"{where}.rule")
        _bool(plan["met"], f"{where}.met")
        _bool(plan["kept"], f"{where}.kept")
        _bool(plan["madeBeforeRun"], f"{where}.madeBeforeRun", nullable=True)
    claims = predicate["claims"]
    if not isinstance(claims, list) or len(claims) > 16:
        raise _malformed("predicate.claims must be a list of at most 16 claims")
    for i, claim in enumerate(claims):
        _claim(claim, f"predicate.claims[{i}]")
    roots = _case_roots(predicate["cases"])
    if _int(predicate["sampleSize"], "predicate.sampleSize") != len(roots):
        raise _malformed(
            f"predicate.sampleSize {predicate['sampleSize']} is not the {len(roots)} case results"
        )
    return predicate


def _case_roots(value: object) -> list[bytes]:
    """The case roots of ``predicate.cases``, once its shape and stated root are checked."""
    cases = _object(value, "predicate.cases", {"size", "rootHex", "results"})
    results = cases["results"]
    if not isinstance(results, list) or len(results) > _MAX_CASES:
        raise _malformed(f"predicate.cases.results must be a list of at most {_MAX_CASES}")
    roots: list[bytes] = []
    keys: set[str] = set()
    for i, item in enumerate(results):
        where = f"predicate.cases.results[{i}]"
        case = _object(item, where, {"key", "status", "size", "rootHex"})
        key = _text(case["key"], f"{where}.key")
        if key in keys:
            raise _malformed(f"two case results have the key {key[:80]!r}")
        keys.add(key)
        _one_of(case["status"], _STATUSES, f"{where}.status")
        _int(case["size"], f"{where}.size", 1)
        roots.append(bytes.fromhex(_hex64(case["rootHex"], f"{where}.rootHex")))
    if _int(cases["size"], "predicate.cases.size") != len(roots):
        raise _malformed(f"predicate.cases.size {cases['size']} is not the {len(roots)} results")
    stated = _hex64(cases["rootHex"], "predicate.cases.rootHex")
    if cases_root(roots).hex() != stated:
        raise _malformed(
            f"predicate.cases.rootHex {stated} is not the Merkle root of the case roots it "
            f"lists ({cases_root(roots).hex()})"
        )
    return roots


def check_reproduction_predicate(value: object) -> dict[str, Any]:
    """Refuse a reproduction predicate not of its documented shape; return it.

    Raises:
        TraceFormatError (``attestation``): naming the first member that is wrong.
    """
    members = {"assuranceLevel", "attestation", "suite", "mode", "cases", "environment"}
    predicate = _object(value, "the predicate", members)
    if predicate["assuranceLevel"] != "reproduced":
        raise _malformed("predicate.assuranceLevel of a reproduction is 'reproduced'")
    named = _object(predicate["attestation"], "predicate.attestation", {"digest", "casesRootHex"})
    _digest(named["digest"], "predicate.attestation.digest")
    _hex64(named["casesRootHex"], "predicate.attestation.casesRootHex")
    suite = _object(predicate["suite"], "predicate.suite", {"name", "digest"})
    _text(suite["name"], "predicate.suite.name")
    _digest(suite["digest"], "predicate.suite.digest")
    _one_of(predicate["mode"], _MODES, "predicate.mode")
    results = predicate["cases"]
    if not isinstance(results, list) or len(results) > _MAX_CASES:
        raise _malformed(f"predicate.cases must be a list of at most {_MAX_CASES}")
    for i, item in enumerate(results):
        where = f"predicate.cases[{i}]"
        # A case written before each case named its mode and place has the four first members.
        legacy = isinstance(item, dict) and set(item) == set(_CASE_MEMBERS[:4])
        case = _object(item, where, set(_CASE_MEMBERS[: 4 if legacy else None]))
        _text(case["key"], f"{where}.key")
        _one_of(case["outcome"], _OUTCOMES, f"{where}.outcome")
        for member in ("seq", "turn", "step"):
            if case.get(member) is not None:
                _int(case[member], f"{where}.{member}")
        _optional_text(case["detail"], f"{where}.detail")
        if not legacy:
            _one_of(case["mode"], _MODES, f"{where}.mode")
    environment = predicate["environment"]
    if not isinstance(environment, list) or not all(type(e) is str for e in environment):
        raise _malformed("predicate.environment must be a list of strings")
    return predicate


def check_case(statement: dict[str, Any], trace: bytes, proof: bytes, *, where: str) -> str:
    """Check that a case trace is the case a tlog-proof places in an attested eval run.

    Args:
        statement: A verified eval statement (`open_attestation`).
        trace: The case trace's bytes (redacted events allowed).
        proof: The tlog-proof file's bytes (`prove_case`).
        where: The proof file's name, for messages.

    Returns:
        The case's key.

    Raises:
        TraceFormatError: The proof file is not a tlog-proof.
        SignatureError (``attestation_mismatch``): The trace, its proof and the statement
            disagree; the message says which.
    """
    if statement["predicateType"] != EVAL_PREDICATE_TYPE:
        raise _mismatch("a case trace is checked against an eval attestation, not this one")
    cases = statement["predicate"]["cases"]
    size, root = trace_root(trace)
    parsed = parse_tlog_proof(proof, where=where)
    try:
        published = check_tlog_proof(parsed, root, (), where=where)
    except InvalidProofError as exc:
        raise _mismatch(f"the case trace is not the case its proof names: {exc}") from None
    stated = (cases["size"], cases["rootHex"])
    proved = (published.checkpoint.size, published.checkpoint.root)
    if stated != proved or published.origin != CASES_ORIGIN:
        raise _mismatch(
            f"{where} leads to a case tree of size {proved[0]}, root (hex) {proved[1]}; the "
            f"attestation states size {stated[0]}, root (hex) {stated[1]}: another run"
        )
    case = cases["results"][parsed.index]
    if (case["size"], case["rootHex"]) != (size, root.hex()):
        raise _mismatch(
            f"the case trace has {size} events, root (hex) {root.hex()}; the attestation states "
            f"{case['size']} events, root (hex) {case['rootHex']} for case {case['key'][:80]!r}"
        )
    return str(case["key"])


def envelope_digest(data: bytes) -> str:
    """The sha256 (hex) of an attestation file's bytes: how a reproduction names it."""
    return hashlib.sha256(data).hexdigest()


def check_names(statement: dict[str, Any], attestation: bytes, *, where: str) -> None:
    """Refuse a reproduction statement that does not name the attestation file ``attestation``.

    Raises:
        SignatureError (``attestation_mismatch``): It names another attestation.
    """
    named = statement["predicate"]["attestation"]["digest"]["sha256"]
    if named != envelope_digest(attestation):
        raise _mismatch(
            f"the reproduction names attestation sha256 {named}, {where} has sha256 "
            f"{envelope_digest(attestation)}: a reproduction of another run"
        )
