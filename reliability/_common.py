"""Shared pieces of the reliability campaigns: mode parsing, figures, scripted agents.

The campaigns are plain scripts (like benchmarks/): they measure real time and kill real
processes, so they live outside every package and are exempt from the determinism gate.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from twinflow.agent import Agent, FunctionModel, Policy
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink, TraceSink
from twinflow.vocab import CallId, Message, ModelRequest, TextPart, ToolCallPart

START = datetime(2026, 1, 1, tzinfo=UTC)


def parse_mode(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    """`--short` (the CI run) or `--full` (the published figures), plus `--seed` and `--json`."""
    parser = argparse.ArgumentParser(description=description)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--short", action="store_true", help="the bounded CI run (default)")
    group.add_argument("--full", action="store_true", help="the run behind the published figures")
    parser.add_argument("--seed", type=int, default=20261130, help="random seed (default fixed)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    args.mode = "full" if args.full else "short"
    return args


@dataclass
class Figures:
    """A campaign's figures and failures; `finish()` prints them and sets the exit status."""

    campaign: str
    mode: str
    started: float = field(default_factory=time.perf_counter)
    values: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        """Record a violated invariant (the campaign goes red)."""
        if len(self.failures) < 50:
            print(f"FAIL {self.campaign}: {message}", file=sys.stderr, flush=True)
        self.failures.append(message)

    def finish(self, as_json: bool = False) -> int:
        """Print the figures; 0 if no invariant was violated, else 1."""
        self.values["seconds"] = round(time.perf_counter() - self.started, 1)
        self.values["failures"] = len(self.failures)
        if as_json:
            print(json.dumps({"campaign": self.campaign, "mode": self.mode, **self.values}))
        else:
            print(f"== {self.campaign} ({self.mode})")
            for key, value in self.values.items():
                print(f"  {key:34} {value}")
            print(f"  {'verdict':34} {'FAILED' if self.failures else 'ok'}")
        return 1 if self.failures else 0


class Tools:
    """Tools for scripted agents: one that adds, one that raises, one with a big answer."""

    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def boom(self, x: int) -> str:
        """Always raise."""
        raise ValueError(f"boom {x}")

    def blob(self, n: int) -> str:
        """Return ``n`` characters (makes trace lines longer than the file buffer)."""
        return "z" * n

    def shell(self, command: str) -> str:
        """Never allowed: exists to be denied."""
        return command


class Answer(BaseModel):
    """A structured answer for the reask shape."""

    value: int
    """The number."""


def call(name: str, arguments: dict[str, Any], id_: str) -> Message:
    """An assistant message calling one tool."""
    return Message(
        role="assistant", parts=(ToolCallPart(id=CallId(id_), name=name, arguments=arguments),)
    )


def text(value: str) -> Message:
    """An assistant text message."""
    return Message(role="assistant", parts=(TextPart(text=value),))


def scripted(replies: list[Message] | Callable[[ModelRequest], Message]) -> FunctionModel:
    """A model replying with the given messages in order (or through a handler)."""
    if callable(replies):
        return FunctionModel(replies)
    it: Iterator[Message] = iter(replies)

    def handler(request: ModelRequest) -> Message:
        try:
            return next(it)
        except StopIteration:
            raise RuntimeError("the scripted model ran out of replies") from None

    return FunctionModel(handler)


def agent(
    model: FunctionModel,
    *,
    trace: TraceSink | None = None,
    output_type: type[BaseModel] | None = None,
    fsync: str = "step",
    max_steps: int = 10,
) -> Agent[Any]:
    """An agent over `Tools` with deterministic ports (add, boom and blob allowed)."""
    tools = Tools()
    kwargs: dict[str, Any] = {}
    if output_type is not None:
        kwargs["output_type"] = output_type
    return Agent(
        model,
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[tools.add, tools.boom, tools.blob, tools.shell],
        policy=Policy(allow=frozenset({"add", "boom", "blob"}), per_tool_budget={"add": 3}),
        max_steps=max_steps,
        trace=trace if trace is not None else MemoryTraceSink(),
        fsync=fsync,
        **kwargs,
    )


def run_quietly(a: Agent[Any], prompt: str) -> None:
    """Run; a failing run is one of the shapes (its trace ends with run_failed)."""
    with contextlib.suppress(Exception):  # the trace records the failure: that is the shape
        a.run(prompt)


def trace_shapes() -> dict[str, bytes]:
    """Complete traces of several shapes: tools, denials, reasks, failures, a long one."""
    shapes: dict[str, bytes] = {}

    def build(name: str, model: FunctionModel, **kwargs: Any) -> None:
        sink = MemoryTraceSink()
        run_quietly(agent(model, trace=sink, **kwargs), f"shape {name}")
        shapes[name] = sink.data

    build("tools", scripted([call("add", {"a": 1, "b": 2}, "c1"), text("3")]))
    build(
        "denials",
        scripted(
            [
                call("shell", {"command": "rm -rf /"}, "c1"),
                call("nosuch", {}, "c2"),
                call("add", {"a": "x", "b": 2}, "c3"),
                text("gave up"),
            ]
        ),
    )
    build(
        "reasks",
        scripted([text("not json"), text('{"value": "x"}'), text('{"value": 7}')]),
        output_type=Answer,
    )
    build("tool_error", scripted([call("boom", {"x": 1}, "c1"), text("it failed")]))

    def broken(request: ModelRequest) -> Message:
        raise ConnectionError("model went away")

    build("model_failure", scripted(broken))
    build(
        "max_steps",
        scripted([call("add", {"a": i, "b": i}, f"c{i}") for i in range(5)]),
        max_steps=2,
    )
    return shapes


def twinflow(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command, as `python -m` (so the working directory is on sys.path)."""
    return subprocess.run(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def rechained(events: list[Any], path: Path) -> Path:
    """``events`` (typed trace events, edited at will) written to ``path`` as a fresh chain:
    every digest and the Merkle tree recomputed, so only what the events say can be refused."""
    from twinflow.agent._trace import TraceWriter
    from twinflow.trace import FileTraceSink

    writer = TraceWriter(FileTraceSink(path))
    for event in events:
        writer.append(event.at, event.body)
    writer.end_step()
    writer.sink.close()
    return path
