"""The public surface of twinflow.kernel."""

import twinflow.kernel

EXPECTED = {
    "FileWriteError",
    "PlantedLinkError",
    "TargetExistsError",
    "BEARER",
    "KeyHeader",
    "api_key_headers",
    "check_endpoint_url",
    "redact_url",
    "write_new",
    "write_replace",
    "ProcessResult",
    "run_process",
    "GUARDED_ENTRY_POINTS",
    "GuardRecord",
    "NondeterminismError",
    "nondeterminism_guard",
    "Clock",
    "ClusterError",
    "ConnectError",
    "ConnectionPool",
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
    "StreamingTransport",
    "NetworkBlockedError",
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
    "SubprocessLauncher",
    "SystemClock",
    "SystemIds",
    "ThreadExecutor",
    "Transport",
    "TaskLost",
    "TransportError",
    "TransportTimeout",
    "UrllibJsonTransport",
    "HttpTransport",
    "Closing",
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


def test_importing_the_kernel_builds_no_pydantic_models() -> None:
    """`import twinflow.kernel` stays cheap: pydantic is loaded only when a value class is used."""
    import sys

    from twinflow.kernel import run_process

    script = (
        "import sys, twinflow.kernel as k; before = 'pydantic' in sys.modules; "
        "k.LoopbackResponse; print(before, 'pydantic' in sys.modules)"
    )
    result = run_process([sys.executable, "-c", script])
    assert (0, "False True\n") == (result.returncode, result.stdout)


def test_dir_lists_every_public_name_before_it_is_resolved() -> None:
    """`dir(twinflow.kernel)` shows the lazily resolved names too."""
    public = {name for name in dir(twinflow.kernel) if not name.startswith("_")}
    assert set(twinflow.kernel.__all__) == public
