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

# Only underscored names and the public ones may live here (tests/test_exported_members.py).
import typing as _typing
from importlib import import_module as _import_module

from twinflow.kernel._errors import (
    ClusterError,
    ConnectError,
    FileWriteError,
    HTTPStatusError,
    KernelError,
    LaunchError,
    NetworkBlockedError,
    PlantedLinkError,
    ReplayDivergence,
    ResponseDecodeError,
    ResponseTooLarge,
    TargetExistsError,
    TaskLost,
    TransportError,
    TransportTimeout,
)

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
        BEARER,
        KeyHeader,
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
    "BEARER",
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
    "KeyHeader",
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
    "ReplayDivergence",
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

_LAZY = {
    "FixedClock": "_clock",
    "SteppingClock": "_clock",
    "SystemClock": "_clock",
    "Executor": "_concurrency",
    "SerialExecutor": "_concurrency",
    "ThreadExecutor": "_concurrency",
    "BEARER": "_credentials",
    "KeyHeader": "_credentials",
    "api_key_headers": "_credentials",
    "check_endpoint_url": "_credentials",
    "redact_url": "_credentials",
    "Fault": "_fault",
    "FaultTransport": "_fault",
    "write_new": "_files",
    "write_replace": "_files",
    "CountingIds": "_ids",
    "SeededIds": "_ids",
    "SystemIds": "_ids",
    "ServerProcess": "_launcher",
    "SubprocessLauncher": "_launcher",
    "LoopbackRequest": "_loopback",
    "LoopbackResponse": "_loopback",
    "LoopbackServer": "_loopback",
    "MockTransport": "_mock",
    "free_port": "_netpolicy",
    "GUARDED_ENTRY_POINTS": "_nondeterminism",
    "GuardRecord": "_nondeterminism",
    "NondeterminismError": "_nondeterminism",
    "nondeterminism_guard": "_nondeterminism",
    "ConnectionPool": "_pool",
    "Clock": "_ports",
    "Closing": "_ports",
    "Ids": "_ports",
    "Launcher": "_ports",
    "StreamingTransport": "_ports",
    "Transport": "_ports",
    "ProcessResult": "_process",
    "run_process": "_process",
    "RayExecutor": "_ray",
    "RecordingTransport": "_replay",
    "ReplayTransport": "_replay",
    "HttpTransport": "_transport",
    "UrllibJsonTransport": "_transport",
}


def __getattr__(name: str) -> object:
    """Import the private module that defines `name` on first access, then cache the name."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's attributes, the not yet resolved public names included."""
    return sorted({*globals(), *__all__})
