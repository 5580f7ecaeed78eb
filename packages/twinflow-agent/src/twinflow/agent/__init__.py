"""twinflow.agent: the agent loop, deny-by-default tool policy, the tamper-evident trace.

Errors (every one under the workspace's root)::

    TwinflowError                                    (twinflow.trace)
    ├── AgentError
    │   ├── CannotResume (also a UserError)           a trace that cannot be continued as it is; nothing written
    │   ├── RunPaused                                a run waits for a person's decision (`.paused`)
    │   ├── AgentConfigError (also a UserError)       a usage mistake: bad tool, policy, agent or value
    │   │                                            (every agent value, `Policy(max_tool_calls=-1)` too)
    │   ├── McpToolFailed                            an MCP call's result is unusable (an error result;
    │   │                                            `.reason`: error, content_invalid, output_invalid,
    │   │                                            request_refused)
    │   ├── SpecError (also a UserError)             a run spec that cannot be used (file:line: key: why);
    │   │                                            ``reason="code_changed"``: a module changed since the run
    │   ├── RunError                                 a run ended without an output (``run_failed``);
    │   │   │                                        `.reason`: max_steps, usage_limit, output_invalid
    │   │   │                                        (structured output still invalid after the last
    │   │   │                                        attempt), invalid_reply (a reply the loop cannot act
    │   │   │                                        on; no tool of it ran; `.attempts`)
    │   │   └── RecordedFailure                      replay: the recorded run failed here (its type and message)
    ├── KernelError                                  (twinflow.kernel)
    │   ├── ReplayDivergenceError                    replay: an event differs (`.seq`, `.expected`, `.actual`,
    │   │                                            `.difference`)
    │   └── NondeterminismError (also a RuntimeError)  replayed code reached the clock, randomness or network
    └── TraceError                                   (twinflow.trace: import it from there)
        └── TraceCorruptError, SignatureError, InvalidProofError, FileWriteError, TargetExistsError, ...

Errors raised by the injected model (a connection failure from the kernel's transport, for
example) are recorded in the trace as ``run_failed`` and re-raised unchanged.
"""

from twinflow.agent._agent import Agent as Agent
from twinflow.agent._agent import RunResult as RunResult
from twinflow.agent._agent import UsageLimits as UsageLimits
from twinflow.agent._connect import connect as connect
from twinflow.agent._connect import replay_run as replay_run
from twinflow.agent._errors import AgentConfigError as AgentConfigError
from twinflow.agent._errors import AgentError as AgentError
from twinflow.agent._errors import CannotResume as CannotResume
from twinflow.agent._errors import McpToolFailed as McpToolFailed
from twinflow.agent._errors import RunError as RunError
from twinflow.agent._errors import RunPaused as RunPaused
from twinflow.agent._errors import SpecError as SpecError
from twinflow.agent._events import ApprovalDecided as ApprovalDecided
from twinflow.agent._events import ApprovalRequested as ApprovalRequested
from twinflow.agent._events import ModelRequested as ModelRequested
from twinflow.agent._events import ModelResponded as ModelResponded
from twinflow.agent._events import OutputAccepted as OutputAccepted
from twinflow.agent._events import OutputRejected as OutputRejected
from twinflow.agent._events import PolicyDecided as PolicyDecided
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
from twinflow.agent._policy import ApprovalHook as ApprovalHook
from twinflow.agent._policy import Approve as Approve
from twinflow.agent._policy import Deny as Deny
from twinflow.agent._policy import Modify as Modify
from twinflow.agent._policy import Policy as Policy
from twinflow.agent._replay import ReplayResult as ReplayResult
from twinflow.agent._replay import replay as replay
from twinflow.agent._resume import Decision as Decision
from twinflow.agent._spec import McpServerSpec as McpServerSpec
from twinflow.agent._spec import ModelSpec as ModelSpec
from twinflow.agent._spec import PolicySpec as PolicySpec
from twinflow.agent._spec import RunSpec as RunSpec
from twinflow.agent._spec import load_spec as load_spec
from twinflow.agent._tools import Tool as Tool
from twinflow.agent._verify import Trace as Trace
from twinflow.agent._verify import typed_event as typed_event
from twinflow.agent._verify import verify_agent_trace as verify_agent_trace
