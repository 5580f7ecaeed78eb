"""twinflow.kernel (L1): the ports for all nondeterminism and their adapters.

Time, ids, the network and processes enter twinflow only through the ports here (`Clock`, `Ids`,
`Transport`, `Launcher`). The real adapters (`SystemClock`, `SystemIds`, `HttpTransport`,
`SubprocessLauncher`) sit beside deterministic and test ones (`FixedClock`, `SteppingClock`,
`CountingIds`, `SeededIds`, `MockTransport`, `RecordingTransport`, `ReplayTransport`,
`FaultTransport`, `LoopbackServer`). Bounded concurrency is the `Executor` port
(`SerialExecutor`, `ThreadExecutor`, and `RayExecutor` with the ``ray`` extra). The HTTP
transport keeps its idle connections in a `ConnectionPool`.

The errors are imported eagerly (they need no pydantic). Every other name is resolved on first
access (PEP 562), so `import twinflow.kernel` stays cheap for a caller that needs only a few
adapters, and pydantic's model machinery is built only when a value class is used.

Errors; every message names where (the URL or the command), what went wrong, and what to do::

    TwinflowError                          (twinflow.vocab)
    └── KernelError                        raised by twinflow.kernel
        ├── TransportError                 a request did not produce a JSON answer (`.url`)
        │   ├── ConnectError               refused, DNS, TLS, reset: the connection failed (never retried)
        │   ├── TransportTimeout           no complete answer within the timeout (also a TimeoutError)
        │   ├── HTTPStatusError            status >= 400, or a redirect not followed (`.status`, `.body_excerpt`)
        │   ├── ResponseDecodeError        the answer is not HTTP, or its body is not JSON
        │   ├── ResponseTooLarge           the body is larger than `max_response_bytes`
        │   └── NetworkBlockedError        the network kill switch refused a non-loopback host
        ├── ReplayDivergenceError          a replayed request differs from the recording (`.difference`);
        │                                  twinflow.agent's, for a trace event, is a subclass
        ├── NondeterminismError            replayed code reached the clock, randomness or the network (also a RuntimeError)
        ├── LaunchError                    a server process did not start, or did not become healthy
        ├── McpError                       an MCP server gave no usable answer (`.server`)
        │   ├── McpProtocolError           not JSON-RPC, past the size or depth limit, a bad tool list
        │   ├── McpTimeout                 no answer before the request's deadline (also a TimeoutError)
        │   ├── McpClosed                  the server exited or closed the connection first
        │   └── McpRemoteError             a JSON-RPC error answer (`.code`)
        └── ClusterError                   the Ray cluster could not be reached or started
            └── TaskLost                   a call's worker died on its last allowed attempt (`.index`)
                └── WorkerStartFailed      no worker could be started for the call (node, Ray's reason)

Usage mistakes (a bad URL scheme, a naive datetime) raise `twinflow.vocab.UserError` instead.
"""

# Only underscored names and the public ones may live here (tests/gates/test_exported_members.py).
import typing as _typing

from twinflow._base._lazy import lazy_exports as _lazy_exports
from twinflow.kernel._errors import ClusterError as ClusterError
from twinflow.kernel._errors import ConnectError as ConnectError
from twinflow.kernel._errors import HTTPStatusError as HTTPStatusError
from twinflow.kernel._errors import KernelError as KernelError
from twinflow.kernel._errors import LaunchError as LaunchError
from twinflow.kernel._errors import McpClosed as McpClosed
from twinflow.kernel._errors import McpError as McpError
from twinflow.kernel._errors import McpProtocolError as McpProtocolError
from twinflow.kernel._errors import McpRemoteError as McpRemoteError
from twinflow.kernel._errors import McpTimeout as McpTimeout
from twinflow.kernel._errors import NetworkBlockedError as NetworkBlockedError
from twinflow.kernel._errors import ReplayDivergenceError as ReplayDivergenceError
from twinflow.kernel._errors import ResponseDecodeError as ResponseDecodeError
from twinflow.kernel._errors import ResponseTooLarge as ResponseTooLarge
from twinflow.kernel._errors import TaskLost as TaskLost
from twinflow.kernel._errors import TransportError as TransportError
from twinflow.kernel._errors import TransportTimeout as TransportTimeout
from twinflow.kernel._errors import WorkerStartFailed as WorkerStartFailed

if _typing.TYPE_CHECKING:
    from twinflow.kernel._clock import FixedClock as FixedClock
    from twinflow.kernel._clock import SteppingClock as SteppingClock
    from twinflow.kernel._clock import SystemClock as SystemClock
    from twinflow.kernel._concurrency import Executor as Executor
    from twinflow.kernel._concurrency import SerialExecutor as SerialExecutor
    from twinflow.kernel._concurrency import ThreadExecutor as ThreadExecutor
    from twinflow.kernel._credentials import BEARER as BEARER
    from twinflow.kernel._credentials import KeyHeader as KeyHeader
    from twinflow.kernel._credentials import api_key_headers as api_key_headers
    from twinflow.kernel._credentials import check_endpoint_url as check_endpoint_url
    from twinflow.kernel._credentials import redact_url as redact_url
    from twinflow.kernel._environment import cached_file_sha256 as cached_file_sha256
    from twinflow.kernel._environment import file_sha256 as file_sha256
    from twinflow.kernel._environment import imported_distributions as imported_distributions
    from twinflow.kernel._environment import interpreter as interpreter
    from twinflow.kernel._fault import Fault as Fault
    from twinflow.kernel._fault import FaultTransport as FaultTransport
    from twinflow.kernel._ids import CountingIds as CountingIds
    from twinflow.kernel._ids import SeededIds as SeededIds
    from twinflow.kernel._ids import SystemIds as SystemIds
    from twinflow.kernel._launcher import PipedProcess as PipedProcess
    from twinflow.kernel._launcher import ServerProcess as ServerProcess
    from twinflow.kernel._launcher import SubprocessLauncher as SubprocessLauncher
    from twinflow.kernel._loopback import LoopbackRequest as LoopbackRequest
    from twinflow.kernel._loopback import LoopbackResponse as LoopbackResponse
    from twinflow.kernel._loopback import LoopbackServer as LoopbackServer
    from twinflow.kernel._mcp import MCP_PROTOCOL_VERSIONS as MCP_PROTOCOL_VERSIONS
    from twinflow.kernel._mcp import McpChannel as McpChannel
    from twinflow.kernel._mcp import McpClient as McpClient
    from twinflow.kernel._mcp import McpLimits as McpLimits
    from twinflow.kernel._mcp import McpSession as McpSession
    from twinflow.kernel._mcp import connect_http as connect_http
    from twinflow.kernel._mcp import connect_stdio as connect_stdio
    from twinflow.kernel._mock import MockTransport as MockTransport
    from twinflow.kernel._netpolicy import free_port as free_port
    from twinflow.kernel._nondeterminism import GUARDED_ENTRY_POINTS as GUARDED_ENTRY_POINTS
    from twinflow.kernel._nondeterminism import GuardRecord as GuardRecord
    from twinflow.kernel._nondeterminism import NondeterminismError as NondeterminismError
    from twinflow.kernel._nondeterminism import nondeterminism_guard as nondeterminism_guard
    from twinflow.kernel._pool import ConnectionPool as ConnectionPool
    from twinflow.kernel._ports import Clock as Clock
    from twinflow.kernel._ports import Closing as Closing
    from twinflow.kernel._ports import Ids as Ids
    from twinflow.kernel._ports import Launcher as Launcher
    from twinflow.kernel._ports import StreamingTransport as StreamingTransport
    from twinflow.kernel._ports import Transport as Transport
    from twinflow.kernel._process import ProcessResult as ProcessResult
    from twinflow.kernel._process import StartedProcess as StartedProcess
    from twinflow.kernel._process import run_process as run_process
    from twinflow.kernel._process import start_process as start_process
    from twinflow.kernel._ray import RayExecutor as RayExecutor
    from twinflow.kernel._replay import RecordingTransport as RecordingTransport
    from twinflow.kernel._replay import ReplayTransport as ReplayTransport
    from twinflow.kernel._transport import HttpAnswer as HttpAnswer
    from twinflow.kernel._transport import HttpTransport as HttpTransport


__getattr__, __dir__, __all__ = _lazy_exports(
    globals(),
    {
        "_clock": ("FixedClock", "SteppingClock", "SystemClock"),
        "_concurrency": ("Executor", "SerialExecutor", "ThreadExecutor"),
        "_credentials": (
            "BEARER",
            "KeyHeader",
            "api_key_headers",
            "check_endpoint_url",
            "redact_url",
        ),
        "_environment": (
            "cached_file_sha256",
            "file_sha256",
            "imported_distributions",
            "interpreter",
        ),
        "_fault": ("Fault", "FaultTransport"),
        "_ids": ("CountingIds", "SeededIds", "SystemIds"),
        "_launcher": ("PipedProcess", "ServerProcess", "SubprocessLauncher"),
        "_loopback": ("LoopbackRequest", "LoopbackResponse", "LoopbackServer"),
        "_mcp": (
            "MCP_PROTOCOL_VERSIONS",
            "McpChannel",
            "McpClient",
            "McpLimits",
            "McpSession",
            "connect_http",
            "connect_stdio",
        ),
        "_mock": ("MockTransport",),
        "_netpolicy": ("free_port",),
        "_nondeterminism": (
            "GUARDED_ENTRY_POINTS",
            "GuardRecord",
            "nondeterminism_guard",
            "NondeterminismError",
        ),
        "_pool": ("ConnectionPool",),
        "_ports": ("Clock", "Closing", "Ids", "Launcher", "StreamingTransport", "Transport"),
        "_process": ("ProcessResult", "StartedProcess", "run_process", "start_process"),
        "_ray": ("RayExecutor",),
        "_replay": ("RecordingTransport", "ReplayTransport"),
        "_transport": ("HttpAnswer", "HttpTransport"),
    },
)
