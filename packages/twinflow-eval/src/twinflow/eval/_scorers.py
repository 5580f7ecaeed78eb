"""Scorers: each turns a case and the `Observation` of its run into a `Score`.

Scorers are data (a ``kind``-tagged spec in the dataset) so a run directory records exactly
how it was scored and ``rescore`` can score it again. A scorer that raises yields an errored
score, and an errored score makes its case errored: neither passed nor failed.

Tool-call arguments are matched against literals or predicates. A predicate is a mapping
whose keys all start with ``$``: ``{"$approx": 12.5, "$tol": 0.01}``, ``{"$regex": "^EUR"}``,
``{"$in": [...]}``, ``{"$gt": 0}`` (also ``$ge``, ``$lt``, ``$le``), ``{"$eq": ...}``,
``{"$any": true}``. Several keys must all hold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, JsonValue, ValidationError

from twinflow._base._code import resolve_dotted
from twinflow._base._json import decimal
from twinflow.eval._errors import RunAborted, scorer_error
from twinflow.eval._frozen import EvalValue
from twinflow.eval._observe import Observation, ToolCallRecord
from twinflow.trace import Checkpoint
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = [
    "Custom",
    "ExactMatch",
    "ExpectedCall",
    "FieldMatch",
    "Judge",
    "JudgementLink",
    "NoDeniedCalls",
    "NumericTolerance",
    "SchemaValid",
    "Score",
    "ScorerSpec",
    "ToolCalls",
    "matches",
    "score_all",
]


class JudgementLink(EvalValue):
    """Where a judge scorer's own traced run is kept, and the checkpoint it verified to."""

    trace: str
    """The judgement's trace, relative to the run directory (``judgements/<key>.<n>.jsonl``)."""
    checkpoint: Checkpoint
    """Checkpoint (size, Merkle root, head) of the judgement's trace as it verified."""


class Score(EvalValue):
    """One scorer's verdict on one case."""

    scorer: str
    """The scorer's label (its ``name``, or its kind)."""
    outcome: Literal["passed", "failed", "errored"]
    """Passed, failed, or the scorer itself raised."""
    value: float
    """A number in [0, 1] (1 for passed; partial credit where the scorer gives it)."""
    detail: str = ""
    """Why, in words."""
    judgement: JudgementLink | None = None
    """A judge scorer's traced run, when one was made (None for every other scorer)."""


def _get(value: JsonValue, path: str) -> JsonValue:
    """The value at a dotted path (``a.b.0.c``); KeyError when it is not there."""
    current = value
    for part in path.split(".") if path else ():
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and (index := decimal(part)) is not None:
            if index >= len(current):
                raise KeyError(path)
            current = current[index]
        else:
            raise KeyError(path)
    return current


def _same(a: JsonValue, b: JsonValue) -> bool:
    """Equal as JSON values (1 == 1.0; key order irrelevant)."""
    return canonical_bytes(a) == canonical_bytes(b)


def _label(name: str | None, kind: str) -> str:
    return name if name else kind


class _Base(EvalValue):
    name: str | None = None
    """A label for the score (default: the kind)."""


class ExactMatch(_Base):
    """The output equals the case's ``expected`` value."""

    kind: Literal["exact"] = "exact"
    """Union tag."""

    def score(self, case_expected: JsonValue, obs: Observation) -> Score:
        """Compare the whole output."""
        label = _label(self.name, self.kind)
        if not obs.output_accepted:
            return Score(scorer=label, outcome="failed", value=0.0, detail="no output was accepted")
        if _same(case_expected, obs.output):
            return Score(scorer=label, outcome="passed", value=1.0)
        return Score(
            scorer=label, outcome="failed", value=0.0, detail="output differs from expected"
        )


class FieldMatch(_Base):
    """Named fields of the output equal those of ``expected`` (partial credit per field)."""

    kind: Literal["fields"] = "fields"
    """Union tag."""
    fields: tuple[str, ...] = ()
    """Dotted paths to compare; empty means every top-level key of ``expected``."""

    def score(self, case_expected: JsonValue, obs: Observation) -> Score:
        """Compare field by field."""
        label = _label(self.name, self.kind)
        fields = self.fields
        if not fields:
            if not isinstance(case_expected, dict):
                raise scorer_error("fields: no fields named and expected is not an object")
            fields = tuple(sorted(case_expected))
        wrong: list[str] = []
        for field in fields:
            want = _get(case_expected, field)
            try:
                got = _get(obs.output, field)
            except KeyError:
                wrong.append(f"{field}: missing")
                continue
            if not _same(want, got):
                wrong.append(f"{field}: expected {_short(want)}, got {_short(got)}")
        value = (len(fields) - len(wrong)) / len(fields) if fields else 1.0
        outcome: Literal["passed", "failed"] = "failed" if wrong else "passed"
        return Score(scorer=label, outcome=outcome, value=value, detail="; ".join(wrong))


def _short(value: JsonValue) -> str:
    text = canonical_bytes(value).decode()
    return text if len(text) <= 60 else text[:57] + "..."


class SchemaValid(_Base):
    """An output was accepted against the agent's schema (and, if ``model`` is named, validates as it)."""

    kind: Literal["schema"] = "schema"
    """Union tag."""
    model: str | None = None
    """Dotted path of a pydantic model the output must also validate as."""

    def score(self, case_expected: JsonValue, obs: Observation) -> Score:
        """Check the output was accepted and validates."""
        label = _label(self.name, self.kind)
        if not obs.output_accepted or obs.schema_name is None:
            why = (
                "the run had no output schema" if obs.schema_name is None else "no output validated"
            )
            return Score(scorer=label, outcome="failed", value=0.0, detail=why)
        if self.model is not None:
            model = resolve_dotted(self.model, error=scorer_error)
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise scorer_error(f"schema: {self.model!r} is not a pydantic model class")
            try:
                model.model_validate(obs.output)
            except ValidationError as exc:
                return Score(
                    scorer=label, outcome="failed", value=0.0, detail=str(exc).split("\n")[0]
                )
        return Score(
            scorer=label, outcome="passed", value=1.0, detail=f"after {obs.attempts} attempt(s)"
        )


class NumericTolerance(_Base):
    """A numeric output field is within a tolerance of the expected number."""

    kind: Literal["numeric"] = "numeric"
    """Union tag."""
    field: str
    """Dotted path of the number in the output (and in ``expected``)."""
    expected: float | None = None
    """The number to compare with (default: the same path in the case's ``expected``)."""
    tolerance: float = Field(default=0.0, ge=0)
    """Absolute tolerance."""
    relative: float = Field(default=0.0, ge=0)
    """Relative tolerance (of the expected value)."""

    def score(self, case_expected: JsonValue, obs: Observation) -> Score:
        """Compare one number."""
        label = _label(self.name, self.kind)
        want = self.expected if self.expected is not None else _get(case_expected, self.field)
        if not isinstance(want, int | float) or isinstance(want, bool):
            raise scorer_error(f"numeric: expected {self.field} is not a number: {want!r}")
        try:
            got = _get(obs.output, self.field)
        except KeyError:
            return Score(scorer=label, outcome="failed", value=0.0, detail=f"{self.field}: missing")
        if not isinstance(got, int | float) or isinstance(got, bool):
            return Score(
                scorer=label,
                outcome="failed",
                value=0.0,
                detail=f"{self.field}: not a number: {_short(got)}",
            )
        if math.isclose(got, want, abs_tol=self.tolerance, rel_tol=self.relative):
            return Score(scorer=label, outcome="passed", value=1.0)
        return Score(
            scorer=label,
            outcome="failed",
            value=0.0,
            detail=f"{self.field}: expected {want}, got {got}",
        )


class ExpectedCall(EvalValue):
    """A tool call that should have been made."""

    tool: str
    """Tool name."""
    args: dict[str, JsonValue] = Field(default_factory=dict)
    """Argument name to literal or predicate; arguments not named here are not checked."""
    allowed: bool | None = None
    """If set, the policy must have allowed (True) or denied (False) the call."""


def matches(expected: JsonValue, actual: JsonValue) -> bool:
    """Whether ``actual`` matches a literal or a ``$``-predicate (see the module docstring).

    Raises:
        EvalValueError (``reason="scorer"``): an unknown ``$`` key.
    """
    if isinstance(expected, dict) and expected and all(k.startswith("$") for k in expected):
        return all(_predicate(key, arg, expected, actual) for key, arg in expected.items())
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() <= actual.keys() and all(
            matches(v, actual[k]) for k, v in expected.items()
        )
    return _same(expected, actual)


def _number(value: JsonValue) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _predicate(key: str, arg: JsonValue, whole: Mapping[str, JsonValue], actual: JsonValue) -> bool:
    if key == "$tol":
        return True  # read by $approx
    if key == "$any":
        return True
    if key == "$eq":
        return _same(arg, actual)
    if key == "$in":
        if not isinstance(arg, list):
            raise scorer_error(f"$in takes a list, not {arg!r}")
        return any(_same(option, actual) for option in arg)
    if key == "$regex":
        return (
            isinstance(actual, str) and isinstance(arg, str) and re.search(arg, actual) is not None
        )
    number, bound = _number(actual), _number(arg)
    if key == "$approx":
        tol = _number(whole.get("$tol", 0.0))
        if bound is None or tol is None:
            raise scorer_error(
                f"$approx takes numbers, not {arg!r} with $tol {whole.get('$tol')!r}"
            )
        return number is not None and abs(number - bound) <= tol
    compare: dict[str, Callable[[float, float], bool]] = {
        "$gt": lambda a, b: a > b,
        "$ge": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$le": lambda a, b: a <= b,
    }
    if key in compare:
        if bound is None:
            raise scorer_error(f"{key} takes a number, not {arg!r}")
        return number is not None and compare[key](number, bound)
    raise scorer_error(
        f"unknown predicate {key!r}; use $eq, $in, $regex, $approx/$tol, $gt, $ge, $lt, $le or $any"
    )


def _call_matches(want: ExpectedCall, got: ToolCallRecord) -> bool:
    if want.tool != got.tool:
        return False
    if want.allowed is not None and (got.decision == "allow") != want.allowed:
        return False
    return all(
        name in got.arguments and matches(pred, got.arguments[name])
        for name, pred in want.args.items()
    )


class ToolCalls(_Base):
    """The expected tool calls were made, with matching arguments, in order or in any order."""

    kind: Literal["tool_calls"] = "tool_calls"
    """Union tag."""
    calls: tuple[ExpectedCall, ...]
    """The calls expected."""
    ordered: bool = True
    """The calls must appear in this order (other calls may come between them)."""
    exclusive: bool = False
    """No calls other than the expected ones may be made."""

    def score(self, case_expected: JsonValue, obs: Observation) -> Score:
        """Match the expected calls against the observed ones."""
        label = _label(self.name, self.kind)
        made = list(obs.tool_calls)
        found = 0
        missing: list[str] = []
        if self.ordered:
            position = 0
            for want in self.calls:
                index = next(
                    (i for i in range(position, len(made)) if _call_matches(want, made[i])), None
                )
                if index is None:
                    missing.append(want.tool)
                else:
                    found += 1
                    position = index + 1
        else:
            free = list(range(len(made)))
            for want in self.calls:
                index = next((i for i in free if _call_matches(want, made[i])), None)
                if index is None:
                    missing.append(want.tool)
                else:
                    found += 1
                    free.remove(index)
        extra = len(made) - found if self.exclusive else 0
        value = found / len(self.calls) if self.calls else 1.0
        problems = [f"no matching call to {', '.join(missing)}"] if missing else []
        if extra:
            problems.append(f"{extra} unexpected call(s)")
            value = min(value, found / (found + extra))
        outcome: Literal["passed", "failed"] = "failed" if problems else "passed"
        made_text = ", ".join(c.tool for c in made) or "none"
        detail = "; ".join(problems) + (f" (calls made: {made_text})" if problems else "")
        return Score(scorer=label, outcome=outcome, value=value, detail=detail)


class NoDeniedCalls(_Base):
    """The policy denied no tool call in the run."""

    kind: Literal["no_denied_calls"] = "no_denied_calls"
    """Union tag."""

    def score(self, case_expected: JsonValue, obs: Observation) -> Score:
        """Look for denials."""
        label = _label(self.name, self.kind)
        denied = [c for c in obs.tool_calls if c.decision == "deny"]
        if not denied:
            return Score(scorer=label, outcome="passed", value=1.0)
        detail = "; ".join(f"{c.tool}: {c.reason}" for c in denied)
        return Score(scorer=label, outcome="failed", value=0.0, detail=f"denied: {detail}")


class Custom(_Base):
    """A scorer function named by dotted path: ``fn(observation, expected) -> bool | float | Score``.

    A float is a value in [0, 1] that passes at ``threshold`` or above.
    """

    kind: Literal["custom"] = "custom"
    """Union tag."""
    path: str
    """``package.module:function`` (or ``package.module.function``)."""
    threshold: float = Field(default=1.0, ge=0, le=1)
    """The value a float result must reach to pass."""

    def score(self, case_expected: JsonValue, obs: Observation) -> Score:
        """Call the function."""
        label = _label(self.name, self.path)
        fn = resolve_dotted(self.path, error=scorer_error)
        if not callable(fn):
            raise scorer_error(f"custom: {self.path!r} is not callable")
        result: Any = fn(obs, case_expected)
        if isinstance(result, Score):
            return result
        if isinstance(result, bool):
            return Score(
                scorer=label, outcome="passed" if result else "failed", value=float(result)
            )
        if isinstance(result, int | float) and 0.0 <= result <= 1.0:
            outcome: Literal["passed", "failed"] = (
                "passed" if result >= self.threshold else "failed"
            )
            return Score(scorer=label, outcome=outcome, value=float(result))
        raise scorer_error(
            f"custom: {self.path!r} returned {result!r}; return a bool, a float in [0, 1] or a Score"
        )


class Judge(_Base):
    """A model judges the output against a rubric; its own run is traced and kept.

    The judge is an agent of its own: no tools, the rubric as its system message, the case's
    prompt, expected value and output as its prompt, and the verdict model as its output
    schema (constrained decoding by the model client, then pydantic, as every twinflow call).
    Scoring it needs the judging context the runner and `rescore` pass (`Judging`).
    """

    kind: Literal["judge"] = "judge"
    """Union tag."""
    rubric: str = Field(min_length=1, max_length=20_000)
    """What a passing answer is, in words, for the judge."""
    model: dict[str, JsonValue]
    """The judge's model, written as a run spec's ``model`` section (``url``, ``kind``,
    ``name``, ``temperature``...); the command that runs the eval builds the client from it."""
    verdict: str | None = None
    """Dotted path of the pydantic model of the verdict (default `JudgeVerdict`:
    ``passed`` and ``reason``); it must have a boolean ``pass_field``."""
    pass_field: str = Field(default="passed", min_length=1)
    """The verdict's boolean field that says whether the case passed."""

    def score(self, case_expected: JsonValue, obs: Observation) -> Score:
        """A judge is scored by `Judging`, never alone.

        Raises:
            EvalValueError (``reason="scorer"``): always; score with a judging context.
        """
        raise scorer_error(
            "judge: this scorer calls a model; it is scored by the runner or rescore with a "
            "judging context, not on its own"
        )


ScorerSpec = Annotated[
    ExactMatch
    | FieldMatch
    | SchemaValid
    | NumericTolerance
    | ToolCalls
    | NoDeniedCalls
    | Custom
    | Judge,
    Discriminator("kind"),
]
"""A scorer, tagged by ``kind``: exact, fields, schema, numeric, tool_calls, no_denied_calls,
custom, judge."""

AnyScorer = (
    ExactMatch
    | FieldMatch
    | SchemaValid
    | NumericTolerance
    | ToolCalls
    | NoDeniedCalls
    | Custom
    | Judge
)
"""The scorer classes (`ScorerSpec` without its tag)."""

JudgeHook = Callable[[int, Judge, JsonValue, Observation], Score]
"""Scores the ``n``-th judge scorer of a case (the judging context's `Judging.score`)."""


def score_all(
    scorers: Sequence[AnyScorer],
    expected: JsonValue,
    obs: Observation,
    judge: JudgeHook | None = None,
) -> tuple[Score, ...]:
    """Run every scorer; one that raises gives an errored score naming the exception.

    Judge scorers go to ``judge`` with their number among the case's judges (from 1).
    """
    scores: list[Score] = []
    judges = 0
    for scorer in scorers:
        try:
            if isinstance(scorer, Judge) and judge is not None:
                judges += 1
                scores.append(judge(judges, scorer, expected, obs))
                continue
            scores.append(scorer.score(expected, obs))
        except RunAborted:  # a judge that cannot be reached stops the run, as the model does
            raise
        except Exception as exc:  # a broken scorer must not sink the run, nor pass or fail a case
            label = scorer.name or (scorer.path if isinstance(scorer, Custom) else scorer.kind)
            scores.append(
                Score(
                    scorer=label,
                    outcome="errored",
                    value=0.0,
                    detail=f"{type(exc).__name__}: {exc}",
                )
            )
    return tuple(scores)
