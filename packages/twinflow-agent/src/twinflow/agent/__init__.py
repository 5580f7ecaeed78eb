"""twinflow.agent: the agent loop, deny-by-default tool policy, the tamper-evident trace.

Errors (every one under the workspace's root)::

    TwinflowError                                    (twinflow.vocab)
    ├── AgentError
    │   ├── CannotResume (also a UserError)           a trace that cannot be continued as it is; nothing written
    │   ├── RunPaused                                a run waits for a person's decision (`.paused`)
    │   ├── AgentConfigError (also a UserError)       a usage mistake: bad tool, policy, agent or value
    │   │                                            (every agent value, `Policy(max_tool_calls=-1)` too)
    │   ├── McpToolFailed                            an MCP call's result is unusable (an error result)
    │   │   ├── McpToolError                         the server marked it ``isError``
    │   │   ├── McpOutputInvalid                     ``structuredContent`` does not match ``outputSchema``
    │   │   ├── McpContentInvalid                    a content block maps onto no part, or is too big
    │   │   └── McpRequestRefused                    the server asked to sample or elicit during the call
    │   ├── RunError                                 a run ended without an output (``run_failed``)
    │   │   ├── MaxStepsExceeded
    │   │   ├── UsageLimitExceeded
    │   │   ├── OutputValidationFailed               structured output still invalid after the last attempt
    │   │   ├── InvalidModelReply                    a reply the loop cannot act on; no tool of it ran
    │   │   └── RecordedFailure                      replay: the recorded run failed here (its type and message)
    │   └── ReplayDivergenceError                    replay: an event differs (`.seq`, `.expected`, `.actual`,
    │                                                `.difference`); also the kernel's ReplayDivergenceError
    ├── KernelError                                  (twinflow.kernel)
    │   ├── ReplayDivergenceError                    the one replay-divergence error (the agent's above)
    │   └── NondeterminismError (also a RuntimeError)  replayed code reached the clock, randomness or network
    └── TraceError                                   (twinflow.trace: import it from there)
        └── TraceCorruptError, SignatureError, InvalidProofError, FileWriteError, TargetExistsError, ...

Errors raised by the injected model (a connection failure from the kernel's transport, for
example) are recorded in the trace as ``run_failed`` and re-raised unchanged.
"""

from twinflow.agent._agent import Agent, RunResult, UsageLimits
from twinflow.agent._behaviour import BehaviourDivergence, behaviour_of, compare_behaviour
from twinflow.agent._errors import (
    AgentConfigError,
    AgentError,
    InvalidModelReply,
    MaxStepsExceeded,
    McpContentInvalid,
    McpOutputInvalid,
    McpRequestRefused,
    McpToolError,
    McpToolFailed,
    OutputValidationFailed,
    RunError,
    UsageLimitExceeded,
)
from twinflow.agent._events import (
    AgentConfig,
    ApprovalDecided,
    ApprovalRequested,
    Environment,
    EventBody,
    ForkParent,
    ListedTool,
    MessageChain,
    ModelRequested,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    PartKindRecord,
    PolicyDecided,
    PolicyRecord,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    SteeringReceived,
    ToolCalled,
    ToolReturned,
    ToolsListed,
    TraceEvent,
)
from twinflow.agent._function_model import FunctionModel
from twinflow.agent._mcp import McpTools
from twinflow.agent._observe import Observer, Steering
from twinflow.agent._page import render_trace_page
from twinflow.agent._policy import (
    Approval,
    ApprovalHook,
    Approve,
    Deny,
    Modify,
    Policy,
    RecordedResults,
)
from twinflow.agent._replay import (
    REPLAY_KINDS,
    RecordedFailure,
    ReplayDivergenceError,
    ReplayMode,
    ReplayPorts,
    ReplayResult,
    replay,
)
from twinflow.agent._resume import (
    CannotResume,
    Decision,
    Paused,
    RunPaused,
    approval_statement,
    record_decisions,
)
from twinflow.agent._structured import PydanticStructuredOutput
from twinflow.agent._summary import CallSummary, TraceSummary, summarize_trace
from twinflow.agent._tools import Tool
from twinflow.agent._trace import TraceWriter, encode_event
from twinflow.agent._verify import Trace, typed_event, verify_agent_trace

__all__ = [
    "REPLAY_KINDS",
    "Agent",
    "AgentConfig",
    "AgentConfigError",
    "AgentError",
    "Approval",
    "ApprovalDecided",
    "ApprovalHook",
    "ApprovalRequested",
    "Approve",
    "BehaviourDivergence",
    "CallSummary",
    "CannotResume",
    "Decision",
    "Deny",
    "Environment",
    "EventBody",
    "ForkParent",
    "FunctionModel",
    "InvalidModelReply",
    "ListedTool",
    "MaxStepsExceeded",
    "McpContentInvalid",
    "McpOutputInvalid",
    "McpRequestRefused",
    "McpToolError",
    "McpToolFailed",
    "McpTools",
    "MessageChain",
    "ModelRequested",
    "ModelResponded",
    "Modify",
    "Observer",
    "OutputAccepted",
    "OutputRejected",
    "OutputValidationFailed",
    "PartKindRecord",
    "Paused",
    "Policy",
    "PolicyDecided",
    "PolicyRecord",
    "PydanticStructuredOutput",
    "RecordedFailure",
    "RecordedResults",
    "ReplayDivergenceError",
    "ReplayMode",
    "ReplayPorts",
    "ReplayResult",
    "RunError",
    "RunFailed",
    "RunFinished",
    "RunPaused",
    "RunResult",
    "RunResumed",
    "RunStarted",
    "Steering",
    "SteeringReceived",
    "Tool",
    "ToolCalled",
    "ToolReturned",
    "ToolsListed",
    "Trace",
    "TraceEvent",
    "TraceSummary",
    "TraceWriter",
    "UsageLimitExceeded",
    "UsageLimits",
    "approval_statement",
    "behaviour_of",
    "compare_behaviour",
    "encode_event",
    "record_decisions",
    "render_trace_page",
    "replay",
    "summarize_trace",
    "typed_event",
    "verify_agent_trace",
]
