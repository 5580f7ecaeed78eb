"""Extension part kinds on the providers' wires: fallback text, refusals, cache hints."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from twinflow.models._anthropic_wire import from_anthropic, to_anthropic
from twinflow.models._ollama_wire import to_ollama_messages
from twinflow.models._openai_wire import to_openai_messages
from twinflow.vocab import (
    CacheHintPart,
    EmbeddedResourcePart,
    ExtensionPart,
    MediaPart,
    Message,
    PartNotCarriedError,
    PrefillPart,
    ResourceLinkPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
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


def test_openai_and_ollama_send_a_plugin_part_as_its_fallback_text() -> None:
    """A citation becomes its text; a cache hint disappears."""
    transcript = Transcript(
        messages=(Message.user("q"), answer(TextPart(text="yes "), Citation(source="s"))),
    )
    transcript = transcript.append(
        Message(role="user", parts=(TextPart(text="more"), CacheHintPart()))
    )
    openai = to_openai_messages(transcript)
    assert [{"type": "text", "text": "yes "}, {"type": "text", "text": "[s]"}] == openai[1][
        "content"
    ]
    assert "more" == openai[2]["content"]
    assert ["q", "yes [s]", "more"] == [m["content"] for m in to_ollama_messages(transcript)]


@pytest.mark.parametrize(
    ("translate", "adapter"),
    [(to_openai_messages, "openai"), (to_ollama_messages, "ollama"), (to_anthropic, "anthropic")],
)
def test_every_wire_refuses_a_kind_without_fallback(translate: Any, adapter: str) -> None:
    """The plugin's stamp has no form on any provider wire."""
    transcript = Transcript(messages=(Message.user("q"), answer(Stamp(by="x"))))
    with pytest.raises(PartNotCarriedError) as caught:
        translate(transcript)
    assert (adapter, "acme.stamp") == (caught.value.adapter, caught.value.kind)


@pytest.mark.parametrize(
    ("translate", "adapter"), [(to_openai_messages, "openai"), (to_ollama_messages, "ollama")]
)
def test_a_wire_without_prefill_refuses_it(translate: Any, adapter: str) -> None:
    """Sending a prefill as a finished assistant turn would change its meaning: refused."""
    transcript = Transcript(messages=(Message.user("q"), answer(PrefillPart(text="{"))))
    with pytest.raises(PartNotCarriedError) as caught:
        translate(transcript)
    assert (adapter, "prefill") == (caught.value.adapter, caught.value.kind)


def test_anthropic_carries_cache_hints_as_cache_control_and_reads_them_back() -> None:
    """The hint marks the block before it (system prompt included) and round-trips."""
    transcript = Transcript(
        messages=(
            Message(role="system", parts=(TextPart(text="long rules"), CacheHintPart(ttl="1h"))),
            Message(role="user", parts=(TextPart(text="doc"), CacheHintPart(), TextPart(text="q"))),
        )
    )
    payload = to_anthropic(transcript)
    expected = {
        "system": [
            {
                "type": "text",
                "text": "long rules",
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            }
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "doc", "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "q"},
                ],
            }
        ],
    }
    assert expected == payload
    assert transcript == from_anthropic(payload)


def test_anthropic_carries_a_prefill_in_the_final_assistant_message_only() -> None:
    """At the end it is the assistant's opening text; anywhere else it is refused, naming where."""
    transcript = Transcript(messages=(Message.user("q"), answer(PrefillPart(text='{"a":'))))
    assert {"role": "assistant", "content": '{"a":'} == to_anthropic(transcript)["messages"][-1]
    early = transcript.append(Message.user("again"))
    with pytest.raises(PartNotCarriedError, match=r"final assistant message, not messages\[1\]"):
        to_anthropic(early)


def test_anthropic_refuses_a_cache_hint_with_nothing_before_it() -> None:
    """A hint that marks no block is a mistake, not something to drop."""
    transcript = Transcript(messages=(Message(role="user", parts=(CacheHintPart(),)),))
    with pytest.raises(PartNotCarriedError, match="has none"):
        to_anthropic(transcript)


def test_audio_is_input_audio_on_openai_and_refused_by_anthropic() -> None:
    """Audio is never sent as an image: chat completions' input_audio, or a named refusal."""
    audio = MediaPart(media_type="audio/wav", uri="data:audio/wav;base64,UklGRg==")
    transcript = Transcript(messages=(Message(role="user", parts=(TextPart(text="hear"), audio)),))
    expected = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    assert expected == to_openai_messages(transcript)[0]["content"][1]
    with pytest.raises(PartNotCarriedError) as caught:
        to_anthropic(transcript)
    assert ("anthropic", "media") == (caught.value.adapter, caught.value.kind)


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


def test_openai_ollama_and_datapizza_send_a_result_with_parts_as_its_fallback_text() -> None:
    """Text as itself, the image by its media fallback, the link by its kind's fallback."""
    sent = "a picture\n[image/png: 3 bytes]\n[resource full.png: file:///full.png]"
    assert sent == to_openai_messages(tool_turn(*GALLERY))[2]["content"]
    assert sent == to_ollama_messages(tool_turn(*GALLERY))[2]["content"]
    assert sent == to_datapizza_turn(tool_turn(*GALLERY).messages[2]).blocks[0].result


def test_anthropic_carries_a_results_image_and_sends_its_link_by_fallback() -> None:
    """Messages takes text and images inside a tool_result; the link becomes its text."""
    block = to_anthropic(tool_turn(*GALLERY))["messages"][2]["content"][0]
    assert [
        {"type": "text", "text": "a picture"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "cG5n"}},
        {"type": "text", "text": "[resource full.png: file:///full.png]"},
    ] == block["content"]


@pytest.mark.parametrize(
    ("translate", "adapter"),
    [(to_openai_messages, "openai"), (to_ollama_messages, "ollama"), (to_anthropic, "anthropic")],
)
def test_a_result_part_without_fallback_is_refused_naming_adapter_and_kind(
    translate: Any, adapter: str
) -> None:
    """An embedded binary resource has no text form: every wire refuses it in one line."""
    blob = EmbeddedResourcePart(uri="file:///c.bin", blob="AAE=")
    with pytest.raises(PartNotCarriedError) as caught:
        translate(tool_turn(blob, content=""))
    assert (adapter, "embedded_resource") == (caught.value.adapter, caught.value.kind)
