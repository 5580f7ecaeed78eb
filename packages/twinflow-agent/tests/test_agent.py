"""The loop, the deny-by-default policy and structured output, through the public FunctionModel."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from twinflow.agent import (
    Agent,
    AgentConfigError,
    Approve,
    Deny,
    FunctionModel,
    Modify,
    Policy,
    RunError,
    Tool,
    Trace,
    UsageLimits,
    verify_agent_trace,
)
from twinflow.agent._structured import PydanticStructuredOutput
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import FileTraceSink, MemoryTraceSink
from twinflow.vocab import (
    CallId,
    JsonValue,
    Message,
    ModelRequest,
    ModelResponse,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolSpec,
    Usage,
)

START = datetime(2026, 1, 1, tzinfo=UTC)


class Calls:
    """Records what the tool functions actually received."""

    def __init__(self) -> None:
        """Start with no calls."""
        self.seen: list[tuple[str, dict[str, object]]] = []

    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        self.seen.append(("add", {"a": a, "b": b}))
        return a + b

    def shell(self, command: str) -> str:
        """Run a shell command (never allowed in these tests)."""
        self.seen.append(("shell", {"command": command}))
        return "ran"

    def boom(self, x: int) -> str:
        """Raise."""
        self.seen.append(("boom", {"x": x}))
        raise ValueError(f"bad x {x}")

    def big(self) -> str:
        """Return a lot of text."""
        return "y" * 50


def call(name: str, arguments: dict[str, JsonValue], id_: str = "c1") -> Message:
    """An assistant message calling one tool."""
    return Message(
        role="assistant", parts=(ToolCallPart(id=CallId(id_), name=name, arguments=arguments),)
    )


def text(value: str) -> Message:
    """An assistant text message."""
    return Message(role="assistant", parts=(TextPart(text=value),))


def scripted(*replies: Message) -> FunctionModel:
    """A model replying with the given messages in order."""
    it: Iterator[Message] = iter(replies)
    return FunctionModel(lambda request: next(it))


def make_agent(model: FunctionModel, calls: Calls, **kwargs: object) -> Agent[str]:
    """An agent over the test tools with deterministic ports."""
    kwargs.setdefault("policy", Policy(allow=frozenset({"add", "boom", "big"})))
    return Agent(
        model,
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[calls.add, calls.shell, calls.boom, calls.big],
        **kwargs,
    )


def results(agent: Agent[str]) -> list[tuple[str, str, bool]]:
    """(tool, content, is_error) of every tool_returned event."""
    trace = Trace.load(agent.writer.sink.data)
    return [
        (e.body.result.name, e.body.result.content, e.body.result.is_error)
        for e in trace.events
        if e.body.kind == "tool_returned"
    ]


def decisions(agent: Agent[str]) -> list[tuple[str, str, str]]:
    """(decision, by, reason) of every policy_decided event."""
    trace = Trace.load(agent.writer.sink.data)
    return [
        (e.body.decision, e.body.by, e.body.reason)
        for e in trace.events
        if e.body.kind == "policy_decided"
    ]


def test_allowed_tool_runs_and_the_run_answers() -> None:
    """An allowed call with valid arguments runs; its result reaches the model; the run answers."""
    calls = Calls()
    seen: list[ModelRequest] = []

    def handler(request: ModelRequest) -> Message:
        seen.append(request)
        return call("add", {"a": 2, "b": 3}) if len(seen) == 1 else text("five")

    agent = make_agent(FunctionModel(handler), calls)
    result = agent.run("add 2 and 3")
    assert "five" == result.output
    assert [("add", {"a": 2, "b": 3})] == calls.seen
    assert "5" == seen[1].transcript.messages[-1].parts[0].content
    assert [("allow", "policy", "allowed by name")] == decisions(agent)
    assert verify_agent_trace(agent.writer.sink.data).ok
    assert result.head == Trace.load(agent.writer.sink.data).checkpoint()


def test_the_model_sees_schema_only_specs() -> None:
    """Requests carry ToolSpecs with the JSON Schema derived from the signature."""
    calls = Calls()
    seen: list[ModelRequest] = []
    agent = make_agent(FunctionModel(lambda r: seen.append(r) or text("ok")), calls)
    agent.run("hi")
    add_spec = next(s for s in seen[0].tools if s.name == "add")
    assert "Add two integers." == add_spec.description
    assert {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    } == add_spec.parameters["properties"]
    assert ["a", "b"] == add_spec.parameters["required"]


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (
            call("shell", {"command": "rm -rf /"}),
            "ToolDenied: tool 'shell' is not allowed by the policy",
        ),
        (call("nope", {}), "UnknownTool: no tool named 'nope' (tools: add, big, boom, shell)"),
        (
            call("add", {"a": "1", "b": 2}),
            "InvalidArguments: arguments for 'add' are invalid:\n/a: Input should be a valid integer",
        ),
        (
            call("add", {"a": 1}),
            "InvalidArguments: arguments for 'add' are invalid:\n/b: Field required",
        ),
        (
            call("add", {"a": 1, "b": 2, "c": 3}),
            "InvalidArguments: arguments for 'add' are invalid:\n/c: Extra inputs are not permitted",
        ),
        (call("boom", {"x": 7}), "ValueError: bad x 7"),
    ],
)
def test_refusals_and_failures_become_error_results(reply: Message, error: str) -> None:
    """Denied, unknown, invalid and raising calls become error results; the run goes on."""
    calls = Calls()
    agent = make_agent(scripted(reply, text("done")), calls)
    assert "done" == agent.run("go").output
    [(_, content, is_error)] = results(agent)
    assert (error, True) == (content, is_error)
    assert all(name == "boom" for name, _ in calls.seen)


def test_traceback_only_when_asked() -> None:
    """A raising tool's traceback is added to its error result only if the policy says so."""
    calls = Calls()
    agent = make_agent(
        scripted(call("boom", {"x": 1}), text("done")),
        calls,
        policy=Policy(allow=frozenset({"boom"}), include_traceback=True),
    )
    agent.run("go")
    [(_, content, _)] = results(agent)
    assert content.startswith("ValueError: bad x 1\nTraceback (most recent call last):")


def test_budgets_deny_calls_over_the_limit() -> None:
    """Per-tool and per-run budgets deny calls beyond them, with the reason recorded."""
    calls = Calls()
    replies = [call("add", {"a": i, "b": 0}, f"c{i}") for i in range(4)]
    agent = make_agent(
        scripted(*replies, text("done")),
        calls,
        policy=Policy(
            allow=frozenset({"add", "big"}), per_tool_budget={"add": 2}, max_tool_calls=3
        ),
    )
    agent.run("go")
    assert 2 == len(calls.seen)
    expected = "BudgetExceeded: tool 'add' budget of 2 calls is used up"
    assert [expected, expected] == [c for _, c, _ in results(agent)[2:]]
    agent2 = make_agent(
        scripted(call("big", {}, "x1"), call("add", {"a": 1, "b": 1}, "x2"), text("done")),
        Calls(),
        policy=Policy(allow=frozenset({"add", "big"}), max_tool_calls=1),
    )
    agent2.run("go")
    assert "BudgetExceeded: run budget of 1 tool calls is used up" == results(agent2)[1][1]


def test_approval_hook_can_approve_deny_or_modify() -> None:
    """The approval hook's verdicts are applied and recorded; modified arguments are re-validated."""
    verdicts: list[Approve | Deny | Modify] = [
        Approve(),
        Deny(reason="not today"),
        Modify(arguments={"a": 10, "b": 10}),
        Modify(arguments={"a": "ten", "b": 1}),
    ]
    calls = Calls()
    agent = make_agent(
        scripted(*[call("add", {"a": 1, "b": 1}, f"c{i}") for i in range(4)], text("done")),
        calls,
        policy=Policy(allow=frozenset({"add"}), approval=lambda _call: verdicts.pop(0)),
    )
    agent.run("go")
    assert [("add", {"a": 1, "b": 1}), ("add", {"a": 10, "b": 10})] == calls.seen
    assert [
        ("allow", "approval", "approved by the approval hook"),
        ("deny", "approval", "not today"),
        ("allow", "approval", "arguments modified by the approval hook"),
        (
            "deny",
            "approval",
            "modified arguments for 'add' are invalid:\n/a: Input should be a valid integer",
        ),
    ] == decisions(agent)


def test_an_approval_hook_returning_no_verdict_denies_the_call() -> None:
    """A hook answering None, True or a string is not an approval: the call is denied, never run."""
    answers: list[object] = [None, True, "approve"]
    calls = Calls()
    agent = make_agent(
        scripted(*[call("add", {"a": 1, "b": 1}, f"c{i}") for i in range(3)], text("done")),
        calls,
        policy=Policy(allow=frozenset({"add"}), approval=lambda _call: answers.pop(0)),
    )
    agent.run("go")
    assert [] == calls.seen
    assert [
        ("deny", "approval", f"the approval hook returned {kind}, not Approve, Deny or Modify")
        for kind in ("NoneType", "bool", "str")
    ] == decisions(agent)


def test_output_above_the_cap_is_truncated_with_a_marker() -> None:
    """Tool output longer than the cap is cut and says how much was cut."""
    agent = make_agent(
        scripted(call("big", {}), text("done")),
        Calls(),
        policy=Policy(allow=frozenset({"big"}), max_output_chars=10),
    )
    agent.run("go")
    assert ("big", "yyyyyyyyyy\n[truncated: 40 more characters]", False) == results(agent)[0]


VALID_ARGUMENTS: dict[str, st.SearchStrategy[dict[str, JsonValue]]] = {
    "add": st.fixed_dictionaries({"a": st.integers(-5, 5), "b": st.integers(-5, 5)}),
    "shell": st.fixed_dictionaries({"command": st.text(max_size=5)}),
    "boom": st.fixed_dictionaries({"x": st.integers(-5, 5)}),
    "missing": st.just({}),
}
ANY_ARGUMENTS = st.dictionaries(
    st.sampled_from(["a", "b", "x", "command", "zz"]),
    st.one_of(
        st.integers(-5, 5),
        st.text(max_size=3),
        st.none(),
        st.booleans(),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    max_size=3,
)
a_call = st.sampled_from(sorted(VALID_ARGUMENTS)).flatmap(
    lambda name: st.tuples(st.just(name), st.one_of(VALID_ARGUMENTS[name], ANY_ARGUMENTS))
)
reply_strategy = st.lists(a_call, min_size=0, max_size=4)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(reply_strategy, min_size=1, max_size=4), st.sets(st.sampled_from(["add", "boom"])))
def test_property_disallowed_tools_never_run_and_bad_args_never_arrive(
    steps: list[list[tuple[str, dict[str, JsonValue]]]], allowed: set[str]
) -> None:
    """Whatever the model emits: a tool not allowed never runs; every call that runs had valid arguments."""
    calls = Calls()
    replies = [
        Message(
            role="assistant",
            parts=tuple(
                ToolCallPart(id=CallId(f"s{i}c{j}"), name=n, arguments=a)
                for j, (n, a) in enumerate(step)
            ),
        )
        if step
        else text("done")
        for i, step in enumerate(steps)
    ]
    agent = make_agent(
        scripted(*replies, text("done")),
        calls,
        policy=Policy(allow=frozenset(allowed)),
        max_steps=10,
    )
    agent.run("go")
    for name, kwargs in calls.seen:
        assert name in allowed
        assert "shell" != name
        assert all(type(v) is int for v in kwargs.values())
        assert {"x"} == set(kwargs) if name == "boom" else {"a", "b"} == set(kwargs)
    assert verify_agent_trace(agent.writer.sink.data).ok


class Answer(BaseModel):
    """A structured answer."""

    total: int
    """The sum."""


def test_structured_output_reasks_with_the_schema_present() -> None:
    """An invalid answer is re-asked with the error, every request carrying the output schema."""
    seen: list[ModelRequest] = []
    replies = iter(
        [
            text('{"total": "x"}'),
            Message(
                role="assistant", parts=(StructuredPart(schema_name="Answer", value={"total": 3}),)
            ),
        ]
    )

    def handler(request: ModelRequest) -> Message:
        seen.append(request)
        return next(replies)

    agent = Agent(
        FunctionModel(handler), clock=SteppingClock(START), ids=CountingIds(), output_type=Answer
    )
    result = agent.run("sum")
    assert Answer(total=3) == result.output
    assert ["Answer", "Answer"] == [r.output_schema.name if r.output_schema else None for r in seen]
    assert "total: Input should be a valid integer" in seen[1].transcript.messages[-1].text
    kinds = [e.body.kind for e in Trace.load(agent.writer.sink.data).events]
    assert [
        "model_requested",
        "model_responded",
        "output_rejected",
        "model_requested",
        "model_responded",
        "output_accepted",
        "run_finished",
    ] == kinds[1:]


class Measure(BaseModel):
    """A float answer: pydantic alone would accept infinity."""

    value: float
    """The measure."""


def test_an_output_without_a_json_form_is_reasked() -> None:
    """1e400 validates as inf but has no canonical JSON: it is re-asked, never a crash."""
    replies = iter([text('{"value": 1e400}'), text('{"value": 2.5}')])
    agent = Agent(
        FunctionModel(lambda r: next(replies)),
        clock=SteppingClock(START),
        ids=CountingIds(),
        output_type=Measure,
    )
    assert Measure(value=2.5) == agent.run("measure").output
    rejected = [
        e.body
        for e in Trace.load(agent.writer.sink.data).events
        if e.body.kind == "output_rejected"
    ]
    assert ["/value: inf has no JSON form"] == [r.error for r in rejected]


def test_structured_output_gives_up_after_the_bound() -> None:
    """Output that never validates fails the run after max_attempts, recorded as run_failed."""
    agent = Agent(
        FunctionModel(lambda r: text("nope")),
        clock=SteppingClock(START),
        ids=CountingIds(),
        output_type=Answer,
    )
    with pytest.raises(RunError, match="in 3 attempt") as caught:
        agent.run("sum")
    assert "output_invalid" == caught.value.reason
    events = Trace.load(agent.writer.sink.data).events
    assert ("run_failed", 3) == (
        events[-1].body.kind,
        sum(e.body.kind == "output_rejected" for e in events),
    )
    assert verify_agent_trace(agent.writer.sink.data).ok


def test_max_steps_and_usage_limits_fail_the_run_with_a_trace() -> None:
    """Too many steps or too many tokens raise, after a run_failed event."""
    forever = FunctionModel(lambda r: call("add", {"a": 1, "b": 1}, f"c{len(r.transcript)}"))
    agent = make_agent(forever, Calls(), max_steps=3)
    with pytest.raises(RunError, match="max_steps=3") as caught:
        agent.run("go")
    assert "max_steps" == caught.value.reason
    assert "raise max_steps or check the tools' results" in str(caught.value)
    costly = FunctionModel(
        lambda r: ModelResponse(message=text("hi"), usage=Usage(input_tokens=50, output_tokens=60))
    )
    agent2 = make_agent(costly, Calls(), usage_limits=UsageLimits(total_tokens=100))
    with pytest.raises(RunError, match="total_tokens reached 110") as limited:
        agent2.run("go")
    assert "usage_limit" == limited.value.reason
    # Each reason keeps the name traces recorded before the reasons were one class.
    recorded = [Trace.load(a.writer.sink.data).events[-1].body for a in (agent, agent2)]
    assert [("run_failed", "MaxStepsExceeded"), ("run_failed", "UsageLimitExceeded")] == [
        (body.kind, getattr(body, "error_type", None)) for body in recorded
    ]


@pytest.mark.parametrize("name", list(UsageLimits.model_fields))
def test_each_usage_limit_alone_fails_the_run(name: str) -> None:
    """Every usage limit is checked when it is the only one set: none is skipped."""
    costly = FunctionModel(
        lambda r: ModelResponse(
            message=call("add", {"a": 1, "b": 1}, f"c{len(r.transcript)}"),
            usage=Usage(input_tokens=50, output_tokens=60),
            finish_reason="tool_calls",
        )
    )
    # A millionth of a dollar is crossed at the first reply (4.35e-05 at gpt-4o-mini's price).
    limit = 1e-6 if name == "cost_usd" else 1
    agent = make_agent(costly, Calls(), usage_limits=UsageLimits(**{name: limit}))
    agent._priced_as = "openai-compatible:gpt-4o-mini@http://127.0.0.1:9"
    with pytest.raises(RunError, match=f"{name} reached") as caught:
        agent.run("go")
    assert "usage_limit" == caught.value.reason


def test_model_errors_are_recorded_and_reraised_unchanged() -> None:
    """An exception from the model is recorded as run_failed and re-raised as is."""

    def broken(request: ModelRequest) -> Message:
        raise ConnectionError("refused")

    agent = make_agent(FunctionModel(broken), Calls())
    with pytest.raises(ConnectionError, match="refused"):
        agent.run("go")
    last = Trace.load(agent.writer.sink.data).events[-1].body
    assert ("run_failed", "ConnectionError", "refused") == (
        last.kind,
        last.error_type,
        last.message,
    )


def test_runs_are_deterministic_given_the_ports(tmp_path: Path) -> None:
    """Two runs with the same script, clock and ids write byte-identical trace files."""
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for path in paths:
        agent = make_agent(
            scripted(call("add", {"a": 1, "b": 2}), text("3")),
            Calls(),
            trace=FileTraceSink(path),
        )
        agent.run("go")
        agent.writer.close()
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert verify_agent_trace(paths[0]).ok


def test_requests_record_only_the_delta() -> None:
    """Each model_requested event carries the new messages and the length of the prefix before them."""
    agent = make_agent(
        scripted(call("add", {"a": 1, "b": 2}), call("add", {"a": 1, "b": 2}, "c2"), text("3")),
        Calls(),
    )
    agent.run("go")
    requested = [
        e.body
        for e in Trace.load(agent.writer.sink.data).events
        if e.body.kind == "model_requested"
    ]
    assert [(0, 1), (1, 2), (3, 2)] == [(b.prefix_length, len(b.new_messages)) for b in requested]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda c: make_agent(scripted(), c, policy=Policy(allow=frozenset({"ad"}))),
            "not registered: \\['ad'\\]",
        ),
        (lambda c: make_agent(scripted(), c, max_steps=0), "max_steps must be at least 1"),
        (
            lambda c: make_agent(scripted(), c, output_type=int),
            "output_type must be str or a pydantic model class, not <class 'int'>",
        ),
        (
            lambda c: make_agent(scripted(), c, output_type=None),
            "output_type must be str or a pydantic model class, not None",
        ),
        (lambda c: Tool.from_function(lambda x: x), "has no type annotation"),
        (lambda c: Tool(ToolSpec(name="add"), c.add), "do not match the function's parameters"),
    ],
)
def test_configuration_mistakes_are_user_errors(
    build: Callable[[Calls], object], message: str
) -> None:
    """Bad agent or tool configuration raises AgentConfigError naming the mistake."""
    with pytest.raises(AgentConfigError, match=message):
        build(Calls())


def test_structured_adapter_is_a_constructor_argument() -> None:
    """Any StructuredOutputAdapter plugs in; its bound is the one applied."""
    agent = Agent(
        FunctionModel(lambda r: text("nope")),
        clock=SteppingClock(START),
        ids=CountingIds(),
        output_type=Answer,
        structured=PydanticStructuredOutput(max_attempts=1),
    )
    with pytest.raises(RunError, match="in 1 attempt") as caught:
        agent.run("sum")
    assert "output_invalid" == caught.value.reason
    requests = [
        e for e in Trace.load(agent.writer.sink.data).events if e.body.kind == "model_requested"
    ]
    assert 1 == len(requests)


def test_a_tool_whose_budget_is_spent_is_no_longer_offered() -> None:
    """Once a tool's budget is used up the model is not shown it again (it could not run)."""
    offered: list[list[str]] = []

    def handler(request: ModelRequest) -> Message:
        offered.append([spec.name for spec in request.tools])
        if len(offered) == 1:
            call = ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 1, "b": 2})
            return Message(role="assistant", parts=(call,))
        return Message(role="assistant", parts=(TextPart(text="3"),))

    calls = Calls()
    agent = Agent(
        FunctionModel(handler),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[calls.add, calls.shell],
        policy=Policy(allow=frozenset({"add"}), per_tool_budget={"add": 1}),
    )
    agent.run("add 1 and 2")
    # `shell` stays on offer: it is not allowed, and saying so is the policy's job.
    assert [["add", "shell"], ["shell"]] == offered


def test_the_trace_is_synced_even_when_recording_the_failure_fails(tmp_path: Path) -> None:
    """If writing run_failed itself raises, what was written before is still made durable."""

    class FailingAt(MemoryTraceSink):
        """A sink whose write of the run_failed line raises, counting durable flushes."""

        def __init__(self) -> None:
            super().__init__()
            self.durable = 0

        def write(self, line: bytes) -> None:
            if b'"run_failed"' in line:
                raise OSError("disk full")
            super().write(line)

        def flush(self, *, durable: bool) -> None:
            self.durable += durable
            super().flush(durable=durable)

    def broken(request: ModelRequest) -> Message:
        raise RuntimeError("model broke")

    sink = FailingAt()
    agent = Agent(FunctionModel(broken), clock=SteppingClock(START), ids=CountingIds(), trace=sink)
    with pytest.raises(OSError, match="disk full"):
        agent.run("hi")
    assert 1 == sink.durable


def test_the_agent_is_a_context_manager_that_closes_its_trace(tmp_path: Path) -> None:
    """Leaving a `with Agent(...)` block closes the trace file, even when the block raises."""
    sink = FileTraceSink(tmp_path / "t.jsonl")
    model = FunctionModel(lambda request: Message.assistant("hi"))
    with (
        pytest.raises(RuntimeError, match="own failure"),
        Agent(model, clock=SteppingClock(START), ids=CountingIds(), trace=sink) as agent,
    ):
        agent.run("hello")
        raise RuntimeError("the caller's own failure")
    with pytest.raises(ValueError, match="closed file"):
        sink.write(b"more")


def test_an_agent_without_an_output_type_is_a_text_agent() -> None:
    """output_type defaults to str: the run's output is the model's final text, recorded as such."""
    agent = make_agent(scripted(text("forty-two")), Calls())
    result = agent.run("answer")
    accepted = [e.body for e in Trace.load(agent.writer.sink.data).events][-2]
    assert (str, "forty-two") == (agent.output_type, result.output)
    assert ("output_accepted", None, "forty-two") == (
        accepted.kind,
        accepted.schema_name,
        accepted.value,
    )


def test_an_output_type_changed_after_construction_is_refused_at_the_answer() -> None:
    """The text answer is returned only while output_type is str; another type is a config error."""
    agent = make_agent(scripted(text("forty-two")), Calls())
    agent.output_type = int  # type: ignore[assignment]  # the mistake under test
    with pytest.raises(AgentConfigError, match="not <class 'int'>"):
        agent.run("answer")


def test_the_model_label_is_a_constructor_argument() -> None:
    """The trace names the model by model_label when given, else by the model's class name."""
    labelled = make_agent(scripted(), Calls(), model_label="smollm2-135m")
    unlabelled = make_agent(scripted(), Calls())
    assert ("smollm2-135m", "FunctionModel") == (labelled.config.model, unlabelled.config.model)


def test_a_modify_verdict_with_empty_arguments_runs_with_exactly_those() -> None:
    """Modify(arguments={}) is a change like any other: the tool runs with {} and the trace says so."""

    def greet(name: str = "you") -> str:
        """Greet someone."""
        return f"hello {name}"

    agent = Agent(
        scripted(call("greet", {"name": "Bob"}), text("done")),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[greet],
        policy=Policy(allow=frozenset({"greet"}), approval=lambda _call: Modify(arguments={})),
    )
    agent.run("go")
    bodies = [e.body for e in Trace.load(agent.writer.sink.data).events]
    decided = [b.arguments for b in bodies if b.kind == "policy_decided"]
    called = [b.arguments for b in bodies if b.kind == "tool_called"]
    assert ([{}], [{}], [("greet", "hello you", False)]) == (decided, called, results(agent))


def test_a_run_out_of_steps_because_every_call_was_denied_says_so() -> None:
    """A policy allowing none of the tools: the hint names the denials, not more steps."""
    forever = FunctionModel(lambda r: call("add", {"a": 1, "b": 1}, f"c{len(r.transcript)}"))
    agent = make_agent(forever, Calls(), max_steps=4, policy=Policy())
    assert ("add", "big", "boom", "shell") == agent.denied_tools
    with pytest.raises(RunError) as caught:
        agent.run("go")
    assert "max_steps" == caught.value.reason
    expected = (
        "requests; all 4 tool calls were refused (add ToolDenied x4; the policy allows no "
        "tool): fix the policy or the tool calls, more steps will not help"
    )
    assert expected == str(caught.value).split(" max_steps=4 ")[1]


def test_a_run_out_of_steps_with_some_calls_denied_counts_them() -> None:
    """Some calls allowed, some denied: the hint says how many of each before 'raise max_steps'."""
    asked = iter(range(100))

    def alternate(request: ModelRequest) -> Message:
        n = next(asked)
        return call(("add", "shell")[n % 2], {"a": 1, "b": 1}, f"c{n}")

    forever = FunctionModel(alternate)
    agent = make_agent(forever, Calls(), max_steps=4, policy=Policy(allow=frozenset({"add"})))
    with pytest.raises(RunError) as caught:
        agent.run("go")
    assert "max_steps" == caught.value.reason
    assert "2 of 4 tool calls were refused (" in str(caught.value)
    assert "the policy allows add): check the policy before raising max_steps" in str(caught.value)
