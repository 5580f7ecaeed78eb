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
