"""What a run did, read from its events once: the one summary the command line and eval share.

`summarize_trace` walks a run's events in one pass and keeps what a reader asks first: how it
ended and with what output, each tool call the model asked for with the policy's decision and
what became of it, the decisions by verdict, the rejected outputs, the model replies, the
tokens and the time it took. ``twinflow run`` prints it and eval's `observe` scores from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import JsonValue

from twinflow.agent import (
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    PolicyDecided,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCalled,
    ToolReturned,
    TraceEvent,
)
from twinflow.vocab import FrozenValue

__all__ = ["CallSummary", "TraceSummary", "summarize_trace"]


class CallSummary(FrozenValue):
    """One tool call the model asked for, and what became of it."""

    call_id: str
    """The call's id."""
    tool: str
    """The tool name the model asked for."""
    arguments: dict[str, JsonValue]
    """The arguments the model sent."""
    decision: Literal["allow", "deny"] | None = None
    """The policy's final decision (None if the run ended before one was made)."""
    reason: str = ""
    """Why the policy decided so."""
    ran: bool = False
    """The tool ran (a ``tool_called`` event): a denied call never does."""
    is_error: bool = False
    """The result the model saw was an error (a denial, bad arguments, a raising tool)."""
    error_type: str | None = None
    """The error's type, when the result was one (``ToolDenied``, or what the tool raised)."""
    result: str | None = None
    """The result text the model saw, if any."""


class TraceSummary(FrozenValue):
    """A run as its events record it."""

    status: Literal["finished", "failed", "incomplete"]
    """How the run ended: an output, an error, or no terminal event."""
    prompt: str
    """The prompt the run started with."""
    turns: tuple[str, ...] = ()
    """The user's further turns of a conversation (each ``user_turn``'s message), in order;
    empty for a run of one prompt. ``output`` and ``status`` are the last turn's."""
    answers: tuple[JsonValue, ...] = ()
    """The output each turn before the last accepted (None for none), in order: with
    ``prompt``, ``turns`` and ``output``, the whole conversation."""
    seed: int | None = None
    """The sampling seed the run's configuration sends (None: it sends none)."""
    schema_name: str | None
    """The output schema's name, when the agent had one."""
    output_schema: dict[str, JsonValue] | None
    """The output JSON schema the agent sent, when it had one."""
    output: JsonValue
    """The accepted output (JSON form, or text); None when no output was accepted."""
    output_accepted: bool
    """An output was accepted (for a schema: it validated)."""
    attempts: int
    """Structured-output attempts: accepted after N, or N rejected; 0 if never asked."""
    rejected: int
    """Replies refused (``output_rejected`` events)."""
    steps: int
    """Model requests made, as the terminal event counts them (0 without one)."""
    replies: int
    """Model replies recorded (``model_responded`` events)."""
    tool_calls: tuple[CallSummary, ...]
    """Tool calls in the order the model asked for them."""
    decisions: dict[str, int]
    """Policy decisions by verdict (``allow``, ``deny``)."""
    error_type: str | None
    """The error class name when the run failed."""
    error: str | None
    """The error message when the run failed."""
    input_tokens: int
    """Prompt tokens over the run."""
    output_tokens: int
    """Generated tokens over the run."""
    duration_s: float
    """Seconds between the first and last event's clock readings."""
    cost_usd: float = 0.0
    """US dollars of the replies whose cost is recorded (each at the price recorded with it)."""
    unpriced: int = 0
    """Replies without a recorded cost: their model's price was unknown."""
    prices: tuple[str, ...] = ()
    """Each price the run was charged at, once: ``MODEL in/out US dollars per million tokens
    (TABLE)``."""

    @property
    def cost(self) -> str:
        """The run's cost as a reader sees it: ``$0.0012``, ``unknown``, or both."""
        return self.cost_text(self.cost_usd, self.unpriced, self.replies)

    @staticmethod
    def cost_text(usd: float, unpriced: int, replies: int) -> str:
        """A cost as a reader sees it: dollars, ``unknown`` (no reply priced), or dollars plus
        the replies whose price is unknown."""
        if replies and unpriced >= replies:
            return "unknown"
        text = f"${usd:.6f}".rstrip("0").rstrip(".") if usd else "$0"
        return text if not unpriced else f"{text} + {unpriced} unpriced replies"

    @property
    def tools_run(self) -> list[str]:
        """The tools that ran, in order."""
        return [call.tool for call in self.tool_calls if call.ran]

    @property
    def tool_errors(self) -> list[str]:
        """Tools that ran and raised, as ``name: ErrorType``, in order."""
        return [f"{c.tool}: {c.error_type}" for c in self.tool_calls if c.ran and c.error_type]


_NOTHING_YET: dict[str, Any] = {
    "status": "incomplete",
    "prompt": "",
    "turns": (),
    "answers": (),
    "schema_name": None,
    "output_schema": None,
    "output": None,
    "output_accepted": False,
    "attempts": 0,
    "rejected": 0,
    "steps": 0,
    "replies": 0,
    "error_type": None,
    "error": None,
    "input_tokens": 0,
    "output_tokens": 0,
    "cost_usd": 0.0,
    "unpriced": 0,
    "prices": (),
}
"""A summary's fields before any event is read (copied for each summary)."""


def _track_calls(
    body: ModelResponded | PolicyDecided | ToolCalled | ToolReturned,
    calls: dict[str, dict[str, Any]],
    decisions: dict[str, int],
) -> None:
    """Follow each tool call from the reply that asked for it to the result the model saw."""
    if isinstance(body, ModelResponded):
        for call in body.response.message.tool_calls:
            calls[call.id] = {
                "call_id": call.id,
                "tool": call.name,
                "arguments": dict(call.arguments),
            }
    elif isinstance(body, PolicyDecided):
        decisions[body.decision] = decisions.get(body.decision, 0) + 1
        if body.call_id in calls:
            calls[body.call_id].update(decision=body.decision, reason=body.reason)
    elif isinstance(body, ToolCalled):
        if body.call_id in calls:
            calls[body.call_id]["ran"] = True
    elif body.result.call_id in calls:
        calls[body.result.call_id].update(
            is_error=body.result.is_error, error_type=body.error_type, result=body.result.content
        )


def _charge(body: ModelResponded, summary: dict[str, Any]) -> None:
    """Add a reply's recorded cost (or count it unpriced) and note the price it used."""
    cost = body.cost
    if cost is None:
        summary["unpriced"] += 1
        return
    summary["cost_usd"] = round(summary["cost_usd"] + cost.usd, 10)
    price = (
        f"{cost.model} {cost.input_per_mtok:g}/{cost.output_per_mtok:g} US dollars per million "
        f"tokens ({cost.table})"
    )
    if price not in summary["prices"]:
        summary["prices"] = (*summary["prices"], price)


def _record_start(body: RunStarted, summary: dict[str, Any]) -> None:
    """Note the run's prompt, seed and output schema."""
    summary["prompt"] = body.prompt
    summary["seed"] = body.config.settings.seed
    if body.config.output_schema is not None:
        summary["schema_name"] = body.config.output_schema.name
        summary["output_schema"] = dict(body.config.output_schema.json_schema)


def _next_turn(text: str, summary: dict[str, Any]) -> None:
    """A conversation's next turn: its own answer and end are still to come."""
    summary.update(
        turns=(*summary["turns"], text),
        answers=(*summary["answers"], summary["output"]),
        status="incomplete",
        output=None,
        output_accepted=False,
    )


def summarize_trace(events: Iterable[TraceEvent]) -> TraceSummary:
    """Summarize one run's events (`Trace.events` of a loaded trace), in one pass.

    Args:
        events: The run's events, in order.

    Returns:
        What the run did.
    """
    summary: dict[str, Any] = dict(_NOTHING_YET)
    calls: dict[str, dict[str, Any]] = {}
    decisions: dict[str, int] = {}
    last_attempt = 0
    first: datetime | None = None
    last: datetime | None = None
    for event in events:
        first = event.at if first is None else first
        last = event.at
        body = event.body
        if isinstance(body, RunStarted):
            _record_start(body, summary)
        elif isinstance(body, ModelResponded):
            summary["replies"] += 1
            summary["input_tokens"] += body.response.usage.input_tokens
            summary["output_tokens"] += body.response.usage.output_tokens
            _charge(body, summary)
            _track_calls(body, calls, decisions)
        elif isinstance(body, PolicyDecided | ToolCalled | ToolReturned):
            _track_calls(body, calls, decisions)
        elif isinstance(body, OutputRejected):
            summary["rejected"] += 1
            last_attempt = max(last_attempt, body.attempt)
        elif isinstance(body, OutputAccepted):
            summary["output_accepted"] = True
            summary["output"] = body.value
            summary["attempts"] = body.attempts if body.schema_name is not None else 0
        elif isinstance(body, RunFinished):
            summary.update(status="finished", steps=body.steps)
        elif body.kind == "user_turn":
            _next_turn(getattr(body, "text", ""), summary)
        elif isinstance(body, RunFailed):
            summary.update(
                status="failed", steps=body.steps, error_type=body.error_type, error=body.message
            )
    if not summary["output_accepted"]:
        summary["attempts"] = last_attempt
    duration = 0.0 if first is None or last is None else (last - first).total_seconds()
    return TraceSummary(
        **summary,
        tool_calls=tuple(CallSummary(**call) for call in calls.values()),
        decisions=decisions,
        duration_s=duration,
    )
