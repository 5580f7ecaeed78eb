"""The fast event encoder: byte-equal to vocab's canonical_bytes on every event kind and content."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, JsonValue

from twinflow.agent import (
    GENESIS,
    ModelRequested,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    PolicyDecided,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCalled,
    ToolReturned,
    TraceEvent,
    encode_line,
)
from twinflow.agent._encoding import PLAIN_MODELS, event_bytes, value_bytes
from twinflow.agent._events import AgentConfig, PolicyRecord
from twinflow.vocab import (
    CallId,
    CanonicalError,
    Message,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    RunId,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
    canonical_bytes,
)

SAFE = 2**53 - 1

# Escapes, control characters, astral characters (UTF-16 order differs) and number-like text.
text = st.text(
    alphabet=st.one_of(
        st.sampled_from('"\\\b\n\x00\x1f\x7f\u2028\ue000\uffff\U0001f600:,[1.e-5'),
        st.characters(exclude_categories=("Cs",)),
    ),
    max_size=10,
)
numbers = st.one_of(
    st.integers(min_value=-SAFE, max_value=SAFE),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 1e16, 1e21, 1e-7, 0.5, 2.0**53, 10**15, -(10**15)]),
)
json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, text),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(text, children, max_size=3)
    ),
    max_leaves=8,
)
objects = st.dictionaries(text, json_values, max_size=3)
names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
call_ids = names.map(CallId)
settings = st.builds(
    ModelSettings,
    temperature=st.one_of(
        st.none(),
        st.sampled_from([0.0, 1.0, 2.0, 0.7, 1e-7, 2.0**53, 1e300]),
        st.floats(min_value=0, max_value=1e300),
    ),
    max_tokens=st.one_of(st.none(), st.integers(min_value=1, max_value=SAFE)),
    seed=st.one_of(st.none(), st.integers(min_value=-SAFE, max_value=SAFE)),
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """An assistant message with text, a structured value and a tool call, or a tool message."""
    if draw(st.booleans()):
        result = ToolResultPart(
            call_id=draw(call_ids),
            name=draw(names),
            content=draw(text),
            is_error=draw(st.booleans()),
        )
        return Message(role="tool", parts=(result,))
    return Message(
        role="assistant",
        parts=(
            TextPart(text=draw(text)),
            StructuredPart(schema_name=draw(names), value=draw(json_values)),
            ToolCallPart(id=draw(call_ids), name=draw(names), arguments=draw(objects)),
        ),
    )


def config(draw: st.DrawFn) -> AgentConfig:
    """An agent configuration with generated tool specs, schema and settings."""
    return AgentConfig(
        model=draw(text),
        system_prompt=draw(st.one_of(st.none(), text)),
        tools=(ToolSpec(name=draw(names), description=draw(text), parameters=draw(objects)),),
        policy=PolicyRecord(
            allow=(draw(names),),
            tool_budgets=draw(st.dictionaries(text, st.integers(0, SAFE), max_size=2)),
            run_budget=draw(st.one_of(st.none(), st.integers(0, SAFE))),
            approval=None,
            max_output_chars=draw(st.integers(1, SAFE)),
            include_traceback=draw(st.booleans()),
        ),
        output_schema=OutputSchema(name=draw(names), json_schema=draw(objects)),
        max_steps=draw(st.integers(1, 1000)),
        usage_limits={"requests": draw(st.one_of(st.none(), st.integers(1, SAFE)))},
        settings=draw(settings),
    )


@st.composite
def bodies(draw: st.DrawFn) -> BaseModel:
    """One event body of any kind, with generated content."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return RunStarted(
            run_id=RunId(draw(names)), config_digest=GENESIS, config=config(draw), prompt=draw(text)
        )
    if kind == 1:
        return ModelRequested(
            step=draw(st.integers(1, SAFE)),
            purpose=draw(st.sampled_from(["step", "reask"])),
            prefix_length=draw(st.integers(0, SAFE)),
            prefix_digest=GENESIS,
            new_messages=tuple(draw(st.lists(messages(), max_size=2))),
            tools_digest=GENESIS,
            output_schema_digest=draw(st.one_of(st.none(), st.just(GENESIS))),
            settings=draw(settings),
        )
    if kind == 2:
        message = draw(messages())
        if message.role != "assistant":
            message = Message.assistant(draw(text))
        usage = Usage(
            input_tokens=draw(st.integers(0, SAFE)), output_tokens=draw(st.integers(0, 9))
        )
        return ModelResponded(
            step=1, response=ModelResponse(message=message, usage=usage, model_name=draw(text))
        )
    if kind == 3:
        return PolicyDecided(
            call_id=draw(call_ids),
            tool=draw(text),
            decision="deny",
            by="approval",
            reason=draw(text),
            arguments=draw(st.one_of(st.none(), objects)),
        )
    if kind == 4:
        return ToolCalled(call_id=draw(call_ids), tool=draw(text), arguments=draw(objects))
    if kind == 5:
        result = ToolResultPart(call_id=draw(call_ids), name=draw(names), content=draw(text))
        return ToolReturned(result=result, error_type=draw(st.one_of(st.none(), text)))
    if kind == 6:
        return OutputRejected(attempt=1, emission=draw(text), error=draw(text))
    if kind == 7:
        return OutputAccepted(attempts=1, schema_name=None, value=draw(json_values))
    if kind == 8:
        return RunFinished(run_id=RunId("r"), steps=2, usage=Usage(), transcript_digest=GENESIS)
    return RunFailed(run_id=RunId("r"), steps=0, error_type=draw(text), message=draw(text))


stamps = st.datetimes(
    min_value=datetime(1, 1, 2), timezones=st.sampled_from([UTC, timezone(timedelta(hours=-3))])
)


@given(body=bodies(), at=stamps, seq=st.integers(0, SAFE))
def test_event_bytes_equal_canonical_bytes(body: BaseModel, at: datetime, seq: int) -> None:
    """On generated events of every kind the fast encoder's bytes are vocab's canonical bytes."""
    event = TraceEvent(seq=seq, prev=GENESIS, at=at, body=body)
    assert canonical_bytes(event) == event_bytes(event)
    assert canonical_bytes(body) == value_bytes(body)


@given(messages())
def test_message_bytes_equal_canonical_bytes(message: Message) -> None:
    """A message's fast bytes are its canonical bytes (the running transcript digest uses them)."""
    assert canonical_bytes(message) == value_bytes(message)


@pytest.mark.parametrize("temperature", [0.0, 1.0, 2.0, 0.7, 1e-7, 2.0**53 - 1, 2.0**53, 1e300])
def test_settings_temperature_bytes_equal_canonical_bytes(temperature: float) -> None:
    """An integral temperature prints as the integer, as canonical JSON prints it."""
    body = RunFinished(run_id=RunId("r"), steps=1, usage=Usage(), transcript_digest="")
    settings = ModelSettings(temperature=temperature)
    assert canonical_bytes(settings) == value_bytes(settings)
    assert canonical_bytes(body) == value_bytes(body)


def test_every_event_body_kind_is_a_plain_model() -> None:
    """Every body kind, and every model it nests, takes the fast path."""
    expected = {
        RunStarted,
        ModelRequested,
        ModelResponded,
        PolicyDecided,
        ToolCalled,
        ToolReturned,
        OutputRejected,
        OutputAccepted,
        RunFinished,
        RunFailed,
        AgentConfig,
        PolicyRecord,
    }
    assert expected == expected & PLAIN_MODELS


def test_a_value_with_no_canonical_form_is_refused_as_vocab_refuses_it() -> None:
    """An unsafe integer in an event is refused with vocab's error, located in the event."""
    event = TraceEvent(
        seq=0,
        prev=GENESIS,
        at=datetime(2026, 1, 1, tzinfo=UTC),
        body=RunFinished(
            run_id=RunId("r"), steps=1, usage=Usage(input_tokens=2**60), transcript_digest=""
        ),
    )
    with pytest.raises(CanonicalError, match="at /body/usage/input_tokens:"):
        encode_line(event)
