"""twinflow.agent: the agent loop, deny-by-default tool policy, the tamper-evident trace.

Errors (every one under the workspace's root)::

    TwinflowError                                    (twinflow.trace)
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
    ├── KernelError                                  (twinflow.kernel)
    │   ├── ReplayDivergenceError                    replay: an event differs (`.seq`, `.expected`, `.actual`,
    │   │                                            `.difference`)
    │   └── NondeterminismError (also a RuntimeError)  replayed code reached the clock, randomness or network
    └── TraceError                                   (twinflow.trace: import it from there)
        └── TraceCorruptError, SignatureError, InvalidProofError, FileWriteError, TargetExistsError, ...

Errors raised by the injected model (a connection failure from the kernel's transport, for
example) are recorded in the trace as ``run_failed`` and re-raised unchanged.

`AgentError`, `AgentConfigError`, the MCP errors and `RunError` with its kinds but
`RecordedFailure` are imported eagerly. Every other name is resolved on first access (PEP
562), the errors of resume and replay too (`CannotResume`, `RunPaused`, `RecordedFailure`:
importing them would import resume and replay), so a caller that
reads typed events (`twinflow diff`, `twinflow show`) imports the event models and not the
loop, MCP, replay and the page behind them.
"""

# Only underscored names and the public ones may live here (tests/gates/test_exported_members.py).
import typing as _typing

from twinflow._base._lazy import lazy_exports as _lazy_exports
from twinflow.agent._errors import AgentConfigError as AgentConfigError
from twinflow.agent._errors import AgentError as AgentError
from twinflow.agent._errors import InvalidModelReply as InvalidModelReply
from twinflow.agent._errors import MaxStepsExceeded as MaxStepsExceeded
from twinflow.agent._errors import McpContentInvalid as McpContentInvalid
from twinflow.agent._errors import McpOutputInvalid as McpOutputInvalid
from twinflow.agent._errors import McpRequestRefused as McpRequestRefused
from twinflow.agent._errors import McpToolError as McpToolError
from twinflow.agent._errors import McpToolFailed as McpToolFailed
from twinflow.agent._errors import OutputValidationFailed as OutputValidationFailed
from twinflow.agent._errors import RunError as RunError
from twinflow.agent._errors import UsageLimitExceeded as UsageLimitExceeded

if _typing.TYPE_CHECKING:
    from twinflow.agent._agent import Agent as Agent
    from twinflow.agent._agent import RunResult as RunResult
    from twinflow.agent._agent import UsageLimits as UsageLimits
    from twinflow.agent._behaviour import BehaviourDivergence as BehaviourDivergence
    from twinflow.agent._behaviour import behaviour_of as behaviour_of
    from twinflow.agent._behaviour import compare_behaviour as compare_behaviour
    from twinflow.agent._events import AgentConfig as AgentConfig
    from twinflow.agent._events import ApprovalDecided as ApprovalDecided
    from twinflow.agent._events import ApprovalRequested as ApprovalRequested
    from twinflow.agent._events import Environment as Environment
    from twinflow.agent._events import EventBody as EventBody
    from twinflow.agent._events import ForkParent as ForkParent
    from twinflow.agent._events import ListedTool as ListedTool
    from twinflow.agent._events import MessageChain as MessageChain
    from twinflow.agent._events import ModelRequested as ModelRequested
    from twinflow.agent._events import ModelResponded as ModelResponded
    from twinflow.agent._events import OutputAccepted as OutputAccepted
    from twinflow.agent._events import OutputRejected as OutputRejected
    from twinflow.agent._events import PartKindRecord as PartKindRecord
    from twinflow.agent._events import PolicyDecided as PolicyDecided
    from twinflow.agent._events import PolicyRecord as PolicyRecord
    from twinflow.agent._events import RunFailed as RunFailed
    from twinflow.agent._events import RunFinished as RunFinished
    from twinflow.agent._events import RunResumed as RunResumed
    from twinflow.agent._events import RunStarted as RunStarted
    from twinflow.agent._events import SteeringReceived as SteeringReceived
    from twinflow.agent._events import ToolCalled as ToolCalled
    from twinflow.agent._events import ToolReturned as ToolReturned
    from twinflow.agent._events import ToolsListed as ToolsListed
    from twinflow.agent._events import TraceEvent as TraceEvent
    from twinflow.agent._function_model import FunctionModel as FunctionModel
    from twinflow.agent._mcp import McpTools as McpTools
    from twinflow.agent._observe import Observer as Observer
    from twinflow.agent._observe import Steering as Steering
    from twinflow.agent._page import render_trace_page as render_trace_page
    from twinflow.agent._policy import Approval as Approval
    from twinflow.agent._policy import ApprovalHook as ApprovalHook
    from twinflow.agent._policy import Approve as Approve
    from twinflow.agent._policy import Deny as Deny
    from twinflow.agent._policy import Modify as Modify
    from twinflow.agent._policy import Policy as Policy
    from twinflow.agent._policy import RecordedResults as RecordedResults
    from twinflow.agent._replay import REPLAY_KINDS as REPLAY_KINDS
    from twinflow.agent._replay import RecordedFailure as RecordedFailure
    from twinflow.agent._replay import ReplayMode as ReplayMode
    from twinflow.agent._replay import ReplayPorts as ReplayPorts
    from twinflow.agent._replay import ReplayResult as ReplayResult
    from twinflow.agent._replay import replay as replay
    from twinflow.agent._resume import CannotResume as CannotResume
    from twinflow.agent._resume import Decision as Decision
    from twinflow.agent._resume import Paused as Paused
    from twinflow.agent._resume import RunPaused as RunPaused
    from twinflow.agent._resume import approval_statement as approval_statement
    from twinflow.agent._resume import record_decisions as record_decisions
    from twinflow.agent._structured import PydanticStructuredOutput as PydanticStructuredOutput
    from twinflow.agent._summary import CallSummary as CallSummary
    from twinflow.agent._summary import TraceSummary as TraceSummary
    from twinflow.agent._summary import summarize_trace as summarize_trace
    from twinflow.agent._tools import Tool as Tool
    from twinflow.agent._trace import TraceWriter as TraceWriter
    from twinflow.agent._trace import encode_event as encode_event
    from twinflow.agent._verify import Trace as Trace
    from twinflow.agent._verify import typed_event as typed_event
    from twinflow.agent._verify import verify_agent_trace as verify_agent_trace

# Every other name resolves on first access (PEP 562): a command that reads typed events
# (`twinflow diff`, `show`) imports the event models, not the loop, MCP and replay (ADR 0150).
__getattr__, __dir__, __all__ = _lazy_exports(
    globals(),
    {
        "_agent": (
            "Agent",
            "RunResult",
            "UsageLimits",
        ),
        "_behaviour": (
            "BehaviourDivergence",
            "behaviour_of",
            "compare_behaviour",
        ),
        "_events": (
            "AgentConfig",
            "ApprovalDecided",
            "ApprovalRequested",
            "Environment",
            "EventBody",
            "ForkParent",
            "ListedTool",
            "MessageChain",
            "ModelRequested",
            "ModelResponded",
            "OutputAccepted",
            "OutputRejected",
            "PartKindRecord",
            "PolicyDecided",
            "PolicyRecord",
            "RunFailed",
            "RunFinished",
            "RunResumed",
            "RunStarted",
            "SteeringReceived",
            "ToolCalled",
            "ToolReturned",
            "ToolsListed",
            "TraceEvent",
        ),
        "_function_model": ("FunctionModel",),
        "_mcp": ("McpTools",),
        "_observe": (
            "Observer",
            "Steering",
        ),
        "_page": ("render_trace_page",),
        "_policy": (
            "Approval",
            "ApprovalHook",
            "Approve",
            "Deny",
            "Modify",
            "Policy",
            "RecordedResults",
        ),
        "_replay": (
            "REPLAY_KINDS",
            "RecordedFailure",
            "ReplayMode",
            "ReplayPorts",
            "ReplayResult",
            "replay",
        ),
        "_resume": (
            "CannotResume",
            "Decision",
            "Paused",
            "RunPaused",
            "approval_statement",
            "record_decisions",
        ),
        "_structured": ("PydanticStructuredOutput",),
        "_summary": (
            "CallSummary",
            "TraceSummary",
            "summarize_trace",
        ),
        "_tools": ("Tool",),
        "_trace": (
            "TraceWriter",
            "encode_event",
        ),
        "_verify": (
            "Trace",
            "typed_event",
            "verify_agent_trace",
        ),
    },
)
