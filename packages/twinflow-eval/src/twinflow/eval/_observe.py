"""What a run did, read back from its verified trace: the only thing scorers ever see.

Scoring in the runner and in ``rescore`` both go through `observe`, so the same trace always
gets the same scores, with or without a model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import JsonValue

from twinflow.agent import (
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    PolicyDecided,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolReturned,
    Trace,
    TraceCorruptError,
    TraceEvent,
)
from twinflow.agent._verify import typed_event
from twinflow.eval._frozen import EvalValue
from twinflow.trace import GENESIS, Checkpoint, Frontier, leaf_hash, walk_trace

__all__ = ["Observation", "ToolCallRecord", "observe", "observe_file", "observe_verified"]


class ToolCallRecord(EvalValue):
    """One tool call the model asked for, and what became of it."""

    call_id: str
    """The call's id."""
    tool: str
    """The tool name the model asked for."""
    arguments: dict[str, JsonValue]
    """The arguments the model sent."""
    decision: Literal["allow", "deny"] | None
    """The policy's final decision (None if the run ended before one was made)."""
    reason: str
    """Why the policy decided so."""
    is_error: bool
    """The result the model saw was an error (a denial, bad arguments, a raising tool)."""
    result: str | None
    """The result text the model saw, if any."""


class Observation(EvalValue):
    """A run as its trace records it."""

    status: Literal["finished", "failed", "incomplete"]
    """How the run ended: an output, an error, or no terminal event."""
    prompt: str
    """The prompt the run started with."""
    output: JsonValue
    """The accepted output (JSON form, or text); None when no output was accepted."""
    schema_name: str | None
    """The output schema's name, when the agent had one."""
    output_schema: dict[str, JsonValue] | None
    """The output JSON schema the agent sent, when it had one."""
    output_accepted: bool
    """An output was accepted (for a schema: it validated)."""
    attempts: int
    """Structured-output attempts: accepted after N, or N rejected; 0 if never asked."""
    steps: int
    """Model requests made."""
    tool_calls: tuple[ToolCallRecord, ...]
    """Tool calls in the order the model asked for them."""
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


def observe(trace: Trace | Iterable[TraceEvent]) -> Observation:
    """Read a verified trace into an `Observation`.

    Args:
        trace: A trace loaded with `Trace.load` (so it verified), or its events as they verify
            (`observe_verified` streams them, so a long trace is never held whole).

    Returns:
        What the run did.
    """
    prompt = ""
    output: JsonValue = None
    schema_name: str | None = None
    schema: dict[str, JsonValue] | None = None
    accepted = False
    attempts = 0
    rejected = 0
    steps = 0
    status: Literal["finished", "failed", "incomplete"] = "incomplete"
    error_type: str | None = None
    error: str | None = None
    tokens_in = tokens_out = 0
    calls: dict[str, dict[str, object]] = {}
    first: datetime | None = None
    last: datetime | None = None
    # One pass over events typed as they are read: nothing per event is kept but the calls.
    for event in trace.events if isinstance(trace, Trace) else trace:
        first = event.at if first is None else first
        last = event.at
        body = event.body
        if isinstance(body, RunStarted):
            prompt = body.prompt
            if body.config.output_schema is not None:
                schema_name = body.config.output_schema.name
                schema = dict(body.config.output_schema.json_schema)
        elif isinstance(body, ModelResponded):
            tokens_in += body.response.usage.input_tokens
            tokens_out += body.response.usage.output_tokens
            for call in body.response.message.tool_calls:
                calls[call.id] = {
                    "call_id": call.id,
                    "tool": call.name,
                    "arguments": dict(call.arguments),
                    "decision": None,
                    "reason": "",
                    "is_error": False,
                    "result": None,
                }
        elif isinstance(body, PolicyDecided):
            record = calls.get(body.call_id)
            if record is not None:
                record["decision"] = body.decision
                record["reason"] = body.reason
        elif isinstance(body, ToolReturned):
            record = calls.get(body.result.call_id)
            if record is not None:
                record["is_error"] = body.result.is_error
                record["result"] = body.result.content
        elif isinstance(body, OutputRejected):
            rejected = max(rejected, body.attempt)
        elif isinstance(body, OutputAccepted):
            accepted = True
            output = body.value
            attempts = body.attempts if body.schema_name is not None else 0
        elif isinstance(body, RunFinished):
            status = "finished"
            steps = body.steps
        elif isinstance(body, RunFailed):
            status = "failed"
            steps = body.steps
            error_type = body.error_type
            error = body.message
    if not accepted:
        attempts = rejected
    duration = (last - first).total_seconds() if first is not None and last is not None else 0.0
    return Observation(
        status=status,
        prompt=prompt,
        output=output,
        schema_name=schema_name,
        output_schema=schema,
        output_accepted=accepted,
        attempts=attempts,
        steps=steps,
        tool_calls=tuple(ToolCallRecord.model_validate(record) for record in calls.values()),
        error_type=error_type,
        error=error,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        duration_s=duration,
    )


def observe_verified(
    source: str | os.PathLike[str] | bytes, *, require_complete: bool = False
) -> tuple[Observation, Checkpoint]:
    """Verify a trace and observe it in one streaming pass; also return its checkpoint.

    Memory is bounded by the largest event and the observation, not by the trace: each event
    is typed, observed and dropped as it verifies, and the checkpoint's root is grown on a
    Merkle frontier (one hash per level).

    Raises:
        TraceCorruptError: The trace does not verify (its ``.report`` holds where and the
            checkpoint of the part that did).
        OSError: The file cannot be read (a FIFO or device is refused unread).
    """
    frontier = Frontier()
    heads = [GENESIS]

    def events() -> Iterator[TraceEvent]:
        for item in walk_trace(source, check=typed_event, require_complete=require_complete):
            frontier.append_hash(leaf_hash(bytes.fromhex(item.digest)))
            heads[0] = item.digest
            yield item.value

    observation = observe(events())
    checkpoint = Checkpoint(size=frontier.size, root=frontier.root().hex(), head=heads[0])
    return observation, checkpoint


def observe_file(path: Path) -> Observation | None:
    """`observe` a trace file, streaming; None if it is missing or does not verify."""
    try:
        return observe_verified(path)[0]
    except (OSError, TraceCorruptError):
        return None
