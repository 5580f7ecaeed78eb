"""Frozen conversation values: construction rules, helpers, immutability."""

import pytest
from pydantic import ValidationError

from twinflow.vocab import (
    CallId,
    InvalidValueError,
    MediaPart,
    Message,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
)


def _call(call_id: str = "c1", name: str = "add") -> ToolCallPart:
    return ToolCallPart(id=CallId(call_id), name=name, arguments={"a": 1, "b": 2})


def _result(call_id: str = "c1", name: str = "add") -> ToolResultPart:
    return ToolResultPart(call_id=CallId(call_id), name=name, content="3")


def test_helpers_build_text_messages() -> None:
    """Message.user/system/assistant build one text part with the role."""
    assert Message(role="user", parts=(TextPart(text="hi"),)) == Message.user("hi")
    expected_role, expected_text = "system", "a"
    assert expected_role == Message.system("s").role
    assert expected_text == Message.assistant("a").text


def test_text_concatenates_text_parts_only() -> None:
    """.text joins the text parts in order and skips reasoning and tool calls."""
    m = Message(
        role="assistant",
        parts=(TextPart(text="a"), ReasoningPart(text="r"), _call(), TextPart(text="b")),
    )
    expected = "ab"
    assert expected == m.text
    assert (_call(),) == m.tool_calls


def test_values_are_frozen() -> None:
    """Assigning to a field raises."""
    m = Message.user("hi")
    with pytest.raises(ValidationError):
        m.role = "system"  # type: ignore[misc]  # assigning to a frozen field, on purpose


@pytest.mark.parametrize(
    "build",
    [
        lambda: ToolCallPart(id=CallId("c1"), name="", arguments={}),
        lambda: ToolCallPart(id=CallId(""), name="f", arguments={}),
        lambda: ToolCallPart(id=CallId("c1"), name="f", arguments={"x": float("nan")}),
        lambda: ToolCallPart(id=CallId("c1"), name="f", arguments={"x": {1, 2}}),
        lambda: ToolCallPart(id=CallId("c1"), name="f", arguments={"x": 2**60}),
        lambda: StructuredPart(schema_name="S", value=float("inf")),
        lambda: MediaPart(media_type="png", uri="file:///x.png"),
        lambda: MediaPart(media_type="image/png", uri="data:image/jpeg;base64,AAAA"),
        lambda: ToolSpec(name="", description="d"),
        lambda: ToolSpec(name="two words"),
        lambda: ToolSpec(name="f", parameters={"type": "string"}),
        lambda: TextPart(text="x", extra=1),
        lambda: Message(role="user", parts=(_call(),)),
        lambda: Message(role="assistant", parts=(_result(),)),
        lambda: Message(role="tool", parts=(TextPart(text="x"),)),
        lambda: Message(role="robot", parts=()),
    ],
)
def test_invalid_values_are_refused(build: object) -> None:
    """Invalid values raise InvalidValueError (also a ValueError) at construction."""
    with pytest.raises(InvalidValueError):
        build()  # type: ignore[operator]  # calling with a bad value, on purpose


def test_refusal_names_field() -> None:
    """The refusal names the JSON pointer of the offending argument."""
    with pytest.raises(InvalidValueError, match="/arguments/x/0"):
        ToolCallPart(id=CallId("c1"), name="f", arguments={"x": [float("nan")]})


def test_tool_result_for_no_call_is_refused() -> None:
    """A transcript refuses a tool result whose call id has no earlier call."""
    with pytest.raises(InvalidValueError, match="no earlier tool call"):
        Transcript(messages=(Message(role="tool", parts=(_result(),)),))
    with pytest.raises(InvalidValueError, match="no earlier tool call"):
        Transcript().append(Message(role="tool", parts=(_result(),)))


def test_tool_result_must_come_after_its_call() -> None:
    """A result before its call is refused even if the call comes later."""
    with pytest.raises(InvalidValueError):
        Transcript(
            messages=(
                Message(role="tool", parts=(_result(),)),
                Message(role="assistant", parts=(_call(),)),
            )
        )


def test_tool_result_name_must_match_call() -> None:
    """A result naming a different tool than its call is refused."""
    t = Transcript().append(Message(role="assistant", parts=(_call(),)))
    with pytest.raises(InvalidValueError, match="was to 'add'"):
        t.append(Message(role="tool", parts=(_result(name="mul"),)))


def test_append_returns_new_transcript_equal_to_constructed() -> None:
    """append leaves the original alone and equals the transcript built in one go."""
    messages = (
        Message.user("q"),
        Message(role="assistant", parts=(_call(),)),
        Message(role="tool", parts=(_result(),)),
    )
    empty = Transcript()
    built = empty.append(*messages[:1]).append(*messages[1:])
    assert Transcript(messages=messages) == built
    expected = (0, 3)
    assert expected == (len(empty), len(built))


def test_append_refuses_non_messages() -> None:
    """append takes Message values only."""
    with pytest.raises(InvalidValueError, match="argument 0 is str"):
        Transcript().append("hello")  # type: ignore[arg-type]  # a str is not a Message, on purpose


def test_appended_transcript_keeps_checking() -> None:
    """A transcript made by append still knows earlier calls."""
    t = Transcript().append(Message(role="assistant", parts=(_call("c9"),)))
    t = t.append(Message.user("meanwhile"))
    extended = t.append(Message(role="tool", parts=(_result("c9"),)))
    assert (_result("c9"),) == extended.messages[-1].tool_results


def test_an_older_transcript_does_not_see_calls_appended_after_it() -> None:
    """Appending to an older transcript ignores calls that only a later append made."""
    base = Transcript().append(Message.user("q"))
    base.append(Message(role="assistant", parts=(_call("c1"),)))
    with pytest.raises(InvalidValueError, match="no earlier tool call"):
        base.append(Message(role="tool", parts=(_result("c1"),)))
    branch = base.append(Message(role="assistant", parts=(_call("c1", "mul"),)))
    with pytest.raises(InvalidValueError, match="was to 'mul'"):
        branch.append(Message(role="tool", parts=(_result("c1"),)))


def test_a_reused_call_id_rebinds_only_for_later_transcripts() -> None:
    """A call id called again names the later tool from then on; earlier transcripts keep the first."""
    first = Transcript().append(Message(role="assistant", parts=(_call("c1", "add"),)))
    second = first.append(Message(role="assistant", parts=(_call("c1", "mul"),)))
    expected = (_result("c1", "mul"),)
    assert expected == second.append(Message(role="tool", parts=expected)).messages[-1].parts
    expected = (_result("c1", "add"),)
    assert expected == first.append(Message(role="tool", parts=expected)).messages[-1].parts


def test_a_refused_append_leaves_the_transcript_unchanged() -> None:
    """An append refused halfway records none of its calls."""
    t = Transcript().append(Message.user("q"))
    with pytest.raises(InvalidValueError, match="no earlier tool call"):
        t.append(
            Message(role="assistant", parts=(_call("c7"),)),
            Message(role="tool", parts=(_result("c8"),)),
        )
    with pytest.raises(InvalidValueError, match="no earlier tool call"):
        t.append(Message(role="tool", parts=(_result("c7"),)))
    assert Transcript(messages=(Message.user("q"),)) == t


def test_parts_validate_from_dicts_by_kind() -> None:
    """Dict parts are dispatched on their kind tag."""
    m = Message.model_validate(
        {"role": "assistant", "parts": [{"kind": "reasoning", "text": "hm"}]}
    )
    assert ReasoningPart(text="hm") == m.parts[0]


def test_tool_spec_defaults_to_empty_object_schema() -> None:
    """A ToolSpec without parameters takes no arguments."""
    expected = {"type": "object", "properties": {}}
    assert expected == ToolSpec(name="now").parameters


def test_a_nested_error_is_one_invalid_value_error_with_the_whole_path() -> None:
    """Nested values are validated inside pydantic: one error, the full path, no per-level wrapper."""
    bad = {"messages": [{"role": "user", "parts": [{"kind": "text"}]}]}
    with pytest.raises(InvalidValueError) as caught:
        Transcript(**bad)
    message = str(caught.value)
    expected = (True, True, False)
    actual = (
        message.startswith("invalid Transcript:"),
        "messages.0.parts.0.text.text" in message,
        "invalid Message" in message or "invalid TextPart" in message,
    )
    assert expected == actual


@pytest.mark.parametrize(
    "arguments", [{"\ud800": 1}, {"a": {"\udfff": [1]}}, {"a": [{"\ud83d": None}]}]
)
def test_a_key_with_a_lone_surrogate_is_an_invalid_value_error(
    arguments: dict[str, object],
) -> None:
    """pydantic-core cannot read such a key; the constructor still raises its typed error."""
    with pytest.raises(InvalidValueError, match="a key holds a lone surrogate"):
        ToolCallPart(id=CallId("c1"), name="add", arguments=arguments)


def test_a_subclass_with_its_own_init_is_still_called_when_nested() -> None:
    """Only FrozenValue's own __init__ is skipped for nested values; a subclass's runs."""
    from twinflow.vocab._values import FrozenValue

    seen: list[str] = []

    class Counted(FrozenValue):
        name: str

        def __init__(self, /, **data: object) -> None:
            seen.append(str(data.get("name")))
            super().__init__(**data)

    class Holder(FrozenValue):
        inner: Counted

    Holder(inner={"name": "x"})
    assert ["x"] == seen
