"""twinflow.kernel (L1): the ports for all nondeterminism and their adapters.

Time, ids, the network and processes enter twinflow only through the ports here (`Clock`, `Ids`,
`Transport`, `Launcher`). The real adapters (`SystemClock`, `SystemIds`, `HttpTransport`, once
`UrllibJsonTransport` and still so aliased, `SubprocessLauncher`) sit beside deterministic and test ones (`FixedClock`, `SteppingClock`,
`CountingIds`, `SeededIds`, `MockTransport`, `RecordingTransport`, `ReplayTransport`,
`FaultTransport`, `LoopbackServer`). Bounded concurrency is the `Executor` port
(`SerialExecutor`, `ThreadExecutor`, and `RayExecutor` with the ``ray`` extra). The HTTP
transport keeps its idle connections in a `ConnectionPool`.

The errors are imported eagerly (they need no pydantic). Every other name is resolved on first
access (PEP 562), so `import twinflow.kernel` stays cheap for a caller that needs only a few
adapters, and pydantic's model machinery is built only when a value class is used.
"""

# Only underscored names and the public ones may live here (tests/gates/test_exported_members.py).
import typing as _typing

from twinflow.kernel._errors import (
    ClusterError,
    ConnectError,
    FileWriteError,
    HTTPStatusError,
    KernelError,
    LaunchError,
    NetworkBlockedError,
    PlantedLinkError,
    ReplayDivergenceError,
    ResponseDecodeError,
    ResponseTooLarge,
    TargetExistsError,
    TaskLost,
    TransportError,
    TransportTimeout,
)
from twinflow.trace import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from twinflow.kernel._clock import (
        FixedClock,
        SteppingClock,
        SystemClock,
    )
    from twinflow.kernel._concurrency import (
        Executor,
        SerialExecutor,
        ThreadExecutor,
    )
    from twinflow.kernel._credentials import (
        api_key_headers,
        check_endpoint_url,
        redact_url,
    )
    from twinflow.kernel._fault import (
        Fault,
        FaultTransport,
    )
    from twinflow.kernel._files import (
        write_new,
        write_replace,
    )
    from twinflow.kernel._ids import (
        CountingIds,
        SeededIds,
        SystemIds,
    )
    from twinflow.kernel._launcher import (
        ServerProcess,
        SubprocessLauncher,
    )
    from twinflow.kernel._loopback import (
        LoopbackRequest,
        LoopbackResponse,
        LoopbackServer,
    )
    from twinflow.kernel._mock import (
        MockTransport,
    )
    from twinflow.kernel._netpolicy import (
        free_port,
    )
    from twinflow.kernel._nondeterminism import (
        GUARDED_ENTRY_POINTS,
        GuardRecord,
        NondeterminismError,
        nondeterminism_guard,
    )
    from twinflow.kernel._pool import ConnectionPool
    from twinflow.kernel._ports import (
        Clock,
        Closing,
        Ids,
        Launcher,
        Transport,
    )
    from twinflow.kernel._process import (
        ProcessResult,
        run_process,
    )
    from twinflow.kernel._ray import RayExecutor
    from twinflow.kernel._replay import (
        RecordingTransport,
        ReplayTransport,
    )
    from twinflow.kernel._transport import (
        HttpTransport,
        UrllibJsonTransport,
    )

__all__ = [
    "GUARDED_ENTRY_POINTS",
    "Clock",
    "Closing",
    "ClusterError",
    "ConnectError",
    "ConnectionPool",
    "CountingIds",
    "Executor",
    "Fault",
    "FaultTransport",
    "FileWriteError",
    "FixedClock",
    "GuardRecord",
    "HTTPStatusError",
    "HttpTransport",
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
    "PlantedLinkError",
    "ProcessResult",
    "RayExecutor",
    "RecordingTransport",
    "ReplayDivergenceError",
    "ReplayTransport",
    "ResponseDecodeError",
    "ResponseTooLarge",
    "SeededIds",
    "SerialExecutor",
    "ServerProcess",
    "SteppingClock",
    "StreamingTransport",
    "SubprocessLauncher",
    "SystemClock",
    "SystemIds",
    "TargetExistsError",
    "TaskLost",
    "ThreadExecutor",
    "Transport",
    "TransportError",
    "TransportTimeout",
    "UrllibJsonTransport",
    "api_key_headers",
    "check_endpoint_url",
    "free_port",
    "nondeterminism_guard",
    "redact_url",
    "run_process",
    "write_new",
    "write_replace",
]

__getattr__, __dir__ = _lazy_exports(
    globals(),
    {
        "_clock": ("FixedClock", "SteppingClock", "SystemClock"),
        "_concurrency": ("Executor", "SerialExecutor", "ThreadExecutor"),
        "_credentials": ("api_key_headers", "check_endpoint_url", "redact_url"),
        "_fault": ("Fault", "FaultTransport"),
        "_files": ("write_new", "write_replace"),
        "_ids": ("CountingIds", "SeededIds", "SystemIds"),
        "_launcher": ("ServerProcess", "SubprocessLauncher"),
        "_loopback": ("LoopbackRequest", "LoopbackResponse", "LoopbackServer"),
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
        "_process": ("ProcessResult", "run_process"),
        "_ray": ("RayExecutor",),
        "_replay": ("RecordingTransport", "ReplayTransport"),
        "_transport": ("HttpTransport", "UrllibJsonTransport"),
    },
)
