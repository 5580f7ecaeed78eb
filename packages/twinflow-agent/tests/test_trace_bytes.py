"""The trace bytes a run writes are pinned: a faster loop, writer or encoder writes the same bytes.

Each scenario runs on a stepping clock and counting ids, so its trace is a pure function of the
code; its sha256 is written here. A change that alters any byte of any event (a key, a default,
an order, a number's form) fails here, and must be a deliberate format change, not a side effect.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from twinflow.agent import Agent, Approve, Deny, FunctionModel, Modify, Policy, RunError
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import CallId, Message, StructuredPart, TextPart, ToolCallPart

START = datetime(2026, 1, 1, tzinfo=UTC)


class Answer(BaseModel):
    """A structured answer."""

    total: int
    """The sum."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shell(command: str) -> str:
    """Run a shell command (never allowed here)."""
    return command


def boom(x: int) -> str:
    """Raise."""
    raise ValueError(f"bad x {x}")


def big() -> str:
    """Return more text than the cap."""
    return "y" * 50


def call(name: str, arguments: dict[str, Any], id_: str) -> Message:
    """An assistant message calling one tool."""
    return Message(
        role="assistant", parts=(ToolCallPart(id=CallId(id_), name=name, arguments=arguments),)
    )


def text(value: str) -> Message:
    """An assistant text message."""
    return Message(role="assistant", parts=(TextPart(text=value),))


def run(replies: list[Message], **config: Any) -> bytes:
    """The trace bytes of one scripted run on deterministic ports."""
    it: Iterator[Message] = iter(replies)
    sink = MemoryTraceSink()
    agent: Agent[Any] = Agent(
        FunctionModel(lambda request: next(it)),
        clock=SteppingClock(START),
        ids=CountingIds(),
        trace=sink,
        tools=[add, shell, boom, big],
        **config,
    )
    with contextlib.suppress(RunError):  # a failed run's trace is pinned too
        agent.run("go")
    return sink.data


def tools() -> bytes:
    """Allowed, denied, failing and truncated tool calls, then a text answer."""
    return run(
        [
            call("add", {"a": 1, "b": 2}, "c1"),
            call("shell", {"command": "rm -rf /"}, "c2"),
            call("boom", {"x": 3}, "c3"),
            call("big", {}, "c4"),
            call("add", {"a": "x", "b": 2}, "c5"),
            text("3"),
        ],
        policy=Policy(allow=frozenset({"add", "boom", "big"}), max_output_chars=10),
    )


def structured() -> bytes:
    """A structured answer rejected once, then accepted."""
    return run(
        [
            text('{"total": "x"}'),
            Message(
                role="assistant", parts=(StructuredPart(schema_name="Answer", value={"total": 3}),)
            ),
        ],
        output_type=Answer,
    )


def approvals() -> bytes:
    """Approve, deny and modify verdicts of an approval hook."""
    verdicts: list[Approve | Deny | Modify] = [
        Approve(),
        Deny(reason="not today"),
        Modify(arguments={"a": 10, "b": 10}),
    ]

    def hook(_call: object) -> Approve | Deny | Modify:
        return verdicts.pop(0)

    # The trace names the hook by its import path, which pytest's import mode decides: fix it.
    hook.__module__, hook.__qualname__ = "pinned", "hook"
    return run(
        [*(call("add", {"a": 1, "b": 1}, f"c{i}") for i in range(3)), text("done")],
        policy=Policy(allow=frozenset({"add"}), approval=hook),
    )


def out_of_steps() -> bytes:
    """A run that fails: the model still calls tools at the step limit."""
    return run(
        [call("add", {"a": i, "b": 1}, f"c{i}") for i in range(5)],
        policy=Policy(allow=frozenset({"add"})),
        max_steps=3,
    )


PINNED: list[tuple[Callable[[], bytes], str]] = [
    (tools, "59a387c8683d76b89266939c10fd94e1eef728073b80009d75581a922dea10ad"),
    (structured, "408705f88658ccb4a65e7b658e771b12ec30522419d234d7ee78e1bb6f9ebb6d"),
    (approvals, "ba93c3d8eeabbf7c5df95984babf1760276dcf3eae9370d0f72101d869424f34"),
    (out_of_steps, "a1e96c957664f3c9d8a88084b1cae00ad714ab44cc5f8461e47040e53e877657"),
]


@pytest.mark.parametrize(("scenario", "digest"), PINNED, ids=[s.__name__ for s, _ in PINNED])
def test_a_scripted_run_writes_the_pinned_bytes(scenario: Callable[[], bytes], digest: str) -> None:
    """The run's trace hashes to the pinned sha256 (two runs alike, and alike across versions)."""
    data = scenario()
    assert data == scenario()
    assert digest == hashlib.sha256(data).hexdigest()


def test_run_started_records_the_trace_format() -> None:
    """A new run's ``run_started`` says ``"format":1``; the rest of its trace is unchanged."""
    data = tools()
    first = data.split(b"\n", 1)[0]
    assert b'"format":1,' in first
    assert 1 == data.count(b'"format":')
