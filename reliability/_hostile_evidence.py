"""Hostile input, an eval's evidence: attestations, case proofs and reproductions a forger shaped.

Three classes, each counted, each with the invariant it must not break:

- **Eval statements.** The shipped vector's eval statement with every member of its predicate
  removed, or replaced by null, a number, a string, a list or an object, and one extra member
  added, each re-signed with the lab key: the stdlib leaf's `open_attestation` accepts it or
  refuses it with `TraceFormatError` (``attestation``), never another error; a case root, a
  case count or a sample size that no longer agrees is always refused.
- **Case proofs.** Each case's trace and tlog-proof with one byte of the trace, one hash, the
  index or the checkpoint's origin changed: `check_case` refuses every one with a typed error.
- **Reproductions.** A reproduction predicate with every member mutated the same ways: the
  leaf's shape check accepts or refuses it typed, never crashes.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import Figures

from twinflow.trace import SignatureError, TraceError
from twinflow.trace._attest import open_attestation, sign_attestation
from twinflow.trace._conformance import VECTORS
from twinflow.trace._evidence import check_case, check_reproduction_predicate
from twinflow.trace._keys import generate_key

LAB = generate_key("example.org/lab", bytes(range(32)))
REPLACEMENTS: tuple[object, ...] = (None, 1.5, "x", [], {})


def _paths(value: object, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every member and item path inside ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield (*path, i)
            yield from _paths(item, (*path, i))


def _mutants(value: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``value`` with one member removed or replaced, or one member added, each with a label."""
    for path in _paths(value):
        *parent_path, last = path
        for replacement in ("<removed>", *REPLACEMENTS):
            mutant = copy.deepcopy(value)
            parent = mutant
            for step in parent_path:
                parent = parent[step]
            if replacement == "<removed>":
                if isinstance(parent, dict):
                    del parent[last]
                else:
                    parent.pop(last)
            else:
                parent[last] = replacement
            yield f"{'/'.join(map(str, path))}={replacement!r}", mutant
    extra = copy.deepcopy(value)
    extra["extra"] = 1
    yield "extra member", extra


def _statement() -> dict[str, Any]:
    envelope = json.loads((VECTORS / "attestation" / "eval.intoto.json").read_bytes())
    result: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return result


def eval_statements(figures: Figures) -> None:
    """Every mutant eval predicate, signed: accepted or refused typed; a disagreeing case list
    always refused."""
    statement = _statement()
    tried = accepted = untyped = 0
    must_refuse = re.compile(
        r"^(cases/results/\d+/rootHex|cases/results/\d+=|cases/size|cases/rootHex|sampleSize)"
    )
    for label, predicate in _mutants(statement["predicate"]):
        tried += 1
        signed = sign_attestation({**statement, "predicate": predicate}, [LAB])
        try:
            open_attestation(signed, [LAB.verifier])
        except TraceError as exc:
            if getattr(exc, "reason", None) != "attestation":
                figures.fail(f"eval statement {label}: refused as {getattr(exc, 'reason', None)!r}")
            continue
        except Exception as exc:
            untyped += 1
            figures.fail(f"eval statement {label}: {type(exc).__name__}: {exc}")
            continue
        accepted += 1
        if must_refuse.match(label):
            figures.fail(f"eval statement {label}: accepted though its cases disagree")
    figures.values["eval statements mutated / accepted / untyped errors"] = (
        f"{tried} / {accepted} / {untyped}"
    )


def case_proofs(figures: Figures) -> None:
    """Each case trace and proof with one thing changed: refused, typed."""
    statement = _statement()
    traces = [VECTORS / "trace" / "good.jsonl", VECTORS / "trace" / "good-unicode.jsonl"]
    tried = refused = 0
    for index, trace_path in enumerate(traces):
        trace = trace_path.read_bytes()
        proof = (VECTORS / "attestation" / f"case{index}.tlog-proof").read_bytes()
        lines = proof.split(b"\n")
        variants = [
            ("a trace byte", trace.replace(b'"kind"', b'"kinD"', 1), proof),
            ("the index", trace, proof.replace(b"index %d" % index, b"index %d" % (1 - index))),
            ("the origin", trace, proof.replace(b"twinflow.dev/eval-cases", b"example.org/x")),
            (
                "a hash",
                trace,
                b"\n".join([*lines[:3], base64.b64encode(bytes(32)), *lines[4:]]),
            ),
        ]
        for label, data, proof_data in variants:
            tried += 1
            try:
                check_case(statement, data, proof_data, where=f"case{index}")
            except (SignatureError, TraceError):
                refused += 1
                continue
            except Exception as exc:
                figures.fail(f"case {index}, {label}: {type(exc).__name__}: {exc}")
                continue
            figures.fail(f"case {index}, {label} changed: accepted")
    figures.values["case proofs altered / refused"] = f"{tried} / {refused}"


def reproductions(figures: Figures) -> None:
    """Every mutant reproduction predicate: accepted or refused typed."""
    predicate = {
        "assuranceLevel": "reproduced",
        "attestation": {"digest": {"sha256": "a" * 64}, "casesRootHex": "b" * 64},
        "suite": {"name": "s", "digest": {"sha256": "c" * 64}},
        "mode": "recorded",
        "cases": [
            {"key": "a@1", "outcome": "reproduced", "seq": None, "detail": None},
            {
                "key": "b@1",
                "mode": "live",
                "outcome": "diverged",
                "seq": 3,
                "turn": 1,
                "step": 2,
                "detail": "text differs",
            },
        ],
        "environment": ["python: 3.11 -> 3.12"],
    }
    tried = untyped = 0
    for label, mutant in _mutants(predicate):
        tried += 1
        try:
            check_reproduction_predicate(mutant)
        except TraceError:
            continue
        except Exception as exc:
            untyped += 1
            figures.fail(f"reproduction {label}: {type(exc).__name__}: {exc}")
    figures.values["reproductions mutated / untyped errors"] = f"{tried} / {untyped}"


def eval_evidence(figures: Figures, work: Path) -> None:
    """The campaign's three classes (``work`` is unused: everything is in memory)."""
    del work
    eval_statements(figures)
    case_proofs(figures)
    reproductions(figures)
