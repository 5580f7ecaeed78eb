"""What a run did, read back from its verified trace: the only thing scorers ever see.

Scoring in the runner and in ``rescore`` both go through `observe`, so the same trace always
gets the same scores, with or without a model. The events are read once, by the agent's
`twinflow.views.summarize_trace` (what ``twinflow run`` prints, too).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import JsonValue

from twinflow.agent import Trace, TraceEvent, typed_event
from twinflow.eval._frozen import EvalValue
from twinflow.trace import Checkpoint, TraceCorruptError, walk_trace
from twinflow.views import summarize_trace

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
    turns: tuple[str, ...] = ()
    """A conversation's further user messages (a case's ``turns``), in order; empty for one
    prompt."""
    answers: tuple[JsonValue, ...] = ()
    """The output of each turn before the last, in order (``output`` is the last turn's)."""
    seed: int | None = None
    """The sampling seed the run was configured with (trials differ in it)."""
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
    cost_usd: float = 0.0
    """US dollars of the replies whose cost the trace records (each at its recorded price)."""
    unpriced: int = 0
    """Replies without a recorded cost: their model's price was unknown."""
    prices: tuple[str, ...] = ()
    """Each price the run was charged at, once (model, rates and price table)."""


def observe(trace: Trace | Iterable[TraceEvent]) -> Observation:
    """Read a verified trace into an `Observation` (from `twinflow.views.summarize_trace`).

    Args:
        trace: A trace loaded with `Trace.load` (so it verified), or its events as they verify
            (`observe_verified` streams them, so a long trace is never held whole).

    Returns:
        What the run did.
    """
    # The observation's fields are the summary's of the same names (its calls' too).
    events = trace.events if isinstance(trace, Trace) else trace
    return Observation.model_validate(summarize_trace(events), from_attributes=True)


def observe_verified(
    source: str | os.PathLike[str] | bytes,
    *,
    require_complete: bool = False,
    keep: Callable[[TraceEvent], object] | None = None,
) -> tuple[Observation, Checkpoint]:
    """Verify a trace and observe it in one streaming pass; also return its checkpoint.

    Memory is bounded by the largest event and the observation, not by the trace: each event
    is typed, observed and dropped as it verifies, and the checkpoint's root is the walk's,
    grown on a Merkle frontier (one hash per level).

    Args:
        source: A trace file path, or the trace's bytes.
        require_complete: Refuse a trace without a terminal event.
        keep: Called with each typed event as it verifies (the reports keep a few kinds from
            the same pass, ADR 0139).

    Raises:
        TraceCorruptError: The trace does not verify (its ``.report`` holds where and the
            checkpoint of the part that did).
        OSError: The file cannot be read (a FIFO or device is refused unread).
    """
    checkpoints: list[Checkpoint] = []

    def events() -> Iterator[TraceEvent]:
        walk = walk_trace(source, check=typed_event, require_complete=require_complete)
        while True:
            try:
                item = next(walk)
            except StopIteration as end:
                # Every event verified: the walk returns the checkpoint of its own tree, so
                # the events are not hashed into a second one here.
                checkpoints.append(end.value)
                return
            if keep is not None:
                keep(item.value)
            yield item.value

    walked = events()
    observation = observe(walked)
    for _ in walked:  # `summarize_trace` reads every event; were it to stop early, the walk
        pass  # still ends here, so every event is verified and the checkpoint is the whole's
    return observation, checkpoints[0]


def observe_file(path: Path) -> Observation | None:
    """`observe` a trace file, streaming; None if it is missing or does not verify."""
    try:
        return observe_verified(path)[0]
    except (OSError, TraceCorruptError):
        return None
