"""The local model clients send extension parts by their kind's fallback, or refuse them by name."""

from __future__ import annotations

from typing import Literal

import pytest

from twinflow.kernel import MockTransport
from twinflow.models import OpenAICompatibleChatModel
from twinflow.models._wire import outgoing
from twinflow.vocab import (
    CacheHintPart,
    ExtensionPart,
    Message,
    ModelRequest,
    PartNotCarriedError,
    TextPart,
    Transcript,
)


class Citation(ExtensionPart):
    """A plugin's kind with a text fallback."""

    kind: Literal["acme.citation"] = "acme.citation"
    source: str

    def fallback(self) -> str:
        """The source in brackets."""
        return f"[{self.source}]"


class Stamp(ExtensionPart):
    """A plugin's kind with no fallback."""

    kind: Literal["acme.stamp"] = "acme.stamp"
    by: str


def test_structured_action_mode_joins_fallback_text_and_drops_cache_hints() -> None:
    """Every message is one text part there: a citation joins as its text."""
    message = Message(
        role="assistant", parts=(TextPart(text="yes "), Citation(source="s"), CacheHintPart())
    )
    sent = outgoing([Message.user("q"), message], native_tools=False)
    assert ["q", "yes [s]"] == [m.text for m in sent.messages]


def test_structured_action_mode_refuses_a_kind_without_fallback() -> None:
    """The error names the mode that could not carry the kind."""
    message = Message(role="assistant", parts=(Stamp(by="x"),))
    with pytest.raises(PartNotCarriedError) as caught:
        outgoing([Message.user("q"), message], native_tools=False)
    assert ("structured-action", "acme.stamp") == (caught.value.adapter, caught.value.kind)


def test_a_chat_model_refuses_before_sending_anything() -> None:
    """Native mode's request is built by the OpenAI wire: refused there, no request made."""
    sent: list[object] = []

    def handler(url: str, body: object) -> object:
        sent.append(body)
        raise AssertionError("nothing should be sent")

    model = OpenAICompatibleChatModel(
        MockTransport(handler), base_url="http://127.0.0.1:9", dialect="vllm", mode="native"
    )
    transcript = Transcript(
        messages=(Message.user("q"), Message(role="assistant", parts=(Stamp(by="x"),)))
    )
    transcript = transcript.append(Message.user("again"))
    with pytest.raises(PartNotCarriedError, match="the openai wire format cannot carry"):
        model.request(ModelRequest(transcript=transcript))
    assert [] == sent
