"""Composed encodings: the bytes the loop puts together from members are the whole encodings."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import (
    BaseModel,
    Field,
    PlainSerializer,
    computed_field,
    field_serializer,
    model_serializer,
)

from twinflow.agent import (
    Agent,
    Approve,
    FunctionModel,
    ModelRequested,
    ModelResponded,
    Modify,
    OutputAccepted,
    Policy,
    PolicyDecided,
    RunFinished,
    Tool,
    ToolCalled,
    ToolReturned,
    Trace,
)
from twinflow.agent._encode import (
    _accepted,
    _called,
    _composed_message,
    _decided,
    _returned,
    body_bytes,
    layout,
    message_bytes,
    responded_bytes,
)
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import CanonicalError, MemoryTraceSink
from twinflow.vocab import (
    CallId,
    MediaPart,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes

# Every code point, lone surrogates included (they have no canonical form: both sides refuse).
_TEXT = st.text(st.characters(codec=None, categories=None), max_size=12)
# Arguments refuse lone surrogates when built; keys outside the BMP sort differently in UTF-16.
_JSON_TEXT = st.text(st.characters(codec="utf-8"), max_size=8)
_KEYS = st.text(st.characters(codec="utf-8"), max_size=4) | st.sampled_from(
    ["a", "\U0001f600", "\uff61", "Z", "_", ""]
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
_ARGUMENTS = st.dictionaries(_KEYS, _JSON, max_size=4)


def _outcome(encode: Callable[[], bytes]) -> bytes | str:
    """The bytes, or the refusal's type and message."""
    try:
        return encode()
    except CanonicalError as exc:
        return f"{type(exc).__name__}: {exc}"


def _same(expected: BaseModel, encode: Callable[[], bytes]) -> None:
    assert _outcome(lambda: canonical_bytes(expected)) == _outcome(encode)


@st.composite
def _calls(draw: st.DrawFn) -> ToolCallPart:
    return ToolCallPart(
        id=CallId(draw(_TEXT.filter(lambda t: t.strip()))),
        name=draw(_TEXT.filter(lambda t: t.strip())),
        arguments=draw(_ARGUMENTS),
    )


@st.composite
def _results(draw: st.DrawFn) -> ToolResultPart:
    return ToolResultPart(
        call_id=CallId(draw(_TEXT.filter(lambda t: t.strip()))),
        name=draw(_TEXT.filter(lambda t: t.strip())),
        content=draw(_TEXT),
        is_error=draw(st.booleans()),
    )


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(_TEXT, max_size=2),
    calls=st.lists(_calls(), max_size=2),
    results=st.lists(_results(), min_size=1, max_size=2),
    role=st.sampled_from(["system", "user", "assistant"]),
)
def test_composed_messages_are_the_whole_message_encodings(
    texts: list[str], calls: list[ToolCallPart], results: list[ToolResultPart], role: str
) -> None:
    """A message of text, tool calls or text results composes to its whole encoding, and one
    with no canonical form is refused with the whole encoding's error."""
    texted = Message(role=role, parts=tuple(TextPart(text=t) for t in texts))  # type: ignore[arg-type]  # drawn from the roles
    calling = Message(role="assistant", parts=(*texted.parts, *calls))
    answering = Message(role="tool", parts=tuple(results))
    for message in (texted, calling, answering):
        _same(message, lambda message=message: message_bytes(message))  # type: ignore[misc]  # bound per loop


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    call=_calls(),
    result=_results(),
    words=st.tuples(_TEXT, _TEXT),
    modified=st.none() | _ARGUMENTS,
    truncated=st.integers(min_value=0, max_value=2**60),
    tokens=st.tuples(st.integers(min_value=0, max_value=2**60), st.integers(min_value=0)),
    step=st.integers(min_value=1, max_value=2**60),
)
def test_composed_events_are_the_whole_event_encodings(
    call: ToolCallPart,
    result: ToolResultPart,
    words: tuple[str, str],
    modified: dict[str, Any] | None,
    truncated: int,
    tokens: tuple[int, int],
    step: int,
) -> None:
    """The events a tool call writes and a model reply's event compose to their whole
    encodings, with any strings, arguments and counts; those with none are refused alike."""
    reason, model_name = words
    bodies: list[BaseModel] = [
        PolicyDecided(
            call_id=call.id,
            tool=call.name,
            decision="allow",
            by="approval",
            reason=reason,
            arguments=modified,
        ),
        PolicyDecided(call_id=call.id, tool=call.name, decision="deny", by="policy", reason=reason),
        ToolCalled(call_id=call.id, tool=call.name, arguments=call.arguments),
        ToolReturned(result=result, error_type=reason or None, truncated_chars=truncated),
        OutputAccepted(attempts=1, schema_name=None, value=reason),
        OutputAccepted(attempts=step, schema_name=model_name, value=call.arguments),
    ]
    for body in bodies:
        _same(body, lambda body=body: body_bytes(body))  # type: ignore[misc]  # bound per loop
    response = ModelResponse(
        message=Message(role="assistant", parts=(TextPart(text=reason), call)),
        usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1]),
        finish_reason="tool_calls",
        model_name=model_name,
    )
    responded = ModelResponded(step=step, response=response)

    def composed() -> bytes:
        # As the agent does: a message with no canonical form, or None, leaves it to the whole
        # encoding, whose error names the member.
        try:
            encoded = responded_bytes(responded, message_bytes(response.message))
        except CanonicalError:
            encoded = None
        return canonical_bytes(responded) if encoded is None else encoded

    _same(responded, composed)


def test_the_common_shapes_are_composed() -> None:
    """A text message, a tool call's reply, its results and the reply's event are composed (not
    left to the whole encoding), and equal it."""
    call = ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 1, "b": [0.5, None]})
    result = ToolResultPart(call_id=CallId("c1"), name="add", content="1.5", is_error=True)
    messages = [
        Message.user("hi \U0001f600"),
        Message(role="assistant", parts=(TextPart(text="calling"), call)),
        Message(role="tool", parts=(result,)),
    ]
    for message in messages:
        assert canonical_bytes(message) == _composed_message(message)
    response = ModelResponse(message=messages[1], finish_reason="tool_calls", model_name="m")
    responded = ModelResponded(step=3, response=response)
    assert canonical_bytes(responded) == responded_bytes(responded, canonical_bytes(messages[1]))
    for compose, body in [
        (
            _decided,
            PolicyDecided(call_id=call.id, tool="add", decision="allow", by="policy", reason="ok"),
        ),
        (_called, ToolCalled(call_id=call.id, tool="add", arguments=call.arguments)),
        (_returned, ToolReturned(result=result, error_type="ValueError", truncated_chars=4)),
        (_accepted, OutputAccepted(attempts=2, schema_name="T", value={"total": 1.0})),
    ]:
        assert canonical_bytes(body) == compose(body)


class _Response(ModelResponse):
    """A response type of an adapter's own (encoded as pydantic decides)."""


class _Message(Message):
    """A message subclass."""


def test_values_of_other_shapes_take_the_whole_encoding() -> None:
    """Other part kinds, results with content parts and subclasses are encoded whole."""
    image = MediaPart(media_type="image/png", uri="https://example.test/a.png")
    messages = [
        Message(role="assistant", parts=(ReasoningPart(text="hm"), TextPart(text="x"))),
        Message(role="assistant", parts=(StructuredPart(schema_name="T", value={"n": 1.5}),)),
        Message(
            role="tool",
            parts=(ToolResultPart(call_id=CallId("c1"), name="see", content="", parts=(image,)),),
        ),
        _Message(role="user", parts=(TextPart(text="sub"),)),
    ]
    for message in messages:
        assert canonical_bytes(message) == message_bytes(message)
    result = messages[2].parts[0]
    assert isinstance(result, ToolResultPart)
    returned = ToolReturned(result=result)
    assert canonical_bytes(returned) == body_bytes(returned)
    sub = _Response(message=Message.assistant("hi"))
    responded = ModelResponded(step=1, response=sub)
    assert None is responded_bytes(responded, message_bytes(sub.message))


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


def test_assembled_values_equal_the_validated_ones() -> None:
    """The events an observer is shown, and the run's result, equal the values validation
    builds from the same data: nothing is missing from a value the loop assembles."""
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
    """The settings' bytes kept by the agent are not used for settings replaced since: every
    request records the settings it was sent with, as its fresh encoding."""
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


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic warns of the int it writes
@pytest.mark.parametrize("flag", [0, 1, 2])
def test_a_result_flag_that_is_not_a_bool_takes_the_whole_encoding(flag: int) -> None:
    """A result built without validation whose ``is_error`` is an int is written as pydantic
    writes it (the int), not as a boolean or an index error."""
    result = ToolResultPart.model_construct(
        call_id=CallId("c1"),
        name="t",
        content="x",
        is_error=flag,  # type: ignore[arg-type]  # what validation would refuse
    )
    message = Message.model_construct(role="tool", parts=(result,))
    assert canonical_bytes(message) == message_bytes(message)
    returned = ToolReturned.model_construct(result=result, error_type=None, truncated_chars=0)
    assert canonical_bytes(returned) == body_bytes(returned)


class _Excluded(BaseModel):
    left_out: int = Field(default=0, exclude=True)


class _ExcludedIf(BaseModel):
    left_out: int = Field(default=0, exclude_if=lambda value: not value)


class _Computed(BaseModel):
    a: int = 0

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form
    @property
    def twice(self) -> int:
        return 2 * self.a


class _FieldSerialized(BaseModel):
    a: int = 0

    @field_serializer("a")
    def _a(self, value: int) -> str:
        return str(value)


class _Annotated(BaseModel):
    a: Annotated[int, PlainSerializer(str)] = 0


class _ModelSerialized(BaseModel):
    a: int = 0

    @model_serializer
    def _all(self) -> dict[str, int]:
        return {"b": self.a}


class _Aliased(BaseModel):
    a: int = Field(default=0, serialization_alias="b")


@pytest.mark.parametrize(
    "cls",
    [_Excluded, _ExcludedIf, _Computed, _FieldSerialized, _Annotated, _ModelSerialized, _Aliased],
)
def test_a_type_whose_dump_is_not_its_fields_has_no_layout(cls: type[BaseModel]) -> None:
    """A field left out of the dump (and not named in ``without``), a serializer, a computed
    field or an alias makes ``layout`` refuse the type, so its template cannot silently differ."""
    with pytest.raises(TypeError):
        layout(cls)


class _PartlyExcluded(_ExcludedIf):
    a: int = 0


def test_a_field_left_out_and_named_in_without_is_laid_out() -> None:
    """A field left out of the dump is accepted when the caller names it in ``without``."""
    assert b'{"a":%(a)s}' == layout(_PartlyExcluded, without=frozenset({"left_out"}))
