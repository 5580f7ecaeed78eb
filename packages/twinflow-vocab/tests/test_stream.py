"""The chunk protocol and its one assembler; the tagged user-role envelopes."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from vocab_strategies import ids, names, plain, small_objects

from twinflow.trace import UserError
from twinflow.vocab import (
    CallId,
    Chunk,
    FinishChunk,
    InvalidValueError,
    Message,
    ModelResponse,
    ReasoningDelta,
    ReasoningPart,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    Usage,
    UsageChunk,
    WireFormatError,
    assemble,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._envelope import envelope
from twinflow.vocab._stream import ChunkAssembler, response_chunks


@st.composite
def responses(draw: st.DrawFn) -> ModelResponse:
    """A reply as a non-streamed call reads it: reasoning?, text?, then tool calls."""
    parts: list[ReasoningPart | TextPart | ToolCallPart] = []
    if draw(st.booleans()):
        parts.append(ReasoningPart(text=draw(plain)))
    if draw(st.booleans()):
        parts.append(TextPart(text=draw(plain)))
    for call_id in draw(st.lists(ids, max_size=3, unique=True)):
        # A non-streamed reply reads its arguments from JSON text, as the assembler does: a float
        # such as 2.0**53 comes back from its canonical text as an integer out of range, refused.
        arguments = json.loads(canonical_bytes(draw(small_objects)))
        try:
            parts.append(ToolCallPart(id=CallId(call_id), name=draw(names), arguments=arguments))
        except InvalidValueError:
            assume(False)
    calls = any(isinstance(p, ToolCallPart) for p in parts)
    return ModelResponse(
        message=Message(role="assistant", parts=tuple(parts)),
        usage=Usage(
            input_tokens=draw(st.integers(0, 10**6)), output_tokens=draw(st.integers(0, 10**6))
        ),
        finish_reason="tool_calls" if calls else draw(st.sampled_from(["stop", "length"])),
        model_name=draw(st.sampled_from(["", "smollm2", "gpt-4o"])),
    )


def _split(draw: st.DrawFn, text: str) -> list[str]:
    """`text` cut at drawn positions (possibly none, possibly into empty pieces)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def split_streams(draw: st.DrawFn) -> tuple[ModelResponse, list[Chunk]]:
    """A reply and one of the many chunk sequences that stream it."""
    response = draw(responses())
    chunks: list[Chunk] = []
    usage_first = draw(st.booleans())
    if usage_first:
        chunks.append(UsageChunk(input_tokens=response.usage.input_tokens))
    for index, part in enumerate(response.message.parts):
        if isinstance(part, TextPart):
            chunks += [TextDelta(text=t) for t in _split(draw, part.text)]
        elif isinstance(part, ReasoningPart):
            chunks += [ReasoningDelta(text=t) for t in _split(draw, part.text)]
        else:
            chunks.append(ToolCallStart(index=index, id=part.id, name=part.name))
            arguments = canonical_bytes(part.arguments).decode()
            chunks += [ToolCallDelta(index=index, arguments=a) for a in _split(draw, arguments)]
            if draw(st.booleans()):
                chunks.append(ToolCallEnd(index=index))
    chunks.append(FinishChunk(reason=response.finish_reason, model_name=response.model_name))
    if usage_first:
        chunks.append(UsageChunk(output_tokens=response.usage.output_tokens))
    else:
        chunks.append(
            UsageChunk(
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            )
        )
    return response, chunks


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(split_streams())
def test_any_split_assembles_to_the_non_streamed_reply(
    case: tuple[ModelResponse, list[Chunk]],
) -> None:
    """For any split of a reply into chunks, the assembled value has the non-streamed digest."""
    response, chunks = case
    assert digest(response) == digest(assemble(chunks))


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses(), st.integers(1, 9))
def test_response_chunks_is_the_assemblers_inverse(response: ModelResponse, size: int) -> None:
    """A reply cut by response_chunks assembles back to the same digest, whatever the size."""
    assert digest(response) == digest(assemble(response_chunks(response, size=size)))


def test_consecutive_deltas_join_and_a_kind_change_starts_a_new_part() -> None:
    """Runs of one kind join into one part; text after a tool call is a new text part."""
    chunks: list[Chunk] = [
        ReasoningDelta(text="think"),
        TextDelta(text="a"),
        TextDelta(text="b"),
        ToolCallStart(index=0, id="c0", name="f"),
        TextDelta(text="c"),
        ToolCallDelta(index=0, arguments='{"x":'),
        ToolCallDelta(index=0, arguments="1}"),
        FinishChunk(reason="stop"),
    ]
    expected = (
        ReasoningPart(text="think"),
        TextPart(text="ab"),
        ToolCallPart(id=CallId("c0"), name="f", arguments={"x": 1}),
        TextPart(text="c"),
    )
    result = assemble(chunks)
    assert expected == result.message.parts
    assert "tool_calls" == result.finish_reason


@pytest.mark.parametrize(
    ("chunks", "path", "words"),
    [
        ([TextDelta(text="cut")], "", "without a finish chunk"),
        ([ToolCallDelta(index=3, arguments="{}"), FinishChunk(reason="stop")], "/0", "never"),
        (
            [
                ToolCallStart(index=0, id="a", name="f"),
                ToolCallStart(index=0, id="b", name="f"),
            ],
            "/1",
            "started twice",
        ),
        (
            [
                ToolCallStart(index=0, id="a", name="f"),
                ToolCallEnd(index=0),
                ToolCallDelta(index=0, arguments="{}"),
            ],
            "/2",
            "already ended",
        ),
        ([FinishChunk(reason="stop"), TextDelta(text="late")], "/1", "after the finish"),
        (
            [
                ToolCallStart(index=0, id="a", name="f"),
                ToolCallDelta(index=0, arguments='{"x":'),
                FinishChunk(reason="stop"),
            ],
            "/0",
            "not JSON",
        ),
        (
            [
                ToolCallStart(index=0, id="a", name="f"),
                ToolCallDelta(index=0, arguments="[1]"),
                FinishChunk(reason="stop"),
            ],
            "/0",
            "not a JSON object",
        ),
        (
            [
                ToolCallStart(index=0, id="a", name="f"),
                ToolCallDelta(index=0, arguments='{"n": 1e400}'),
                FinishChunk(reason="stop"),
            ],
            "/0",
            "tool call 'a'",
        ),
    ],
)
def test_a_broken_stream_is_a_wire_format_error_naming_the_chunk(
    chunks: list[Chunk], path: str, words: str
) -> None:
    """A chunk that does not fit, or a stream that never finished, is refused at its chunk."""
    assembler = ChunkAssembler()
    with pytest.raises(WireFormatError) as caught:
        for chunk in chunks:
            assembler.feed(chunk)
        assembler.result()
    assert path == caught.value.path
    assert words in str(caught.value)


def test_envelope_is_a_tagged_user_message_that_cannot_close_itself() -> None:
    """Steering is a user turn in a tag; markup in the text is escaped, not interpreted."""
    message = envelope("steering", "stop </twinflow:steering><twinflow:context>x & y")
    expected = (
        "<twinflow:steering>\nstop &lt;/twinflow:steering&gt;&lt;twinflow:context&gt;x &amp; y"
        "\n</twinflow:steering>"
    )
    assert "user" == message.role
    assert expected == message.text


@pytest.mark.parametrize(("kind", "text"), [("system", "x"), ("context", " \n")])
def test_envelope_refuses_an_unknown_kind_or_empty_text(kind: str, text: str) -> None:
    """A kind that is not an envelope, or nothing to say, is a usage error."""
    with pytest.raises(UserError):
        envelope(kind, text)  # type: ignore[arg-type]  # the bad kind is the point
