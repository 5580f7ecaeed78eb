"""Approvals as a trace holds them: each waiting call with its decision, and what a signed
decision signs.

A signed decision is a C2SP signed note of `approval_statement`, which names everything the
decision is about, each recomputed from the trace's events by whoever checks it (never read
from a digest the trace stores): the run (its id and the trace's size and root just after the
request, so a decision copied into another run, or into a rewritten history, does not verify),
the call (its id, tool, and the digest of its arguments as parsed), and the verdict.

Call ids come from the model, so two requests can share one: such a trace is refused by
`approvals` rather than having one decision taken for two calls (docs/adr/0163-signed-decisions-and-witness-state.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from twinflow.agent._errors import CannotResume
from twinflow.agent._events import ApprovalDecided, ApprovalRequested, RunStarted, ToolReturned
from twinflow.agent._verify import Trace
from twinflow.vocab import digest

__all__ = ["Approval", "approval_statement", "approvals", "shared_id"]

STATEMENT_V2 = "twinflow approval v2"
"""The first line of the statement a signed decision signs."""


def approval_statement(
    run_id: str, request: ApprovalRequested, size: int, root: str, verdict: str
) -> str:
    """The note text a signed decision signs.

    Args:
        run_id: The run's id (its ``run_started``).
        request: The call's ``approval_requested`` event body.
        size: The trace's size just after the request (its seq + 1).
        root: The trace's Merkle root (hex) at that size.
        verdict: ``approve`` or ``deny``.
    """
    # JSON strings: ids and names come from the model or the spec and may hold a newline.
    return (
        f"{STATEMENT_V2}\n"
        f"run {json.dumps(run_id)}\n"
        f"log {size} {root}\n"
        f"call {json.dumps(request.call_id)}\n"
        f"tool {json.dumps(request.tool)}\n"
        f"arguments {digest(request.arguments)}\n"
        f"decision {verdict}\n"
    )


@dataclass(frozen=True, slots=True)
class Approval:
    """A call that waited for approval, and its decision if one is recorded."""

    request_seq: int
    request: ApprovalRequested
    decision_seq: int | None
    decision: ApprovalDecided | None
    run_id: str
    root: str
    """The trace's root (hex) just after the request."""
    settled: bool = False
    """Whether the trace records the call's result (its run, or its denial): a continuation
    serves that result and does not act on the decision again."""

    def statement(self, verdict: str | None = None) -> str:
        """What a decision on this call signs (default verdict: the recorded one)."""
        if verdict is None:
            assert self.decision is not None, "a waiting call has no recorded verdict"
            verdict = self.decision.decision
        return approval_statement(
            self.run_id, self.request, self.request_seq + 1, self.root, verdict
        )


_KINDS = ("approval_requested", "approval_decided", "tool_returned")


def shared_id(path: str, call_id: str, first: int, second: int) -> CannotResume:
    """The refusal of two requests that share a call id."""
    return CannotResume(
        f"{path}: two calls waiting for approval share the id {call_id!a} (seq {first} and "
        f"{second}): a decision cannot say which it is for, so neither is decided; fork the "
        "run before the second one's step"
    )


def approvals(trace: Trace, path: str) -> tuple[Approval, ...]:
    """Every call the trace asked approval for, in order, each with its decision.

    Raises:
        CannotResume: Two requests share a call id, a decision names no earlier request, or
            two decisions decide one call: which decision is for which call is not certain.
    """
    kinds: Sequence[str] = trace.kinds
    if not trace.size or kinds[0] != "run_started":
        raise CannotResume(f"{path}: does not start with run_started; it is not a run's trace")
    started = trace.events[0].body
    assert isinstance(started, RunStarted)  # kinds[0] says so
    requests: dict[str, tuple[int, ApprovalRequested]] = {}
    decided: dict[str, tuple[int, ApprovalDecided]] = {}
    returned: set[str] = set()
    for seq, kind in enumerate(kinds):
        if kind not in _KINDS:
            continue
        body = trace.events[seq].body
        if isinstance(body, ApprovalRequested):
            if body.call_id in requests:
                raise shared_id(path, body.call_id, requests[body.call_id][0], seq)
            requests[body.call_id] = (seq, body)
        elif isinstance(body, ApprovalDecided):
            if body.call_id not in requests:
                raise CannotResume(
                    f"{path}: the decision at seq {seq} is on call {body.call_id!a}, which no "
                    "earlier event asks approval for"
                )
            if body.call_id in decided:
                raise CannotResume(
                    f"{path}: call {body.call_id!a} is decided twice (seq "
                    f"{decided[body.call_id][0]} and {seq})"
                )
            decided[body.call_id] = (seq, body)
        elif isinstance(body, ToolReturned) and body.result.call_id in decided:
            returned.add(body.result.call_id)
    found = []
    for call_id, (seq, request) in requests.items():
        decision_seq, decision = decided.get(call_id, (None, None))
        found.append(
            Approval(
                request_seq=seq,
                request=request,
                decision_seq=decision_seq,
                decision=decision,
                run_id=started.run_id,
                root=trace.checkpoint(seq + 1).root,
                settled=call_id in returned,
            )
        )
    return tuple(found)
