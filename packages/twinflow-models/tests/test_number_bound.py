"""A reply's numbers are judged by the canonical encoder's one bound, ±(2**53-1), to the integer."""

from __future__ import annotations

import json

import pytest

from twinflow._base._json import MAX_SAFE_INTEGER
from twinflow.kernel import MockTransport
from twinflow.models import OpenAICompatibleChatModel
from twinflow.vocab import (
    JsonValue,
    Message,
    ModelRequest,
    OutputSchema,
    StructuredPart,
    Transcript,
)

SUM = OutputSchema(
    name="Sum", json_schema={"type": "object", "properties": {"total": {"type": "integer"}}}
)
ASK = ModelRequest(transcript=Transcript(messages=(Message.user("sum?"),)), output_schema=SUM)


def reply(total: int) -> JsonValue:
    """An OpenAI-style answer whose content is a final structured action."""
    content = json.dumps({"action": "final", "output": {"total": total}})
    return {
        "model": "smol",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }


@pytest.mark.parametrize(
    ("total", "requests"),
    [
        (MAX_SAFE_INTEGER, 1),
        (-MAX_SAFE_INTEGER, 1),
        (MAX_SAFE_INTEGER + 1, 2),
        (-MAX_SAFE_INTEGER - 1, 2),
    ],
)
def test_an_integer_is_kept_exactly_up_to_the_bound_and_reasked_past_it(
    total: int, requests: int
) -> None:
    """±(2**53-1) is an answer; one past it is re-asked, and the next valid reply is the answer."""
    answers = [reply(total), reply(5)]
    sent: list[JsonValue] = []

    def handler(url: str, body: JsonValue) -> JsonValue:
        del url
        sent.append(body)
        return answers.pop(0)

    model = OpenAICompatibleChatModel(
        MockTransport(handler), base_url="http://127.0.0.1:9", dialect="llama.cpp"
    )
    response = model.request(ASK)
    kept = total if requests == 1 else 5
    assert (StructuredPart(schema_name="Sum", value={"total": kept}),) == response.message.parts
    assert requests == len(sent)
