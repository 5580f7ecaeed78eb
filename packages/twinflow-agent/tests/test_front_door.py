"""The front door: an agent with the real clock and ids, a trace path, replay, and closing."""

from __future__ import annotations

from pathlib import Path

from twinflow.agent import Agent, FunctionModel, Policy, Trace
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _script(request: ModelRequest) -> Message:
    """Call ``add`` once, then answer with its result."""
    results = [m for m in request.transcript.messages if m.role == "tool"]
    if not results:
        call = ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 2, "b": 3})
        return Message(role="assistant", parts=(call,))
    return Message.assistant(results[0].tool_results[0].content)


class _Closable(FunctionModel):
    """A scripted model that counts its closes."""

    __slots__ = ("closed",)

    def __init__(self) -> None:
        super().__init__(_script)
        self.closed = 0

    def close(self) -> None:
        """Count the close."""
        self.closed += 1


def test_a_trace_path_is_written_and_named_by_the_result(tmp_path: Path) -> None:
    """``trace=`` a path writes a trace file there (its folder made); the result names it."""
    path = tmp_path / "runs" / "trace.jsonl"
    with Agent(
        FunctionModel(_script), tools=[add], policy=Policy(allow=["add"]), trace=str(path)
    ) as agent:
        result = agent.run("Add 2 and 3.")
    assert (str(path), "5") == (result.trace_path, result.output)
    assert "run_finished" == Trace.load(path).kinds[-1]


def test_an_in_memory_run_has_no_trace_path() -> None:
    """A run written to a memory sink has no trace path."""
    with Agent(FunctionModel(_script), tools=[add], policy=Policy(allow=["add"])) as agent:
        assert None is agent.run("Add 2 and 3.").trace_path
        assert isinstance(agent.writer.sink, MemoryTraceSink)


def test_an_agent_replays_its_own_trace(tmp_path: Path) -> None:
    """`Agent.replay` re-runs the agent's configuration against the trace it wrote, in both modes."""
    path = tmp_path / "trace.jsonl"
    with Agent(
        FunctionModel(_script), tools=[add], policy=Policy(allow=["add"]), trace=path
    ) as agent:
        result = agent.run("Add 2 and 3.")
        assert result.trace_path is not None
        recorded = agent.replay(result.trace_path)
        live = agent.replay(result.trace_path, mode="live")
    expected = (result.head.root, result.head.root, result.head.size)
    assert expected == (recorded.root, live.root, recorded.events)


def test_a_model_passed_in_is_not_closed_by_the_agent() -> None:
    """The agent closes only a model it opened itself: one passed in is the caller's."""
    model = _Closable()
    with Agent(model, tools=[add], policy=Policy(allow=["add"])) as agent:
        agent.run("Add 2 and 3.")
    assert 0 == model.closed
