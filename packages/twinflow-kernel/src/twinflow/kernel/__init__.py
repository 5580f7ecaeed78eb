"""twinflow.kernel (L1): the ports for all nondeterminism and their adapters.

Time, ids, the network and processes enter twinflow only through the ports here (`Clock`, `Ids`,
`Transport`, `Launcher`). The real adapters (`SystemClock`, `SystemIds`, `UrllibJsonTransport`,
`SubprocessLauncher`) sit beside deterministic and test ones (`FixedClock`, `SteppingClock`,
`CountingIds`, `SeededIds`, `MockTransport`, `RecordingTransport`, `ReplayTransport`,
`FaultTransport`, `LoopbackServer`).
"""

from twinflow.kernel._clock import FixedClock, SteppingClock, SystemClock
from twinflow.kernel._concurrency import Executor, SerialExecutor, ThreadExecutor
from twinflow.kernel._errors import (
    ConnectError,
    HTTPStatusError,
    KernelError,
    LaunchError,
    NetworkBlockedError,
    ReplayDivergence,
    ResponseDecodeError,
    ResponseTooLarge,
    TransportError,
    TransportTimeout,
)
from twinflow.kernel._fault import Fault, FaultTransport
from twinflow.kernel._ids import CountingIds, SeededIds, SystemIds
from twinflow.kernel._launcher import ServerProcess, SubprocessLauncher
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse, LoopbackServer
from twinflow.kernel._mock import MockTransport
from twinflow.kernel._netpolicy import free_port
from twinflow.kernel._nondeterminism import (
    GUARDED_ENTRY_POINTS,
    GuardRecord,
    NondeterminismError,
    nondeterminism_guard,
)
from twinflow.kernel._ports import Clock, Ids, Launcher, Transport
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.kernel._replay import RecordingTransport, ReplayTransport
from twinflow.kernel._transport import UrllibJsonTransport

__all__ = [
    "GUARDED_ENTRY_POINTS",
    "Clock",
    "ConnectError",
    "CountingIds",
    "Executor",
    "Fault",
    "FaultTransport",
    "FixedClock",
    "GuardRecord",
    "HTTPStatusError",
    "Ids",
    "KernelError",
    "LaunchError",
    "Launcher",
    "LoopbackRequest",
    "LoopbackResponse",
    "LoopbackServer",
    "MockTransport",
    "NetworkBlockedError",
    "NondeterminismError",
    "ProcessResult",
    "RecordingTransport",
    "ReplayDivergence",
    "ReplayTransport",
    "ResponseDecodeError",
    "ResponseTooLarge",
    "SeededIds",
    "SerialExecutor",
    "ServerProcess",
    "SteppingClock",
    "SubprocessLauncher",
    "SystemClock",
    "SystemIds",
    "ThreadExecutor",
    "Transport",
    "TransportError",
    "TransportTimeout",
    "UrllibJsonTransport",
    "free_port",
    "nondeterminism_guard",
    "run_process",
]
