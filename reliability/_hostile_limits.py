"""Hostile rate limits: servers that refuse every request with a hostile ``Retry-After``.

One class, counted, on a real loopback server behind the real transport and the agent loop
(the agent's clock a `SteppingClock`, whose `sleep` moves it without waiting): a status of
429, 503 or 529 with a ``Retry-After`` of a year, an HTTP date far ahead or long past, a
negative number, garbage, 5000 digits, ``1e400``, ``NaN``, a non-ASCII digit, an empty value,
or none, answered a few times and then with a reply, or forever. Each run must end with the
reply or with a `TransportError` whose message says ``not retried`` (quoting the header when
it was the reason), within its ``total_wait_seconds``; never another exception. Every trace
verifies, and its replay matches it byte for byte.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from _common import Figures

from twinflow.agent import Agent, Trace, replay
from twinflow.agent._retry import RetryLimits
from twinflow.kernel import HttpTransport, LoopbackServer, SteppingClock, TransportError
from twinflow.kernel._ids import SeededIds
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.models import OpenAICompatibleChatModel
from twinflow.trace import MemoryTraceSink

_START = datetime(2026, 1, 1, tzinfo=UTC)
_HEADERS = (
    None,
    "0",
    "3",
    "31536000",
    "Fri, 01 Jan 2027 00:00:00 GMT",
    "Thu, 01 Jan 2026 00:00:00 GMT",
    "Fri, 32 Jan 2026 00:00:00 GMT",
    "-5",
    "soon",
    "9" * 5000,
    "1e400",
    "NaN",
    "\u00b2",  # a superscript two: a digit to str.isdigit, not to HTTP
    "",
)
_ANSWER = {
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
}
_LIMITS = RetryLimits(attempts=6, total_wait_seconds=40)


def _server(status: int, header: str | None, refusals: int) -> LoopbackServer:
    left = [refusals]

    def answer(request: LoopbackRequest) -> LoopbackResponse:
        if left[0] == 0:
            return LoopbackResponse.json_body(_ANSWER)
        left[0] -= 1
        headers = () if header is None else (("Retry-After", header),)
        return LoopbackResponse(status=status, headers=headers, body=b'{"error":"later"}')

    return LoopbackServer(answer)


def _agent(model: Any, sink: Any) -> Agent[str]:
    return Agent(
        model,
        clock=SteppingClock(_START, timedelta(seconds=1)),
        ids=SeededIds(1),
        trace=sink,
        retries=_LIMITS,
    )


def _one(figures: Figures, status: int, header: str | None, refusals: int) -> None:
    label = f"{status} Retry-After {header!r:.30} x{refusals}"
    sink = MemoryTraceSink()
    with _server(status, header, refusals) as server:
        model = OpenAICompatibleChatModel(
            HttpTransport(), base_url=server.url, dialect="llama.cpp", mode="native"
        )
        try:
            _agent(model, sink).run("hi")
        except TransportError as exc:
            if "not retried" not in str(exc) or (
                "asks for" in str(exc) and repr(header) not in str(exc)
            ):
                figures.fail(f"limits / {label}: unclear end: {exc}")
        except Exception as exc:  # the invariant: nothing else escapes
            figures.fail(f"limits / {label}: {type(exc).__name__}: {exc}")
            return
    bodies = [json.loads(line)["event"]["body"] for line in sink.data.splitlines()]
    waited = sum(b["wait_seconds"] for b in bodies if b["kind"] == "model_waited")
    if waited > _LIMITS.total_wait_seconds:
        figures.fail(f"limits / {label}: waited {waited} s, over the budget")
    trace = Trace.load(sink.data)
    try:
        replay(
            trace,
            lambda ports: Agent(
                ports.model,
                clock=ports.clock,
                ids=ports.ids,
                trace=ports.trace,
                model_label=ports.model_label,
                tool_results=ports.tool_results,
                retries=_LIMITS,
            ),
        )
    except Exception as exc:
        figures.fail(f"limits / {label}: replay: {type(exc).__name__}: {exc}")


def hostile_limits(figures: Figures, full: bool) -> None:
    """Every hostile header, under each refusing status, a few refusals and forever."""
    statuses = (429, 503, 529) if full else (429,)
    runs = 0
    for status in statuses:
        for header in _HEADERS:
            for refusals in (2, 1000):
                _one(figures, status, header, refusals)
                runs += 1
    figures.values["rate-limited runs"] = runs
