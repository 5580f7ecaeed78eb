"""datapizza interop: blocks, roles, tools and memory both ways; import isolation."""

import sys

import pytest
from datapizza.memory import Memory
from datapizza.tools import Tool
from datapizza.type import (
    ROLE,
    FunctionCallBlock,
    FunctionCallResultBlock,
    Media,
    MediaBlock,
    StructuredBlock,
    TextBlock,
    ThoughtBlock,
)
from hypothesis import given
from pydantic import BaseModel
from vocab_strategies import transcripts

from twinflow.trace import UserError
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
from twinflow.vocab.datapizza import as_datapizza_tool, from_datapizza_memory, to_datapizza_memory
from twinflow.vocab.datapizza._blocks import (
    SchemaOnlyTool,
    StructuredContent,
    ToolResultBlock,
    from_datapizza_block,
    from_datapizza_role,
    from_datapizza_tool,
    from_datapizza_turn,
    to_datapizza_block,
    to_datapizza_role,
    to_datapizza_turn,
)

pytest_plugins = ["pytester"]

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class Answer(BaseModel):
    """A sample structured output."""

    city: str
    celsius: float


def test_import_vocab_does_not_import_datapizza(pytester: pytest.Pytester) -> None:
    """A fresh interpreter importing twinflow.vocab (and using it) has not loaded datapizza."""
    script = (
        "import sys, twinflow.vocab as v\n"
        "v.digest(v.Transcript(messages=(v.Message.user('x'),)))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'datapizza'))\n"
    )
    result = pytester.run(sys.executable, "-c", script)
    assert (result.ret, result.outlines) == (0, ["[]"])


@pytest.mark.parametrize(
    ("part", "block"),
    [
        (TextPart(text="hi"), TextBlock(content="hi")),
        (ReasoningPart(text="hmm"), ThoughtBlock(content="hmm")),
        (
            ToolCallPart(id=CallId("c1"), name="get_weather", arguments={"city": "Rome"}),
            FunctionCallBlock(
                id="c1",
                arguments={"city": "Rome"},
                name="get_weather",
                tool=Tool(name="get_weather"),
            ),
        ),
    ],
)
def test_simple_blocks_both_ways(
    part: TextPart | ReasoningPart | ToolCallPart, block: object
) -> None:
    """Text, thought and function call blocks translate both ways to equal values."""
    assert block == to_datapizza_block(part)
    assert part == from_datapizza_block(block)


def test_tool_result_block_is_a_function_call_result_block() -> None:
    """ToolResultBlock subclasses FunctionCallResultBlock, keeps the error flag and serialises it."""
    part = ToolResultPart(call_id=CallId("c1"), name="get_weather", content="boom", is_error=True)
    block = to_datapizza_block(part, tools={"get_weather": WEATHER})
    assert isinstance(block, FunctionCallResultBlock)
    assert (
        ToolResultBlock(id="c1", tool=as_datapizza_tool(WEATHER), result="boom", is_error=True)
        == block
    )
    expected = {"type": "function_call_result", "id": "c1", "result": "boom", "is_error": True}
    assert expected == {k: v for k, v in block.to_dict().items() if k != "tool"}
    assert part == from_datapizza_block(block)


def test_plain_function_call_result_is_success() -> None:
    """A datapizza FunctionCallResultBlock without the flag reads as a successful result."""
    block = FunctionCallResultBlock(id="c1", tool=Tool(name="f"), result="ok")
    assert ToolResultPart(call_id=CallId("c1"), name="f", content="ok") == from_datapizza_block(
        block
    )


def test_structured_with_and_without_model() -> None:
    """Structured values become the named model when given, StructuredContent otherwise, and come back."""
    part = StructuredPart(schema_name="Answer", value={"city": "Rome", "celsius": 21.5})
    typed = to_datapizza_block(part, models={"Answer": Answer})
    assert Answer(city="Rome", celsius=21.5) == typed.content
    generic = to_datapizza_block(part)
    assert (
        StructuredContent(schema_name="Answer", value={"city": "Rome", "celsius": 21.5})
        == generic.content
    )
    assert (part, part) == (from_datapizza_block(typed), from_datapizza_block(generic))


def test_structured_invalid_for_model_is_refused() -> None:
    """A structured value that does not fit its model class is refused."""
    with pytest.raises(InvalidValueError, match="not a valid Answer"):
        to_datapizza_block(
            StructuredPart(schema_name="Answer", value={"city": 1}), models={"Answer": Answer}
        )


@pytest.mark.parametrize(
    ("part", "media"),
    [
        (
            MediaPart(media_type="image/png", uri="data:image/png;base64,iVBORw0KGgo="),
            ("png", "image", "base64", "iVBORw0KGgo="),
        ),
        (
            MediaPart(media_type="image/jpeg", uri="https://example.com/cat.jpg"),
            ("jpeg", "image", "url", "https://example.com/cat.jpg"),
        ),
        (
            MediaPart(media_type="application/pdf", uri="file:///tmp/a.pdf"),
            ("pdf", "pdf", "path", "/tmp/a.pdf"),
        ),
        (
            MediaPart(media_type="audio/wav", uri="file:///tmp/a.wav"),
            ("wav", "audio", "path", "/tmp/a.wav"),
        ),
    ],
)
def test_media_both_ways(part: MediaPart, media: tuple[str, str, str, str]) -> None:
    """Media parts become datapizza media of the matching kind and source, and come back."""
    block = to_datapizza_block(part)
    m = block.media
    assert media == (m.extension, m.media_type, m.source_type, m.source)
    assert part == from_datapizza_block(block)


@pytest.mark.parametrize(
    "block",
    [
        MediaBlock(
            media=Media(media_type="image", source_type="pil", source=object(), extension="png")
        ),
        MediaBlock(media=Media(media_type="image", source_type="url", source="https://x")),
        StructuredBlock(content={"a": 1}),
        "not a block",
    ],
)
def test_untranslatable_blocks_are_refused(block: object) -> None:
    """Blocks with no twinflow form raise InvalidValueError."""
    with pytest.raises(InvalidValueError):
        from_datapizza_block(block)


def test_media_datapizza_cannot_hold_is_refused() -> None:
    """A media type datapizza has no kind for is refused."""
    with pytest.raises(InvalidValueError, match="no datapizza form"):
        to_datapizza_block(MediaPart(media_type="text/plain", uri="file:///a.txt"))


@pytest.mark.parametrize("role", ["system", "user", "assistant", "tool"])
def test_roles_use_datapizza_role(role: str) -> None:
    """Each role maps to the ROLE member of the same value and back."""
    member = to_datapizza_role(role)  # type: ignore[arg-type]  # an invalid role, on purpose
    assert (ROLE(role), role) == (member, from_datapizza_role(member))


def test_unknown_role_is_refused() -> None:
    """Something that is not a ROLE is refused."""
    with pytest.raises(InvalidValueError):
        from_datapizza_role("assistant")


def test_schema_only_tool() -> None:
    """as_datapizza_tool carries the schema, has no function, and refuses to be called."""
    tool = as_datapizza_tool(WEATHER)
    assert isinstance(tool, Tool)
    expected = {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    assert (expected, None) == (tool.schema, tool.func)
    with pytest.raises(UserError, match="schema-only"):
        tool(city="Rome")
    assert from_datapizza_tool(tool) == WEATHER


def test_schema_only_tool_stays_schema_only_as_attribute() -> None:
    """Looked up through a class attribute, the tool is still the schema-only one."""

    class Holder:
        weather = as_datapizza_tool(WEATHER)

    assert isinstance(Holder().weather, SchemaOnlyTool)


def test_turn_keeps_role_and_blocks() -> None:
    """A message becomes a Turn with datapizza's role and comes back equal."""
    message = Message(
        role="assistant", parts=(TextPart(text="a"), ToolCallPart(id=CallId("c"), name="f"))
    )
    turn = to_datapizza_turn(message)
    assert turn.role == ROLE.ASSISTANT
    assert message == from_datapizza_turn(turn)


@given(transcripts())
def test_transcripts_round_trip_through_memory(transcript: Transcript) -> None:
    """Every generated transcript round-trips through datapizza Memory to an equal value."""
    memory = to_datapizza_memory(transcript, tools=[WEATHER])
    assert isinstance(memory, Memory)
    assert transcript == from_datapizza_memory(memory)
