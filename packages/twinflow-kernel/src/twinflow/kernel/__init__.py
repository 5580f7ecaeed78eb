"""twinflow.kernel (L1): the ports for all nondeterminism and their adapters.

Time, ids, the network and processes enter twinflow only through the ports here (`Clock`, `Ids`,
`Transport`, `Launcher`, and `Sandbox` for code run in isolation: `BubblewrapSandbox` with its
`SandboxLimits`). The real adapters (`SystemClock`, `SystemIds`, `HttpTransport`,
`SubprocessLauncher`) sit beside deterministic and test ones (`FixedClock`, `SteppingClock`,
`CountingIds`, `SeededIds`, `MockTransport`, `RecordingTransport`, `ReplayTransport`,
`FaultTransport`, `LoopbackServer`). Bounded concurrency is the `Executor` port
(`SerialExecutor`, `ThreadExecutor`, and `RayExecutor` with the ``ray`` extra). The HTTP
transport keeps its idle connections in a `ConnectionPool`.

The names below are what a caller injects or catches; every other adapter and helper (the
fault-injecting, recording and replaying transports, the process helpers, the pool) stays in its
private module, imported from there by the kernel's own tests.

Errors; every message names where (the URL, the command or the server), what went wrong, and
what to do. A family of failures is one class; its `reason` says which failure it was::

    TwinflowError                          (twinflow.trace)
    └── KernelError                        raised by twinflow.kernel
        ├── TransportError                 a request did not produce a JSON answer (`.url`, `.reason`:
        │                                  connect, timeout, status, decode, too_large, blocked;
        │                                  `.status` and `.body_excerpt` for a status >= 400)
        ├── ReplayDivergenceError          a replayed request or event differs from the recording
        │                                  (`.difference`)
        ├── NondeterminismError            replayed code reached the clock, randomness or the network
        │                                  (also a RuntimeError)
        ├── LaunchError                    a process did not start or become healthy, or its sandbox is
        │                                  missing or broke (`.reason`: start, unavailable, protocol)
        ├── McpError                       an MCP server gave no usable answer (`.server`, `.reason`:
        │                                  protocol, timeout, closed, remote; `.code` for remote)
        └── ClusterError                   a Ray run failed (`.reason`: unreachable, task_lost,
                                           worker_start; `.index` of the call that failed)

Usage mistakes (a bad URL scheme, a naive datetime) raise `twinflow.trace.UserError` instead.
"""

from twinflow.kernel._clock import SteppingClock as SteppingClock
from twinflow.kernel._clock import SystemClock as SystemClock
from twinflow.kernel._concurrency import Executor as Executor
from twinflow.kernel._concurrency import SerialExecutor as SerialExecutor
from twinflow.kernel._concurrency import ThreadExecutor as ThreadExecutor
from twinflow.kernel._errors import ClusterError as ClusterError
from twinflow.kernel._errors import KernelError as KernelError
from twinflow.kernel._errors import LaunchError as LaunchError
from twinflow.kernel._errors import McpError as McpError
from twinflow.kernel._errors import NondeterminismError as NondeterminismError
from twinflow.kernel._errors import ReplayDivergenceError as ReplayDivergenceError
from twinflow.kernel._errors import TransportError as TransportError
from twinflow.kernel._ids import CountingIds as CountingIds
from twinflow.kernel._ids import SystemIds as SystemIds
from twinflow.kernel._launcher import SubprocessLauncher as SubprocessLauncher
from twinflow.kernel._loopback import LoopbackResponse as LoopbackResponse
from twinflow.kernel._loopback import LoopbackServer as LoopbackServer
from twinflow.kernel._mcp import McpClient as McpClient
from twinflow.kernel._mock import MockTransport as MockTransport
from twinflow.kernel._nondeterminism import nondeterminism_guard as nondeterminism_guard
from twinflow.kernel._ports import Clock as Clock
from twinflow.kernel._ports import Ids as Ids
from twinflow.kernel._ports import Transport as Transport
from twinflow.kernel._ray import RayExecutor as RayExecutor
from twinflow.kernel._sandbox import BubblewrapSandbox as BubblewrapSandbox
from twinflow.kernel._sandbox import Sandbox as Sandbox
from twinflow.kernel._sandbox import SandboxLimits as SandboxLimits
from twinflow.kernel._transport import HttpTransport as HttpTransport
