"""Verified replay: the same agent code re-run against its recorded trace, event by event."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

import twinflow.agent._replay
import twinflow.agent._resume
import twinflow.agent._trace
from twinflow.agent import (
    Agent,
    AgentConfigError,
    AgentError,
    FunctionModel,
    ModelResponded,
    Policy,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCalled,
    Trace,
    replay,
)
from twinflow.agent._compare import ComparingSink, ComparingWriter
from twinflow.agent._events import GENESIS, TraceEvent
from twinflow.agent._replay import REPLAY_KINDS, ReplayMode, ReplayPorts
from twinflow.agent._trace import TraceWriter
from twinflow.kernel import CountingIds, NondeterminismError, ReplayDivergenceError, SteppingClock
from twinflow.trace import Checkpoint, MemoryTraceSink, MerkleTree, TraceFormatError
from twinflow.trace._format import DEFAULT_MAX_LINE_BYTES
from twinflow.trace._merkle import leaf_hash
from twinflow.vocab import (
    CallId,
    Message,
    ModelRequest,
    ModelResponse,
    RunId,
    StructuredPart,
    ToolCallPart,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes

START = datetime(2026, 1, 1, tzinfo=UTC)


class Total(BaseModel):
    """The scripted run's answer."""

    total: int
    """The sum."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def add_changed(a: int, b: int) -> int:
    """Add two integers."""
    # Same name, signature and docstring as `add` (so the same spec): only the code changed.
    return a + b + 1


def add_reading_the_clock(a: int, b: int) -> int:
    """Add two integers."""
    # Reads the wall clock behind the ports' back.
    # Through a container and a computed name, as code hiding from the static gate would do
    # (values built at run time are the runtime guard's to catch; docs/adr/0004).
    modules, name = [time], "time"
    getattr(modules[0], name)()
    return a + b


def script(request: ModelRequest) -> Message:
    """Call `add` twice, then answer with the last tool result as structured output."""
    results = [m for m in request.transcript.messages if m.role == "tool"]
    if len(results) < 2:
        call = ToolCallPart(id=CallId(f"c{len(results)}"), name="add", arguments={"a": 2, "b": 3})
        return Message(role="assistant", parts=(call,))
    total = int(results[-1].tool_results[0].content)
    return Message(
        role="assistant", parts=(StructuredPart(schema_name="Total", value={"total": total}),)
    )


def agent_with(tool: Callable[..., Any], ports: ReplayPorts | None = None) -> Agent[Total]:
    """The agent under test, with replaying ports or with fresh deterministic ones."""
    if ports is None:
        return Agent(
            FunctionModel(script),
            clock=SteppingClock(START, timedelta(milliseconds=5)),
            ids=CountingIds(),
            tools=[tool],
            policy=Policy(allow=frozenset({tool.__name__})),
            output_type=Total,
            trace=MemoryTraceSink(),
        )
    return Agent(
        ports.model,
        clock=ports.clock,
        ids=ports.ids,
        tools=[tool],
        policy=Policy(allow=frozenset({tool.__name__})),
        output_type=Total,
        trace=ports.trace,
        model_label=ports.model_label,
        tool_results=ports.tool_results,
    )


def record(tool: Callable[..., Any] = add) -> Trace:
    """Run the scripted agent once and read its trace back."""
    agent = agent_with(tool)
    agent.run("add 2 and 3, twice")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    return Trace.load(sink.data)


def renamed(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """The same function under the tool name the recording used."""
    function.__name__ = name
    return function


def test_replay_of_an_unchanged_agent_matches_every_event_in_both_modes() -> None:
    """Recorded and live replays of the same code reproduce the trace exactly."""
    trace = record()
    for mode in ("recorded", "live"):
        result = replay(trace, lambda ports: agent_with(add, ports), mode=mode)
        assert (trace.size, trace.checkpoint().root) == (result.events, result.root)


def test_a_changed_tool_diverges_in_live_mode_naming_the_event_and_the_difference() -> None:
    """Live mode runs the tool again, so a changed tool is the first difference, with a diff."""
    trace = record()
    changed = renamed(add_changed, "add")
    with pytest.raises(ReplayDivergenceError) as caught:
        replay(trace, lambda ports: agent_with(changed, ports), mode="live")
    error = caught.value
    assert "tool_returned" == error.expected["body"]["kind"]
    assert error.difference is not None
    assert "/body/result/content" == error.difference.pointer
    assert ("5", "6") == (error.difference.expected, error.difference.actual)
    assert f"event {error.seq} differs" in str(error)


def test_a_changed_tool_still_replays_in_recorded_mode() -> None:
    """Recorded mode serves results from the trace, so the tool's code does not matter."""
    trace = record()
    changed = renamed(add_changed, "add")
    result = replay(trace, lambda ports: agent_with(changed, ports), mode="recorded")
    assert trace.size == result.events


def test_a_tool_reaching_the_clock_fails_live_replay_with_nondeterminism_error() -> None:
    """`getattr(time, "time")()` in a tool is caught by the runtime guard during replay."""
    trace = record(renamed(add_reading_the_clock, "add"))
    clocky = renamed(add_reading_the_clock, "add")
    with pytest.raises(NondeterminismError) as caught:
        replay(trace, lambda ports: agent_with(clocky, ports), mode="live")
    assert "time.time" == caught.value.entry_point


def test_a_changed_configuration_diverges_at_the_first_event() -> None:
    """Another policy is another agent: run_started differs, and replay says so at seq 0."""
    trace = record()

    def build(ports: ReplayPorts) -> Agent[Total]:
        return Agent(
            ports.model,
            clock=ports.clock,
            ids=ports.ids,
            tools=[add],
            policy=Policy(allow=frozenset({"add"}), max_tool_calls=5),
            output_type=Total,
            trace=ports.trace,
            model_label=ports.model_label,
            tool_results=ports.tool_results,
        )

    with pytest.raises(ReplayDivergenceError) as caught:
        replay(trace, build)
    assert 0 == caught.value.seq
    assert caught.value.difference is not None
    assert caught.value.difference.pointer.startswith("/body/config")


def test_a_trace_cut_short_reports_the_extra_event_the_re_run_wrote() -> None:
    """A re-run that goes past the end of the record is a divergence at that sequence number."""
    full = record()
    lines = b"".join(
        line + b"\n" for line in MemoryTraceSinkBytes.of(full).splitlines()[: full.size - 3]
    )
    cut = Trace.load(lines)
    with pytest.raises(ReplayDivergenceError) as caught:
        replay(cut, lambda ports: agent_with(add, ports))
    assert cut.size == caught.value.seq
    assert caught.value.expected is None


def test_recorded_events_the_re_run_never_produced_are_a_divergence() -> None:
    """A re-run that stops early leaves recorded events unconsumed, reported by number."""
    agent = agent_with(add)
    agent.run("add 2 and 3, twice")
    written = agent.writer.size
    # One event more than the agent's code writes, chained like the rest.
    agent.writer.append(
        START, RunFailed(run_id=RunId("extra"), steps=0, error_type="X", message="x")
    )
    agent.writer.end_step()
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    with pytest.raises(ReplayDivergenceError, match=f"stopped after {written} events") as caught:
        replay(Trace.load(sink.data), lambda ports: agent_with(add, ports))
    assert (written, None) == (caught.value.seq, caught.value.actual)


class MemoryTraceSinkBytes:
    """Re-encodes a loaded trace to its file bytes."""

    @staticmethod
    def of(trace: Trace) -> bytes:
        """The trace's bytes, line by line, as the writer wrote them."""
        from twinflow.agent._trace import encode_event

        return b"".join(encode_event(event)[0] for event in trace.events)


@pytest.mark.parametrize(
    ("mode", "missing"),
    [("recorded", "ports.tool_results, ports.model_label"), ("live", "ports.model_label")],
)
def test_an_agent_built_without_every_replaying_port_is_refused(
    mode: ReplayMode, missing: str
) -> None:
    """A factory that drops a port would not replay (tools would run, the label would differ)."""
    trace = record()

    def build(ports: ReplayPorts) -> Agent[Total]:
        # The agent gets other values than the harness's for the two ports it may forget.
        return agent_with(add, dataclasses.replace(ports, model_label="Mine", tool_results=None))

    with pytest.raises(AgentConfigError) as caught:
        replay(trace, build, mode=mode)
    assert (
        f"the agent the replay factory built does not use the replaying {missing}; pass each "
        "to Agent under its own name (see ReplayPorts)"
    ) == str(caught.value)


def test_a_loaded_traces_kinds_are_its_typed_events_kinds() -> None:
    """`Trace.kinds`, noted at load without keeping typed events, is each event's body kind."""
    trace = record()
    assert [event.body.kind for event in trace.events] == list(trace.kinds)
    assert "run_started" == trace.kinds[0] and "run_finished" == trace.kinds[-1]


def _lines_without(trace: Trace, drop: Callable[[int], bool]) -> Trace:
    """The trace's events, some dropped, re-chained by a fresh writer."""
    writer = TraceWriter(MemoryTraceSink())
    for seq, event in enumerate(trace.events):
        if not drop(seq):
            writer.append(event.at, event.body)
    sink = writer.sink
    assert isinstance(sink, MemoryTraceSink)
    return Trace.load(sink.data)


def test_a_trace_whose_run_starts_later_is_refused() -> None:
    """A trace opening with another event than run_started is refused, even when one follows."""
    trace = record()
    moved = TraceWriter(MemoryTraceSink())
    events = list(trace.events)
    for event in [events[1], events[0], *events[2:]]:
        moved.append(event.at, event.body)
    assert isinstance(moved.sink, MemoryTraceSink)
    with pytest.raises(AgentError, match="starts with run_started"):
        replay(Trace.load(moved.sink.data), lambda ports: agent_with(add, ports))
    with pytest.raises(AgentError, match="starts with run_started"):
        replay(_lines_without(trace, lambda seq: seq == 0), lambda ports: agent_with(add, ports))


def test_a_trace_of_two_runs_is_refused() -> None:
    """A second run_started anywhere in the trace is refused before anything runs."""
    trace = record()
    twice = TraceWriter(MemoryTraceSink())
    for event in [*trace.events, *trace.events]:
        twice.append(event.at, event.body)
    assert isinstance(twice.sink, MemoryTraceSink)
    with pytest.raises(AgentError, match="several runs"):
        replay(Trace.load(twice.sink.data), lambda ports: agent_with(add, ports))


def test_a_run_after_its_configuration_is_replaced_records_the_new_one() -> None:
    """The configuration bytes kept from construction are not used for another configuration:
    each run_started is its event's encoding."""
    agent = agent_with(add)
    agent.config = agent.config.model_copy(update={"model": "Replaced"})
    agent.run("add 2 and 3, twice")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data)
    started = trace.events[0].body
    assert isinstance(started, RunStarted)
    assert "Replaced" == started.config.model
    assert [canonical_bytes(e) for e in trace.events] == list(trace.encoded)


def test_spliced_requests_and_the_transcript_digest_are_fresh_encodings() -> None:
    """The model_requested events built from each message's kept bytes, and run_finished's
    transcript digest, equal the fresh encodings of the values they record."""
    agent = agent_with(add)
    result = agent.run("add 2 and 3, twice")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data)
    finished = trace.events[-1].body
    assert isinstance(finished, RunFinished)
    assert digest(result.transcript) == finished.transcript_digest
    requested = [i for i, kind in enumerate(trace.kinds) if kind == "model_requested"]
    assert 3 == len(requested)
    assert [canonical_bytes(trace.events[i]) for i in requested] == [
        trace.encoded[i] for i in requested
    ]


def test_recorded_mode_serves_only_results_of_calls_that_ran() -> None:
    """A denied call's result (no tool_called before it) is not served to a call that ran: the
    recorded replay of a reply mixing a denied and an allowed call matches."""
    replies = iter(
        [
            Message(
                role="assistant",
                parts=(
                    ToolCallPart(id=CallId("d1"), name="nope", arguments={}),
                    ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 2, "b": 3}),
                ),
            ),
            Message(
                role="assistant", parts=(StructuredPart(schema_name="Total", value={"total": 5}),)
            ),
        ]
    )

    def build(ports: ReplayPorts | None = None) -> Agent[Total]:
        if ports is None:
            return Agent(
                FunctionModel(lambda request: next(replies)),
                clock=SteppingClock(START, timedelta(milliseconds=5)),
                ids=CountingIds(),
                tools=[add],
                policy=Policy(allow=frozenset({"add"})),
                output_type=Total,
                trace=MemoryTraceSink(),
            )
        return agent_with(add, ports)

    agent = build()
    agent.run("add 2 and 3")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data)
    assert ["tool_returned", "policy_decided"] == [
        trace.kinds[i] for i in (4, 5)
    ]  # the denial's result comes before the allowed call's decision
    result = replay(trace, build, mode="recorded")
    assert (trace.size, trace.checkpoint().root) == (result.events, result.root)


def test_typed_events_read_long_numbers_as_the_canonical_parse_does() -> None:
    """An event typed on read holds the values the canonical parse gives: 2**53 as a double."""
    writer = TraceWriter(MemoryTraceSink())
    call = ToolCallPart(
        id=CallId("c1"), name="add", arguments={"a": 2.0**53, "b": 1.5, "c": 123456789012345}
    )
    response = ModelResponse(message=Message(role="assistant", parts=(call,)))
    writer.append(START, ModelResponded(step=1, response=response))
    assert isinstance(writer.sink, MemoryTraceSink)
    trace = Trace.load(writer.sink.data)
    body = trace.events[0].body
    assert isinstance(body, ModelResponded)
    part = body.response.message.parts[0]
    assert isinstance(part, ToolCallPart)
    arguments = part.arguments
    expected = {"a": (float, 2.0**53), "b": (float, 1.5), "c": (int, 123456789012345)}
    assert expected == {key: (type(value), value) for key, value in arguments.items()}


def test_a_trace_loaded_to_replay_keeps_the_events_replay_serves_from() -> None:
    """`Trace.load(keep=REPLAY_KINDS)` keeps the very values that verified for those kinds (read
    twice, the same object), types the others on read, and every event equals a plain load's."""
    plain = record()
    data = MemoryTraceSinkBytes.of(plain)
    kept = Trace.load(data, keep=REPLAY_KINDS)
    assert [k in REPLAY_KINDS for k in plain.kinds] == [
        kept.events[i] is kept.events[i] for i in range(kept.size)
    ]
    assert list(plain.events) == list(kept.events)
    assert [plain.events[i] for i in range(plain.size)] == [
        kept.events[i] for i in range(kept.size)
    ]


@pytest.mark.parametrize("mode", ["recorded", "live"])
def test_a_kept_trace_replays_and_diverges_as_a_plain_one(mode: ReplayMode) -> None:
    """A trace loaded with `REPLAY_KINDS` kept replays to the same result, and a changed tool
    diverges at the same event with the same message, events and difference."""
    plain = record()
    kept = Trace.load(MemoryTraceSinkBytes.of(plain), keep=REPLAY_KINDS)
    same = [replay(t, lambda ports: agent_with(add, ports), mode=mode) for t in (plain, kept)]
    assert same[0] == same[1]
    changed = renamed(add_changed, "add")
    errors = []
    for trace in (plain, kept):
        with pytest.raises(ReplayDivergenceError) as caught:
            replay(trace, lambda ports: agent_with(changed, ports), mode="live")
        error = caught.value
        errors.append((str(error), error.seq, error.expected, error.actual, error.difference))
    assert errors[0] == errors[1]


def test_recorded_mode_on_a_kept_trace_serves_only_results_of_calls_that_ran() -> None:
    """With the results kept typed, a denied call's result (no tool_called before it) is
    still not served to a call that ran."""
    replies = iter(
        [
            Message(
                role="assistant",
                parts=(
                    ToolCallPart(id=CallId("d1"), name="nope", arguments={}),
                    ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 2, "b": 3}),
                ),
            ),
            Message(
                role="assistant", parts=(StructuredPart(schema_name="Total", value={"total": 5}),)
            ),
        ]
    )
    agent = agent_with(add)
    agent.model = FunctionModel(lambda request: next(replies))
    agent.run("add 2 and 3")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data, keep=REPLAY_KINDS)
    assert ["tool_returned", "policy_decided"] == [trace.kinds[i] for i in (4, 5)]
    result = replay(trace, lambda ports: agent_with(add, ports), mode="recorded")
    assert (trace.size, trace.checkpoint().root) == (result.events, result.root)


def test_the_checkpoint_load_keeps_is_the_one_the_digests_make() -> None:
    """`Trace.load` keeps the checkpoint its verification walk computed; it is the one a tree
    of the digests makes, and a prefix's checkpoint is still made from the digests."""
    trace = Trace.load(MemoryTraceSinkBytes.of(record()))
    tree = MerkleTree()
    for hexdigest in trace.digests:
        tree.append_hash(leaf_hash(bytes.fromhex(hexdigest)))
    assert trace.checkpoint() == Checkpoint(
        size=trace.size, root=tree.root().hex(), head=trace.digests[-1]
    )
    assert trace.checkpoint(3) == Checkpoint(size=3, root=tree.root(3).hex(), head=trace.digests[2])


@pytest.mark.parametrize("mode", ["recorded", "live"])
def test_a_replay_frames_and_hashes_no_event_it_matches(
    mode: ReplayMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event the re-run writes as recorded takes its recorded digest: no line is framed
    (hashed) for it and no tree is grown, yet the result's root is the trace's."""
    trace = Trace.load(MemoryTraceSinkBytes.of(record()), keep=REPLAY_KINDS)
    framed: list[bytes] = []
    frame = twinflow.agent._trace._frame

    def counting(event: bytes) -> tuple[bytes, str]:
        framed.append(event)
        return frame(event)

    monkeypatch.setattr(twinflow.agent._trace, "_frame", counting)
    result = replay(trace, lambda ports: agent_with(add, ports), mode=mode)
    assert framed == []
    assert (result.events, result.root) == (trace.size, trace.checkpoint().root)
    # The first event that differs is the first framed (then the re-run's own failure, which
    # the sink ignores), and it is reported as before.
    with pytest.raises(ReplayDivergenceError) as caught:
        replay(trace, lambda ports: agent_with(renamed(add_changed, "add"), ports), mode="live")
    seq = caught.value.seq
    assert framed[0].endswith(b'"seq":%d}' % seq)
    assert framed[0] != trace.encoded[seq]


def test_a_replayed_event_too_long_for_its_line_is_refused_as_the_run_refused_it() -> None:
    """An event longer than a trace line may be is refused by the replay's writer even when a
    trace read with wider limits holds the same bytes: the original writer refused it too."""
    body = RunFailed(
        run_id=RunId("run-1"),
        steps=0,
        error_type="Boom",
        message="x" * DEFAULT_MAX_LINE_BYTES,
    )
    event = canonical_bytes(TraceEvent(seq=0, prev=GENESIS, at=START, body=body))
    sink = ComparingSink([event], [hashlib.sha256(event).hexdigest()])
    writer = ComparingWriter(sink, Trace.load(MemoryTraceSinkBytes.of(record())))
    with pytest.raises(TraceFormatError, match="a trace reader accepts"):
        writer.append(START, body)
    assert sink.written == 0


def test_a_diverged_replay_writer_has_no_checkpoint_of_the_record() -> None:
    """After the first difference the replay's writer gives no checkpoint: it would not be the
    record's."""
    trace = Trace.load(MemoryTraceSinkBytes.of(record()))
    sink = ComparingSink(list(trace.encoded), trace.digests)
    writer = ComparingWriter(sink, trace)
    body = RunFailed(run_id=RunId("run-1"), steps=0, error_type="Boom", message="no")
    with pytest.raises(ReplayDivergenceError):
        writer.append(START, body)
    with pytest.raises(ReplayDivergenceError):
        writer.checkpoint()


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"a": 1, "b": 2},
        {"call_id": "not-this-one", "note": '"body":{"arguments":{},"call_id":"nor-this"}'},
        {"nested": {"call_id": ["x", {"call_id": "y"}]}, "z": None},
    ],
)
def test_a_tool_calls_id_read_from_its_bytes_is_the_parsed_one(arguments: dict[str, Any]) -> None:
    """Recorded mode reads a ``tool_called``'s id from its bytes without parsing the event;
    arguments that hold the same names or the same text do not mislead it."""
    body = ToolCalled(call_id=CallId("c-7"), tool="add", arguments=arguments)
    event = canonical_bytes(TraceEvent(seq=3, prev=GENESIS, at=START, body=body))
    assert twinflow.agent._resume.call_id_of(event) == "c-7"
