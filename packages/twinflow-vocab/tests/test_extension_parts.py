"""Extension part kinds: defined outside the core union, read back without their class, carried
by the wire adapters that know them and sent by fallback or refused by the others."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from datapizza.type import TextBlock

from twinflow.trace import UserError
from twinflow.vocab import (
    CacheHintPart,
    EmbeddedResourcePart,
    ExtensionPart,
    GenericPart,
    InvalidValueError,
    MediaPart,
    Message,
    PartNotCarriedError,
    PrefillPart,
    ResourceLinkPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
    WireFormatError,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._canonical import parse_canonical
from twinflow.vocab._parts import carried_parts
from twinflow.vocab._wire import (
    from_mcp_content,
)
from twinflow.vocab.datapizza._blocks import to_datapizza_turn


class Citation(ExtensionPart):
    """A plugin's kind with a text fallback."""

    kind: Literal["acme.citation"] = "acme.citation"
    source: str
    page: int | None = None

    def fallback(self) -> str:
        """The source in brackets."""
        return f"[{self.source}]"


class Stamp(ExtensionPart):
    """A plugin's kind with no fallback."""

    kind: Literal["acme.stamp"] = "acme.stamp"
    by: str


def answer(*parts: Any) -> Message:
    """An assistant message of ``parts``."""
    return Message(role="assistant", parts=parts)


def test_a_plugin_part_is_kept_as_its_own_class_and_encodes_its_fields() -> None:
    """The instance passes through a message unchanged and its fields reach the canonical bytes."""
    part = Citation(source="doc.pdf", page=3)
    message = answer(TextPart(text="yes"), part)
    assert part is message.parts[1]
    expected = (
        b'{"parts":[{"kind":"text","text":"yes"},'
        b'{"kind":"acme.citation","page":3,"source":"doc.pdf"}],"role":"assistant"}'
    )
    assert expected == canonical_bytes(message)


def test_a_kind_the_reader_does_not_know_reads_as_a_generic_part_with_the_same_bytes() -> None:
    """No class in sight: a GenericPart holds kind and fields, and encodes to the bytes it was read from."""
    data = canonical_bytes(answer(Citation(source="doc.pdf", page=3)))
    read = parse_canonical(data, Message)
    part = read.parts[0]
    assert GenericPart is type(part)
    assert ("acme.citation", {"page": 3, "source": "doc.pdf"}) == (part.kind, part.fields)
    assert data == canonical_bytes(read)


@pytest.mark.parametrize(
    "part",
    [
        {"kind": 5},
        {"kind": ""},
        {"kind": "Acme"},
        {"kind": "acme citation"},
        {"kind": "a" * 10_000},
        {"kind": "cache_hint", "ttl": "9m"},
        {"kind": "text"},
        "just text",
        None,
        [{"kind": "acme.x"}],
    ],
)
def test_a_malformed_part_is_one_invalid_value_error(part: object) -> None:
    """Wrong types, bad names, core kinds without their fields: a typed error, never a traceback."""
    data = canonical_bytes({"parts": [part], "role": "assistant"})
    with pytest.raises(InvalidValueError) as caught:
        parse_canonical(data, Message)
    assert "parts.0" in str(caught.value)
    assert len(str(caught.value)) < 2000


def test_a_generic_part_holds_json_only() -> None:
    """A field that is no JSON value (a set, NaN) is refused at construction."""
    for bad in ({1, 2}, float("nan")):
        with pytest.raises(InvalidValueError):
            answer({"kind": "acme.x", "v": bad})


def test_a_generic_part_cannot_take_a_kind_vocab_defines() -> None:
    """cache_hint and the rest are read as their own classes, never as generic parts."""
    with pytest.raises(InvalidValueError, match="not an extension kind"):
        GenericPart(kind="cache_hint")
    assert CacheHintPart is type(answer({"kind": "cache_hint"}).parts[0])


def test_an_extension_class_must_declare_its_own_kind() -> None:
    """A core kind's name, or a kind that is not a Literal default, fails at class definition."""
    with pytest.raises(TypeError, match="core part kind"):

        class Text(ExtensionPart):
            kind: Literal["text"] = "text"

    with pytest.raises(TypeError, match="declares its kind"):

        class Loose(ExtensionPart):
            kind: str = "acme.loose"


def test_the_base_class_makes_no_part() -> None:
    """ExtensionPart(kind="text") would write a part no reader could read back: refused."""
    with pytest.raises(InvalidValueError, match="ExtensionPart is a base"):
        ExtensionPart(kind="text")


def test_carried_parts_keeps_carried_kinds_and_sends_the_rest_by_fallback() -> None:
    """Fallback text replaces the part, an empty fallback drops it, a carried kind stays."""
    parts = [TextPart(text="a"), Citation(source="s"), CacheHintPart(), Stamp(by="x")]
    assert [TextPart(text="a"), TextPart(text="[s]")] == carried_parts(parts[:3], "test")
    assert [parts[3]] == carried_parts(parts[3:], "test", frozenset({"acme.stamp"}))


def test_a_kind_without_fallback_is_refused_naming_the_adapter_and_kind() -> None:
    """One line, a UserError: the adapter and the kind it cannot carry."""
    with pytest.raises(PartNotCarriedError) as caught:
        carried_parts([Stamp(by="x")], "openai")
    error = caught.value
    assert ("openai", "acme.stamp") == (error.adapter, error.kind)
    assert isinstance(error, UserError)
    assert str(error).startswith("the openai wire format cannot carry a 'acme.stamp' part")
    assert "\n" not in str(error)


def test_datapizza_sends_a_plugin_part_as_its_fallback_text() -> None:
    """A citation becomes a text block, a cache hint is left out, a stamp is refused."""
    turn = to_datapizza_turn(answer(Citation(source="s"), CacheHintPart()))
    assert [TextBlock(content="[s]")] == turn.blocks
    with pytest.raises(PartNotCarriedError, match="datapizza"):
        to_datapizza_turn(answer(Stamp(by="x")))


def test_mcp_content_blocks_map_onto_parts() -> None:
    """text, image, audio, resource_link and embedded resource each have their part."""
    blocks = [
        {"type": "text", "text": "hi", "annotations": {"priority": 1}},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        {
            "type": "resource_link",
            "uri": "file:///a.txt",
            "name": "a.txt",
            "mimeType": "text/plain",
        },
        {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "B"}},
        {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AAE="}},
    ]
    expected = [
        TextPart(text="hi"),
        MediaPart(media_type="image/png", uri="data:image/png;base64,iVBORw0KGgo="),
        MediaPart(media_type="audio/wav", uri="data:audio/wav;base64,UklGRg=="),
        ResourceLinkPart(uri="file:///a.txt", name="a.txt", media_type="text/plain"),
        EmbeddedResourcePart(uri="file:///b.txt", text="B"),
        EmbeddedResourcePart(uri="file:///c.bin", blob="AAE="),
    ]
    assert expected == [from_mcp_content(b) for b in blocks]
    assert ["[resource a.txt: file:///a.txt]", "[resource file:///b.txt]\nB", None] == [
        p.fallback() for p in expected[3:]
    ]


@pytest.mark.parametrize(
    ("block", "pointer"),
    [
        ({"type": "video", "data": ""}, "/0/type"),
        ({"type": "image", "data": "AA==", "mimeType": "audio/wav"}, "/0/mimeType"),
        (
            {"type": "resource", "resource": {"uri": "u", "text": "a", "blob": "AA=="}},
            "/0/resource",
        ),
        ({"type": "image", "data": "not base64!", "mimeType": "image/png"}, "/0/data"),
        ({"type": "audio", "data": "AAA", "mimeType": "audio/wav"}, "/0/data"),
        ({"type": "resource", "resource": {"uri": "u", "blob": "%%%%"}}, "/0/resource/blob"),
        ({"type": "image", "data": "AA==", "mimeType": "image/"}, "/0"),
        ({"type": "image", "data": "AA==", "mimeType": "image/png,x"}, "/0"),
        ({"type": "resource_link", "uri": 5, "name": "n"}, "/0/uri"),
        ("text", "/0"),
    ],
)
def test_a_malformed_mcp_block_is_a_wire_format_error_at_its_pointer(
    block: object, pointer: str
) -> None:
    """Unknown types and wrong fields name where they are, in one typed error of one line
    (no pydantic layout or URL: the message can become a recorded tool error)."""
    with pytest.raises(WireFormatError) as caught:
        from_mcp_content(block, (0,))
    assert pointer == caught.value.path
    assert (1, False) == (len(str(caught.value).splitlines()), "pydantic" in str(caught.value))


GALLERY = (
    TextPart(text="a picture"),
    MediaPart(media_type="image/png", uri="data:image/png;base64,cG5n"),
    ResourceLinkPart(uri="file:///full.png", name="full.png"),
)


def tool_turn(*parts: Any, content: str = "a picture") -> Transcript:
    """A call and its result holding ``parts``."""
    call = ToolCallPart(id="c1", name="media.gallery", arguments={})
    result = ToolResultPart(call_id="c1", name="media.gallery", content=content, parts=parts)
    return Transcript(
        messages=(
            Message.user("q"),
            Message(role="assistant", parts=(call,)),
            Message(role="tool", parts=(result,)),
        )
    )


def test_a_text_result_encodes_as_before_and_a_result_with_parts_round_trips() -> None:
    """No parts: the encoding has no ``parts`` key; parts encode and read back as themselves."""
    text = ToolResultPart(call_id="c", name="t", content="5")
    assert b'{"call_id":"c","content":"5","is_error":false,"kind":"tool_result","name":"t"}' == (
        canonical_bytes(text)
    )
    rich = tool_turn(*GALLERY)
    assert rich == Transcript.model_validate(parse_canonical(canonical_bytes(rich)))


@pytest.mark.parametrize(
    "inner", [ToolCallPart(id="x", name="t", arguments={}), PrefillPart(text="{")]
)
def test_a_tool_result_holds_no_conversation_parts(inner: Any) -> None:
    """A call or a prefill inside a result would be a turn of its own: refused in one line."""
    with pytest.raises(InvalidValueError, match=f"holds no {inner.kind} part"):
        ToolResultPart(call_id="c", name="t", content="", parts=(inner,))
