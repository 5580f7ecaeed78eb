"""The trace's events: one frozen value per thing that happened in a run.

Every event is a `TraceEvent` envelope (sequence number, previous event's digest, clock
reading) around a body tagged by ``kind``. Bodies carry deltas, never the whole transcript:
a model request records only the messages added since the previous request plus a running
digest of the messages before them, so an event's size does not grow with the run.

Everything a replay needs is in here: the clock reading of each event (``at``), the run id,
every model request and response, every policy decision and tool result.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, Discriminator, Field, JsonValue

from twinflow.agent._records import (
    AgentConfig,
    Environment,
    ForkParent,
    PartKindRecord,
    PolicyRecord,
)
from twinflow.agent._records import _Frozen as _Frozen  # the base the agent's values share
from twinflow.trace._format import GENESIS, TERMINAL_KINDS
from twinflow.vocab import (
    CallId,
    Message,
    ModelResponse,
    ModelSettings,
    RunId,
    ToolResultPart,
    Usage,
)

__all__ = [
    "FORMAT",
    "GENESIS",
    "TERMINAL_KINDS",
    "AgentConfig",
    "ApprovalDecided",
    "ApprovalRequested",
    "BudgetExceeded",
    "ChildRun",
    "ChildUse",
    "Environment",
    "EventBody",
    "ForkParent",
    "InputAnswered",
    "InputRequested",
    "ListedTool",
    "ModelRequested",
    "ModelResponded",
    "ModelWaited",
    "OutputAccepted",
    "OutputRejected",
    "PartKindRecord",
    "PolicyDecided",
    "PolicyRecord",
    "ReplyCost",
    "RunFailed",
    "RunFinished",
    "RunResumed",
    "RunStarted",
    "SteeringReceived",
    "ToolCalled",
    "ToolReturned",
    "ToolsListed",
    "TraceEvent",
    "UserTurn",
]


FORMAT = 1
"""The trace format version a run records in ``run_started`` (a reader takes absent as 1)."""


class RunStarted(_Frozen):
    """A run began."""

    kind: Literal["run_started"] = "run_started"
    """Union tag."""
    format: int | None = Field(default=None, ge=1, exclude_if=lambda value: value is None)
    """The trace format version the run was written in (`FORMAT` for a run recorded now);
    absent in runs recorded before it was written, which are format 1."""
    run_id: RunId
    """The run's id, from the `Ids` port."""
    config_digest: str
    """Digest of ``config``."""
    config: AgentConfig
    """The agent configuration."""
    prompt: str
    """The user prompt."""
    parent: ForkParent | None = Field(default=None, exclude_if=lambda value: value is None)
    """The trace this run was forked from (`twinflow fork`); absent, not null, for other runs,
    so the events of runs recorded before forks existed keep their bytes."""
    environment: Environment | None = Field(default=None, exclude_if=lambda value: value is None)
    """Where the run ran (absent when the agent was given none, as in runs recorded before)."""


class ModelRequested(_Frozen):
    """The loop asked the model; only what is new since the previous request is recorded."""

    kind: Literal["model_requested"] = "model_requested"
    """Union tag."""
    step: int
    """Step number, from 1."""
    purpose: Literal["step", "reask"]
    """A loop step, or a re-ask after a structured output failed validation."""
    prefix_length: int
    """Number of transcript messages before ``new_messages``."""
    prefix_digest: str
    """`MessageChain` digest of those messages."""
    new_messages: tuple[Message, ...]
    """Messages appended since the previous request."""
    tools_digest: str
    """Digest of the tool specs sent."""
    output_schema_digest: str | None
    """Digest of the output schema sent, if any."""
    settings: ModelSettings
    """Settings sent."""


class ReplyCost(_Frozen):
    """What one reply cost, with the price it was charged at: a later price table never
    changes a recorded run's cost (docs/adr/0198)."""

    usd: float = Field(ge=0)
    """US dollars: input tokens times ``input_per_mtok`` plus output tokens times
    ``output_per_mtok``, over a million, rounded to 10 places."""
    model: str
    """The price table's id of the model charged."""
    input_per_mtok: float = Field(ge=0)
    """US dollars per million input tokens."""
    output_per_mtok: float = Field(ge=0)
    """US dollars per million output tokens."""
    table: str
    """The price table's source and date."""


class ModelResponded(_Frozen):
    """The model answered."""

    kind: Literal["model_responded"] = "model_responded"
    """Union tag."""
    step: int
    """Step number, from 1."""
    response: ModelResponse
    """The response, whole."""
    answered_by: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """Which model of a fallback list answered (its label: the model string, or the spec's
    model identity); absent, not null, for a single model, so other runs keep their bytes."""
    cost: ReplyCost | None = Field(default=None, exclude_if=lambda value: value is None)
    """What the reply cost by the price table; absent, not null, where the model's price is
    unknown (and in runs recorded before prices shipped, which keep their bytes)."""


class ModelFellBack(_Frozen):
    """A model of a fallback list failed for a listed class; the next one was asked."""

    kind: Literal["model_fell_back"] = "model_fell_back"
    """Union tag."""
    step: int
    """Step number, from 1."""
    model: str
    """The model that failed (its label)."""
    failure: str
    """Its failure class (`rate_limited`, `overloaded`, `server_error`, `connect`, `timeout`,
    `malformed` or `refused`)."""
    error: str
    """The failure's one line, scrubbed like every event."""
    next: str
    """The model asked next (its label)."""


class ModelWaited(_Frozen):
    """A model request was refused for now (rate limited, overloaded, the connection reset
    before it was sent) and the run waited before sending it again (ADR 0179).

    A replay reads it back: the wait is reproduced as this event, and nothing is waited for.
    """

    kind: Literal["model_waited"] = "model_waited"
    """Union tag."""
    step: int
    """Step number, from 1."""
    attempt: int = Field(ge=1)
    """The send that was refused, from 1 (the next send is ``attempt + 1``)."""
    status: int | None
    """The HTTP status that refused it (429, 503, 529); None for a connection reset."""
    retry_after: str | None
    """The answer's ``Retry-After`` header as received, if any."""
    jitter: float = Field(ge=0, lt=1)
    """The fraction drawn from the ids port that spread this wait."""
    wait_seconds: float = Field(ge=0)
    """How long the run waited (on the clock port) before sending again."""


class BudgetExceeded(_Frozen):
    """The run's usage went over one of its limits (`UsageLimits`, the spec's ``budget``): the
    decision to end the run, recorded just before its ``run_failed``."""

    kind: Literal["budget_exceeded"] = "budget_exceeded"
    """Union tag."""
    budget: str
    """Which limit: ``requests``, ``input_tokens``, ``output_tokens``, ``total_tokens``,
    ``tool_calls``, ``wall_seconds`` or ``cost_usd``."""
    used: int | float
    """What the run had used of it."""
    limit: int | float
    """The limit."""


class SteeringReceived(_Frozen):
    """A steering message arrived between steps; it is sent to the model as a tagged user turn."""

    kind: Literal["steering_received"] = "steering_received"
    """Union tag."""
    step: int
    """The step whose model request carries it (1 for the first)."""
    text: str
    """The message, as given (the model sees it in `twinflow.vocab._envelope.envelope("steering", ...)`)."""


class ChildUse(_Frozen):
    """What a child run used that its parent counted against its own budget (a ``shared`` or
    split budget, docs/adr/0201): replaying the parent counts it again from here."""

    requests: int = Field(ge=0)
    """The child's model requests (its steps, re-asks included)."""
    input_tokens: int = Field(ge=0)
    """The child's prompt tokens."""
    output_tokens: int = Field(ge=0)
    """The child's generated tokens."""
    tool_calls: int = Field(ge=0)
    """The child's tool calls that ran."""


class ChildRun(_Frozen):
    """The run a sub-agent tool made: what the parent's trace vouches for (docs/adr/0191)."""

    run_id: RunId
    """The child run's id."""
    trace: str | None = Field(max_length=255)
    """The child's trace file, by name, in the parent trace's directory; None when the parent
    writes to a sink that is not a file (the child's trace is then in memory only)."""
    size: int = Field(ge=0)
    """Events in the child's trace when it returned (``root`` covers that many)."""
    root: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Merkle root of the child's trace at ``size`` events (hex)."""
    counted: ChildUse | None = Field(default=None, exclude_if=lambda value: value is None)
    """What the child used that the parent counted against its budget; absent under an
    ``own`` budget (and for a simulated user)."""


class UserTurn(_Frozen):
    """The user took another turn in the run's conversation (``Agent.run(prompt,
    continue_from=result)``): the steps after it answer this message, with the whole
    conversation before it in the model's context."""

    kind: Literal["user_turn"] = "user_turn"
    """Union tag."""
    turn: int = Field(ge=2)
    """The turn's number: 2 for the first after the prompt ``run_started`` records."""
    text: str
    """The user's message, as given."""
    simulator: ChildRun | None = Field(default=None, exclude_if=lambda value: value is None)
    """The simulated user's run that wrote ``text`` (an eval case's simulated user): its
    trace file beside this one, and its size and Merkle root once it had written the
    message, so this run's checkpoint vouches for the simulator's (``verify --tree``).
    Absent for a message a person or a list of turns gave."""


class PolicyDecided(_Frozen):
    """The policy allowed or denied one tool call."""

    kind: Literal["policy_decided"] = "policy_decided"
    """Union tag."""
    call_id: CallId
    """The call decided on."""
    tool: str
    """Tool name the model asked for."""
    decision: Literal["allow", "deny"]
    """The decision."""
    by: Literal["policy", "approval"]
    """Who decided: the automatic rules, or the approval hook."""
    reason: str
    """Why."""
    arguments: dict[str, JsonValue] | None = None
    """The arguments the tool will run with, when the approval hook changed them."""


class ToolCalled(_Frozen):
    """The runner called a tool with validated arguments."""

    kind: Literal["tool_called"] = "tool_called"
    """Union tag."""
    call_id: CallId
    """Call id."""
    tool: str
    """Tool name."""
    arguments: dict[str, JsonValue]
    """Arguments as passed (after validation and any approved modification)."""


class ToolReturned(_Frozen):
    """A tool call's result, as the model will see it (denials included)."""

    kind: Literal["tool_returned"] = "tool_returned"
    """Union tag."""
    result: ToolResultPart
    """The result part appended to the transcript."""
    error_type: str | None = None
    """Error class name when ``result.is_error``."""
    truncated_chars: int = 0
    """Characters cut off by the output size cap."""
    child: ChildRun | None = Field(default=None, exclude_if=lambda value: value is None)
    """The run a sub-agent tool made for this call (absent for every other tool, so results
    recorded before sub-agents existed keep their bytes)."""


class ListedTool(_Frozen):
    """One tool an MCP server offers, as the model is shown it."""

    name: str
    """``<server>.<tool>``: the name in the policy, the model's calls and the trace."""
    description: str
    """The server's description of it."""
    parameters: dict[str, JsonValue]
    """The JSON Schema of its arguments (the server's ``inputSchema``)."""
    output_schema: dict[str, JsonValue] | None = Field(
        default=None, exclude_if=lambda value: value is None
    )
    """The JSON Schema its structured results are checked against (``outputSchema``), if any."""


class ToolsListed(_Frozen):
    """An MCP server's identity and tool list, as the run used it from here on.

    Written after ``run_started`` for each server, and again before the step that follows the
    server's saying its list changed: replay serves the tools from these events, with no server.
    """

    kind: Literal["tools_listed"] = "tools_listed"
    """Union tag."""
    server: str
    """The server's name (the spec's ``mcp_servers[].name``)."""
    step: int = Field(ge=1)
    """The step whose model request is the first to offer this list."""
    protocol_version: str
    """The MCP protocol revision agreed on (``server/discover`` or ``initialize``)."""
    server_info: dict[str, JsonValue]
    """The server's ``serverInfo`` (its name and version, as it says)."""
    tools: tuple[ListedTool, ...]
    """Its tools, in the order it listed them."""
    ttl_ms: int | None = Field(default=None, ge=0, exclude_if=lambda value: value is None)
    """How long the list may be kept (its ``ttlMs`` cache hint, capped at a day), from a
    2026-07-28 server; None if it gave none. Past it, the list is asked again before a step
    and traced again only if it changed."""


class OutputRejected(_Frozen):
    """A structured output attempt failed validation."""

    kind: Literal["output_rejected"] = "output_rejected"
    """Union tag."""
    attempt: int
    """Attempt number, from 1."""
    emission: str
    """The raw emission."""
    error: str
    """The validation error the model is re-asked with."""


class OutputAccepted(_Frozen):
    """The final output was accepted."""

    kind: Literal["output_accepted"] = "output_accepted"
    """Union tag."""
    attempts: int
    """Attempts it took."""
    schema_name: str | None
    """Output schema name, or None for plain text."""
    value: JsonValue
    """The validated output (JSON form), or the text."""


class RunFinished(_Frozen):
    """A run ended with an output."""

    kind: Literal["run_finished"] = "run_finished"
    """Union tag."""
    run_id: RunId
    """The run."""
    steps: int
    """Model requests made."""
    usage: Usage
    """Total usage."""
    transcript_digest: str
    """`twinflow.vocab.digest` of the final transcript."""


class RunFailed(_Frozen):
    """A run ended without an output."""

    kind: Literal["run_failed"] = "run_failed"
    """Union tag."""
    run_id: RunId
    """The run."""
    steps: int
    """Model requests made."""
    error_type: str
    """Error class name."""
    message: str
    """Error message."""
    reason: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """The error's stable ``reason`` tag where its class has one (a `TransportError`'s
    ``timeout`` or ``blocked``, a `FileWriteError`'s ``write``): whether a resume may go on
    past the failure is read from it. Absent in traces recorded before it was."""


class RunResumed(_Frozen):
    """The run went on after its recorded prefix (`Agent.resume`): what follows was produced live.

    Everything before this event was re-run against the record, not done again: no model
    request and no tool call of the prefix was repeated, except ``repeated_call``.
    """

    kind: Literal["run_resumed"] = "run_resumed"
    """Union tag."""
    why: str
    """Why the run is continued (the prefix's end: no terminal event, a failure that can
    pass, calls that were waiting for approval)."""
    prefix_size: int = Field(ge=1)
    """Events on disk before this one (the prefix re-run against the record)."""
    prefix_root: str
    """Merkle root of those events (hex); ``prove --from-size prefix_size`` ties them to the
    continued trace."""
    repeated_call: CallId | None = None
    """A call recorded as started but never returned, run again because its tool is declared
    safe to repeat; None when nothing is run twice."""
    environment: Environment | None = Field(default=None, exclude_if=lambda value: value is None)
    """Where the continuation runs, when it is not where the run started (absent otherwise)."""


class ApprovalRequested(_Frozen):
    """The policy asks a person to decide on a call (``Policy.ask``); the run stops until then."""

    kind: Literal["approval_requested"] = "approval_requested"
    """Union tag."""
    call_id: CallId
    """The call waiting."""
    tool: str
    """Tool name."""
    arguments: dict[str, JsonValue]
    """Arguments the model sent."""
    digest: str
    """`twinflow.vocab.digest` of ``{call_id, tool, arguments}``: what a signed decision signs."""


class ApprovalDecided(_Frozen):
    """A person's decision on a call that waited for approval."""

    kind: Literal["approval_decided"] = "approval_decided"
    """Union tag."""
    call_id: CallId
    """The call decided on."""
    decision: Literal["approve", "deny"]
    """The decision."""
    by: str
    """Who decided (as given; not authenticated unless ``signature`` is set)."""
    reason: str
    """Why; a denial's reason reaches the model."""
    signed_note: str | None = None
    """A C2SP signed note of the decision's statement (`twinflow.agent._approval`: the run, the
    trace's root at the request, the call's id, tool and arguments, and the verdict), signed
    with a `twinflow keygen` Ed25519 key; ``twinflow verify --key`` recomputes the statement from
    the events and checks it. None if unsigned."""


class InputRequested(_Frozen):
    """An MCP server asked for a form's input during a call (its ``input_required`` round);
    the run stops until a person answers (``approve --answer``) or a callback does."""

    kind: Literal["input_requested"] = "input_requested"
    """Union tag."""
    call_id: CallId
    """The call the server asked during."""
    tool: str
    """Tool name (``<server>.<tool>``)."""
    round: int = Field(ge=1)
    """Which of the call's rounds (1 for the server's first answer)."""
    key: str = Field(max_length=256)
    """The server's name for the request, within its round."""
    message: str
    """What the server says it wants, shown to the person answering."""
    requested_schema: dict[str, JsonValue]
    """The JSON Schema an answer must match (the server's ``requestedSchema``)."""


class InputAnswered(_Frozen):
    """The answer to an `InputRequested`, sent to the server when the call is retried."""

    kind: Literal["input_answered"] = "input_answered"
    """Union tag."""
    call_id: CallId
    """The call."""
    round: int = Field(ge=1)
    """The round of the request answered."""
    key: str = Field(max_length=256)
    """The request answered, by the server's name for it."""
    action: Literal["accept", "decline"]
    """``accept`` sends ``content``; ``decline`` refuses the form."""
    content: dict[str, JsonValue] | None = None
    """The form's values (checked against the requested schema); None when declined."""
    by: str
    """Who answered (as given; ``callback`` for an answer from Python)."""
    signed_note: str | None = None
    """A C2SP signed note of the answer's statement (`twinflow.agent._inputs`), checked like a
    signed decision's; None if unsigned."""


EventBody = Annotated[
    RunStarted
    | ModelRequested
    | ModelResponded
    | ModelFellBack
    | ModelWaited
    | BudgetExceeded
    | SteeringReceived
    | UserTurn
    | PolicyDecided
    | ToolCalled
    | ToolReturned
    | OutputRejected
    | OutputAccepted
    | RunFinished
    | RunFailed
    | RunResumed
    | ApprovalRequested
    | ApprovalDecided
    | ToolsListed
    | InputRequested
    | InputAnswered,
    Discriminator("kind"),
]
"""What happened, tagged by ``kind``."""


class TraceEvent(_Frozen):
    """One line of a trace: the envelope that chains events together."""

    seq: int = Field(ge=0)
    """Position in the trace, from 0."""
    prev: str
    """Digest of the previous event (`GENESIS` for the first)."""
    at: AwareDatetime
    """Clock reading when the event was recorded."""
    body: EventBody
    """What happened."""
