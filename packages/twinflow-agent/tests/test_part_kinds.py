"""A run names its extension part kinds: recorded in run_started, held to, replayed, read back."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pytest
from agent_testkit import replaying_agent

from twinflow.agent import (
    Agent,
    AgentConfigError,
    FunctionModel,
    ModelResponded,
    Policy,
    RunError,
    RunFailed,
    RunStarted,
    Trace,
    replay,
)
from twinflow.agent._replay import ReplayPorts
from twinflow.agent._trace import encode_event
from twinflow.kernel import CountingIds, ReplayDivergenceError, SteppingClock
from twinflow.models._openai_wire import to_openai_messages
from twinflow.trace import FileTraceSink, MemoryTraceSink
from twinflow.vocab import (
    CallId,
    ExtensionPart,
    GenericPart,
    MediaPart,
    Message,
    ModelRequest,
    ReasoningPart,
    ResourceLinkPart,
    TextPart,
    ToolCallPart,
)
from twinflow.vocab import value_bytes as canonical_bytes


class Citation(ExtensionPart):
    """A plugin's kind."""

    kind: Literal["acme.citation"] = "acme.citation"
    source: str

    def fallback(self) -> str:
        """The source in brackets."""
        return f"[{self.source}]"


def cite(request: ModelRequest) -> Message:
    """Answer with a text and a citation."""
    return Message(role="assistant", parts=(TextPart(text="yes"), Citation(source="doc")))


def agent(sink: MemoryTraceSink | FileTraceSink, **kwargs: Any) -> Agent[Any]:
    """An agent answering with `cite`, on fixed ports."""
    return Agent(
        kwargs.pop("model", FunctionModel(cite)),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        trace=sink,
        **kwargs,
    )


def test_the_declared_kinds_are_recorded_in_run_started_sorted_by_kind() -> None:
    """Kind and class path; vocab's own kinds under their public module."""
    sink = MemoryTraceSink()
    agent(sink, part_kinds=[ResourceLinkPart, Citation]).run("q")
    started = Trace.load(bytes(sink.data)).events[0].body
    assert isinstance(started, RunStarted)
    config = started.config
    expected = [
        ("acme.citation", f"{__name__}:Citation"),
        ("resource_link", "twinflow.vocab:ResourceLinkPart"),
    ]
    assert expected == [(k.kind, k.type) for k in config.part_kinds]


def test_a_reply_with_an_undeclared_kind_fails_the_run_after_recording_it() -> None:
    """The reply is in the trace; run_failed names the kind and where to declare it."""
    sink = MemoryTraceSink()
    with pytest.raises(RunError, match=r"'acme\.citation' part, a kind this run did not") as caught:
        agent(sink).run("q")
    assert "invalid_reply" == caught.value.reason
    events = Trace.load(bytes(sink.data)).events
    assert ["run_started", "model_requested", "model_responded", "run_failed"] == [
        e.body.kind for e in events
    ]
    failed = events[-1].body
    assert isinstance(failed, RunFailed)
    assert "InvalidModelReply" == failed.error_type


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        ([str], "is not an extension part class"),
        ([ExtensionPart], "is not an extension part class"),
        ([GenericPart], "is not an extension part class"),
        ([Citation, Citation], "declared twice"),
    ],
)
def test_part_kinds_take_extension_classes_each_once(kinds: list[Any], message: str) -> None:
    """Anything else is an AgentConfigError before a run starts."""
    with pytest.raises(AgentConfigError, match=message):
        agent(MemoryTraceSink(), part_kinds=kinds)


def test_a_run_with_plugin_parts_replays_and_a_missing_declaration_diverges() -> None:
    """Replay matches every line with the kinds declared; without them, run_started differs."""
    sink = MemoryTraceSink()
    agent(sink, part_kinds=[Citation]).run("q")
    trace = Trace.load(bytes(sink.data))

    def build(kinds: list[type[ExtensionPart]]) -> Any:
        def make(ports: ReplayPorts) -> Agent[Any]:
            return replaying_agent(ports, part_kinds=kinds)

        return make

    assert len(trace.events) == replay(trace, build([Citation])).events
    with pytest.raises(ReplayDivergenceError) as caught:
        replay(trace, build([]))
    assert (0, "/body/config/part_kinds") == (caught.value.seq, caught.value.difference.pointer)


def test_trace_load_keeps_an_unknown_kind_byte_exact() -> None:
    """Typed on read as a GenericPart; its event encodes to exactly the line's event bytes."""
    sink = MemoryTraceSink()
    agent(sink, part_kinds=[Citation]).run("q")
    data = bytes(sink.data)
    trace = Trace.load(data)
    responded = trace.events[2].body
    assert isinstance(responded, ModelResponded)
    part = responded.response.message.parts[1]
    assert isinstance(part, GenericPart)
    assert ("acme.citation", {"source": "doc"}) == (part.kind, part.fields)
    assert [bytes(event) for event in trace.encoded] == [canonical_bytes(e) for e in trace.events]
    assert data == b"".join(encode_event(e)[0] for e in trace.events)


def test_a_trace_without_extension_kinds_keeps_the_bytes_it_had_before_they_existed() -> None:
    """A run with tools, reasoning and media: sha256 of its whole trace, pinned (format 1)."""

    def reply(request: ModelRequest) -> Message:
        if not any(m.role == "tool" for m in request.transcript.messages):
            call = ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 2, "b": 3})
            return Message(role="assistant", parts=(ReasoningPart(text="think"), call))
        media = MediaPart(media_type="image/png", uri="https://example.invalid/a.png")
        return Message(role="assistant", parts=(TextPart(text="5"), media))

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    sink = MemoryTraceSink()
    agent(
        sink,
        model=FunctionModel(reply),
        tools=[add],
        policy=Policy(allow=frozenset({"add"})),
        system="be brief",
    ).run("add 2 and 3")
    expected = "745a2c0c7758acad9c7c1d04c5f012effe87823b7381e88c3ee905afc5f669b0"
    assert expected == hashlib.sha256(bytes(sink.data)).hexdigest()


def test_a_fork_types_recorded_plugin_parts_so_the_wire_sends_their_fallback(
    tmp_path: Path,
) -> None:
    """Step 1 is served from the parent's trace; the live model at step 2 sees a Citation."""

    def two_steps(request: ModelRequest) -> Message:
        if not any(m.role == "tool" for m in request.transcript.messages):
            call = ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 2, "b": 3})
            return Message(role="assistant", parts=(Citation(source="doc"), call))
        return Message.assistant("5")

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    seen: list[Any] = []

    def live(request: ModelRequest) -> Message:
        seen.append(to_openai_messages(request.transcript)[1]["content"])
        return Message.assistant("5")

    common: dict[str, Any] = {
        "tools": [add],
        "policy": Policy(allow=frozenset({"add"})),
        "part_kinds": [Citation],
    }
    parent = tmp_path / "parent.jsonl"
    with agent(FileTraceSink(parent), model=FunctionModel(two_steps), **common) as first:
        first.run("q")
    with agent(
        FileTraceSink(tmp_path / "fork.jsonl"), model=FunctionModel(live), **common
    ) as second:
        assert "5" == second.fork(parent, at_step=2).output
    assert ["[doc]"] == seen


def test_a_recorded_part_that_no_longer_fits_its_class_fails_the_run_in_one_line() -> None:
    """The plugin's fields changed since the run: the replayed reply is refused, naming why."""

    class Strict(ExtensionPart):
        kind: Literal["acme.citation"] = "acme.citation"
        source: int

    sink = MemoryTraceSink()
    agent(sink, part_kinds=[Citation]).run("q")
    trace = Trace.load(bytes(sink.data))
    with pytest.raises(ReplayDivergenceError):
        replay(
            trace,
            lambda ports: replaying_agent(ports, part_kinds=[Strict]),
        )
    refused = MemoryTraceSink()
    replies = [trace.events[2].body.response]  # type: ignore[union-attr]  # the third event is model_responded
    with pytest.raises(RunError) as caught:
        agent(refused, model=FunctionModel(lambda request: replies.pop()), part_kinds=[Strict]).run(
            "q"
        )
    assert "invalid_reply" == caught.value.reason
    assert "is not a valid" in str(caught.value) and "\n" not in str(caught.value)
