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
        ├── FileWriteError                 a file could not be written safely (also an OSError; `.filename`)
        │   ├── PlantedLinkError           the target or its directory is a symbolic link: refused
        │   └── TargetExistsError          `write_new` found the name taken (also a FileExistsError)
        └── ClusterError                   the Ray cluster could not be reached or started
            └── TaskLost                   a call's worker died on its last allowed attempt (`.index`)
                └── WorkerStartFailed      no worker could be started for the call (node, Ray's reason)

Usage mistakes (a bad URL scheme, a naive datetime) raise `twinflow.vocab.UserError` instead.
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
    WorkerStartFailed,
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
    "WorkerStartFailed",
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
        "_credentials": (
            "BEARER",
            "KeyHeader",
            "api_key_headers",
            "check_endpoint_url",
            "redact_url",
        ),
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
