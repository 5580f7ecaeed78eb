"""Hostile conversations: turns sent to runs that cannot take them, and edited turns.

Two classes, each counted, in-process on a scripted model (about a second in the short mode):

1. **Turns a run cannot take.** A three-turn conversation's trace is cut after each event that
   is not a turn's ``run_finished`` (a run stopped mid-turn), and runs that failed (a
   ``max_steps`` turn, a transport error) or wait for a decision are recorded. A turn sent to
   each (`Agent.run` with ``continue_from``) must be refused with `CannotResume` (its
   ``reason`` ``unfinished``, ``failed`` or ``paused``), in one line naming the command to run,
   asking the model nothing and leaving the file's bytes as they were.
2. **Edited turns.** Each ``user_turn`` of the conversation is edited in place (its text, its
   number, the event dropped): the stdlib leaf refuses the edited line, naming its seq; the
   trace re-chained after the edit verifies, and a replay of it with the recording agent's code
   reports a divergence (the message the next request sent, or the turn's number, no longer
   follows from the record).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import Figures, rechained

from twinflow.agent import (
    Agent,
    CannotResume,
    FunctionModel,
    Policy,
    RunError,
    RunPaused,
    Trace,
    replay,
)
from twinflow.agent._events import UserTurn
from twinflow.kernel import CountingIds, ReplayDivergenceError, SteppingClock, TransportError
from twinflow.trace import verify_trace
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart

_START = datetime(2026, 1, 1, tzinfo=UTC)


class _Chat:
    """Answers each user message; one starting ``add`` first calls `add`. Counts requests."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.requests = 0
        self.fail = fail

    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def reply(self, request: ModelRequest) -> Message:
        self.requests += 1
        messages = request.transcript.messages
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        text = messages[users[-1]].text
        if self.fail is not None and len(users) == 2:
            raise self.fail
        if text.startswith("add") and not any(m.role == "tool" for m in messages[users[-1] :]):
            call = ToolCallPart(id=CallId(f"t{len(users)}"), name="add", arguments={"a": 1, "b": 2})
            return Message(role="assistant", parts=(call,))
        return Message.assistant(f"turn {len(users)}: {text}")


def _agent(chat: _Chat, trace: Path | None = None, **config: Any) -> Agent[Any]:
    return Agent(
        FunctionModel(chat.reply),
        clock=SteppingClock(_START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[chat.add],
        policy=config.pop("policy", Policy(allow={"add"})),
        trace=trace,
        **config,
    )


def _conversation(path: Path) -> Path:
    with _agent(_Chat(), path) as agent:
        result = agent.run("hello")
        for turn in ("add one", "bye"):
            result = agent.run(turn, continue_from=result)
    return path


def _refused(figures: Figures, label: str, path: Path, reasons: set[str]) -> bool:
    """Send ``path`` a turn: refused as the class says, nothing asked, nothing written."""
    before = path.read_bytes()
    chat = _Chat()
    try:
        with _agent(chat) as agent:
            agent.run("one more", continue_from=path)
    except CannotResume as exc:
        message = str(exc)
        if exc.reason not in reasons or "\n" in message or "(twinflow " not in message:
            figures.fail(f"turns / {label}: refused as {exc.reason!r}: {message}")
            return False
    except Exception as exc:  # any other outcome is the failure counted
        figures.fail(f"turns / {label}: {type(exc).__name__}: {exc}")
        return False
    else:
        figures.fail(f"turns / {label}: the turn was taken")
        return False
    if chat.requests or path.read_bytes() != before:
        figures.fail(f"turns / {label}: asked the model or wrote the trace")
        return False
    return True


def turns_refused(figures: Figures, work: Path) -> None:
    """Class 1: every run that cannot take a turn refuses it."""
    full = _conversation(work / "full.jsonl")
    lines = full.read_bytes().splitlines(keepends=True)
    kinds = Trace.load(full).kinds
    refused = 0
    for size in range(1, len(lines)):
        if kinds[size - 1] == "run_finished":
            continue
        cut = work / f"cut-{size}.jsonl"
        cut.write_bytes(b"".join(lines[:size]))
        refused += _refused(figures, f"cut after seq {size - 1}", cut, {"unfinished", "paused"})
    recorded: list[tuple[str, Path, dict[str, Any], BaseException | None]] = [
        ("max_steps", work / "steps.jsonl", {"max_steps": 1}, None),
        (
            "transport",
            work / "transport.jsonl",
            {},
            TransportError("down", reason="connect", url="http://127.0.0.1:9/"),
        ),
        ("paused", work / "paused.jsonl", {"policy": Policy(ask={"add"})}, None),
    ]
    for label, path, config, fail in recorded:
        with _agent(_Chat(fail), path, **config) as agent:
            try:
                first = agent.run("add one" if fail is None else "hello")
                if fail is not None:
                    agent.run("again", continue_from=first)
            except (RunError, RunPaused, TransportError):
                pass  # recorded in the trace: that run is the case
        refused += _refused(figures, label, path, {"failed", "paused"})
    figures.values["conversation_turns_refused"] = refused


def turns_edited(figures: Figures, work: Path) -> None:
    """Class 2: edited user turns are refused by the leaf; re-chained, replay refuses them."""
    full = _conversation(work / "edited-from.jsonl")
    trace = Trace.load(full)
    events = list(trace.events)
    lines = full.read_bytes().splitlines(keepends=True)
    checked = 0
    for seq in [i for i, kind in enumerate(trace.kinds) if kind == "user_turn"]:
        body = events[seq].body
        assert isinstance(body, UserTurn)  # its kind says so
        edits = {
            "text": body.model_copy(update={"text": body.text + " (edited)"}),
            "number": body.model_copy(update={"turn": body.turn + 1}),
        }
        for label, edited in edits.items():
            line = json.loads(lines[seq])
            line["event"]["body"] = edited.model_dump(mode="json")
            raw = work / f"raw-{seq}-{label}.jsonl"
            text = json.dumps(line, separators=(",", ":"), sort_keys=True).encode() + b"\n"
            raw.write_bytes(b"".join([*lines[:seq], text, *lines[seq + 1 :]]))
            report = verify_trace(raw)
            if report.ok or report.problem is None or report.problem.seq != seq:
                figures.fail(f"edited turns / seq {seq} {label}: the leaf did not name seq {seq}")
            changed = [*events[:seq], events[seq].model_copy(update={"body": edited})]
            changed += events[seq + 1 :]
            _diverges(
                figures, f"seq {seq} {label}", rechained(changed, work / f"re-{seq}-{label}.jsonl")
            )
        dropped = events[:seq] + events[seq + 1 :]
        _diverges(
            figures, f"seq {seq} dropped", rechained(dropped, work / f"re-{seq}-dropped.jsonl")
        )
        checked += 3
    figures.values["conversation_turns_edited"] = checked


def _diverges(figures: Figures, label: str, path: Path) -> None:
    """A re-chained edit verifies, and replay with the recording code reports a divergence."""
    try:
        replay(Trace.load(path), _replaying)
    except ReplayDivergenceError:
        return
    figures.fail(f"edited turns / {label}: the re-chained edit replayed as recorded")


def _replaying(ports: Any) -> Agent[Any]:
    chat = _Chat()
    return Agent(
        ports.model,
        clock=ports.clock,
        ids=ports.ids,
        trace=ports.trace,
        model_label=ports.model_label,
        tool_results=ports.tool_results,
        tools=[chat.add],
        policy=Policy(allow={"add"}),
    )


def conversations(figures: Figures, work: Path) -> None:
    """The two classes, into ``work``."""
    (work / "conversations").mkdir()
    for campaign in (turns_refused, turns_edited):
        campaign(figures, work / "conversations")
