"""`open_model`: a model's name to a chat model, on the provider table's row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from twinflow.kernel import LoopbackResponse, LoopbackServer, TransportError
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.models import (
    AnthropicChatModel,
    ModelSetupError,
    OllamaChatModel,
    OpenAICompatibleChatModel,
    open_model,
)
from twinflow.models._gemini import GeminiChatModel
from twinflow.models._providers import PROVIDERS
from twinflow.trace import UserError
from twinflow.vocab import Message, ModelRequest, Transcript

ACTION = '{"action": "final", "answer": "hello"}'
"""A structured-action reply whose final answer is "hello"."""

REQUEST = ModelRequest(transcript=Transcript(messages=(Message.user("hi"),)))


def openai_reply(content: str) -> JsonValue:
    return {"model": "m", "choices": [{"message": {"role": "assistant", "content": content}}]}


def ollama_reply(content: str) -> JsonValue:
    return {"model": "m", "message": {"role": "assistant", "content": content}, "done": True}


def anthropic_reply(content: str) -> JsonValue:
    return {
        "model": "m",
        "content": [{"type": "text", "text": content}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


class Recorder:
    """Answers every request with `reply` and keeps what it received."""

    def __init__(self, reply: JsonValue) -> None:
        self.reply = reply
        self.seen: list[LoopbackRequest] = []

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        self.seen.append(request)
        return LoopbackResponse.json_body(self.reply)


@pytest.mark.parametrize(
    ("name", "reply", "kind", "path", "model"),
    [
        ("{url}/v1", openai_reply(ACTION), OpenAICompatibleChatModel, "/v1/chat/completions", "local"),
        ("{url}", openai_reply(ACTION), OpenAICompatibleChatModel, "/v1/chat/completions", "local"),
        ("vllm:qwen@{url}", openai_reply(ACTION), OpenAICompatibleChatModel, "/v1/chat/completions", "qwen"),
        ("ollama:llama3.2@{url}", ollama_reply(ACTION), OllamaChatModel, "/api/chat", "llama3.2"),
        ("openai:gpt-4o-mini@{url}", openai_reply("hello"), OpenAICompatibleChatModel, "/v1/chat/completions", "gpt-4o-mini"),
        ("anthropic:claude-x@{url}", anthropic_reply("hello"), AnthropicChatModel, "/v1/messages", "claude-x"),
    ],
)  # fmt: skip
def test_each_name_form_reaches_its_provider_endpoint(
    name: str,
    reply: JsonValue,
    kind: type[Any],
    path: str,
    model: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A URL, PROVIDER:MODEL@URL: the provider's client, posting to its path with the model named."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    recorder = Recorder(reply)
    with LoopbackServer(recorder) as server, open_model(name.format(url=server.url)) as chat:
        response = chat.request(REQUEST)
    assert (kind, "hello", [path]) == (
        type(chat),
        response.message.text,
        [r.path for r in recorder.seen],
    )
    body = recorder.seen[0].json_value()
    assert isinstance(body, dict)
    assert model == body["model"]


@pytest.mark.parametrize(
    ("name", "header", "value"),
    [
        ("openai:gpt@{url}", "authorization", "Bearer sk-test-openai"),
        ("anthropic:claude@{url}", "x-api-key", "sk-test-anthropic"),
    ],
)
def test_a_hosted_provider_sends_the_key_from_its_variable(
    name: str, header: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row's key variable is read by the transport and sent in the client's key header."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    reply = anthropic_reply("k") if name.startswith("anthropic") else openai_reply("k")
    recorder = Recorder(reply)
    with LoopbackServer(recorder) as server, open_model(name.format(url=server.url)) as chat:
        chat.request(REQUEST)
    headers = {k.lower(): v for k, v in recorder.seen[0].headers}
    assert value == headers[header]


def test_a_missing_key_is_refused_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """openai:MODEL without OPENAI_API_KEY: a UserError naming the variable."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        open_model("openai:gpt-4o-mini")


@pytest.mark.parametrize(
    "name", ["gpt-4o-mini", "nosuch:model", "ollama:", "vllm:qwen", "ftp://host/v1", ""]
)
def test_a_name_no_row_resolves_is_a_setup_error(name: str) -> None:
    """Unknown providers, a missing model, a provider without a default URL: reason `name`."""
    with pytest.raises(ModelSetupError) as caught:
        open_model(name)
    assert "name" == caught.value.reason


def test_the_defaults_of_a_row_decide_the_mode() -> None:
    """Ollama defaults to structured-action; `mode` given to open_model overrides the row."""
    with open_model("ollama:m") as default, open_model("ollama:m", mode="native") as native:
        assert ("structured-action", "native") == (default.mode, native.mode)


def test_every_row_names_a_client_and_hosted_rows_a_key() -> None:
    """Each provider row's client is one of the four chat models; the hosted rows name a key."""
    clients = {OpenAICompatibleChatModel, OllamaChatModel, AnthropicChatModel, GeminiChatModel}
    assert clients >= {row.client for row in PROVIDERS.values()}
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"} == {
        row.key_env for row in PROVIDERS.values() if row.key_env
    }


def test_a_mode_the_provider_does_not_speak_is_a_setup_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Anthropic's Messages speaks native mode only: structured-action is refused, reason `mode`."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    with pytest.raises(ModelSetupError) as caught:
        open_model("anthropic:claude", mode="structured-action")
    assert "mode" == caught.value.reason


@pytest.mark.real_model
def test_embedded_starts_the_bundled_model_and_close_stops_it(tmp_path: Path) -> None:
    """`embedded` serves SmolLM2 on loopback; the model answers, and close() stops the server."""
    with open_model("embedded", log_dir=tmp_path, on_progress=lambda line: None) as chat:
        response = chat.request(REQUEST)
        assert isinstance(chat, OpenAICompatibleChatModel)
        root = chat._server.url.removesuffix("/v1/chat/completions")  # the port it picked
    assert "assistant" == response.message.role
    assert (tmp_path / "model-server.log").is_file()
    with (
        open_model(root) as after,
        pytest.raises(TransportError, check=lambda e: "connect" == e.reason),
    ):
        after.request(REQUEST)
