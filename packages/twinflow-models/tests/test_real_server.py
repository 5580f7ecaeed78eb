"""Against a real model: llama-cpp-python's server constraining SmolLM2-135M to our schemas."""

from __future__ import annotations

import json
from enum import StrEnum

import pytest
from pydantic import BaseModel, Field

from twinflow.kernel import HttpTransport
from twinflow.models import OpenAICompatibleChatModel
from twinflow.models._chat import RETRY_TEMPERATURE_STEP
from twinflow.vocab import (
    Message,
    ModelRequest,
    ModelSettings,
    StructuredOutputError,
    ToolResultPart,
    ToolSpec,
    Transcript,
    digest,
)

SETTINGS = ModelSettings(temperature=0, max_tokens=96, seed=0)


class Address(BaseModel):
    """An address."""

    city: str
    country: str


class Customer(BaseModel):
    """Nested object."""

    name: str
    address: Address


class Item(BaseModel):
    """A line item."""

    product: str
    quantity: int


class Order(BaseModel):
    """Array of objects."""

    items: list[Item] = Field(max_length=3)


class Colour(StrEnum):
    """Colours."""

    red = "red"
    green = "green"
    blue = "blue"


class Paint(BaseModel):
    """Enum."""

    colour: Colour


class Dice(BaseModel):
    """Integer bounds."""

    roll: int = Field(ge=1, le=6)


class Contact(BaseModel):
    """Optional fields."""

    name: str
    email: str | None = None
    phone: str | None = None


class Person(BaseModel):
    """A bound the grammar drops: llama-cpp-python does not enforce `minimum`."""

    name: str
    age: int = Field(ge=50)


def adapter(base: str, max_attempts: int = 3) -> OpenAICompatibleChatModel:
    return OpenAICompatibleChatModel(
        HttpTransport(),
        base_url=base,
        dialect="llama-cpp-python",
        max_attempts=max_attempts,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("question", "output_type"),
    [
        ("Ada lives in Paris, France. Give the customer.", Customer),
        ("Order: 2 apples and 1 pear. Give the order items.", Order),
        ("The paint is the colour of the sky. Which colour?", Paint),
        ("I rolled a four. Give the roll.", Dice),
        ("Contact: Bob, phone 555-1234. Give the contact.", Contact),
    ],
)
def test_the_real_model_answers_schema_valid_values(
    llama_server: str, question: str, output_type: type[BaseModel]
) -> None:
    """Nested objects, arrays of objects, enums, integer bounds and optional fields all validate."""
    result = adapter(llama_server).generate(
        (Message.user(question),), output_type, settings=SETTINGS
    )
    assert isinstance(result.output, output_type)
    assert result.attempts[-1].error is None


def test_the_second_validation_catches_what_the_grammar_let_through(llama_server: str) -> None:
    """The decoder emits age 36 under `minimum: 50`; pydantic refuses it and the retry keeps the schema."""
    bodies: list[dict[str, object]] = []
    real = HttpTransport()

    class Spy:
        def post_json(self, url: str, body: object, *, timeout: float) -> object:
            assert isinstance(body, dict)
            bodies.append(body)
            return real.post_json(url, body, timeout=timeout)

        def close(self) -> None:
            real.close()

    structured = OpenAICompatibleChatModel(
        Spy(),  # type: ignore[arg-type]  # a duck-typed spy standing in for the transport
        base_url=llama_server,
        dialect="llama-cpp-python",
        max_attempts=2,
        timeout=60,
    )
    question = Transcript(messages=(Message.user("Ada is 36. Give her name and age as JSON."),))
    report = structured.preflight(Person)
    assert [f.pointer for f in report.findings] == ["/properties/age/minimum"]
    # The re-ask samples hotter and with another seed, so it may or may not fix the age; either
    # way the value the grammar let through never reaches the caller.
    try:
        attempts = structured.generate(question, Person, settings=SETTINGS).attempts
    except StructuredOutputError as caught:
        attempts = caught.attempts
    first = attempts[0]
    assert json.loads(first.emission)["age"] == 36
    assert first.error == "/age: Input should be greater than or equal to 50 (the reply gave 36)"
    assert len(bodies) == 2
    schema = report.sent_schema
    assert [schema, schema] == [b["response_format"]["schema"] for b in bodies]
    assert [digest(b) for b in bodies] == [a.request_digest for a in attempts]
    assert [0, RETRY_TEMPERATURE_STEP] == [b["temperature"] for b in bodies]


def test_a_structured_action_exchange_with_the_real_model(llama_server: str) -> None:
    """Step one is constrained to call `add`; with the result in, the final answer closes the run."""
    add = ToolSpec(
        name="add",
        description="Add two integers a and b.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )
    model = OpenAICompatibleChatModel(
        HttpTransport(),
        base_url=llama_server,
        dialect="llama-cpp-python",
        mode="structured-action",
        timeout=60,
    )
    transcript = Transcript(messages=(Message.user("What is 2 + 3? Use the add tool."),))
    first = model.request(ModelRequest(transcript=transcript, tools=(add,), settings=SETTINGS))
    (call,) = first.message.tool_calls
    assert (call.name, first.finish_reason) == ("add", "tool_calls")
    assert {"a", "b"} == set(call.arguments)
    a, b = call.arguments["a"], call.arguments["b"]
    assert isinstance(a, int) and isinstance(b, int)
    transcript = transcript.append(
        first.message,
        Message(
            role="tool", parts=(ToolResultPart(call_id=call.id, name="add", content=str(a + b)),)
        ),
    )
    # The loop offers no further tool once it has the result: the union is the final branch alone.
    final = model.request(ModelRequest(transcript=transcript, settings=SETTINGS))
    assert final.finish_reason == "stop"
    assert final.message.tool_calls == ()
    assert final.message.text != ""


# --- the held-out schema shapes, with the adapter's own defaults (no max_tokens given) -----


class Node(BaseModel):
    """A recursive model: its schema's root is a $ref the converter could not follow."""

    name: str
    children: list[Node] = []


class Line(BaseModel):
    """One item of a bounded list."""

    product: str
    quantity: int


class Basket(BaseModel):
    """A list of objects with item bounds: the shape that ran to the client timeout."""

    lines: list[Line] = Field(min_length=2, max_length=5)


class Code(BaseModel):
    """A `\\d` pattern: its grammar did not parse and took the server down."""

    code: str = Field(pattern=r"^\d{3}$")


def server_answers(base: str) -> bool:
    """The server still answers a one-token request."""
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    answer = HttpTransport().post_json(f"{base}/v1/chat/completions", body, timeout=60)
    return isinstance(answer, dict) and "choices" in answer


@pytest.mark.parametrize(
    ("question", "output_type"),
    [
        ("A tree: root 'a' with two children 'b' and 'c'. Give the tree.", Node),
        ("Basket: 2 apples and 3 pears. Give the basket lines.", Basket),
        ("The room code is 042. Give the code.", Code),
    ],
)
def test_the_shapes_that_failed_now_give_valid_answers(
    llama_server: str, question: str, output_type: type[BaseModel]
) -> None:
    """Recursive, bounded-list and \\d-pattern models validate, and the server lives on."""
    structured = OpenAICompatibleChatModel(
        HttpTransport(), base_url=llama_server, dialect="llama-cpp-python", timeout=60
    )
    result = structured.generate((Message.user(question),), output_type)
    assert (True, None) == (isinstance(result.output, output_type), result.attempts[-1].error)
    assert True is server_answers(llama_server)


class Parcel(BaseModel):
    """Unanchored patterns: the filler around them must not let the string close early."""

    zip_code: str = Field(pattern=r"\d{5}")
    ref: str = Field(pattern=r"^[A-Z]+")


@pytest.mark.real_model
@pytest.mark.parametrize(("temperature", "seed"), [(0.0, 0), (0.7, 3)])
def test_an_unanchored_pattern_cannot_close_its_string_early(
    llama_server: str, temperature: float, seed: int
) -> None:
    """The model cannot write `10969"}` inside the zip's filler: the first answer validates."""
    structured = OpenAICompatibleChatModel(
        HttpTransport(),
        base_url=llama_server,
        dialect="llama-cpp-python",
        max_attempts=1,
        timeout=60,
    )
    question = "The parcel goes to zip code 10969, reference ABC. Give zip_code and ref."
    settings = ModelSettings(temperature=temperature, max_tokens=64, seed=seed)
    result = structured.generate((Message.user(question),), Parcel, settings=settings)
    assert (1, None) == (len(result.attempts), result.attempts[0].error)
