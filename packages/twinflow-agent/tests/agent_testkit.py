"""What several agent tests build the same way: the scripted `Counts` model and its `Total`, an
agent on replaying ports, a crashed trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from twinflow.agent import Agent
from twinflow.agent._replay import ReplayPorts
from twinflow.kernel._errors import TransportError
from twinflow.vocab import CallId, Message, ModelRequest, StructuredPart, ToolCallPart


class Total(BaseModel):
    """The scripted run's answer."""

    total: int
    """The last sum."""


class Counts:
    """A model that calls `add` ``steps`` times, then answers with the last result (a `Total`).

    It counts the model requests and tool executions of one process, as a crash test must.
    """

    def __init__(self, steps: int) -> None:
        self.steps = steps
        """Tool calls before the answer."""
        self.requests = 0
        self.tools = 0
        self.fail_at: int | None = None
        """Raise a transport error at this request (1-based), once."""

    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        self.tools += 1
        return a + b

    def script(self, request: ModelRequest) -> Message:
        """Call `add` ``steps`` times, then answer with the last result."""
        self.requests += 1
        if self.fail_at == self.requests:
            self.fail_at = None
            raise TransportError(
                "connection refused by http://127.0.0.1:9/",
                reason="connect",
                url="http://127.0.0.1:9/",
            )
        results = [m for m in request.transcript.messages if m.role == "tool"]
        if len(results) < self.steps:
            n = len(results)
            call = ToolCallPart(id=CallId(f"c{n}"), name="add", arguments={"a": n, "b": 1})
            return Message(role="assistant", parts=(call,))
        total = int(results[-1].tool_results[0].content)
        return Message(
            role="assistant", parts=(StructuredPart(schema_name="Total", value={"total": total}),)
        )


def replaying_agent(ports: ReplayPorts, **config: Any) -> Agent[Any]:
    """An agent on every replaying port ``ports`` names but the environment (the factory's to
    choose); ``config`` is the rest of `Agent`'s keywords (tools, policy, output type...)."""
    return Agent(
        ports.model,
        clock=ports.clock,
        ids=ports.ids,
        trace=ports.trace,
        model_label=ports.model_label,
        tool_results=ports.tool_results,
        **config,
    )


def crashed_at(full: Path, size: int, into: Path) -> Path:
    """The trace a process killed after writing ``size`` events leaves on disk."""
    into.write_bytes(b"".join(full.read_bytes().splitlines(keepends=True)[:size]))
    return into
