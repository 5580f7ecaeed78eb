"""Pre-registration: a plan fixed before a run, and the decision rule it is judged by.

A plan names what will be run (the dataset's, the spec's and the scorers' digests), the
metric that will be reported and the rule that decides the outcome, and when it was made;
it may be signed (a C2SP signed note, `twinflow.trace.sign_note`, with a ``twinflow keygen`` key).
``eval run --plan`` refuses a run that does not match it, keeps it in the run directory as
``plan.note``, and Lab Notes say whether the rule was met and whether the plan was made
before the run's first trace (docs/adr/0126).

The file is a note text, with signature lines after a blank line when signed::

    twinflow eval plan v1
    {"dataset": ..., "rule": "rate >= 0.8", ...}        (canonical JSON, one line)

    — example.org/lab Az3k...

The rule language is a parsed comparison, never evaluated as Python::

    rule    := conj ("or" conj)*
    conj    := unary ("and" unary)*
    unary   := "not" unary | "(" rule ")" | operand CMP operand
    operand := METRIC | NUMBER          CMP := < <= > >= == !=

METRIC is one of `METRICS`. A rule is at most 500 characters, nested at most 16 deep.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, Field, ValidationError

from twinflow.eval._dataset import MAX_TRIALS, Dataset
from twinflow.eval._errors import PlanError
from twinflow.eval._frozen import EvalValue
from twinflow.eval._results import EvalResults
from twinflow.eval._stats import wilson_interval
from twinflow.trace import (
    CanonicalError,
    SignatureError,
    SignerKey,
    VerifierKey,
    open_note,
    parse_note,
    sign_note,
)
from twinflow.trace._canonical import parse_json
from twinflow.vocab import digest
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = [
    "MAX_PLAN_BYTES",
    "METRICS",
    "Plan",
    "PlanOutcome",
    "ReadPlan",
    "Rule",
    "check_plan",
    "judge_plan",
    "make_plan",
    "parse_rule",
    "read_plan",
    "run_metrics",
    "scorers_digest",
    "write_plan",
]

MAX_PLAN_BYTES = 64 * 1024
"""Largest plan file read (a signed note's own limit)."""
MAX_RULE_CHARS = 500
"""Longest decision rule."""
MAX_RULE_DEPTH = 16
"""Deepest nesting of a rule (parentheses and ``not``)."""
_HEADER = "twinflow eval plan v1"

METRICS: Mapping[str, str] = {
    "rate": "the pass rate: passed / total",
    "rate_low": "the lower end of the pass rate's 95% Wilson interval",
    "rate_high": "the upper end of the pass rate's 95% Wilson interval",
    "passed": "case runs passed",
    "failed": "case runs failed",
    "errored": "case runs errored (a scorer raised, a judge gave no verdict)",
    "flagged": "case runs whose trace did not verify",
    "total": "case runs with a result",
}
"""The names a plan's metric and rule may use, and what each is."""


# -- the rule language ---------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<cmp><=|>=|==|!=|<|>)"
    r"|(?P<paren>[()])|(?P<word>[A-Za-z_][A-Za-z0-9_]*))"
)
_COMPARE: Mapping[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_KEYWORDS = frozenset({"and", "or", "not"})


@dataclasses.dataclass(frozen=True)
class _Compare:
    left: str | float
    op: str
    right: str | float


@dataclasses.dataclass(frozen=True)
class _Not:
    item: _Node


@dataclasses.dataclass(frozen=True)
class _Join:
    op: Literal["and", "or"]
    items: tuple[_Node, ...]


_Node = _Compare | _Not | _Join


def _tokens(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise PlanError(f"rule {text!r}: cannot read {text[position:].strip()[:20]!r}")
        kind = match.lastgroup
        assert kind is not None
        value = match.group(kind)
        found.append(("keyword" if kind == "word" and value in _KEYWORDS else kind, value))
        position = match.end()
    return found


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def fail(self, why: str) -> PlanError:
        return PlanError(f"rule {self.text!r}: {why}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise self.fail("it ends too soon")
        self.at += 1
        return token

    def rule(self, depth: int) -> _Node:
        if depth > MAX_RULE_DEPTH:
            raise self.fail(f"nested deeper than {MAX_RULE_DEPTH}")
        return self.join("or", lambda: self.join("and", lambda: self.unary(depth)))

    def join(self, op: Literal["and", "or"], item: Callable[[], _Node]) -> _Node:
        items = [item()]
        while self.peek() == ("keyword", op):
            self.take()
            items.append(item())
        return items[0] if len(items) == 1 else _Join(op, tuple(items))

    def unary(self, depth: int) -> _Node:
        token = self.peek()
        if token == ("keyword", "not"):
            self.take()
            return _Not(self.unary(depth + 1)) if depth < MAX_RULE_DEPTH else self.rule(depth + 1)
        if token == ("paren", "("):
            self.take()
            inner = self.rule(depth + 1)
            if self.take() != ("paren", ")"):
                raise self.fail("a '(' is not closed")
            return inner
        left = self.operand()
        kind, op = self.take()
        if kind != "cmp":
            raise self.fail(f"expected a comparison (<, <=, >, >=, ==, !=) after {left!r}")
        return _Compare(left, op, self.operand())

    def operand(self) -> str | float:
        kind, value = self.take()
        if kind == "number":
            number = float(value)
            if not math.isfinite(number):
                raise self.fail(f"{value} is not a finite number")
            return number
        if kind == "word":
            if value not in METRICS:
                raise self.fail(f"unknown metric {value!r}; the metrics are {', '.join(METRICS)}")
            return value
        raise self.fail(f"expected a metric or a number, not {value!r}")


@dataclasses.dataclass(frozen=True)
class Rule:
    """A parsed decision rule (`parse_rule`)."""

    text: str
    """The rule as written."""
    _root: _Node = dataclasses.field(repr=False)

    @property
    def metrics(self) -> frozenset[str]:
        """The metrics the rule names."""
        found: set[str] = set()

        def walk(node: _Node) -> None:
            if isinstance(node, _Compare):
                found.update(x for x in (node.left, node.right) if isinstance(x, str))
            elif isinstance(node, _Not):
                walk(node.item)
            else:
                for item in node.items:
                    walk(item)

        walk(self._root)
        return frozenset(found)

    def holds(self, values: Mapping[str, float]) -> bool:
        """Whether the rule holds for these metric values.

        Raises:
            PlanError: a metric the rule names has no value.
        """

        def value(x: str | float) -> float:
            if isinstance(x, float):
                return x
            if x not in values:
                raise PlanError(f"rule {self.text!r}: no value for {x!r}")
            return values[x]

        def check(node: _Node) -> bool:
            if isinstance(node, _Compare):
                return _COMPARE[node.op](value(node.left), value(node.right))
            if isinstance(node, _Not):
                return not check(node.item)
            results = (check(item) for item in node.items)
            return all(results) if node.op == "and" else any(results)

        return check(self._root)


def parse_rule(text: str) -> Rule:
    """Parse a decision rule (the grammar is in the module docstring).

    Raises:
        PlanError: one line naming what is wrong.
    """
    if len(text) > MAX_RULE_CHARS:
        raise PlanError(f"a rule is at most {MAX_RULE_CHARS} characters; this one is {len(text)}")
    if not text.strip():
        raise PlanError("the rule is empty; write a comparison such as 'rate >= 0.8'")
    parser = _Parser(text)
    root = parser.rule(0)
    if parser.peek() is not None:
        raise parser.fail(f"unexpected {parser.peek()[1]!r} after a whole rule")  # type: ignore[index]  # peek() is not None here
    return Rule(text, root)


def run_metrics(results: EvalResults) -> dict[str, float]:
    """Every metric of `METRICS` for a run's results."""
    s = results.summary
    low, high = wilson_interval(s.passed, s.total)
    return {
        "rate": s.passed / s.total if s.total else 0.0,
        "rate_low": low,
        "rate_high": high,
        "passed": float(s.passed),
        "failed": float(s.failed),
        "errored": float(s.errored),
        "flagged": float(s.flagged),
        "total": float(s.total),
    }


# -- the plan ---------------------------------------------------------------------------------


class Plan(EvalValue):
    """What a run is registered to be, and how its outcome is decided."""

    dataset: str
    """The dataset's name."""
    dataset_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The dataset's digest (its cases and scorers)."""
    spec_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The run spec's digest (`twinflow.cli` `run_identity`)."""
    scorers_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """`scorers_digest` of the dataset: how every case is scored."""
    trials: int = Field(ge=1, le=MAX_TRIALS)
    """Trials of each case (a case's ``repeats`` above it wins, as in the run)."""
    metric: str
    """The metric reported as the result (one of `METRICS`)."""
    rule: str = Field(min_length=1, max_length=MAX_RULE_CHARS)
    """The decision rule (the module docstring's grammar)."""
    made_at: AwareDatetime
    """When the plan was made (the maker's clock; signed with the rest when signed). It must
    name its offset: a naive time cannot be ordered against the run's traces."""


def scorers_digest(dataset: Dataset) -> str:
    """Digest of how every case is scored: each case's scorers, in case order."""
    return digest(
        [[s.model_dump(mode="json") for s in dataset.scorers_for(case)] for case in dataset.cases]
    )


def _check_terms(metric: str, rule: Rule) -> None:
    if metric not in METRICS:
        raise PlanError(f"unknown metric {metric!r}; the metrics are {', '.join(METRICS)}")
    if metric not in rule.metrics:
        raise PlanError(f"the rule {rule.text!r} does not use the plan's metric {metric!r}")


def make_plan(
    dataset: Dataset,
    spec_digest: str,
    *,
    metric: str,
    rule: str,
    made_at: datetime,
    trials: int | None = None,
) -> Plan:
    """A plan for running ``dataset`` with the spec of ``spec_digest``, ``trials`` times per
    case (default: the dataset's ``trials``).

    Raises:
        PlanError: an unknown metric, a rule that does not parse or does not use the metric.
    """
    _check_terms(metric, parse_rule(rule))
    return Plan(
        dataset=dataset.name,
        dataset_digest=dataset.digest,
        spec_digest=spec_digest,
        scorers_digest=scorers_digest(dataset),
        trials=dataset.trials if trials is None else trials,
        metric=metric,
        rule=rule,
        made_at=made_at,
    )


def write_plan(plan: Plan, signer: SignerKey | None = None) -> bytes:
    """The plan file's bytes: the note text, signed by ``signer`` when given.

    Raises:
        PlanError: the note cannot be signed (the signatures extra is missing, say).
    """
    text = f"{_HEADER}\n{canonical_bytes(plan).decode()}\n"
    if signer is None:
        return text.encode()
    try:
        return sign_note(text, [signer])
    except SignatureError as exc:
        raise PlanError(f"cannot sign the plan: {exc}") from None


@dataclasses.dataclass(frozen=True)
class ReadPlan:
    """A plan file, read and (when signed) verified."""

    plan: Plan
    """The plan."""
    signers: tuple[str, ...]
    """The verifier keys (``name+hash+key``) whose signatures verified; empty when unsigned."""
    data: bytes
    """The file's bytes, as read (a run directory keeps them as ``plan.note``)."""


def read_plan(
    data: bytes, keys: tuple[VerifierKey, ...] = (), *, check_signature: bool = True
) -> ReadPlan:
    """Read a plan file; a signed one must verify by one of ``keys``.

    A signed plan read without ``keys`` is refused: a signature nobody checks says nothing.
    With ``check_signature=False`` (Lab Notes, reading the copy a run kept) the signature
    lines are named, marked unverified, and nothing is checked.

    Raises:
        PlanError: malformed, signed by none of ``keys``, or a signature that does not verify.
    """
    if len(data) > MAX_PLAN_BYTES:
        raise PlanError(f"a plan file is at most {MAX_PLAN_BYTES} bytes; this one is {len(data)}")
    signers: tuple[str, ...] = ()
    text_bytes = data
    if b"\n\n" in data and not check_signature:
        try:
            parsed = parse_note(data, max_bytes=MAX_PLAN_BYTES)
        except (SignatureError, ValueError) as exc:
            raise PlanError(f"not a plan file: {exc}") from None
        text_bytes = parsed.text.encode()
        signers = tuple(f"{s.name} (not verified here)" for s in parsed.signatures)
    elif b"\n\n" in data:
        if not keys:
            raise PlanError(
                "the plan is signed: name the verifier key it must verify by (--plan-key FILE)"
            )
        try:
            verified = open_note(data, keys, max_bytes=MAX_PLAN_BYTES)
        except (SignatureError, ValueError) as exc:
            raise PlanError(f"the plan's signature does not verify: {exc}") from None
        text_bytes = verified.text.encode()
        signers = tuple(k.text for k in verified.verified_by)
    elif keys:
        raise PlanError("the plan is not signed, but a verifier key was named for it")
    try:
        text = text_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise PlanError("not a plan file: not UTF-8") from None
    header, _, rest = text.partition("\n")
    body, _, tail = rest.partition("\n")
    if header != _HEADER or tail:
        raise PlanError(f"not a plan file: it starts with {_HEADER!r} and one JSON line")
    try:
        value = parse_json(body.encode(), max_depth=8, canonical=True)
    except CanonicalError as exc:
        raise PlanError(f"not a plan file: its JSON line is not canonical JSON ({exc})") from None
    if not isinstance(value, dict):
        raise PlanError("not a plan file: its JSON line is not an object")
    try:
        plan = Plan.model_validate(value)
    except ValidationError as exc:
        problems = exc.errors()
        first = problems[0]
        where = ".".join(str(p) for p in first["loc"]) or "(the object)"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PlanError(f"not a plan file: {where}: {first['msg']}{more}") from None
    _check_terms(plan.metric, parse_rule(plan.rule))
    return ReadPlan(plan=plan, signers=signers, data=data)


def check_plan(
    plan: Plan, dataset: Dataset, spec_digest: str | None, trials: int | None = None
) -> None:
    """Refuse a run that is not the one ``plan`` registered (``trials``: the run's; default
    the dataset's).

    Raises:
        PlanError: ``reason == "mismatch"``, naming what differs, the plan's value and the run's.
    """
    pairs = {
        "dataset": (plan.dataset_digest, dataset.digest),
        "scorers": (plan.scorers_digest, scorers_digest(dataset)),
        "spec": (plan.spec_digest, spec_digest or "not recorded"),
        "trial count": (str(plan.trials), str(dataset.trials if trials is None else trials)),
    }
    for what, (planned, now) in pairs.items():
        if planned != now:
            raise PlanError(
                f"the plan registered another {what} (plan: {planned[:12]}; this run: "
                f"{now[:12]}); nothing was run: run what the plan names, or make a new plan",
                reason="mismatch",
            )


@dataclasses.dataclass(frozen=True)
class PlanOutcome:
    """What a plan's rule concluded on a run, and whether the plan came first."""

    met: bool
    """The rule held."""
    values: Mapping[str, float]
    """The value of each metric the rule names (and the plan's metric)."""
    before_run: bool | None
    """The plan was made before the run's first trace started (None: no trace read)."""


def judge_plan(plan: Plan, results: EvalResults, first_start: datetime | None) -> PlanOutcome:
    """Apply ``plan``'s rule to ``results``; compare its time with the run's first trace."""
    rule = parse_rule(plan.rule)
    metrics = run_metrics(results)
    named = sorted(rule.metrics | {plan.metric})
    return PlanOutcome(
        met=rule.holds(metrics),
        values={name: metrics[name] for name in named},
        before_run=None if first_start is None else plan.made_at < first_start,
    )
