"""The eval and reproduction predicates' strict readers: what they refuse, and how."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from tracekit import refused

from twinflow.trace import TraceFormatError
from twinflow.trace._conformance import VECTORS
from twinflow.trace._evidence import check_eval_predicate, check_reproduction_predicate


def predicate() -> dict[str, Any]:
    """The shipped vector's eval predicate."""
    envelope = json.loads((VECTORS / "attestation" / "eval.intoto.json").read_bytes())
    result: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    return result


@pytest.mark.parametrize("bad", [[], {}, 1, None])
def test_a_status_that_is_not_a_string_is_refused_typed(bad: object) -> None:
    """A list or an object where a case's status belongs: TraceFormatError, not TypeError."""
    value = predicate()
    value["cases"]["results"][0]["status"] = bad
    with refused("attestation", TraceFormatError, match="status is not one of"):
        check_eval_predicate(value)


def test_case_roots_that_do_not_lead_to_the_stated_root_are_refused() -> None:
    """One case root changed, the stated root kept: refused naming both roots."""
    value = predicate()
    value["cases"]["results"][1]["rootHex"] = "00" * 32
    with refused("attestation", TraceFormatError, match="is not the Merkle root"):
        check_eval_predicate(value)


@pytest.mark.parametrize("bad", [[], {}])
def test_a_reproduction_outcome_that_is_not_a_string_is_refused_typed(bad: object) -> None:
    """A list or an object where an outcome belongs: TraceFormatError, not TypeError."""
    value = {
        "assuranceLevel": "reproduced",
        "attestation": {"digest": {"sha256": "a" * 64}, "casesRootHex": "b" * 64},
        "suite": {"name": "s", "digest": {"sha256": "c" * 64}},
        "mode": "recorded",
        "cases": [{"key": "a@1", "outcome": bad, "seq": None, "detail": None}],
        "environment": [],
    }
    with refused("attestation", TraceFormatError, match="outcome is not one of"):
        check_reproduction_predicate(value)


def reproduction(*cases: dict[str, Any]) -> dict[str, Any]:
    """A live reproduction predicate of ``cases``."""
    return {
        "assuranceLevel": "reproduced",
        "attestation": {"digest": {"sha256": "a" * 64}, "casesRootHex": "b" * 64},
        "suite": {"name": "s", "digest": {"sha256": "c" * 64}},
        "mode": "live",
        "cases": list(cases),
        "environment": [],
    }


LIVE_CASE = {
    "key": "b@1",
    "mode": "live",
    "outcome": "diverged",
    "seq": 7,
    "turn": 1,
    "step": 2,
    "detail": "changed: model_responded",
}


def test_cases_with_their_mode_and_place_and_cases_written_before_are_read() -> None:
    """A case naming its mode, turn and step, beside one of the four members written before."""
    old = {"key": "a@1", "outcome": "reproduced", "seq": None, "detail": None}
    value = reproduction(old, LIVE_CASE)
    assert value == check_reproduction_predicate(value)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"mode": "tools"}, r"mode is not one of"),
        ({"step": -1}, r"step must be an integer >= 0"),
        ({"turn": "1"}, r"turn must be an integer >= 0"),
        ({"mode": None}, r"mode is not one of"),
    ],
)
def test_a_case_with_a_bad_mode_or_place_is_refused_typed(
    change: dict[str, Any], match: str
) -> None:
    """An unknown mode, a negative step, a turn that is text: TraceFormatError naming it."""
    with refused("attestation", TraceFormatError, match=match):
        check_reproduction_predicate(reproduction({**LIVE_CASE, **change}))


def test_a_case_missing_its_place_is_refused() -> None:
    """A case naming its mode but not its turn and step: neither shape, refused."""
    partial = {k: v for k, v in LIVE_CASE.items() if k not in ("turn", "step")}
    with refused("attestation", TraceFormatError, match="missing"):
        check_reproduction_predicate(reproduction(partial))
