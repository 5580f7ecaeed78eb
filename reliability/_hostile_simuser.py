"""Hostile simulated users: forged links from a conversation's turns to the simulator's trace.

One class, counted, in-process on scripted models (well under a second in the short mode):

**Forged simulator links.** A case conversation whose turns a simulated user wrote links the
simulator's trace from each ``user_turn`` (``simulator``: run id, file name, size, root). Each
link is forged in turn (its root, a size past the trace's end, another run id, a name that
climbs out, is absolute, is a symbolic link or names a missing file) and the case's trace is
re-chained so it verifies on its own; the simulator's trace is also edited and re-chained. Each
must make ``verify_tree`` report a problem naming the link (``<case>#<seq> -> <file>``), never
raise, and the untouched tree must verify.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import Figures, rechained

from twinflow.agent import Agent, FunctionModel, Trace
from twinflow.agent._events import UserTurn
from twinflow.eval._dataset import SimulatedUser
from twinflow.eval._simulated import converse_with
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace._tree import verify_tree
from twinflow.vocab import Message, ModelRequest

_START = datetime(2026, 1, 1, tzinfo=UTC)


def _agent(reply: Any, trace: Path) -> Agent[Any]:
    return Agent(
        FunctionModel(reply),
        clock=SteppingClock(_START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        trace=trace,
    )


def _answer(request: ModelRequest) -> Message:
    users = [m for m in request.transcript.messages if m.role == "user"]
    return Message.assistant(f"turn {len(users)}: {users[-1].text}")


def _user(request: ModelRequest) -> Message:
    users = [m for m in request.transcript.messages if m.role == "user"]
    return Message.assistant(f"message {len(users)}" if len(users) <= 2 else "[done]")


def _case(work: Path) -> Path:
    case = work / "case.jsonl"
    with _agent(_answer, case) as agent:
        user = SimulatedUser(spec="user.yaml", max_turns=5)
        converse_with(
            agent, "hello", "a refund", user, lambda: _agent(_user, work / "case.user.jsonl")
        )
    return case


def _refused(figures: Figures, label: str, path: Path, seq: int | None) -> bool:
    try:
        report = verify_tree(path)
    except Exception as exc:  # any raise is the failure counted
        figures.fail(f"simulator links / {label}: verify_tree raised {type(exc).__name__}: {exc}")
        return False
    where = f"{path.name}#{seq}" if seq is not None else path.name
    if report.ok or report.problem is None or where not in report.problem:
        figures.fail(f"simulator links / {label}: not refused naming {where}: {report.problem}")
        return False
    return True


def forged_links(figures: Figures, work: Path) -> None:
    """Each forged link, and an edited simulator trace, fails ``verify_tree`` naming it."""
    case = _case(work)
    if not verify_tree(case).ok:
        figures.fail(f"simulator links / untouched: {verify_tree(case).problem}")
    events = list(Trace.load(case).events)
    (work / "elsewhere.jsonl").write_bytes((work / "case.user.jsonl").read_bytes())
    os.symlink(work / "elsewhere.jsonl", work / "linked.jsonl")
    refused = 0
    for seq, event in enumerate(events):
        body = event.body
        if not isinstance(body, UserTurn) or body.simulator is None:
            continue
        link = body.simulator
        forged = {
            "root": {"root": "0" * 64},
            "past the end": {"size": link.size + 100},
            "run id": {"run_id": "run_other"},
            "climbs out": {"trace": "../case.user.jsonl"},
            "absolute": {"trace": str(work / "case.user.jsonl")},
            "symbolic link": {"trace": "linked.jsonl"},
            "missing": {"trace": "nobody.jsonl"},
        }
        for label, update in forged.items():
            changed = body.model_copy(update={"simulator": link.model_copy(update=update)})
            out = work / f"forged-{seq}-{label.replace(' ', '-')}" / "case.jsonl"
            out.parent.mkdir()
            for name in ("case.user.jsonl", "elsewhere.jsonl"):
                (out.parent / name).write_bytes((work / name).read_bytes())
            if label == "symbolic link":
                os.symlink(out.parent / "elsewhere.jsonl", out.parent / "linked.jsonl")
            edited = [*events[:seq], event.model_copy(update={"body": changed}), *events[seq + 1 :]]
            refused += _refused(figures, f"seq {seq} {label}", rechained(edited, out), seq)
    # The simulator's own trace edited (its first reply) and re-chained: its root moves.
    user_events = list(Trace.load(work / "case.user.jsonl").events)
    out = work / "edited-simulator" / "case.jsonl"
    out.parent.mkdir()
    out.write_bytes(case.read_bytes())
    responded = next(i for i, e in enumerate(user_events) if e.body.kind == "model_responded")
    body = user_events[responded].body
    reply = body.response.model_copy(  # type: ignore[union-attr]  # model_responded's
        update={"message": Message.assistant("message forged")}
    )
    user_events[responded] = user_events[responded].model_copy(
        update={"body": body.model_copy(update={"response": reply})}
    )
    rechained(user_events, out.parent / "case.user.jsonl")
    first = next(i for i, e in enumerate(events) if isinstance(e.body, UserTurn))
    refused += _refused(figures, "edited simulator trace", out, first)
    figures.values["simulator_links_refused"] = refused


def simulated_users(figures: Figures, work: Path) -> None:
    """The class, into ``work``."""
    (work / "simuser").mkdir()
    forged_links(figures, work / "simuser")
