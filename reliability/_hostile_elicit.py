"""Hostile input, answers to a form an MCP server asked for mid-call (a run paused on input).

One class, one real paused run (the official SDK's server, stateless-only), and one invariant:
each forged or misdirected answer is refused in one line before anything is written, and a
call whose retry may have been sent is never sent again on a recorded answer:

- an answer to another call, or to another request of the call;
- values off the requested schema (named by JSON pointer); an approval with no values;
- a person answering as the Python callback;
- a resume with no answer;
- a trace forged to answer one request twice, or to answer a request nobody made;
- a trace cut after a resume wrote its answer (the retry may have reached the server).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from _common import Figures

from twinflow.agent import Agent, CannotResume, Decision, FunctionModel, McpTools, Policy, RunPaused
from twinflow.agent._resume import plan, record_decisions
from twinflow.agent._verify import Trace
from twinflow.kernel import CountingIds, McpClient
from twinflow.kernel._clock import FixedClock
from twinflow.trace._testing import events_of, rechain
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart

SERVERS = Path(__file__).resolve().parents[1] / "packages/twinflow-kernel/tests/mcp_servers"
_AT = datetime(2026, 1, 1, tzinfo=UTC)


def _paused(work: Path) -> Path:
    """A run whose call to calc.pay waits on the server's form; its trace."""
    command = [sys.executable, str(SERVERS / "calc_server.py"), "stdio", "--era", "current"]

    def connect() -> McpClient:
        return McpClient.stdio("calc", command, log_path=work / "elicit-calc.log")

    def model(request: ModelRequest) -> Message:
        call = ToolCallPart(id=CallId("c0"), name="calc.pay", arguments={"amount": 3})
        return Message(role="assistant", parts=(call,))

    path = work / "elicit.jsonl"
    server = McpTools.live("calc", connect)
    run = Agent(
        FunctionModel(model),
        clock=FixedClock(_AT),
        ids=CountingIds(),
        tools=[server],
        policy=Policy(allow=frozenset({"calc.pay"})),
        trace=path,
    )
    try:
        with run:
            run.run("pay")
    except RunPaused:
        pass
    finally:
        server.close()
    return path


def elicit_answers(figures: Figures, work: Path) -> None:
    """Each case on a copy of one paused trace; the count of cases refused as they must be."""
    paused = _paused(work)

    def copy(name: str) -> Path:
        target = work / f"elicit-{name}.jsonl"
        shutil.copy(paused, target)
        return target

    def answering(decision: Decision, words: str) -> Callable[[str], bool]:
        def case(name: str) -> bool:
            path = copy(name)
            before = path.read_bytes()
            try:
                record_decisions(path, [decision], FixedClock(_AT))
            except CannotResume as exc:
                return words in str(exc) and "\n" not in str(exc) and before == path.read_bytes()
            return False

        return case

    def resumed(
        edit: Callable[[list[dict[str, object]]], None], words: str
    ) -> Callable[[str], bool]:
        def case(name: str) -> bool:
            path = copy(name)
            events = events_of(path.read_bytes())
            edit(events)
            path.write_bytes(rechain(events))
            try:
                plan(Trace.load(path), str(path), repeat_safe=frozenset(), decisions=[])
            except CannotResume as exc:
                return words in str(exc)
            return False

        return case

    def answered(events: list[dict[str, object]], key: str = "confirm") -> dict[str, object]:
        body = {"kind": "input_answered", "call_id": "c0", "round": 1, "key": key}
        body |= {"action": "accept", "content": {"yes": True}, "by": "mallory"}
        return {**events[-1], "body": body}

    yes = {"yes": True}
    cases: dict[str, Callable[[str], bool]] = {
        "another call": answering(
            Decision(call_id=CallId("c9"), approve=True, answer=yes), "no call 'c9' is waiting"
        ),
        "another request": answering(
            Decision(call_id=CallId("c0"), approve=True, answer=yes, request="x"),
            "to request 'x'",
        ),
        "off the schema": answering(
            Decision(call_id=CallId("c0"), approve=True, answer={"yes": 1}), "at '/yes'"
        ),
        "an approval with no values": answering(
            Decision(call_id=CallId("c0"), approve=True), "not an approval"
        ),
        "a person as the callback": answering(
            Decision(call_id=CallId("c0"), approve=True, answer=yes, by="callback"),
            "names the Python callback",
        ),
        "a resume with no answer": resumed(lambda events: None, "waits for an answer"),
        "one request answered twice": resumed(
            lambda events: events.extend([answered(events), answered(events)]),
            "answered twice",
        ),
        "an answer to no request": resumed(
            lambda events: events.append(answered(events, "other")), "which no earlier event"
        ),
        "a cut after a resume's answer": resumed(
            lambda events: events.extend(
                [{**events[-1], "body": _resumed_marker(len(events))}, answered(events)]
            ),
            "stopped inside tool call c0",
        ),
    }
    held = 0
    for name, case in cases.items():
        if case(name.replace(" ", "-")):
            held += 1
        else:
            figures.fail(f"elicit: {name}: not refused as it must be")
    figures.values["forged or misdirected answers refused"] = f"{held} of {len(cases)}"


def _resumed_marker(size: int) -> dict[str, object]:
    return {"kind": "run_resumed", "why": "an answer", "prefix_size": size, "prefix_root": "0" * 64}


if __name__ == "__main__":
    figures = Figures("hostile-elicit", "short")
    with tempfile.TemporaryDirectory() as tmp:
        elicit_answers(figures, Path(tmp))
    sys.exit(figures.finish())
