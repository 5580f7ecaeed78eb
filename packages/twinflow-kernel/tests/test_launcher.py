"""SubprocessLauncher: health wait, logs, stopping, and no orphans even when the parent dies."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow._base._untrusted import REDACTED, register_secret
from twinflow.kernel import SubprocessLauncher
from twinflow.kernel._errors import LaunchError
from twinflow.kernel._launcher import wait_exit
from twinflow.kernel._netpolicy import free_port
from twinflow.trace import UserError

# A server stand-in: spawns a grandchild, writes "<guard> <child> <grandchild>" pids to a file,
# then serves HTTP on the given port (or just sleeps when the port is 0). With "stubborn" both
# processes ignore SIGTERM, so only SIGKILL stops them.
CHILD = textwrap.dedent(
    """
    import http.server, os, signal, subprocess, sys, time
    pid_file, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ignore = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); " if mode == "stubborn" else ""
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen([sys.executable, "-c", ignore + "import time; time.sleep(600)"])
    with open(pid_file + ".tmp", "w") as out:
        out.write(f"{os.getppid()} {os.getpid()} {grandchild.pid}")
    os.rename(pid_file + ".tmp", pid_file)
    print("child started", flush=True)
    if port:
        http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler).serve_forever()
    time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False


def wait_gone(pids: list[int], within: float) -> list[int]:
    """Wait up to `within` seconds for every pid to be gone; return those still alive."""
    end = time.monotonic() + within
    while time.monotonic() < end and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def read_pids(pid_file: Path, within: float = 120.0) -> list[int]:
    """Wait for the child to write its pid file and return the three pids."""
    end = time.monotonic() + within
    while not pid_file.exists():
        if time.monotonic() > end:
            raise AssertionError(f"{pid_file} never appeared")
        time.sleep(0.05)
    return [int(pid) for pid in pid_file.read_text().split()]


@pytest.fixture
def child_script(tmp_path: Path) -> Path:
    """The server stand-in, as a file."""
    path = tmp_path / "child.py"
    path.write_text(CHILD)
    return path


def test_launch_waits_for_health_logs_output_and_stops_everything(
    tmp_path: Path, child_script: Path
) -> None:
    """A real HTTP server is healthy on return, logs to the file, and stop() ends its whole group."""
    port = free_port()
    log = tmp_path / "logs" / "server.log"
    command = [sys.executable, str(child_script), str(tmp_path / "pids"), str(port), "serve"]
    with SubprocessLauncher().launch(
        command, health_url=f"http://127.0.0.1:{port}/", deadline=120, log_path=log
    ) as server:
        pids = read_pids(tmp_path / "pids")
        assert server.running()
        assert server.pid == pids[0]
        assert [] == [pid for pid in pids if not alive(pid)]
    # stop() has returned: the group is signalled; reaping may lag on a loaded machine.
    assert [] == wait_gone(pids, within=30)
    text = log.read_text()
    assert "child started" in text
    assert '"GET / HTTP/1.1" 200' in text


def test_a_server_that_exits_early_is_a_launch_error_with_its_log(tmp_path: Path) -> None:
    """A command that dies before it is healthy: LaunchError with its status and log tail."""
    command = [sys.executable, "-c", "import sys; print('bad model path', flush=True); sys.exit(3)"]
    start = time.monotonic()
    with pytest.raises(LaunchError) as caught:
        SubprocessLauncher().launch(
            command,
            health_url=f"http://127.0.0.1:{free_port()}/v1/models",
            deadline=600,
            log_path=tmp_path / "server.log",
        )
    # Far below the deadline: the launcher noticed the exit instead of waiting out the deadline.
    assert time.monotonic() - start < 120
    assert "exited with status 3" in str(caught.value)
    assert "bad model path" in str(caught.value)
    assert str(tmp_path / "server.log") in str(caught.value)


def test_a_server_that_never_gets_healthy_is_stopped_at_the_deadline(
    tmp_path: Path, child_script: Path
) -> None:
    """No answer within the deadline: LaunchError, and the server and its child are gone."""
    command = [sys.executable, str(child_script), str(tmp_path / "pids"), "0", "sleep"]
    start = time.monotonic()
    with pytest.raises(LaunchError, match="did not answer 2xx") as caught:
        SubprocessLauncher(grace=1.0).launch(
            command,
            health_url=f"http://127.0.0.1:{free_port()}/v1/models",
            deadline=1.5,
            log_path=tmp_path / "server.log",
        )
    elapsed = time.monotonic() - start
    # The child would sleep 600 s: an upper bound this far off holds on a loaded machine.
    assert 1.5 <= elapsed < 120
    assert "Raise the deadline" in str(caught.value)
    assert [] == wait_gone(read_pids(tmp_path / "pids"), within=30)


def test_no_orphans_when_the_caller_raises(tmp_path: Path, child_script: Path) -> None:
    """An exception inside the `with` block still stops the server and its grandchild."""
    port = free_port()
    command = [sys.executable, str(child_script), str(tmp_path / "pids"), str(port), "serve"]
    with (
        pytest.raises(RuntimeError, match="caller failed"),
        SubprocessLauncher().launch(
            command,
            health_url=f"http://127.0.0.1:{port}/",
            deadline=120,
            log_path=tmp_path / "server.log",
        ),
    ):
        read_pids(tmp_path / "pids")
        raise RuntimeError("caller failed")
    assert [] == wait_gone(read_pids(tmp_path / "pids"), within=30)


def test_processes_that_ignore_sigterm_are_killed_after_the_grace(
    tmp_path: Path, child_script: Path
) -> None:
    """A server and grandchild that ignore SIGTERM are SIGKILLed once the grace has passed."""
    port = free_port()
    command = [sys.executable, str(child_script), str(tmp_path / "pids"), str(port), "stubborn"]
    server = SubprocessLauncher(grace=0.5).launch(
        command, health_url=f"http://127.0.0.1:{port}/", deadline=120, log_path=tmp_path / "log"
    )
    pids = read_pids(tmp_path / "pids")
    start = time.monotonic()
    server.stop()
    assert time.monotonic() - start < 3
    assert [] == wait_gone(pids, within=30)
    assert -signal.SIGKILL == server.returncode


@pytest.mark.parametrize("mode", ["sleep", "stubborn"])
def test_killing_the_parent_mid_wait_leaves_no_child(
    tmp_path: Path, child_script: Path, mode: str
) -> None:
    """SIGKILL the process that is waiting in launch(): the watchdog, server and grandchild all go."""
    pid_file = tmp_path / "pids"
    parent = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from twinflow.kernel import SubprocessLauncher, free_port
        SubprocessLauncher(grace=1.0).launch(
            [sys.executable, {str(child_script)!r}, {str(pid_file)!r}, "0", {mode!r}],
            health_url=f"http://127.0.0.1:{{free_port()}}/v1/models",
            deadline=120,
            log_path=Path({str(tmp_path / "server.log")!r}),
        )
        """
    )
    process = subprocess.Popen([sys.executable, "-c", parent])
    try:
        pids = read_pids(pid_file)
        assert [] == [pid for pid in pids if not alive(pid)]
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert [] == wait_gone(pids, within=30)


def test_launch_refuses_bad_arguments(tmp_path: Path) -> None:
    """An empty command or a non-loopback health URL is a usage error, and nothing starts."""
    launcher = SubprocessLauncher()
    with pytest.raises(UserError, match="pass the server command"):
        launcher.launch([], health_url="http://127.0.0.1:1/", deadline=1, log_path=tmp_path / "l")
    with pytest.raises(UserError, match="not a loopback http URL"):
        launcher.launch(
            ["true"], health_url="http://example.com/v1/models", deadline=1, log_path=tmp_path / "l"
        )


SECRET_SERVER = Path(__file__).parent / "mcp_servers" / "secret_server.py"
SERVER_KEY = "sk-launcher-Log-Key-5f0e9a2c71d4"


@pytest.fixture
def daemon_pid(tmp_path: Path) -> Iterator[Path]:
    """Where the escaping grandchild writes its pid; killed at the end if it survived."""
    pid_file = tmp_path / "daemon.pid"
    yield pid_file
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_grandchild_that_left_the_group_and_session_is_stopped(
    tmp_path: Path, daemon_pid: Path
) -> None:
    """setsid and a double fork, SIGTERM ignored: the grandchild is gone once stop() returns."""
    process = SubprocessLauncher(grace=0.5).spawn(
        [sys.executable, str(SECRET_SERVER), "--daemon", str(daemon_pid)],
        log_path=tmp_path / "server.log",
    )
    with process:
        # The server answers only once the grandchild's pid is written.
        process.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n', timeout=60)
        assert process.read_line(timeout=60, limit=1000) is not None
        pid = int(daemon_pid.read_text())
        assert (False, True) == (wait_exit(pid, 0), os.getsid(pid) != os.getsid(process.pid))
    assert wait_exit(pid, 60)


def test_the_log_is_scrubbed_of_every_form_of_a_key_split_or_not(tmp_path: Path) -> None:
    """The key the process read, as is, upper-, lower-cased and split across two writes,
    reaches the server's log only as the marker."""
    register_secret(SERVER_KEY)
    log = tmp_path / "server.log"
    launcher = SubprocessLauncher(
        grace=0.5, env={**os.environ, "TWINFLOW_TEST_MCP_TOKEN": SERVER_KEY}
    )
    with launcher.spawn([sys.executable, str(SECRET_SERVER)], log_path=log):
        pass
    text = log.read_text()
    assert 4 == text.count(REDACTED), text
    assert [] == [f for f in (SERVER_KEY, SERVER_KEY[:7]) if f.lower() in text.lower()]


def test_the_log_is_bounded_and_says_what_it_dropped(tmp_path: Path) -> None:
    """A server writing past max_log_bytes: the log keeps that much and says how much was dropped."""
    log = tmp_path / "server.log"
    launcher = SubprocessLauncher(grace=0.5, max_log_bytes=1000)
    with launcher.spawn([sys.executable, str(SECRET_SERVER), "--flood", "50000"], log_path=log):
        pass
    data = log.read_bytes()
    kept, notice = data[:1000], data[1000:].decode()
    assert b"f" * 1000 == kept
    assert "this log reached its limit of 1000 bytes" in notice
    assert notice.strip().endswith("were dropped]")
