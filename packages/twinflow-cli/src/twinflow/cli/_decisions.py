"""Which recorded decisions ``resume`` and ``approve`` may act on, checked before anything runs.

A decision in a trace is a line anyone who had the file could have written. One is acted on
only if it can be checked:

- signed by a key the user names (``--require-signed KEY``, repeatable): the signed note must
  verify under one of the keys and its text must be `Approval.statement`, recomputed from the
  trace's events (the run, the trace's root at the request, the call and the verdict). With
  the option, every decision must be so signed, wherever it was recorded;
- or recorded on this machine: ``twinflow approve`` keeps, for each decision it records, the
  SHA-256 of its statement in this machine's state directory (``$TWINFLOW_STATE_DIR``, else
  ``$XDG_STATE_HOME/twinflow``, else ``~/.local/state/twinflow``; ``decisions/<hex>``). A trace
  received from elsewhere carries no such record, and a decision whose call, run or verdict was
  edited no longer matches the one recorded.

Any other decision the continuation would act on (its call has no recorded result yet: a fork's
served decisions and those already carried out are only replayed) is named, and nothing runs,
unless ``--accept-received-decisions`` says the user takes them as they are (they are named
again on stderr before the run goes on).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from twinflow.agent import CannotResume, ToolReturned, Trace
from twinflow.agent._approval import approvals
from twinflow.agent._inputs import CALLBACK, input_waits, request_name
from twinflow.cli._output import CheckFailed, say
from twinflow.cli._traces import read_small_file, squash
from twinflow.trace import SignatureError, UserError
from twinflow.trace._keys import VerifierKey, parse_verifier_key
from twinflow.trace._note import open_note

__all__ = [
    "add_decision_arguments",
    "check_recorded_decisions",
    "remember_decisions",
    "verify_signed_decisions",
]


def add_decision_arguments(p: argparse.ArgumentParser) -> None:
    """``--require-signed KEY`` and ``--accept-received-decisions``."""
    p.add_argument(
        "--require-signed",
        type=Path,
        action="append",
        metavar="VKEY",
        help="act only on decisions signed by this verifier key over their call and run "
        "(`approve --sign`); repeat for several people",
    )
    p.add_argument(
        "--accept-received-decisions",
        action="store_true",
        help="act on decisions this machine did not record, unchecked (a trace received from "
        "elsewhere); they are named before the run goes on",
    )


def _state_dir() -> Path:
    named = os.environ.get("TWINFLOW_STATE_DIR")
    if named:
        return Path(named)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "twinflow"


def _record(statement: str) -> Path:
    return _state_dir() / "decisions" / hashlib.sha256(statement.encode()).hexdigest()


def remember_decisions(statements: Iterable[str]) -> None:
    """Keep, on this machine, that these decisions were taken here (`check_recorded_decisions`)."""
    for statement in statements:
        path = _record(statement)
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.touch()
        except OSError as exc:
            # The decision stands; only a later resume here will ask for it to be accepted.
            say(
                f"(this machine's record of the decision was not written: {squash(exc)}; a "
                "later resume will name it as received: set TWINFLOW_STATE_DIR to a writable "
                "directory)"
            )
            return


def _verifiers(keys: list[Path]) -> list[VerifierKey]:
    try:
        return [parse_verifier_key(read_small_file(k, "key")) for k in keys]
    except SignatureError as exc:
        raise UserError(f"not a verifier key: {squash(exc)}") from None


def verify_signed_decisions(trace: Trace, path: Path, keys: list[Path]) -> int:
    """Check every recorded decision is signed by one of ``keys`` over its recomputed statement.

    Returns:
        The number of decisions checked.

    Raises:
        CheckFailed: A decision is unsigned, signed by another key, or signs another call, run
            or verdict than the one the trace's events show (made in another run, or edited).
            Or two calls share an id, a decision names no call that waited, or one call is
            decided twice.
        UserError: A key file is not a verifier key, or two of the keys are one key.
    """
    verifiers = _verifiers(keys)
    try:
        paired = approvals(trace, str(path))
        answered = [
            (
                w.answer_seq,
                w.answer.signed_note,
                w.statement(),
                request_name(w.request.call_id, w.request.round, w.request.key),
            )
            for w in input_waits(trace, str(path))
            if w.answer is not None and w.answer.by != CALLBACK
        ]
    except CannotResume as exc:  # which decision is for which call is not certain: not checked
        raise CheckFailed(str(exc)) from None
    signed = [
        (a.decision_seq, a.decision.signed_note, a.statement(), f"call {a.decision.call_id!a}")
        for a in paired
        if a.decision is not None
    ]
    for seq, note, statement, what in signed + answered:
        _check_signed(f"{path}: the decision at seq {seq} ({what})", note, statement, verifiers)
    return len(signed) + len(answered)


def _check_signed(
    where: str, note: str | None, statement: str, verifiers: list[VerifierKey]
) -> None:
    """Refuse a decision or answer whose note is missing, does not verify under ``verifiers``,
    or signs another statement than the one recomputed from the trace."""
    if note is None:
        raise CheckFailed(f"{where} is not signed")
    try:
        opened = open_note(note.encode(), verifiers)
    except SignatureError as exc:
        if exc.reason == "ambiguous_key":  # the keys given, not the trace
            raise UserError(f"the keys given: {squash(exc)}") from None
        raise CheckFailed(f"{where}: its signature does not verify: {squash(exc)}") from None
    if opened.text != statement:
        raise CheckFailed(
            f"{where}: the signed statement is not this one in this run: "
            f"{_differs(opened.text, statement)}"
        )


def _differs(signed: str, recomputed: str) -> str:
    """Which line of the statement differs (the first), as a reader can act on it."""
    signed_lines, lines = signed.splitlines(), recomputed.splitlines()
    for mine, theirs in zip(lines, signed_lines, strict=False):
        if mine != theirs:
            field = mine.split(" ", 1)[0]
            return f"its {field!r} line differs (made in another run, or the trace was edited)"
    return "it is another statement (an older format, or not a decision)"


def check_recorded_decisions(
    args: argparse.Namespace, trace: Trace, *, carried_out_too: bool = False
) -> None:
    """Refuse, before any code is imported or run, decisions that cannot be checked.

    A decision whose call already ran or was denied is only served again by a continuation,
    so it is not asked about; ``carried_out_too`` asks about those as well (a live replay
    acts on every recorded decision again).

    Raises:
        CheckFailed: ``--require-signed`` is given and a decision is not signed by its keys.
        UserError: A decision neither signed by ``--require-signed``'s keys nor recorded on this
            machine, without ``--accept-received-decisions``; or a call id shared by two calls.
    """
    path: Path = args.trace
    if args.require_signed:
        verify_signed_decisions(trace, path, args.require_signed)
        return
    unknown = [
        f"seq {a.decision_seq} {a.decision.decision} call {a.request.call_id!a} "
        f"({a.request.tool!a}) by {a.decision.by!a}"
        for a in approvals(trace, str(path))
        if a.decision is not None
        and (carried_out_too or not a.settled)
        and not _known(a.statement())
    ]
    returned = _returned(trace)
    unknown += [
        f"seq {w.answer_seq} {w.answer.action} "
        f"{request_name(w.request.call_id, w.request.round, w.request.key)} "
        f"({w.request.tool!a}) by {w.answer.by!a}"
        for w in input_waits(trace, str(path))
        if w.answer is not None
        and w.answer.by != CALLBACK
        and (carried_out_too or w.request.call_id not in returned)
        and not _known(w.statement())
    ]
    if not unknown:
        return
    names = ", ".join(unknown[:5])
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    if not args.accept_received_decisions:
        raise UserError(
            f"{path}: {len(unknown)} decision(s) were not recorded on this machine and are "
            f"not checked by a key: {names}{more}; nothing was run: give --require-signed "
            "VKEY to check their signatures, or --accept-received-decisions to act on them as "
            "they are"
        )
    say(f"acting on decisions received, not checked: {names}{more}")


def _returned(trace: Trace) -> set[str]:
    """The calls the trace records a result of."""
    bodies = (trace.events[i].body for i, k in enumerate(trace.kinds) if k == "tool_returned")
    return {b.result.call_id for b in bodies if isinstance(b, ToolReturned)}


def _known(statement: str) -> bool:
    return _record(statement).is_file()
