"""A scripted agent for the eval tests: a currency tool and a model that reads the prompt."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from twinflow.agent import Agent, FunctionModel, Policy
from twinflow.eval import Case, Dataset
from twinflow.eval._observe import Observation
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import TraceSink
from twinflow.vocab import (
    CallId,
    JsonValue,
    Message,
    ModelRequest,
    ModelSettings,
    TextPart,
    ToolCallPart,
)

START = datetime(2026, 1, 1, tzinfo=UTC)


class Total(BaseModel):
    """The answer: an amount in euros."""

    total_eur: float
    """The amount in EUR."""


def convert(amount: float, currency: str) -> float:
    """Convert an amount to EUR (fixed rates)."""
    return round(amount * {"USD": 0.5, "EUR": 1.0, "GBP": 2.0}[currency], 2)


def reply(request: ModelRequest) -> Message:
    """Call `convert` once with the prompt's amount and currency, then answer with its result.

    Prompts look like ``"12 USD"``; ``"wrong 12 USD"`` answers 0; ``"bad ..."`` answers invalid JSON.
    """
    prompt = request.transcript.messages[0].text
    results = [p for m in request.transcript.messages for p in m.parts if m.role == "tool"]
    if "bad" in prompt:
        return Message(role="assistant", parts=(TextPart(text="not json"),))
    if not results:
        match = re.search(r"([\d.]+) ([A-Z]{3})", prompt)
        assert match is not None
        args: dict[str, JsonValue] = {"amount": float(match[1]), "currency": match[2]}
        return Message(
            role="assistant",
            parts=(ToolCallPart(id=CallId("call-1"), name="convert", arguments=args),),
        )
    content = getattr(results[-1], "content", "0")
    value = 0.0 if "wrong" in prompt else float(content)
    return Message.assistant(json.dumps({"total_eur": value}))


def scripted_agent(
    sink: TraceSink,
    seed: int,
    answer: Callable[[ModelRequest], Message] = reply,
    **options: Any,
) -> Agent[Any]:
    """The scripted agent (``answer`` its model, `reply` unless told) with `convert` allowed,
    a `Total` to answer, fresh deterministic ports, ``seed`` and ``sink``; ``options`` are the
    rest of `Agent`'s keywords."""
    return Agent(
        FunctionModel(answer),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[convert],
        policy=Policy(allow=frozenset({"convert"})),
        output_type=Total,
        settings=ModelSettings(seed=seed),
        trace=sink,
        **options,
    )


def factory(counter: list[str] | None = None) -> Callable[[Case, TraceSink, int], Agent[Any]]:
    """An agent factory; appends each case id it builds an agent for to ``counter``."""

    def build(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        if counter is not None:
            counter.append(case.id)
        return scripted_agent(sink, seed, max_steps=3)

    return build


def dying_factory(
    marker_dir: str, case_id: str, deaths: int
) -> Callable[[Case, TraceSink, int], Agent[Any]]:
    """`factory`, but the process running case ``case_id`` dies at its first model request,
    on each of its first ``deaths`` attempts (counted as lines of ``<marker_dir>/<case_id>``).

    The death is mid-case: the run has started and its first events are in the trace sink.
    """
    inner = factory()

    def build(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        agent = inner(case, sink, seed)
        if case.id == case_id:
            marker = Path(marker_dir) / case.id
            with marker.open("a") as f:
                f.write("attempt\n")
            dies = len(marker.read_text().splitlines()) <= deaths

            def dying(request: ModelRequest) -> Message:
                if dies:
                    os._exit(1)  # killed mid-case, unwarned
                return reply(request)

            agent.model = FunctionModel(dying)
        return agent

    return build


def dataset(n: int = 6, *, wrong: tuple[int, ...] = (), bad: tuple[int, ...] = ()) -> Dataset:
    """``n`` cases ``c0``..; the ``wrong`` ones answer 0, the ``bad`` ones never validate."""
    cases = []
    for i in range(n):
        amount = 10.0 + i
        currency = ("USD", "EUR", "GBP")[i % 3]
        prefix = "wrong " if i in wrong else "bad " if i in bad else ""
        cases.append(
            Case(
                id=f"c{i}",
                input=f"{prefix}{amount} {currency}",
                expected={"total_eur": convert(amount, currency)},
                tags=(currency.lower(),),
            )
        )
    return Dataset.model_validate(
        {
            "name": "scripted",
            "scorers": [
                {"kind": "fields"},
                {"kind": "schema"},
                {
                    "kind": "tool_calls",
                    "calls": [{"tool": "convert", "args": {"amount": {"$gt": 0}}}],
                },
                {"kind": "no_denied_calls"},
            ],
            "cases": [c.model_dump() for c in cases],
        }
    )


def always_raises(observation: Observation, expected: JsonValue) -> bool:
    """A custom scorer that is broken."""
    raise ValueError("scorer bug")


def positive_total(observation: Observation, expected: JsonValue) -> float:
    """A custom scorer: 1.0 when the output total is positive."""
    output = observation.output
    return 1.0 if isinstance(output, dict) and float(output.get("total_eur", 0)) > 0 else 0.0
