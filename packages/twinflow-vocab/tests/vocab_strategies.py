"""Hypothesis strategies for JSON values and conversation values, shared by the vocab tests."""

from hypothesis import strategies as st

from twinflow.vocab import (
    CallId,
    JsonValue,
    MediaPart,
    Message,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
)

SAFE = 2**53 - 1

# Text that reaches the hard cases: escapes, control characters, non-ASCII, astral characters
# (where code-point and UTF-16 order differ) and the U+E000..U+FFFF range just above surrogates.
text = st.text(
    alphabet=st.one_of(
        st.sampled_from('"\\/\b\f\n\r\t\x00\x1f\x7f\x80\u2028\ue000\uffff\U0001f600\U00010000'),
        st.characters(exclude_categories=("Cs",)),
    ),
    max_size=12,
)

numbers = st.one_of(
    st.integers(min_value=-SAFE, max_value=SAFE),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [0.0, -0.0, 1e21, 1e-7, 1e16, 1e-4, 5e-324, 1.7976931348623157e308, 100.0, 2.0**53, 1e20]
    ),
)

scalars = st.one_of(st.none(), st.booleans(), numbers, text)

json_values: st.SearchStrategy[JsonValue] = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(text, children, max_size=5),
    ),
    max_leaves=20,
)

json_objects: st.SearchStrategy[dict[str, JsonValue]] = st.dictionaries(
    text, json_values, max_size=4
)

_word = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789"
names = st.text(alphabet=_word[:53], min_size=1, max_size=12)
ids = st.text(alphabet=_word, min_size=1, max_size=8).map(lambda s: "call_" + s)
small_json: st.SearchStrategy[JsonValue] = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(text, children, max_size=3)
    ),
    max_leaves=6,
)
small_objects: st.SearchStrategy[dict[str, JsonValue]] = st.dictionaries(
    text, small_json, max_size=3
)
plain = st.text(max_size=40)


@st.composite
def transcripts(
    draw: st.DrawFn, *, reasoning: bool = True, structured: bool = True, media: bool = True
) -> Transcript:
    """A valid transcript: system/user/assistant turns, tool calls each answered by a tool message."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message.system(draw(plain)))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        user_parts: list[TextPart | MediaPart] = [TextPart(text=draw(plain))]
        if media and draw(st.booleans()):
            media_type = draw(
                st.sampled_from(["image/png", "image/jpeg", "application/pdf", "audio/wav"])
            )
            data = draw(st.text(alphabet=_word + "+/", min_size=4, max_size=16))
            uri = draw(
                st.sampled_from(
                    [
                        f"data:{media_type};base64,{data}",
                        f"https://example.com/{data}",
                        f"file:///tmp/{data}",
                    ]
                )
            )
            user_parts.append(MediaPart(media_type=media_type, uri=uri))
        messages.append(Message(role="user", parts=tuple(user_parts)))
        parts: list[TextPart | ReasoningPart | ToolCallPart | StructuredPart] = []
        if reasoning and draw(st.booleans()):
            parts.append(ReasoningPart(text=draw(plain)))
        if draw(st.booleans()):
            parts.append(TextPart(text=draw(plain)))
        if structured and draw(st.booleans()):
            parts.append(StructuredPart(schema_name=draw(names), value=draw(small_json)))
        calls = [
            ToolCallPart(id=CallId(call_id), name=draw(names), arguments=draw(small_objects))
            for call_id in draw(st.lists(ids, max_size=3, unique=True))
        ]
        if not parts and not calls:
            parts.append(TextPart(text=draw(plain)))
        messages.append(Message(role="assistant", parts=(*parts, *calls)))
        if calls:
            messages.append(
                Message(
                    role="tool",
                    parts=tuple(
                        ToolResultPart(
                            call_id=c.id,
                            name=c.name,
                            content=draw(plain),
                            is_error=draw(st.booleans()),
                        )
                        for c in calls
                    ),
                )
            )
    return Transcript(messages=tuple(messages))
