"""The event bytes: every line a run writes is the canonical encoding of its typed event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from twinflow.agent import (
    Agent,
    Approve,
    FunctionModel,
    ModelRequested,
    Modify,
    Policy,
    RunFinished,
    Tool,
    Trace,
)
from twinflow.agent._encode import envelope_bytes, event_bytes
from twinflow.agent._errors import AgentConfigError
from twinflow.agent._events import (
    EventBody,
    ModelResponded,
    OutputAccepted,
    ReplyCost,
    SteeringReceived,
    ToolCalled,
    TraceEvent,
)
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import (
    CallId,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    TextPart,
    ToolCallPart,
    Usage,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes


def test_an_event_is_its_canonical_encoding() -> None:
    """`event_bytes` is `canonical_bytes` of the envelope: the one definition of a line's event."""
    agent = Agent(
        FunctionModel(lambda request: Message.assistant("done")),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
    )
    agent.run("hello")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data)
    assert list(trace.encoded) == [event_bytes(event) for event in trace.events]


def _look(query: str) -> str:
    """Look something up."""
    if query == "boom":
        raise RuntimeError('no "answer" \u2028 here')
    return f'{query} \U0001f600\n\t"quoted" \x01 \\ end, and more text than the cap'


def _approve(call: ToolCallPart) -> Approve | Modify:
    """Let every call run; change the arguments of ``c4``."""
    return Modify(arguments={"query": "seven \u00e9"}) if call.id == "c4" else Approve()


class _Settings(ModelSettings):
    """Settings of a subclass with a field of its own (a request writes them as ModelSettings)."""

    top_p: float | None = None


class _Tagged(Message):
    """A message subclass with a field of its own (a reply writes it as a Message)."""

    tag: str = "x"


@pytest.mark.parametrize(
    ("settings_", "message_type"),
    [
        (ModelSettings(), Message),
        (ModelSettings(temperature=0.7, seed=3), Message),
        (_Settings(temperature=0.7, top_p=0.9), Message),
        ({"temperature": 0.7}, Message),
        (ModelSettings(), _Tagged),
        (_Settings(temperature=0.7, top_p=0.9), _Tagged),
        ({"temperature": 0.7}, _Tagged),
    ],
)
def test_every_line_of_a_varied_run_is_the_whole_event_encoding(
    settings_: ModelSettings, message_type: type[Message]
) -> None:
    """A run with escapes, astral characters, denied, failing, truncated and modified calls,
    settings and replies of subclasses or a dict writes each event as its whole encoding: what
    loading re-encodes from the values, and what pydantic writes of the events the run built."""
    replies = iter(
        [
            ModelResponse(
                message=message_type(
                    role="assistant",
                    parts=(
                        TextPart(text='looking \u2028 \U0001f600 "q"'),
                        ToolCallPart(id=CallId("c1"), name="look", arguments={"query": "x"}),
                        ToolCallPart(id=CallId("c2"), name="nope", arguments={"k": [1.5, None]}),
                        ToolCallPart(id=CallId("c3"), name="look", arguments={"query": "boom"}),
                    ),
                ),
                usage=Usage(input_tokens=12, output_tokens=2**40),
                finish_reason="tool_calls",
                model_name="m \u00e9 \U0001f600",
            ),
            ModelResponse(
                message=Message(
                    role="assistant",
                    parts=(ToolCallPart(id=CallId("c4"), name="look", arguments={"query": "7"}),),
                ),
                finish_reason="tool_calls",
            ),
            ModelResponse(
                message=message_type(role="assistant", parts=(TextPart(text="done \U0001f600"),))
            ),
        ]
    )

    def reply(request: ModelRequest) -> ModelResponse:
        return next(replies)

    shown: list[BaseModel] = []

    agent = Agent(
        FunctionModel(reply),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        tools=[Tool.from_function(_look, name="look")],
        policy=Policy(allow=frozenset({"look"}), max_output_chars=20, approval=_approve),
        system="be \U0001f600 brief",
        settings=settings_,
        observer=shown.append,
    )
    result = agent.run("find \u00e9 things")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data)
    kinds = set(trace.kinds)
    assert {"policy_decided", "tool_called", "tool_returned", "run_finished"} <= kinds
    assert [canonical_bytes(event) for event in trace.events] == list(trace.encoded)
    # The bodies the run built (a subclass's values in them), encoded whole by pydantic.
    built = [body for body in shown if getattr(body, "kind", None) in kinds]
    assert [canonical_bytes(body) for body in built] == [
        canonical_bytes(event.body) for event in trace.events
    ]
    finished = trace.events[-1].body
    assert isinstance(finished, RunFinished)
    assert digest(result.transcript) == finished.transcript_digest


def test_the_values_a_run_builds_survive_a_dump_and_validation() -> None:
    """The events an observer is shown, and the run's result, equal the values validation
    builds from their dumps."""
    shown: list[BaseModel] = []
    replies = iter(
        [
            Message(
                role="assistant",
                parts=(ToolCallPart(id=CallId("c1"), name="look", arguments={"query": "x"}),),
            ),
            Message.assistant("done"),
        ]
    )
    agent = Agent(
        FunctionModel(lambda request: next(replies)),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        tools=[Tool.from_function(_look, name="look")],
        policy=Policy(allow=frozenset({"look"})),
        observer=shown.append,
    )
    result = agent.run("find")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data)
    # The observer is also shown the reply's stream chunks, of other kinds.
    events = [value for value in shown if getattr(value, "kind", None) in set(trace.kinds)]
    assert [event.body for event in trace.events] == events
    for value in [*events, result, result.usage, *result.transcript.messages]:
        again = type(value).model_validate(value.model_dump())
        assert again == value
        assert again.model_dump() == value.model_dump()


def test_requests_after_the_settings_are_replaced_record_the_new_ones() -> None:
    """Every request records the settings it was sent with, replaced ones too."""
    agent = Agent(
        FunctionModel(lambda request: Message.assistant("done")),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
    )
    agent.run("first")
    agent.settings = ModelSettings(temperature=0.25, max_tokens=9)
    agent.run("second")
    agent.settings = _Settings(temperature=0.5, top_p=0.9)
    agent.run("third")
    agent.settings = {"seed": 4}  # type: ignore[assignment]  # a dict is validated, as before
    agent.run("fourth")
    sink = agent.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data)
    requested = [e.body for e in trace.events if isinstance(e.body, ModelRequested)]
    assert [
        ModelSettings(),
        ModelSettings(temperature=0.25, max_tokens=9),
        ModelSettings(temperature=0.5),
        ModelSettings(seed=4),
    ] == [r.settings for r in requested]
    assert [canonical_bytes(event) for event in trace.events] == list(trace.encoded)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_arguments = st.dictionaries(st.text(), _json, max_size=3)
_messages = st.lists(
    st.builds(
        lambda text, cls: cls(role="user", parts=(TextPart(text=text),)),
        st.text(),
        st.sampled_from([Message, _Tagged]),
    )
    | st.builds(
        lambda call_id, name, arguments: Message(
            role="assistant",
            parts=(ToolCallPart(id=CallId(call_id), name=name, arguments=arguments),),
        ),
        st.text(min_size=1),
        st.text(min_size=1),
        _arguments,
    ),
    max_size=3,
).map(tuple)


class _Called(ToolCalled):
    """A body of an event type's subclass (written as its base: the envelope is built)."""

    note: str = "x"


_bodies = st.one_of(
    st.builds(
        lambda cls, call_id, tool, arguments: cls(
            call_id=CallId(call_id), tool=tool, arguments=arguments
        ),
        st.sampled_from([ToolCalled, _Called]),
        st.text(),
        st.text(),
        _arguments,
    ),
    st.builds(SteeringReceived, step=st.integers(0, 99), text=st.text()),
    st.builds(
        OutputAccepted,
        attempts=st.integers(1, 3),
        schema_name=st.none() | st.text(),
        value=_json,
    ),
    st.builds(
        lambda messages, settings_: ModelRequested(
            step=1,
            purpose="step",
            prefix_length=0,
            prefix_digest="0" * 64,
            new_messages=messages,
            tools_digest="1" * 64,
            output_schema_digest=None,
            settings=settings_,
        ),
        _messages,
        st.sampled_from([ModelSettings(), ModelSettings(seed=3), _Settings(top_p=0.5)]),
    ),
    st.builds(
        lambda text, answered_by, usd: ModelResponded(
            step=2,
            response=ModelResponse(message=Message.assistant(text)),
            answered_by=answered_by,
            cost=None
            if usd is None
            else ReplyCost(usd=usd, model="m", input_per_mtok=0.15, output_per_mtok=0.6, table="t"),
        ),
        st.text(),
        st.none() | st.text(),
        st.none() | st.floats(0, 1e6),
    ),
)
_at = st.datetimes(
    min_value=datetime(1, 1, 2),  # bounds; the zone comes from timezones
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(seconds=3601))]
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seq=st.integers(0, 2**40), prev=st.text(), at=_at, body=_bodies)
def test_the_writers_envelope_is_the_events_encoding(
    seq: int, prev: str, at: datetime, body: EventBody
) -> None:
    """`envelope_bytes` writes what `event_bytes` writes of the envelope it skips building."""
    typed = TraceEvent(seq=seq, prev=prev, at=at, body=body)
    assert envelope_bytes(seq, prev, at, body) == event_bytes(typed)


def test_a_bad_envelope_is_refused_as_building_it_refuses() -> None:
    """A naive clock reading, or a body that is no event, is the envelope's own error."""
    body = SteeringReceived(step=1, text="x")
    naive = datetime(2026, 1, 1)  # the point: no zone
    for at, value in [(naive, body), (datetime(2026, 1, 1, tzinfo=UTC), Message.user("x"))]:
        with pytest.raises(AgentConfigError) as built:
            TraceEvent(seq=0, prev="g", at=at, body=value)
        with pytest.raises(AgentConfigError) as enveloped:
            envelope_bytes(0, "g", at, value)  # type: ignore[arg-type]  # the point: a message is no event
        assert str(built.value) == str(enveloped.value)
