"""``twinflow resume``, ``approve`` and ``fork``: runs that continue from their traces.

Both re-run the recorded prefix with the spec's code against the trace (no model request, no
tool call for anything recorded) and go on live into the same file, holding the trace's writer
lock: a second ``resume`` or ``approve`` of the same trace at the same time exits 2 and writes
nothing. ``fork`` takes a run's first steps from its trace into a new one and goes on there
with the spec given (another model, tools or policy). Like ``replay``, they import code only from a spec the user names (``--spec``), or the
one beside the trace with ``--trust-spec``; ``approve --no-resume`` imports nothing at all.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from twinflow._base._code import importing_from
from twinflow.agent import Decision, RunSpec, Trace
from twinflow.agent._approval import approvals
from twinflow.agent._events import InputRequested
from twinflow.agent._inputs import answer_problem, input_pause, input_waits, request_name
from twinflow.agent._resume import record_decisions
from twinflow.cli._decisions import (
    add_decision_arguments,
    check_recorded_decisions,
    remember_decisions,
)
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output
from twinflow.cli._replay_cli import add_spec_arguments, divergence_failed, replay_spec
from twinflow.cli._run import _execute, _Phases, report_outcome, spec_beside
from twinflow.cli._traces import parse_trace, read_trace_bytes, squash
from twinflow.kernel import ReplayDivergenceError, SystemClock
from twinflow.trace import SignatureError, TraceCorruptError, UserError
from twinflow.trace._keys import parse_signer_key
from twinflow.trace._note import sign_note
from twinflow.vocab import CallId

__all__ = [
    "COMMANDS",
    "approve",
    "configure_approve",
    "configure_fork",
    "configure_resume",
    "fork",
    "resume",
]

_MAX_KEY_BYTES = 4096
_MAX_ANSWER_BYTES = 64 * 1024


def _continue(
    args: argparse.Namespace,
    out: Output,
    decisions: list[Decision],
    command: str,
    statements: tuple[str, ...] = (),
) -> int:
    """Re-run the prefix, then go on live: the one path of ``resume`` and ``approve``
    (``statements``: those of ``decisions``, remembered as taken on this machine)."""
    trace_path: Path = args.trace
    # A file that is not a trace at all, or a decision that cannot be checked, is refused
    # before any spec is read or code imported.
    check_recorded_decisions(args, parse_trace(trace_path, read_trace_bytes(trace_path)))
    remember_decisions(statements)
    spec = replay_spec(trace_path, args.spec, args.trust_spec, out)
    try:
        # For the whole run, as `run` does: a tool may import its siblings when it is called.
        with importing_from(spec.directories):
            outcome = _execute(
                spec,
                "",
                trace_path.parent,
                out,
                _Phases(),
                watch=False,
                command=command,
                resume_from=trace_path,
                decisions=decisions,
            )
    except TraceCorruptError as exc:
        raise CheckFailed(f"{trace_path}: {exc}") from None
    except ReplayDivergenceError as exc:
        raise divergence_failed(trace_path, "the recorded prefix", exc) from None
    return report_outcome(outcome, out, command, _spec_option(args))


# -- resume ---------------------------------------------------------------------------------


def configure_resume(p: argparse.ArgumentParser) -> None:
    """Arguments of ``twinflow resume``."""
    p.add_argument("trace", type=Path, help="the trace of a run that did not finish (JSONL)")
    add_spec_arguments(p)
    add_decision_arguments(p)


def resume(args: argparse.Namespace, out: Output) -> int:
    """``twinflow resume TRACE``."""
    return _continue(args, out, [], "resume")


# -- approve --------------------------------------------------------------------------------


def configure_approve(p: argparse.ArgumentParser) -> None:
    """Arguments of ``twinflow approve``."""
    p.add_argument("trace", type=Path, help="the trace of a run waiting for approval (JSONL)")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--call", action="append", metavar="ID", help="a waiting call's id (repeat for several)"
    )
    which.add_argument("--all", action="store_true", help="every call that is waiting")
    p.add_argument(
        "--answer",
        metavar="JSON",
        help="the values of the form an MCP server asked for during the waiting call (a JSON "
        "object, checked against the requested schema); --deny declines the form instead",
    )
    p.add_argument(
        "--request",
        metavar="KEY",
        help="which of the call's waiting forms --answer is for, by the server's key for it "
        "(needed only when one round asks for several)",
    )
    p.add_argument("--deny", action="store_true", help="deny the calls (the model sees why)")
    p.add_argument("--reason", default="", help="why (a denial's reason reaches the model)")
    p.add_argument("--by", default="unnamed", help="who decides (recorded as given)")
    p.add_argument(
        "--sign",
        type=Path,
        metavar="KEYFILE",
        help="sign each decision with this `twinflow keygen` signer key (verify --key checks it)",
    )
    p.add_argument(
        "--no-resume",
        action="store_true",
        help="only record the decisions (imports no code; no spec needed); resume later",
    )
    add_spec_arguments(p)
    add_decision_arguments(p)


def _signer(path: Path | None) -> Any:
    if path is None:
        return None
    with path.open("rb") as f:
        data = f.read(_MAX_KEY_BYTES + 1)
    if len(data) > _MAX_KEY_BYTES:
        raise UserError(f"{path}: a signer key file is at most {_MAX_KEY_BYTES} bytes")
    try:
        return parse_signer_key(data)
    except (ValueError, SignatureError) as exc:
        raise UserError(f"{path}: not a twinflow keygen signer key ({exc})") from None


def _decisions(args: argparse.Namespace, trace: Trace) -> tuple[list[Decision], list[str]]:
    """One decision per named (or every waiting) call, signed if asked, and the statement of
    each (what a signature signs, and what this machine remembers deciding)."""
    asking = input_pause(trace)
    if args.answer is not None or asking:
        return _answer(args, trace, asking)
    if not (args.call or args.all):
        raise UserError(f"{args.trace}: give --call ID or --all (or --answer JSON for a form)")
    waiting = {
        a.request.call_id: a for a in approvals(trace, str(args.trace)) if a.decision is None
    }
    ids = list(waiting) if args.all else list(dict.fromkeys(args.call))
    if not ids:
        raise UserError(f"{args.trace}: no call is waiting for a decision")
    signer = _signer(args.sign)
    verdict = "deny" if args.deny else "approve"
    decisions, statements = [], []
    for call_id in ids:
        note = None
        if call_id in waiting:
            statement = waiting[call_id].statement(verdict)
            statements.append(statement)
            if signer is not None:
                try:
                    note = sign_note(statement, [signer])
                except SignatureError as exc:
                    raise UserError(str(exc)) from None
        decisions.append(
            Decision(
                call_id=CallId(call_id),
                approve=not args.deny,
                by=args.by,
                reason=args.reason,
                signed_note=None if note is None else note.decode(),
            )
        )
    return decisions, statements


def _answer(
    args: argparse.Namespace, trace: Trace, asking: tuple[InputRequested, ...] | None
) -> tuple[list[Decision], list[str]]:
    """The answer to the form the run waits on (or its refusal, declined with ``--deny``),
    checked against the requested schema and signed if asked; nothing is written on a refusal.

    Raises:
        UserError: The run does not wait on a form (or not on the call or request named), the
            answer is not a JSON object matching the schema, or ``--all`` is given.
    """
    path = args.trace
    if not asking:
        done = [w for w in input_waits(trace, str(path)) if w.answer is not None]
        waiting = [a.request for a in approvals(trace, str(path)) if a.decision is None]
        if waiting:
            why = f"it waits for a decision on {', '.join(w.call_id for w in waiting)}: give --call"
        elif done:
            last = done[-1]
            why = (
                f"{request_name(last.request.call_id, last.request.round, last.request.key)} "
                f"was answered already (seq {last.answer_seq})"
            )
        else:
            why = "it is not paused on a form"
        raise UserError(f"{path}: no request for input is waiting: {why}; nothing was written")
    if args.all:
        raise UserError(f"{path}: --all decides calls waiting for approval; answer a form alone")
    if args.answer is None and not args.deny:
        raise UserError(
            f"{path}: the run waits for an answer to {_named(asking)}: give --answer JSON "
            "(or --deny to decline the form)"
        )
    calls = set(args.call or ())
    matching = [
        r
        for r in asking
        if (not calls or r.call_id in calls) and (args.request is None or r.key == args.request)
    ]
    if len(matching) != 1 or len(calls) > 1:
        several = " (name it with --request KEY)" if len(matching) > 1 else ""
        raise UserError(
            f"{path}: no one request for input matches{several}; waiting: {_named(asking)}; "
            "nothing was written"
        )
    request = matching[0]
    content = None
    if not args.deny:
        content = _answer_json(path, args.answer)
        problem = answer_problem(request.requested_schema, content)
        if problem is not None:
            raise UserError(
                f"{path}: --answer does not match the schema {request.tool} asked for "
                f"{problem}; nothing was written"
            )
    [wait] = [
        w
        for w in input_waits(trace, str(path))
        if (w.request.call_id, w.request.round, w.request.key)
        == (request.call_id, request.round, request.key)
    ]
    statement = wait.statement("decline" if args.deny else "accept", content)
    note = _signed(statement, _signer(args.sign))
    decision = Decision(
        call_id=request.call_id,
        approve=not args.deny,
        by=args.by,
        reason=args.reason,
        signed_note=note,
        answer=content,
        request=request.key,
    )
    return [decision], [statement]


def _named(asking: tuple[InputRequested, ...]) -> str:
    return ", ".join(
        f"{request_name(r.call_id, r.round, r.key)} ({r.tool}: {r.message[:200]!r})" for r in asking
    )


def _answer_json(path: Path, text: str) -> dict[str, JsonValue]:
    """``--answer``'s JSON object, read within the trace readers' size and depth limits."""
    if len(text) > _MAX_ANSWER_BYTES:
        raise UserError(f"{path}: --answer is over {_MAX_ANSWER_BYTES} bytes")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{path}: --answer is not JSON: {squash(exc)}") from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: --answer must be a JSON object (the form's values by name)")
    return value


def _signed(statement: str, signer: Any) -> str | None:
    if signer is None:
        return None
    try:
        return sign_note(statement, [signer]).decode()
    except SignatureError as exc:
        raise UserError(str(exc)) from None


def approve(args: argparse.Namespace, out: Output) -> int:
    """``twinflow approve TRACE``."""
    trace = parse_trace(args.trace, read_trace_bytes(args.trace))
    decisions, statements = _decisions(args, trace)
    if not args.no_resume:
        return _continue(args, out, decisions, "approve", tuple(statements))
    try:
        head = record_decisions(args.trace, decisions, SystemClock())
    except TraceCorruptError as exc:
        raise CheckFailed(f"{args.trace}: {exc}") from None
    remember_decisions(statements)
    verdict = "denied" if args.deny else "approved"
    out.document({"ok": True, "trace": str(args.trace), "decided": [d.call_id for d in decisions]})
    if decisions[0].request is not None:
        verdict = "declined the form of" if args.deny else "answered the form of"
    out.line(f"{verdict} {', '.join(d.call_id for d in decisions)}; {head.size} events")
    out.line(f"root (hex) {head.root}")
    return EXIT_OK


# -- fork -----------------------------------------------------------------------------------


def configure_fork(p: argparse.ArgumentParser) -> None:
    """Arguments of ``twinflow fork``."""
    p.add_argument("trace", type=Path, help="the parent run's trace (JSONL); it is not changed")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--at-step",
        type=int,
        metavar="N",
        help="the first step asked of the spec's model; steps before it come from the trace "
        "(steps are numbered through a conversation's turns)",
    )
    where.add_argument(
        "--at-turn",
        type=int,
        metavar="K",
        help="instead of --at-step: the conversation's turn whose first step is asked of the "
        "spec's model; the turns before it come from the trace",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="directory for the new run's trace and spec (default: the parent's directory)",
    )
    add_spec_arguments(p)


def _spec_option(args: argparse.Namespace) -> list[str]:
    """How the command was given its spec, for the next command it prints."""
    return ["--spec", str(args.spec)] if args.spec is not None else ["--trust-spec"]


def fork(args: argparse.Namespace, out: Output) -> int:
    """``twinflow fork TRACE --at-step N`` (or ``--at-turn K``)."""
    trace_path: Path = args.trace
    parse_trace(trace_path, read_trace_bytes(trace_path))
    spec = replay_spec(trace_path, args.spec, args.trust_spec, out)
    spec_path = args.spec if args.spec is not None else spec_beside(trace_path)
    out_dir = args.out if args.out is not None else trace_path.parent
    try:
        with importing_from(spec.directories):
            outcome = _execute(
                spec,
                RunSpec.read_text(spec_path),
                out_dir,
                out,
                _Phases(),
                watch=False,
                command="fork",
                fork_from=(trace_path, args.at_step if args.at_turn is None else args.at_turn),
                at_turn=args.at_turn is not None,
            )
    except TraceCorruptError as exc:
        raise CheckFailed(f"{trace_path}: {exc}") from None
    return report_outcome(outcome, out, "fork", _spec_option(args))


COMMANDS: dict[str, Command] = {
    "resume": (configure_resume, resume),
    "approve": (configure_approve, approve),
    "fork": (configure_fork, fork),
}
"""The commands that continue runs (their summaries are in the command table)."""
