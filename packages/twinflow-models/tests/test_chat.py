"""The ChatModel adapters: plain text, native tool calls, structured-action mode."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, JsonValue

from twinflow.kernel import CountingIds, MockTransport
from twinflow.models import OllamaChatModel, OpenAICompatibleChatModel
from twinflow.models._action import action_schema
from twinflow.models._chat import RETRY_TEMPERATURE_STEP
from twinflow.models._preflight import preflight
from twinflow.trace import UserError
from twinflow.vocab import (
    CallId,
    ChatModel,
    Message,
    ModelRequest,
    ModelSettings,
    OutputSchema,
    StructuredOutputError,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
    digest,
)

ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
ASK = ModelRequest(transcript=Transcript(messages=(Message.user("2+3?"),)), tools=(ADD,))


def openai_answer(message: dict[str, JsonValue], finish: str = "stop") -> JsonValue:
    return {
        "model": "smol",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


class Script:
    """Answers with the given JSON values in turn and records every body."""

    def __init__(self, answers: list[JsonValue]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, url: str, body: JsonValue) -> JsonValue:
        assert isinstance(body, dict)
        self.bodies.append(body)
        return self.answers.pop(0)


def openai_model(script: Script, **kwargs: Any) -> OpenAICompatibleChatModel:
    # The wire tests speak native tool calling unless they say otherwise (the default mode is
    # structured-action, as in the CLI's spec).
    kwargs.setdefault("mode", "native")
    return OpenAICompatibleChatModel(
        MockTransport(script), base_url="http://127.0.0.1:9", dialect="llama.cpp", **kwargs
    )


def test_both_models_are_chat_models() -> None:
    """Either adapter can be injected where the loop expects a `ChatModel`."""
    models: list[ChatModel] = [
        openai_model(Script([])),
        OllamaChatModel(MockTransport(Script([])), model="m", mode="structured-action"),
    ]
    assert len(models) == 2


def test_plain_text_reply_with_usage_and_model_name() -> None:
    """A plain answer becomes one text part; usage and model name come from the server."""
    script = Script([openai_answer({"content": "5"})])
    response = openai_model(script).request(
        ModelRequest(
            transcript=ASK.transcript, settings=ModelSettings(temperature=0.5, max_tokens=8)
        )
    )
    assert Message.assistant("5") == response.message
    assert (
        response.usage.input_tokens,
        response.usage.output_tokens,
        response.finish_reason,
        response.model_name,
    ) == (10, 5, "stop", "smol")
    assert (script.bodies[0]["temperature"], script.bodies[0]["max_tokens"]) == (0.5, 8)
    assert "tools" not in script.bodies[0]


def test_native_openai_tool_calls_get_deterministic_ids() -> None:
    """Server ids are replaced by ids derived from the request digest and the call index."""
    calls = [
        {
            "id": "server-random-1",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a":2,"b":3}'},
        },
        {
            "id": "server-random-2",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a":1,"b":1}'},
        },
    ]
    script = Script([openai_answer({"content": None, "tool_calls": calls}, "tool_calls")] * 2)
    model = openai_model(script)
    first = model.request(ASK)
    second = model.request(ASK)
    d = digest(script.bodies[0])
    expected = (
        ToolCallPart(id=CallId(f"call_{d[:24]}_0"), name="add", arguments={"a": 2, "b": 3}),
        ToolCallPart(id=CallId(f"call_{d[:24]}_1"), name="add", arguments={"a": 1, "b": 1}),
    )
    assert expected == first.message.tool_calls
    assert first == second
    assert first.finish_reason == "tool_calls"
    assert script.bodies[0]["tools"][0]["function"]["name"] == "add"


def test_injected_ids_name_the_calls() -> None:
    """With `Ids` injected, call ids come from it."""
    call = {"id": "x", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    script = Script([openai_answer({"content": "", "tool_calls": [call]})])
    response = openai_model(script, ids=CountingIds(prefix="t-")).request(ASK)
    assert (CallId("t-call-1"),) == tuple(c.id for c in response.message.tool_calls)


def test_native_tool_history_is_sent_in_openai_form() -> None:
    """Earlier calls go as `tool_calls` with JSON-string arguments (content null, as OpenAI
    documents it), results as `tool` messages: vocab.wire's OpenAI translation."""
    history = ASK.transcript.append(
        Message(
            role="assistant",
            parts=(ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 2, "b": 3}),),
        ),
        Message(
            role="tool", parts=(ToolResultPart(call_id=CallId("c1"), name="add", content="5"),)
        ),
    )
    script = Script([openai_answer({"content": "It is 5."})])
    openai_model(script).request(ModelRequest(transcript=history, tools=(ADD,)))
    sent = script.bodies[0]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a":2,"b":3}'},
            }
        ],
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": "5"}


def test_native_ollama_tool_calls_parse_with_derived_ids() -> None:
    """Ollama's id-less tool calls get ids derived from the request digest."""
    answer = {
        "model": "llama3.2",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}],
        },
        "done": True,
        "prompt_eval_count": 7,
        "eval_count": 3,
    }
    script = Script([answer])
    response = OllamaChatModel(MockTransport(script), model="llama3.2", mode="native").request(ASK)
    d = digest(script.bodies[0])
    assert (
        ToolCallPart(id=CallId(f"call_{d[:24]}_0"), name="add", arguments={"a": 2, "b": 3}),
    ) == response.message.tool_calls
    assert script.bodies[0]["tools"][0]["function"]["name"] == "add"


def test_native_output_schema_constrains_and_yields_a_structured_part() -> None:
    """With an output schema, the schema is sent and a JSON reply becomes a StructuredPart."""

    class Sum(BaseModel):
        """A sum."""

        total: int

    script = Script([openai_answer({"content": '{"total": 5}'})])
    request = ModelRequest(transcript=ASK.transcript, output_schema=OutputSchema.for_model(Sum))
    response = openai_model(script).request(request)
    assert (StructuredPart(schema_name="Sum", value={"total": 5}),) == response.message.parts
    assert Sum.model_json_schema() == script.bodies[0]["response_format"]["json_schema"]["schema"]


def action(value: JsonValue) -> JsonValue:
    return openai_answer({"content": json.dumps(value)})


def test_structured_action_call_then_final() -> None:
    """Each step is constrained to the union schema; a call and a final answer parse as such."""
    script = Script(
        [
            action({"action": "call_tool", "tool": "add", "arguments": {"a": 2, "b": 3}}),
            action({"action": "final", "answer": "5"}),
        ]
    )
    model = openai_model(script, mode="structured-action")
    first = model.request(ASK)
    (call,) = first.message.tool_calls
    assert (call.name, call.arguments, first.finish_reason) == (
        "add",
        {"a": 2, "b": 3},
        "tool_calls",
    )
    history = ASK.transcript.append(
        first.message,
        Message(role="tool", parts=(ToolResultPart(call_id=call.id, name="add", content="5"),)),
    )
    second = model.request(ModelRequest(transcript=history, tools=(ADD,)))
    assert Message.assistant("5") == second.message
    for body in script.bodies:
        sent = preflight(action_schema((ADD,), None), "llama.cpp").sent_schema
        assert sent == body["response_format"]["json_schema"]["schema"]
        assert "tools" not in body
    rendered = [m["content"] for m in script.bodies[1]["messages"]]
    assert rendered[2] == '{"action":"call_tool","arguments":{"a":2,"b":3},"tool":"add"}'
    assert "Tool add result: 5" == rendered[3]
    assert rendered[0].startswith("Reply with exactly one JSON object.")


def test_structured_action_final_output_is_a_structured_part() -> None:
    """With an output schema, the final branch carries `output` and becomes a StructuredPart."""
    schema = OutputSchema(
        name="Sum", json_schema={"type": "object", "properties": {"total": {"type": "integer"}}}
    )
    script = Script([action({"action": "final", "output": {"total": 5}})])
    response = OllamaChatModel(
        MockTransport(lambda url, body: _ollama(script(url, body))),
        model="m",
        mode="structured-action",
    ).request(ModelRequest(transcript=ASK.transcript, output_schema=schema))
    assert (StructuredPart(schema_name="Sum", value={"total": 5}),) == response.message.parts
    assert action_schema((), schema) == script.bodies[0]["format"]


def test_structured_action_tells_the_output_schema_in_its_instructions() -> None:
    """The system message outlines the final output's fields, not only the action protocol."""
    schema = OutputSchema(
        name="Sum",
        json_schema={
            "type": "object",
            "properties": {"total": {"type": "integer", "description": "The sum."}},
            "required": ["total"],
        },
    )
    script = Script([action({"action": "final", "output": {"total": 5}})])
    model = openai_model(script, mode="structured-action")
    model.request(ModelRequest(transcript=ASK.transcript, output_schema=schema))
    system = script.bodies[0]["messages"][0]["content"]
    expected = 'The output has this shape:\n{\n  "total": integer  // The sum.\n}'
    assert expected in system


def _ollama(openai: JsonValue) -> JsonValue:
    assert isinstance(openai, dict)
    message = openai["choices"][0]["message"]
    return {"model": "m", "message": message, "done": True}


def test_structured_action_reasks_on_an_unknown_tool_then_gives_up() -> None:
    """A reply naming no offered tool is re-asked with the schema; after max_attempts it raises."""
    bad = action({"action": "call_tool", "tool": "mul", "arguments": {}})
    script = Script([bad, bad])
    with pytest.raises(StructuredOutputError) as caught:
        openai_model(script, mode="structured-action", max_attempts=2).request(ASK)
    assert len(script.bodies) == 2
    assert script.bodies[0]["response_format"] == script.bodies[1]["response_format"]
    assert "tool: must be one of ['add']" in script.bodies[1]["messages"][-1]["content"]
    assert [digest(b) for b in script.bodies] == [a.request_digest for a in caught.value.attempts]


def test_structured_action_reasks_sample_differently_and_a_cut_reply_is_named() -> None:
    """A re-ask in structured-action mode is hotter with a new seed; a cut reply says so."""
    bad = action({"action": "call_tool", "tool": "mul", "arguments": {}})
    cut = openai_answer({"content": '{"action": "call_tool", "tool": "ad'}, finish="length")
    script = Script([bad, cut, bad])
    with pytest.raises(StructuredOutputError) as caught:
        openai_model(script, mode="structured-action", max_attempts=3).request(ASK)
    step = RETRY_TEMPERATURE_STEP
    expected = [(None, None), (step, 1), (2 * step, 2)]
    assert expected == [(b.get("temperature"), b.get("seed")) for b in script.bodies]
    budgets = {b["max_tokens"] for b in script.bodies}
    assert 1 == len(budgets)
    recorded = [
        (a.settings.temperature, a.settings.seed) for a in caught.value.attempts if a.settings
    ]
    assert expected == recorded
    assert "cut off at max_tokens=" in script.bodies[2]["messages"][-1]["content"]


def test_action_schema_is_an_any_of_with_hoisted_defs() -> None:
    """One branch per tool plus the final branch; nested $defs move to the root."""

    class Inner(BaseModel):
        """Inner."""

        x: int

    class Outer(BaseModel):
        """Outer."""

        inner: Inner

    schema = action_schema((ADD,), OutputSchema.for_model(Outer))
    branches = schema["anyOf"]
    assert isinstance(branches, list)
    assert [b["properties"]["action"] for b in branches] == [
        {"const": "call_tool"},
        {"const": "final"},
    ]
    assert {"Inner": Inner.model_json_schema()} == schema["$defs"]
    assert "$defs" not in branches[1]["properties"]["output"]


def test_unknown_mode_is_a_usage_error() -> None:
    """A misspelt mode is refused at construction."""
    with pytest.raises(UserError, match="structured-action"):
        openai_model(Script([]), mode="json")


def test_plain_text_part_is_kept_when_native_structured_reply_is_not_json() -> None:
    """A non-JSON reply under an output schema stays text, for the loop's adapter to re-ask."""
    schema = OutputSchema(name="S", json_schema={"type": "object"})
    script = Script([openai_answer({"content": "sorry"})])
    response = openai_model(script).request(
        ModelRequest(transcript=ASK.transcript, output_schema=schema)
    )
    assert (TextPart(text="sorry"),) == response.message.parts


OLLAMA_CALL = {
    "model": "llama3.2",
    "message": {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}],
    },
    "done": True,
}
OPENAI_CALL = openai_answer(
    {
        "content": None,
        "tool_calls": [
            {
                "id": "srv-1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
        ],
    },
    finish="tool_calls",
)


@pytest.mark.parametrize("server", ["ollama", "llama-cpp-python", "llama.cpp"])
def test_call_ids_derive_from_the_digest_of_each_body_sent_with_a_schema(server: str) -> None:
    """With a reused output schema, each request's call id still comes from digest(its body)."""
    answer = OLLAMA_CALL if server == "ollama" else OPENAI_CALL
    script = Script([answer, answer])
    transport = MockTransport(script)
    model: OllamaChatModel | OpenAICompatibleChatModel
    if server == "ollama":
        model = OllamaChatModel(transport, model="llama3.2", mode="native")
    else:
        model = OpenAICompatibleChatModel(
            transport,
            base_url="http://127.0.0.1:9",
            dialect=server,  # type: ignore[arg-type]  # a Dialect from the parameter list
            mode="native",
        )
    schema = OutputSchema(name="Big", json_schema={"type": "number", "minimum": 0.5, "title": "é"})
    first = ModelRequest(transcript=ASK.transcript, tools=(ADD,), output_schema=schema)
    second = ModelRequest(
        transcript=ASK.transcript.append(Message.assistant("one more")),
        tools=(ADD,),
        output_schema=schema,
        settings=ModelSettings(temperature=0.25),
    )
    ids = [model.request(r).message.tool_calls[0].id for r in (first, second)]
    expected = [CallId(f"call_{digest(b)[:24]}_0") for b in script.bodies]
    assert expected == ids
    assert script.bodies[0] != script.bodies[1]


def test_strict_refusal_is_raised_on_every_request_not_cached_away() -> None:
    """A schema strict mode refuses is refused again on the next request, before any is sent."""
    from twinflow.models import SchemaError

    schema = OutputSchema(name="Set", json_schema={"type": "array", "uniqueItems": True})
    request = ModelRequest(transcript=ASK.transcript, output_schema=schema)
    script = Script([])
    model = OllamaChatModel(MockTransport(script), model="llama3.2", mode="native", strict=True)
    for _ in range(2):
        with pytest.raises(SchemaError):
            model.request(request)
    assert [] == script.bodies


# JSON a decoder can emit that has no canonical form: an overflowing float, an integer past
# 2**53-1, and Python's json extensions NaN / Infinity.
UNREPRESENTABLE = ["1e400", "123456789012345678901", "NaN", "-Infinity"]


@pytest.mark.parametrize("number", UNREPRESENTABLE)
def test_structured_action_reasks_a_reply_whose_numbers_have_no_canonical_form(
    number: str,
) -> None:
    """An action with a non-canonical number is re-asked with the schema, not raised as a crash."""
    schema = OutputSchema(
        name="Sum", json_schema={"type": "object", "properties": {"total": {"type": "number"}}}
    )
    script = Script(
        [
            openai_answer({"content": f'{{"action": "final", "output": {{"total": {number}}}}}'}),
            openai_answer(
                {
                    "content": '{"action": "call_tool", "tool": "add", "arguments": '
                    + f'{{"a": {number}, "b": 1}}}}'
                }
            ),
            action({"action": "final", "output": {"total": 5}}),
        ]
    )
    response = openai_model(script, mode="structured-action").request(
        ModelRequest(transcript=ASK.transcript, tools=(ADD,), output_schema=schema)
    )
    assert (StructuredPart(schema_name="Sum", value={"total": 5}),) == response.message.parts
    assert 3 == len(script.bodies)
    expected = action_schema((ADD,), schema)
    assert [expected] * 3 == [b["response_format"]["json_schema"]["schema"] for b in script.bodies]
    assert "output/total: " in script.bodies[1]["messages"][-1]["content"]
    assert "arguments/a: " in script.bodies[2]["messages"][-1]["content"]


@pytest.mark.parametrize("number", UNREPRESENTABLE)
def test_native_structured_reply_with_a_non_canonical_number_stays_text(number: str) -> None:
    """Such a reply under an output schema is left as text for the loop's adapter to re-ask."""
    schema = OutputSchema(name="S", json_schema={"type": "object"})
    content = f'{{"total": {number}}}'
    script = Script([openai_answer({"content": content})])
    response = openai_model(script).request(
        ModelRequest(transcript=ASK.transcript, output_schema=schema)
    )
    assert (TextPart(text=content),) == response.message.parts


def test_the_default_mode_is_the_spec_s_default() -> None:
    """Both clients default to structured-action, as `model.mode` does in a run spec."""
    expected = ("structured-action", "structured-action")
    ollama = OllamaChatModel(MockTransport(Script([])), model="m")
    openai = OpenAICompatibleChatModel(
        MockTransport(Script([])), base_url="http://127.0.0.1:9", dialect="llama.cpp"
    )
    assert expected == (ollama.mode, openai.mode)
