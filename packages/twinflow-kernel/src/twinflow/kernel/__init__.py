"""twinflow.kernel (L1): the ports for all nondeterminism and their adapters.

Time, ids, the network and processes enter twinflow only through the ports here (`Clock`, `Ids`,
`Transport`, `Launcher`). The real adapters (`SystemClock`, `SystemIds`, `UrllibJsonTransport`,
`SubprocessLauncher`) sit beside deterministic and test ones (`FixedClock`, `SteppingClock`,
`CountingIds`, `SeededIds`, `MockTransport`, `RecordingTransport`, `ReplayTransport`,
`FaultTransport`, `LoopbackServer`).
"""

from twinflow.kernel._clock import FixedClock, SteppingClock, SystemClock
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
from twinflow.kernel._ports import Clock, Ids, Launcher, Transport
from twinflow.kernel._replay import RecordingTransport, ReplayTransport
from twinflow.kernel._transport import UrllibJsonTransport

__all__ = [
    "Clock",
    "ConnectError",
    "CountingIds",
    "Fault",
    "FaultTransport",
    "FixedClock",
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
    "RecordingTransport",
    "ReplayDivergence",
    "ReplayTransport",
    "ResponseDecodeError",
    "ResponseTooLarge",
    "SeededIds",
    "ServerProcess",
    "SteppingClock",
    "SubprocessLauncher",
    "SystemClock",
    "SystemIds",
    "Transport",
    "TransportError",
    "TransportTimeout",
    "UrllibJsonTransport",
    "free_port",
]
