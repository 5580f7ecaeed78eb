"""Scorers over observations read from real traces of scripted runs."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from eval_testkit import START, Total, convert, factory

from twinflow.agent import Agent, FunctionModel, Policy, RunError, Trace
from twinflow.eval import (
    Case,
    Custom,
    EvalValueError,
    ExactMatch,
    FieldMatch,
    NoDeniedCalls,
    NumericTolerance,
    SchemaValid,
    ToolCalls,
)
from twinflow.eval._observe import Observation, observe
from twinflow.eval._scorers import ExpectedCall, matches, score_all
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart


def _observe(prompt: str) -> Observation:
    sink = MemoryTraceSink()
    agent = factory()(Case(id="x", input=prompt), sink, 0)
    with contextlib.suppress(RunError):
        agent.run(prompt)
    return observe(Trace.load(sink.data))


def test_observation_reads_output_calls_and_attempts() -> None:
    """The observation holds the accepted output, the tool call with its arguments, and attempts."""
    obs = _observe("10 USD")
    assert ("finished", {"total_eur": 5.0}, 1, 2) == (
        obs.status,
        obs.output,
        obs.attempts,
        obs.steps,
    )
    assert [("convert", {"amount": 10.0, "currency": "USD"}, "allow")] == [
        (c.tool, c.arguments, c.decision) for c in obs.tool_calls
    ]


def test_failed_run_counts_rejected_attempts() -> None:
    """A run whose output never validates is failed, with its rejected attempts counted."""
    obs = _observe("bad 10 USD")
    assert ("failed", None, 3, "OutputValidationFailed") == (
        obs.status,
        obs.output,
        obs.attempts,
        obs.error_type,
    )


def test_exact_fields_and_numeric() -> None:
    """Exact, per-field (partial credit) and tolerance scorers compare against expected."""
    obs = _observe("10 USD")
    assert "passed" == ExactMatch().score({"total_eur": 5}, obs).outcome
    assert "failed" == ExactMatch().score({"total_eur": 5.1}, obs).outcome
    partial = FieldMatch().score({"total_eur": 5.0, "currency": "EUR"}, obs)
    assert ("failed", 0.5, "currency: missing") == (partial.outcome, partial.value, partial.detail)
    assert (
        "passed"
        == NumericTolerance(field="total_eur", tolerance=0.2).score({"total_eur": 5.1}, obs).outcome
    )
    assert (
        "failed"
        == NumericTolerance(field="total_eur", tolerance=0.05)
        .score({"total_eur": 5.1}, obs)
        .outcome
    )
    assert (
        "passed"
        == NumericTolerance(field="total_eur", relative=0.1, expected=5.4).score(None, obs).outcome
    )


def test_schema_validity_with_a_named_model() -> None:
    """Schema validity needs an accepted output; a named model must also validate it."""
    assert (
        "passed" == SchemaValid(model="eval_testkit:Total").score(None, _observe("10 USD")).outcome
    )
    assert "failed" == SchemaValid().score(None, _observe("bad 1 USD")).outcome
    failing = SchemaValid(model="twinflow.eval:Case").score(None, _observe("10 USD"))
    assert "failed" == failing.outcome


def test_tool_calls_in_order_or_not_with_predicates() -> None:
    """Expected calls match by tool and argument predicates, ordered or unordered, exclusive or not."""
    obs = _observe("10 USD")
    call = ExpectedCall(
        tool="convert", args={"amount": {"$approx": 10, "$tol": 0.1}, "currency": {"$in": ["USD"]}}
    )
    assert "passed" == ToolCalls(calls=(call,)).score(None, obs).outcome
    twice = ToolCalls(calls=(call, call), ordered=False).score(None, obs)
    assert ("failed", 0.5) == (twice.outcome, twice.value)
    wrong = ExpectedCall(tool="convert", args={"currency": {"$regex": "^EUR"}})
    assert "failed" == ToolCalls(calls=(wrong,)).score(None, obs).outcome
    assert "failed" == ToolCalls(calls=(), exclusive=True).score(None, obs).outcome
    denied = ExpectedCall(tool="convert", allowed=False)
    assert "failed" == ToolCalls(calls=(denied,)).score(None, obs).outcome


def test_ordered_calls_must_come_in_order() -> None:
    """Two calls in the wrong order fail an ordered expectation and pass an unordered one."""

    def two_calls(request: ModelRequest) -> Message:
        if len(request.transcript.messages) == 1:
            parts = (
                ToolCallPart(
                    id=CallId("a"), name="convert", arguments={"amount": 1, "currency": "GBP"}
                ),
                ToolCallPart(
                    id=CallId("b"), name="convert", arguments={"amount": 1, "currency": "USD"}
                ),
            )
            return Message(role="assistant", parts=parts)
        return Message.assistant('{"total_eur": 2.5}')

    sink = MemoryTraceSink()
    agent = Agent(
        FunctionModel(two_calls), clock=SteppingClock(START), ids=CountingIds(), tools=[convert],
        policy=Policy(allow=frozenset({"convert"})), output_type=Total, trace=sink,
    )  # fmt: skip
    agent.run("go")
    obs = observe(Trace.load(sink.data))
    usd, gbp = (ExpectedCall(tool="convert", args={"currency": c}) for c in ("USD", "GBP"))
    assert "failed" == ToolCalls(calls=(usd, gbp)).score(None, obs).outcome
    assert "passed" == ToolCalls(calls=(usd, gbp), ordered=False).score(None, obs).outcome
    assert "passed" == ToolCalls(calls=(gbp, usd), exclusive=True).score(None, obs).outcome


def test_no_denied_calls() -> None:
    """A call the policy denied fails the no-denied-calls scorer, naming the reason."""
    sink = MemoryTraceSink()

    agent = Agent(
        FunctionModel(lambda r: Message(role="assistant", parts=(ToolCallPart(id=CallId("c"), name="convert", arguments={"amount": 1, "currency": "USD"}),)) if len(r.transcript.messages) == 1 else Message.assistant('{"total_eur": 0}')),
        clock=SteppingClock(START), ids=CountingIds(), tools=[convert], output_type=Total, trace=sink,
    )  # fmt: skip
    agent.run("1 USD")
    obs = observe(Trace.load(sink.data))
    score = NoDeniedCalls().score(None, obs)
    assert "failed" == score.outcome
    assert score.detail.startswith("denied: convert:")
    assert "passed" == NoDeniedCalls().score(None, _observe("10 USD")).outcome


def test_custom_scorers_and_a_raising_scorer_errors() -> None:
    """Custom scorers resolve by dotted path; one that raises gives an errored score, not a crash."""
    obs = _observe("10 USD")
    scores = score_all(
        [
            Custom(path="eval_testkit:positive_total"),
            Custom(path="eval_testkit.always_raises"),
            Custom(path="eval_testkit:nope"),
        ],
        None,
        obs,
    )
    assert ["passed", "errored", "errored"] == [s.outcome for s in scores]
    assert "ValueError: scorer bug" == scores[1].detail
    assert scores[2].detail.startswith("EvalValueError: ")


def test_predicates() -> None:
    """Predicates: literals, nested objects, $eq/$in/$regex/$approx/bounds/$any; unknown ones raise."""
    assert matches(3, 3.0)
    assert matches({"a": 1}, {"a": 1, "b": 2})
    assert not matches({"a": 1}, {"b": 2})
    assert matches({"$ge": 1, "$lt": 2}, 1)
    assert not matches({"$gt": 1}, "2")
    assert matches({"$any": True}, None)
    assert matches({"$eq": {"x": 1}}, {"x": 1})
    with pytest.raises(EvalValueError, match=r"unknown predicate '\$near'") as caught:
        matches({"$near": 1}, 1)
    assert "scorer" == caught.value.reason


def test_a_misspelt_scorer_path_attribute_gets_a_suggestion() -> None:
    """A custom scorer path naming `eval_testkit:Totl` suggests `Total`."""
    from twinflow._base._code import resolve_dotted
    from twinflow.eval._errors import scorer_error

    with pytest.raises(EvalValueError) as info:
        resolve_dotted("eval_testkit:Totl", error=scorer_error)
    assert "scorer" == info.value.reason
    assert str(info.value).endswith("(did you mean 'Total'?)")


def test_a_scorer_module_that_raises_at_import_is_a_scorer_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one dotted-path resolver turns a broken user module into its typed error, in one line."""
    from twinflow._base._code import resolve_dotted
    from twinflow.eval._errors import scorer_error

    (tmp_path / "broken_scorer_17b.py").write_text("raise RuntimeError('no\\nscorer')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EvalValueError) as info:
        resolve_dotted("broken_scorer_17b:score", error=scorer_error)
    assert "scorer" == info.value.reason
    assert (
        "cannot import 'broken_scorer_17b' for 'broken_scorer_17b:score': RuntimeError: no scorer"
    ) == str(info.value)


@pytest.mark.parametrize("path", ["nodots", ":name", "module:", "."])
def test_what_is_not_a_dotted_path_is_named_as_such(path: str) -> None:
    """split_dotted refuses a path without both a module and a name, with the form to write."""
    from twinflow._base._code import split_dotted
    from twinflow.eval._errors import scorer_error

    with pytest.raises(EvalValueError) as info:
        split_dotted(path, scorer_error)
    assert "scorer" == info.value.reason
    assert f"{path!r} is not a dotted path: write 'package.module:name'" == str(info.value)


@pytest.mark.parametrize("index", ["\u00b2", "9" * 5000, "\u0660"])
def test_a_field_path_index_int_refuses_is_a_missing_field(index: str) -> None:
    """A dotted path's array index of superscripts, thousands of digits or another script's
    digits (``str.isdigit`` takes them all) is a field that is not there, as any other."""
    from twinflow.eval._scorers import _get

    with pytest.raises(KeyError):
        _get({"items": [1, 2]}, f"items.{index}")
