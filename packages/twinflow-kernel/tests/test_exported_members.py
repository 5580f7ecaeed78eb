"""The public surface of twinflow.kernel."""

import twinflow.kernel

EXPECTED = {
    "ProcessResult",
    "run_process",
    "GUARDED_ENTRY_POINTS",
    "GuardRecord",
    "NondeterminismError",
    "nondeterminism_guard",
    "Clock",
    "ConnectError",
    "CountingIds",
    "Executor",
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
}


def test_all_lists_exactly_the_public_names() -> None:
    """`__all__` names the kernel's public API, each once."""
    assert sorted(EXPECTED) == sorted(twinflow.kernel.__all__)


def test_every_exported_name_resolves() -> None:
    """Every name in `__all__` is an attribute of the package."""
    expected = []
    assert expected == [
        name for name in twinflow.kernel.__all__ if not hasattr(twinflow.kernel, name)
    ]
