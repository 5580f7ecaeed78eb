"""Sub-agents as traced tools: each call a child run in its own trace, vouched for by the parent."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from twinflow.agent import (
    Agent,
    AgentConfigError,
    AgentError,
    FunctionModel,
    Policy,
    RunError,
    SpecError,
    Tool,
    Trace,
    UsageLimits,
    load_spec,
)
from twinflow.agent._events import ChildRun, ToolReturned
from twinflow.agent._subagent import Split
from twinflow.kernel import CountingIds, ReplayDivergenceError, SteppingClock
from twinflow.vocab import (
    CallId,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    Usage,
)

START = datetime(2026, 1, 1, tzinfo=UTC)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shell(command: str) -> str:
    """Run a shell command (no child's policy allows it)."""
    raise AssertionError("never allowed")


def calls_then_answers(name: str, arguments: dict[str, object], prefix: str) -> FunctionModel:
    """A model that calls ``name`` once, then answers with the result it saw."""

    def reply(request: ModelRequest) -> Message:
        results = [m for m in request.transcript.messages if m.role == "tool"]
        if not results:
            call = ToolCallPart(id=CallId(f"{prefix}1"), name=name, arguments=arguments)
            return Message(role="assistant", parts=(call,))
        content = results[-1].tool_results[0].content
        return Message(role="assistant", parts=(TextPart(text=f"{prefix}: {content}"),))

    return FunctionModel(reply)


def child_agent(model: FunctionModel, **kwargs: object) -> Agent[str]:
    """A child agent with deterministic ports and the test tools."""
    kwargs.setdefault("policy", Policy(allow=frozenset({"add"})))
    kwargs.setdefault("tools", [add, shell])
    return Agent(
        model,
        clock=SteppingClock(START),
        ids=CountingIds(),
        **kwargs,  # type: ignore[arg-type]  # the keyword arguments of Agent
    )


def parent_of(helper: Agent[str], tmp_path: Path, **kwargs: object) -> Agent[str]:
    """A parent whose model asks the ``helper`` sub-agent once, writing to ``tmp_path``."""
    kwargs.setdefault("policy", Policy(allow=frozenset({"helper"})))
    return Agent(
        calls_then_answers("helper", {"prompt": "add 2 and 3"}, "p"),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[helper.as_tool(name="helper", description="Adds numbers.")],
        trace=tmp_path / "trace.jsonl",
        **kwargs,  # type: ignore[arg-type]  # the keyword arguments of Agent
    )


def returned(path: Path) -> list[ToolReturned]:
    """Every ``tool_returned`` of a trace file."""
    return [e.body for e in Trace.load(path).events if isinstance(e.body, ToolReturned)]


def test_child_trace_is_recorded_by_the_parent(tmp_path: Path) -> None:
    """The parent's ``tool_returned`` names the child's trace file, run id, size and root."""
    helper = child_agent(calls_then_answers("add", {"a": 2, "b": 3}, "c"))
    with parent_of(helper, tmp_path) as parent:
        result = parent.run("what is 2 + 3?")
    child_path = tmp_path / "trace.helper.jsonl"
    child = Trace.load(child_path)
    (record,) = returned(tmp_path / "trace.jsonl")
    expected = ChildRun(
        run_id=child.events[0].body.run_id,  # type: ignore[union-attr]  # run_started's
        trace="trace.helper.jsonl",
        size=child.size,
        root=child.checkpoint().root,
    )
    assert expected == record.child
    assert ("p: c: 5", "c: 5") == (result.output, record.result.content)


def test_each_call_takes_a_new_trace_file(tmp_path: Path) -> None:
    """Two runs of a parent give two child traces, the second numbered."""
    helper = child_agent(calls_then_answers("add", {"a": 2, "b": 3}, "c"))
    with parent_of(helper, tmp_path) as parent:
        parent.run("first")
    with parent_of(helper, tmp_path) as parent:
        parent.run("second")
    names = [r.child.trace for r in returned(tmp_path / "trace.1.jsonl") if r.child is not None]
    assert ["trace.1.helper.jsonl"] == names
    assert (tmp_path / "trace.helper.jsonl").exists()


def test_child_denied_a_tool_by_its_own_policy(tmp_path: Path) -> None:
    """The child's own policy decides its calls: a tool it does not allow is denied in its trace."""
    helper = child_agent(calls_then_answers("shell", {"command": "ls"}, "c"))
    with parent_of(helper, tmp_path, policy=Policy(allow=frozenset({"helper"}))) as parent:
        parent.run("list files")
    child = Trace.load(tmp_path / "trace.helper.jsonl")
    decisions = [e.body.decision for e in child.events if e.body.kind == "policy_decided"]
    assert ["deny"] == decisions


def test_failing_child_is_an_error_result_and_the_parent_goes_on(tmp_path: Path) -> None:
    """A child that fails gives the parent an error result naming why; the parent still answers."""
    helper = child_agent(calls_then_answers("add", {"a": 1, "b": 1}, "c"), max_steps=1)
    with parent_of(helper, tmp_path) as parent:
        result = parent.run("add")
    (record,) = returned(tmp_path / "trace.jsonl")
    child = Trace.load(tmp_path / "trace.helper.jsonl")
    assert ("RunError", True) == (record.error_type, record.result.is_error)
    assert "run_failed" == child.kinds[-1]
    assert record.child is not None and child.size == record.child.size
    assert result.output.startswith("p: RunError: ")


def test_parent_in_memory_keeps_the_child_in_memory() -> None:
    """A parent whose trace is not a file records its child with no file name."""
    helper = child_agent(calls_then_answers("add", {"a": 2, "b": 3}, "c"))
    parent = Agent(
        calls_then_answers("helper", {"prompt": "add"}, "p"),
        ids=CountingIds(),
        clock=SteppingClock(START),
        tools=[helper.as_tool(name="helper", description="Adds.")],
        policy=Policy(allow=frozenset({"helper"})),
    )
    parent.run("go")
    (record,) = [
        e.body for e in Trace.load(parent.writer.sink.data).events if e.body.kind == "tool_returned"
    ]
    assert record.child is not None and record.child.trace is None


def test_child_tool_takes_one_prompt() -> None:
    """A sub-agent tool's schema is one required string, ``prompt``."""
    tool = child_agent(FunctionModel(lambda r: Message.user("x"))).as_tool(
        name="helper", description="Helps."
    )
    expected = {
        "type": "object",
        "properties": {"prompt": {"type": "string", "title": "Prompt"}},
        "required": ["prompt"],
        "additionalProperties": False,
    }
    assert ("helper", "Helps.", expected) == (
        tool.spec.name,
        tool.spec.description,
        tool.spec.parameters,
    )


def test_nesting_deeper_than_four_is_refused() -> None:
    """A fifth level of sub-agents is refused when the tool is made, before anything runs."""
    agent = child_agent(FunctionModel(lambda r: Message.user("x")))
    for level in range(3):
        agent = child_agent(
            FunctionModel(lambda r: Message.user("x")),
            tools=[agent.as_tool(name=f"l{level}", description="nested")],
            policy=Policy(),
        )
    agent.as_tool(name="fourth", description="the deepest allowed")
    with pytest.raises(AgentConfigError, match="nests 5 levels"):
        child_agent(
            FunctionModel(lambda r: Message.user("x")),
            tools=[agent.as_tool(name="l3", description="nested")],
            policy=Policy(),
        ).as_tool(name="fifth", description="too deep")


def test_unknown_budget_is_refused() -> None:
    """A budget other than own or shared is a usage error naming the choices."""
    agent = child_agent(FunctionModel(lambda r: Message.user("x")))
    with pytest.raises(AgentConfigError, match="'own' or 'shared'"):
        agent.as_tool(name="h", description="d", budget="half")  # type: ignore[arg-type]  # a bad value, on purpose


def adds_twice() -> FunctionModel:
    """A child model that calls ``add`` twice, then answers with how many results it saw."""

    def reply(request: ModelRequest) -> Message:
        seen = [m for m in request.transcript.messages if m.role == "tool"]
        if len(seen) < 2:
            call = ToolCallPart(id=CallId(f"a{len(seen)}"), name="add", arguments={"a": 1, "b": 1})
            return Message(role="assistant", parts=(call,))
        return Message(role="assistant", parts=(TextPart(text="done"),))

    return FunctionModel(reply)


def test_shared_budget_bounds_the_child_and_counts_against_the_parent(tmp_path: Path) -> None:
    """A shared tool budget leaves the child what the parent has; its denial is in its trace."""
    helper = child_agent(adds_twice())
    tool = helper.as_tool(name="helper", description="Adds.", budget="shared")
    parent = Agent(
        calls_then_answers("helper", {"prompt": "add"}, "p"),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[tool],
        policy=Policy(allow=frozenset({"helper"}), max_tool_calls=2),
        trace=tmp_path / "trace.jsonl",
    )
    with parent:
        parent.run("go")
    child = Trace.load(tmp_path / "trace.helper.jsonl")
    started = child.events[0].body
    reasons = [e.body.reason for e in child.events if e.body.kind == "policy_decided"]
    assert 1 == started.config.policy.run_budget  # type: ignore[union-attr]  # run_started's
    assert ["allowed by name", "run budget of 1 tool calls is used up"] == reasons


def test_own_budget_leaves_the_child_its_limits(tmp_path: Path) -> None:
    """Under its own budget the child runs with its configured limits, whatever the parent's."""
    helper = child_agent(adds_twice())
    parent = Agent(
        calls_then_answers("helper", {"prompt": "add"}, "p"),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[helper.as_tool(name="helper", description="Adds.")],
        policy=Policy(allow=frozenset({"helper"}), max_tool_calls=1),
        trace=tmp_path / "trace.jsonl",
    )
    with parent:
        parent.run("go")
    child = Trace.load(tmp_path / "trace.helper.jsonl")
    decisions = [e.body.decision for e in child.events if e.body.kind == "policy_decided"]
    assert ["allow", "allow"] == decisions


def test_shared_tokens_are_counted_against_the_parent(tmp_path: Path) -> None:
    """A child's tokens under a shared budget push the parent over its limit: a recorded failure."""

    def costly(request: ModelRequest) -> ModelResponse:
        message = calls_then_answers("add", {"a": 1, "b": 2}, "c").handler(request)
        assert isinstance(message, Message)
        finish = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(
            message=message, finish_reason=finish, usage=Usage(input_tokens=10, output_tokens=5)
        )

    helper = child_agent(FunctionModel(costly))
    parent = Agent(
        calls_then_answers("helper", {"prompt": "add"}, "p"),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[helper.as_tool(name="helper", description="Adds.", budget="shared")],
        policy=Policy(allow=frozenset({"helper"})),
        usage_limits=UsageLimits(total_tokens=20),
        trace=tmp_path / "trace.jsonl",
    )
    with parent, pytest.raises(RunError) as raised:
        parent.run("go")
    child = Trace.load(tmp_path / "trace.helper.jsonl")
    started = child.events[0].body
    assert 20 == started.config.usage_limits["total_tokens"]  # type: ignore[union-attr]  # set above
    assert ("usage_limit", "run_failed") == (raised.value.reason, child.kinds[-1])


def team(tmp_path: Path, budget: object, **kwargs: object) -> Agent[str]:
    """A parent that asks a child (which adds twice) once, under ``budget``."""
    helper = child_agent(adds_twice())
    kwargs.setdefault("policy", Policy(allow=frozenset({"helper"})))
    return Agent(
        calls_then_answers("helper", {"prompt": "add"}, "p"),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[helper.as_tool(name="helper", description="Adds.", budget=budget)],  # type: ignore[arg-type]  # each test's budget
        trace=tmp_path / "trace.jsonl",
        **kwargs,  # type: ignore[arg-type]  # the keyword arguments of Agent
    )


def test_shared_steps_bound_the_child_and_count_against_the_parent(tmp_path: Path) -> None:
    """Under a shared budget the child gets the requests the parent has left; its requests
    count against the parent, whose next request crosses the limit (a recorded failure), and
    a recorded replay counts them again from the link, without the child."""
    parent = team(tmp_path, "shared", usage_limits=UsageLimits(requests=4))
    with parent, pytest.raises(RunError) as raised:
        parent.run("go")
    child = Trace.load(tmp_path / "trace.helper.jsonl")
    started = child.events[0].body
    (link,) = returned(tmp_path / "trace.jsonl")
    exceeded = [e.body for e in Trace.load(tmp_path / "trace.jsonl").events][-2]
    assert 3 == started.config.usage_limits["requests"]  # type: ignore[union-attr]  # run_started's
    assert 3 == link.child.counted.requests  # type: ignore[union-attr]  # a shared child's
    assert ("usage_limit", "budget_exceeded", 5) == (
        raised.value.reason,
        exceeded.kind,
        exceeded.used,  # type: ignore[union-attr]  # budget_exceeded's
    )
    with parent:
        replayed = parent.replay(tmp_path / "trace.jsonl")
    assert Trace.load(tmp_path / "trace.jsonl").checkpoint().root == replayed.root


def test_a_call_is_denied_once_the_shared_steps_are_spent(tmp_path: Path) -> None:
    """With no request left to share, the parent's policy denies the call to the child (a
    recorded decision, its reason naming the limit) and no child run starts."""
    parent = team(tmp_path, "shared", usage_limits=UsageLimits(requests=1))
    with parent, pytest.raises(RunError):
        parent.run("go")
    decisions = [
        (e.body.decision, e.body.reason)  # type: ignore[union-attr]  # policy_decided's
        for e in Trace.load(tmp_path / "trace.jsonl").events
        if e.body.kind == "policy_decided"
    ]
    assert [("deny", "the run's 1 requests (steps) are used up")] == decisions
    assert not (tmp_path / "trace.helper.jsonl").exists()


def test_a_split_bounds_each_call_by_its_part_and_counts_it(tmp_path: Path) -> None:
    """A split of one tool call: the child's second call is denied by its own policy; what
    it used is recorded in the link and replays the same."""
    parent = team(tmp_path, {"tool_calls": 1, "steps": 5})
    with parent:
        result = parent.run("go")
        replayed = parent.replay(tmp_path / "trace.jsonl")
    child = Trace.load(tmp_path / "trace.helper.jsonl")
    reasons = [e.body.reason for e in child.events if e.body.kind == "policy_decided"]  # type: ignore[union-attr]  # policy_decided's
    (link,) = returned(tmp_path / "trace.jsonl")
    assert ["allowed by name", "run budget of 1 tool calls is used up"] == reasons
    assert (3, 1) == (link.child.counted.requests, link.child.counted.tool_calls)  # type: ignore[union-attr]  # a split child's
    assert 5 == child.events[0].body.config.usage_limits["requests"]  # type: ignore[union-attr]  # run_started's
    assert result.head.root == replayed.root


@pytest.mark.parametrize("budget", [{"steps": 0}, {"turns": 2}, {"tokens": -1}, {}, "half"])
def test_a_bad_split_is_refused_naming_the_choices(budget: object) -> None:
    """A split of no steps, an unknown key, a negative count or nothing: a usage error."""
    agent = child_agent(FunctionModel(lambda r: Message.user("x")))
    with pytest.raises(AgentConfigError, match="sub-agent 'h'"):
        agent.as_tool(name="h", description="d", budget=budget)  # type: ignore[arg-type]  # a bad value, on purpose


def test_recorded_replay_serves_the_child_without_starting_it(tmp_path: Path) -> None:
    """Recorded replay takes the child's result from the parent's trace: its model is not asked."""
    model = calls_then_answers("add", {"a": 2, "b": 3}, "c")
    helper = child_agent(model)
    with parent_of(helper, tmp_path) as parent:
        parent.run("what is 2 + 3?")
        asked = model.requests
        result = parent.replay(tmp_path / "trace.jsonl")
    assert (asked, Trace.load(tmp_path / "trace.jsonl").checkpoint().root) == (
        model.requests,
        result.root,
    )


MODEL = "model:\n  url: http://127.0.0.1:9/v1\n  name: m\n"


def write_specs(tmp_path: Path, specs: dict[str, str]) -> None:
    """Write each named spec (a prompt and the shared model added) into ``tmp_path``."""
    for name, body in specs.items():
        (tmp_path / name).write_text(f"prompt: unused\n{MODEL}{body}")


def test_spec_agents_become_tools_under_the_parent_policy(tmp_path: Path) -> None:
    """A spec's ``agents`` are tools by their names; each child runs under its own spec's policy."""
    write_specs(
        tmp_path,
        {
            "parent.yaml": "agents:\n  - {name: helper, spec: helper.yaml}\n"
            "policy: {allow: [helper]}\n",
            "helper.yaml": "system: Adds numbers.\ntools: [tools_mod:add]\n"
            "policy: {allow: [add]}\n",
        },
    )
    (tmp_path / "tools_mod.py").write_text(
        "def add(a: int, b: int) -> int:\n    '''Add.'''\n    return a + b\n"
    )
    resolved = load_spec(tmp_path / "parent.yaml").resolve()
    model = FunctionModel(
        lambda request: (
            calls_then_answers("helper", {"prompt": "2+3"}, "p")
            if request.tools and request.tools[0].name == "helper"
            else calls_then_answers("add", {"a": 2, "b": 3}, "c")
        ).handler(request)
    )
    agent = resolved.agent(
        model=model, clock=SteppingClock(START), ids=CountingIds(), trace=tmp_path / "t.jsonl"
    )
    with agent:
        result = agent.run("go")
    (record,) = returned(tmp_path / "t.jsonl")
    assert ("p: c: 5", "Adds numbers.", "t.helper.jsonl") == (
        result.output,
        agent.tools["helper"].spec.description,
        record.child.trace if record.child else None,
    )


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (
            {
                "a.yaml": "agents: [{name: b, spec: b.yaml}]\n",
                "b.yaml": "agents: [{name: a, spec: a.yaml}]\n",
            },
            r"a cycle: a.yaml -> b.yaml -> a.yaml",
        ),
        ({"a.yaml": "agents: [{name: me, spec: a.yaml}]\n"}, r"a cycle: a.yaml -> a.yaml"),
        (
            {
                f"{c}.yaml": f"agents: [{{name: n, spec: {n}.yaml}}]\n"
                for c, n in zip("abcde", "bcdef", strict=True)
            }
            | {"f.yaml": ""},
            "deeper than 4 levels",
        ),
        ({"a.yaml": "agents: [{name: up, spec: ../x.yaml}]\n"}, "without '..'"),
        (
            {"a.yaml": "agents: [{name: b, spec: b.yaml}]\n", "b.yaml": "model: {name: other}\n"},
            "names another model",
        ),
        ({"a.yaml": "agents: [{name: b, spec: missing.yaml}]\n"}, "missing.yaml"),
    ],
    ids=["cycle", "self", "too-deep", "climbs-out", "other-model", "missing"],
)
def test_bad_sub_agent_specs_are_refused_before_anything_starts(
    tmp_path: Path, specs: dict[str, str], message: str
) -> None:
    """A child spec naming a parent, nesting too deep, escaping or on another model is a SpecError."""
    for name, body in specs.items():
        model = "" if "model:" in body else MODEL
        text = body.replace(
            "model: {name: other}\n", "model: {url: 'http://127.0.0.1:9/v1', name: other}\n"
        )
        (tmp_path / name).write_text(f"prompt: unused\n{model}{text}")
    with pytest.raises(SpecError, match=message):
        load_spec(tmp_path / "a.yaml").resolve()


def test_a_spec_splits_its_budget_with_a_child(tmp_path: Path) -> None:
    """``budget: {steps: 2, tool_calls: 1}`` in a spec's ``agents`` entry is that split; a
    split of 0 steps is refused when the spec is read."""
    write_specs(
        tmp_path,
        {
            "parent.yaml": "agents:\n  - {name: h, spec: h.yaml, budget: {steps: 2, tool_calls: 1}}\n",
            "zero.yaml": "agents:\n  - {name: h, spec: h.yaml, budget: {steps: 0}}\n",
            "h.yaml": "",
        },
    )
    agent = (
        load_spec(tmp_path / "parent.yaml")
        .resolve()
        .agent(
            model=FunctionModel(lambda r: Message.user("x")),
            clock=SteppingClock(START),
            ids=CountingIds(),
            trace=tmp_path / "t.jsonl",
        )
    )
    with agent:
        tool = agent.tools["h"]
    assert Split(steps=2, tool_calls=1) == tool.budget  # type: ignore[attr-defined]  # an AgentTool's
    with pytest.raises(SpecError, match="steps"):
        load_spec(tmp_path / "zero.yaml")


def test_four_levels_of_spec_agents_resolve(tmp_path: Path) -> None:
    """Four levels of sub-agents below the top spec are allowed."""
    specs = {
        f"{c}.yaml": f"agents: [{{name: n, spec: {n}.yaml}}]\n"
        for c, n in zip("abcd", "bcde", strict=True)
    }
    write_specs(tmp_path, specs | {"e.yaml": ""})
    assert 4 == load_spec(tmp_path / "a.yaml").resolve().depth


def test_live_replay_replays_the_child_from_its_trace(tmp_path: Path) -> None:
    """A live replay re-runs the child's tools against the child's trace, and matches."""
    model = calls_then_answers("add", {"a": 2, "b": 3}, "c")
    with parent_of(child_agent(model), tmp_path) as parent:
        parent.run("what is 2 + 3?")
        result = parent.replay(tmp_path / "trace.jsonl", mode="live")
    assert Trace.load(tmp_path / "trace.jsonl").checkpoint().root == result.root


def test_live_replay_with_a_changed_child_tool_diverges_in_the_child(tmp_path: Path) -> None:
    """A child whose tool now answers differently makes the live replay fail, naming the child."""

    def subtract(a: int, b: int) -> int:
        """Add two integers."""
        return a - b

    model = calls_then_answers("add", {"a": 2, "b": 3}, "c")
    with parent_of(child_agent(model), tmp_path) as parent:
        parent.run("what is 2 + 3?")
    changed = child_agent(
        calls_then_answers("add", {"a": 2, "b": 3}, "c"),
        tools=[Tool.from_function(subtract, name="add"), shell],
    )
    with (
        parent_of(changed, tmp_path / "again") as parent,
        pytest.raises(ReplayDivergenceError) as raised,
    ):
        parent.replay(tmp_path / "trace.jsonl", mode="live")
    assert str(raised.value).startswith("sub-agent 'helper' (child trace trace.helper.jsonl")
    assert "-1" == raised.value.actual["body"]["result"]["content"]


def test_live_replay_of_a_trace_given_as_bytes_with_children_is_refused(tmp_path: Path) -> None:
    """Without the trace's file there are no children to replay: a clear error, not a guess."""
    model = calls_then_answers("add", {"a": 2, "b": 3}, "c")
    with parent_of(child_agent(model), tmp_path) as parent:
        parent.run("go")
        with pytest.raises(AgentError, match="needs the trace's file"):
            parent.replay((tmp_path / "trace.jsonl").read_bytes(), mode="live")
