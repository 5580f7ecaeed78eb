"""Structured output over a transport: schema on every request, retries, attempts, failures."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field, JsonValue

from twinflow.kernel import (
    HttpTransport,
    LoopbackResponse,
    LoopbackServer,
    MockTransport,
    TransportError,
)
from twinflow.kernel._fault import FaultTransport
from twinflow.kernel._netpolicy import free_port
from twinflow.models import (
    MalformedResponseError,
    OllamaChatModel,
    OpenAICompatibleChatModel,
    SchemaError,
)
from twinflow.models._budget import MAX_BUDGET, MIN_BUDGET, max_tokens_for
from twinflow.models._chat import RETRY_TEMPERATURE_STEP
from twinflow.models._preflight import preflight
from twinflow.trace import UserError
from twinflow.vocab import (
    Message,
    ModelSettings,
    StructuredOutputError,
    Transcript,
    digest,
)
from twinflow.vocab._reask import reask_message


class Person(BaseModel):
    """A person."""

    name: str
    age: int = Field(ge=50)


PERSON_SENT = preflight(Person, "llama.cpp").sent_schema
"""Person's schema as sent: its plain string gets the JSON-string-text pattern."""

QUESTION = Transcript(messages=(Message.user("Ada is 36. Give name and age."),))


def openai_answer(content: str | None) -> JsonValue:
    return {
        "id": "x",
        "model": "smol",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }


def ollama_answer(content: str) -> JsonValue:
    return {"model": "smol", "message": {"role": "assistant", "content": content}, "done": True}


class Script:
    """A handler that answers with the given emissions in turn and records every body."""

    def __init__(self, emissions: list[str | None], answer: Any = openai_answer) -> None:
        self.emissions = list(emissions)
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []
        self.urls: list[str] = []

    def __call__(self, url: str, body: JsonValue) -> JsonValue:
        assert isinstance(body, dict)
        self.urls.append(url)
        self.bodies.append(body)
        return self.answer(self.emissions.pop(0))


def openai(script: Script, **kwargs: Any) -> OpenAICompatibleChatModel:
    return OpenAICompatibleChatModel(
        MockTransport(script), base_url="http://127.0.0.1:9", dialect="llama-cpp-python", **kwargs
    )


def test_a_valid_first_answer_takes_one_attempt_with_its_request_digest() -> None:
    """One request, one attempt, carrying the digest of the exact body sent."""
    script = Script(['{"name": "Ada", "age": 60}'])
    result = openai(script).generate(QUESTION, Person)
    assert Person(name="Ada", age=60) == result.output
    assert len(result.attempts) == 1
    attempt = result.attempts[0]
    assert (1, None, digest(script.bodies[0])) == (
        attempt.number,
        attempt.error,
        attempt.request_digest,
    )
    assert script.urls == ["http://127.0.0.1:9/v1/chat/completions"]


def test_a_refused_answer_is_reasked_with_the_error_and_the_schema() -> None:
    """The second request repeats the schema and gives the validation error back as a user message."""
    script = Script(['{"name": "Ada", "age": 36}', '{"name": "Ada", "age": 63}'])
    result = openai(script).generate(QUESTION, Person)
    assert Person(name="Ada", age=63) == result.output
    assert [a.number for a in result.attempts] == [1, 2]
    first, second = script.bodies
    assert first["response_format"] == second["response_format"]
    assert (
        result.attempts[0].error
        == "/age: Input should be greater than or equal to 50 (the reply gave 36)"
    )
    assert second["messages"][1] == {"role": "assistant", "content": '{"name": "Ada", "age": 36}'}
    assert "greater than or equal to 50" in second["messages"][2]["content"]
    assert [digest(b) for b in script.bodies] == [a.request_digest for a in result.attempts]


def test_invalid_json_and_empty_content_are_retried_like_validation_errors() -> None:
    """Truncated JSON and a null content are failed attempts, not crashes."""
    script = Script(['{"name": "Ad', None, '{"name": "Ada", "age": 50}'])
    result = openai(script).generate(QUESTION, Person)
    assert [a.emission for a in result.attempts] == [
        '{"name": "Ad',
        "",
        '{"name": "Ada", "age": 50}',
    ]
    errors = [a.error for a in result.attempts]
    assert errors[0] is not None and "Invalid JSON" in errors[0]
    assert errors[1] is not None and "Invalid JSON" in errors[1]
    assert errors[2] is None


def test_max_attempts_counts_every_attempt_then_raises_with_all_of_them() -> None:
    """With max_attempts=2, two requests are made and the error carries both attempts."""
    script = Script(['{"name": "A", "age": 1}', '{"name": "A", "age": 2}', "unused"])
    with pytest.raises(StructuredOutputError) as caught:
        openai(script, max_attempts=2).generate(QUESTION, Person)
    assert len(script.bodies) == 2
    assert [a.emission for a in caught.value.attempts] == [
        '{"name": "A", "age": 1}',
        '{"name": "A", "age": 2}',
    ]


def test_max_attempts_below_one_is_a_usage_error() -> None:
    """Zero attempts would mean no request at all: refused at construction."""
    with pytest.raises(UserError, match="at least 1"):
        openai(Script([]), max_attempts=0)


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        ("llama-cpp-python", {"type": "json_object", "schema": PERSON_SENT}),
        (
            "vllm",
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "Person",
                    "schema": PERSON_SENT,
                    "strict": True,
                },
            },
        ),
        (
            "llama.cpp",
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "Person",
                    "schema": PERSON_SENT,
                    "strict": True,
                },
            },
        ),
        (
            "lmstudio",
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "Person",
                    "schema": PERSON_SENT,
                    "strict": True,
                },
            },
        ),
    ],
)
def test_each_dialect_sends_the_schema_its_own_way(dialect: Any, expected: JsonValue) -> None:
    """llama-cpp-python gets json_object + schema; llama.cpp, vLLM and LM Studio get json_schema."""
    script = Script(['{"name": "Ada", "age": 50}'])
    OpenAICompatibleChatModel(
        MockTransport(script), base_url="http://127.0.0.1:9/", dialect=dialect
    ).generate(QUESTION, Person)
    assert expected == script.bodies[0]["response_format"]
    assert script.bodies[0]["temperature"] == 0


def test_extra_body_reaches_the_server_unmodified_on_every_attempt() -> None:
    """vLLM's guided_json and llama.cpp's grammar pass through as given, retries included."""
    extra: dict[str, JsonValue] = {
        "guided_json": Person.model_json_schema(),
        "grammar": 'root ::= "{" [^}]* "}"',
        "top_k": 1,
    }
    script = Script(['{"name": "Ada", "age": 3}', '{"name": "Ada", "age": 50}'])
    openai(script, extra_body=extra).generate(QUESTION, Person)
    for body in script.bodies:
        assert extra == {k: body[k] for k in extra}


def test_extra_body_may_not_replace_the_schema() -> None:
    """A pass-through field that would drop or replace the schema is a usage error."""
    with pytest.raises(UserError, match="response_format"):
        openai(Script([]), extra_body={"response_format": {"type": "text"}})


def test_ollama_sends_format_stream_false_and_temperature_zero() -> None:
    """Ollama gets POST /api/chat with format = the schema and options.temperature = 0."""
    script = Script(['{"name": "Ada", "age": 70}'], answer=ollama_answer)
    result = OllamaChatModel(MockTransport(script), model="llama3.2").generate(QUESTION, Person)
    body = script.bodies[0]
    assert script.urls == ["http://127.0.0.1:11434/api/chat"]
    budget = max_tokens_for(PERSON_SENT)
    assert (PERSON_SENT, False, {"temperature": 0, "num_predict": budget}) == (
        body["format"],
        body["stream"],
        body["options"],
    )
    assert result.output.age == 70


def test_patterns_are_anchored_and_the_rewrite_travels_with_the_result() -> None:
    """The anchored pattern is what is sent; the report on the result records the rewrite."""

    class Code(BaseModel):
        """A code."""

        code: str = Field(pattern="[A-Z]{3}")

    script = Script(['{"code": "xABCx"}'], answer=ollama_answer)
    model = OllamaChatModel(MockTransport(script), model="m")
    model.generate(QUESTION, Code)
    anchored = "^([A-Z]{3})$"
    assert anchored == script.bodies[0]["format"]["properties"]["code"]["pattern"]
    assert tuple(r.before for r in model.preflight(Code).rewrites) == ("[A-Z]{3}",)


def test_strict_mode_refuses_before_any_request() -> None:
    """Strict pre-flight raises without sending anything."""
    script = Script([])
    with pytest.raises(SchemaError, match="minimum"):
        openai(script, strict=True).generate(QUESTION, Person)
    assert script.bodies == []


def test_no_attempt_falls_back_to_an_unconstrained_call() -> None:
    """Every request, retries included, carries the schema; none is sent without it."""
    for make, key in (
        (lambda s: openai(s), "response_format"),
        (lambda s: OllamaChatModel(MockTransport(s), model="m"), "format"),
    ):
        answer = openai_answer if key == "response_format" else ollama_answer
        script = Script(["nope", "{}", '{"name": 1}'], answer=answer)
        with pytest.raises(StructuredOutputError):
            make(script).generate(QUESTION, Person)
        assert len(script.bodies) == 3
        sent = [b[key] for b in script.bodies]
        assert [PERSON_SENT] * 3 == [s if key == "format" else s["schema"] for s in sent]


def test_a_missing_daemon_is_not_retried_and_is_never_swallowed() -> None:
    """A refused connection (real socket, nothing listening) raises TransportError "connect" after one try."""
    port = free_port()
    calls: list[str] = []
    real = HttpTransport()

    def counting(url: str, body: JsonValue) -> JsonValue:
        calls.append(url)
        return real.post_json(url, body, timeout=5)

    adapter = OpenAICompatibleChatModel(
        MockTransport(counting), base_url=f"http://127.0.0.1:{port}", dialect="llama.cpp"
    )
    with pytest.raises(TransportError, check=lambda e: "connect" == e.reason) as caught:
        adapter.generate(QUESTION, Person)
    assert [f"http://127.0.0.1:{port}/v1/chat/completions"] == calls
    assert f"http://127.0.0.1:{port}/v1/chat/completions" == caught.value.url
    ollama = OllamaChatModel(real, model="m", base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(TransportError, check=lambda e: "connect" == e.reason):
        ollama.generate(QUESTION, Person)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("refuse", "connect"),
        ("timeout", "timeout"),
        ("reset", "connect"),
        ("server_error", "status"),
    ],
)
def test_transport_faults_leave_at_once_and_unretried(fault: Any, reason: str) -> None:
    """Refusals, timeouts, resets and 5xx propagate after exactly one request."""
    script = Script(['{"name": "Ada", "age": 50}'] * 3)
    transport = FaultTransport(MockTransport(script), [fault, None, None])
    adapter = OpenAICompatibleChatModel(
        transport, base_url="http://127.0.0.1:9", dialect="llama.cpp", timeout=0.5
    )
    with pytest.raises(TransportError, check=lambda e: reason == e.reason):
        adapter.generate(QUESTION, Person)
    assert [(0, fault)] == transport.injected
    assert script.bodies == []


def test_an_http_4xx_is_not_retried() -> None:
    """A 400 from a real loopback server raises TransportError "status" after one request."""
    with LoopbackServer(
        lambda r: LoopbackResponse.json_body({"error": "bad schema"}, status=400)
    ) as server:
        adapter = OpenAICompatibleChatModel(
            HttpTransport(), base_url=server.url, dialect="llama-cpp-python"
        )
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
            adapter.generate(QUESTION, Person)
        assert len(server.requests) == 1
    assert caught.value.status == 400


def test_a_response_that_is_not_the_wire_format_is_an_error_not_a_retry() -> None:
    """A 200 without `choices` raises MalformedResponseError naming the pointer."""
    transport = MockTransport(lambda url, body: {"object": "error"})
    adapter = OpenAICompatibleChatModel(transport, base_url="http://127.0.0.1:9", dialect="vllm")
    with pytest.raises(MalformedResponseError, match="/choices"):
        adapter.generate(QUESTION, Person)


ADA_OK = '{"name": "Ada", "age": 70}'


def openai_with(transport: MockTransport) -> OpenAICompatibleChatModel:
    return OpenAICompatibleChatModel(
        transport, base_url="http://127.0.0.1:9", dialect="llama-cpp-python"
    )


def cut_answer(content: str) -> JsonValue:
    """An OpenAI-style answer that stopped at max_tokens."""
    answer = openai_answer(content)
    assert isinstance(answer, dict)
    choices = answer["choices"]
    assert isinstance(choices, list) and isinstance(choices[0], dict)
    choices[0]["finish_reason"] = "length"
    return answer


def test_each_reask_raises_the_temperature_and_moves_the_seed() -> None:
    """A re-ask samples differently from the failed attempt, and each attempt records how."""
    script = Script(['{"name": "Ada", "age": 36}', '{"name": "Ada", "age": 37}', ADA_OK])
    result = openai(script).generate(QUESTION, Person)
    sent = [(b["temperature"], b.get("seed")) for b in script.bodies]
    step = RETRY_TEMPERATURE_STEP
    expected = [(0, None), (step, 1), (2 * step, 2)]
    assert expected == sent
    recorded = [(a.settings.temperature, a.settings.seed) for a in result.attempts if a.settings]
    assert expected == recorded


def test_the_retry_temperature_is_capped_and_never_below_the_callers() -> None:
    """The raised temperature stops at 1.0 and starts from the caller's own temperature."""
    script = Script(['{"name": "Ada"}', '{"name": "Ada"}', ADA_OK])
    openai(script).generate(QUESTION, Person, settings=ModelSettings(temperature=0.9, seed=7))
    expected = [(0.9, 7), (1.0, 8), (1.0, 9)]
    assert expected == [(b["temperature"], b.get("seed")) for b in script.bodies]


def test_every_request_carries_a_max_tokens_derived_from_the_schema() -> None:
    """With no max_tokens given, each request gets the schema's budget; a given one wins."""
    script = Script(['{"name": "Ada"}', ADA_OK])
    openai(script).generate(QUESTION, Person)
    budget = max_tokens_for(PERSON_SENT)
    assert [budget, budget] == [b["max_tokens"] for b in script.bodies]
    given = Script([ADA_OK])
    openai(given).generate(QUESTION, Person, settings=ModelSettings(temperature=0, max_tokens=77))
    assert [77] == [b["max_tokens"] for b in given.bodies]


def test_a_reply_cut_at_max_tokens_is_reasked_and_the_error_says_so() -> None:
    """A generation stopped by max_tokens is refused, named as cut, and re-asked."""
    replies = iter([cut_answer('{"name": "Adaaaaaa'), openai_answer(ADA_OK)])
    bodies: list[Any] = []

    def handler(url: str, body: JsonValue) -> JsonValue:
        bodies.append(body)
        return next(replies)

    result = openai_with(MockTransport(handler)).generate(QUESTION, Person)
    first = result.attempts[0].error or ""
    assert (2, True) == (len(result.attempts), first.startswith("(root): the reply was cut off"))
    assert "cut off at max_tokens=" in bodies[1]["messages"][-1]["content"]


class Child(BaseModel):
    """A node of a tree."""

    name: str
    children: list[Child] = []


@pytest.mark.parametrize(
    ("schema", "low", "high"),
    [
        ({"type": "boolean"}, MIN_BUDGET, MIN_BUDGET),
        ({"type": "string", "maxLength": 400}, 330, 345),
        ({"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 3}, 255, 275),
        ({"type": "string"}, MIN_BUDGET, MIN_BUDGET + 16),
        ({"type": "array", "items": {"type": "string", "maxLength": 900}}, MAX_BUDGET, MAX_BUDGET),
    ],
)
def test_the_budget_follows_the_largest_valid_instance(schema: Any, low: int, high: int) -> None:
    """max_tokens grows with the largest instance the schema allows, within its floor and cap."""
    assert True is (low <= max_tokens_for(schema) <= high)


def test_the_budget_of_a_recursive_schema_is_finite() -> None:
    """A recursive model's budget follows its references a bounded number of levels."""
    budget = max_tokens_for(Child.model_json_schema())
    assert True is (MIN_BUDGET < budget < MAX_BUDGET)


class Ticket(BaseModel):
    """A pattern, a bound and a required field, each failing once."""

    code: str = Field(pattern=r"^[A-Z]{3}-\d{2}$")
    seats: int = Field(le=9)
    note: str


def test_a_reask_names_the_pointer_the_constraint_and_the_value_given() -> None:
    """Each refused field comes back as pointer, constraint and the value the model wrote."""
    long_code = "x" * 200
    script = Script(
        [json.dumps({"code": long_code, "seats": 12}), '{"code": "ABC-12", "seats": 2, "note": ""}']
    )
    openai(script).generate(QUESTION, Ticket)
    given = json.dumps(long_code)[:77] + "..."
    expected = reask_message(
        f"/code: String should match pattern '^[A-Z]{{3}}-\\d{{2}}$' (the reply gave {given})\n"
        "/seats: Input should be less than or equal to 9 (the reply gave 12)\n"
        "/note: Field required"
    )
    assert expected == script.bodies[1]["messages"][-1]["content"]
