"""BubblewrapSandbox: the work directory persists, limits are named, hostile code stays inside."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from twinflow.kernel import LoopbackServer
from twinflow.kernel._errors import LaunchError
from twinflow.kernel._sandbox import BubblewrapSandbox, SandboxLimits, SandboxResult

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="bubblewrap is Linux's"
)

# Small limits, so each hostile program is stopped within a few seconds on a busy machine.
SMALL = SandboxLimits(
    cpu_seconds=2,
    wall_seconds=120,
    memory_bytes=256 * 1024 * 1024,
    processes=32,
    file_bytes=1024 * 1024,
    output_bytes=64 * 1024,
    work_dir_bytes=4 * 1024 * 1024,
)


def leftovers(marker: str) -> list[int]:
    """Processes on the host whose command line holds ``marker`` (the program's and its forks')."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def run(code: str, work: Path, limits: SandboxLimits = SMALL) -> SandboxResult:
    """Run Python ``code`` in a sandbox; every process it starts carries a marker in its argv."""
    marker = f"twinflow-sandbox-test-{os.getpid()}-{id(code)}"
    result = BubblewrapSandbox().run(
        [sys.executable, "-c", textwrap.dedent(code), marker], work_dir=work, limits=limits
    )
    assert [] == leftovers(marker)
    return result


def test_the_work_directory_persists_between_calls(tmp_path: Path) -> None:
    """What one call writes in the work directory the next call reads; the manifest names it."""
    work = tmp_path / "work"
    first = run("open('notes.txt', 'w').write('step one')", work)
    second = run("print(open('notes.txt').read())", work)
    assert ("step one\n", 8) == (second.stdout, first.files["notes.txt"][0])


def test_stdin_reaches_the_command_and_the_environment_is_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command reads its input, and no variable of the host reaches it."""
    monkeypatch.setenv("TWINFLOW_SECRET_TEST", "hunter2")
    code = "import os, sys; print(sys.stdin.read(), sorted(os.environ))"
    result = BubblewrapSandbox().run(
        [sys.executable, "-c", code], work_dir=tmp_path / "w", stdin=b"hello", limits=SMALL
    )
    expected = "hello ['HOME', 'LANG', 'PATH', 'PWD', 'PYTHONDONTWRITEBYTECODE']\n"
    assert expected == result.stdout


def test_a_missing_bwrap_is_refused_naming_what_to_install(tmp_path: Path) -> None:
    """No bubblewrap: a typed error naming the package, never an unsandboxed run."""
    sandbox = BubblewrapSandbox(bwrap=str(tmp_path / "no-such-bwrap"))
    with pytest.raises(LaunchError, match="apt-get install bubblewrap") as caught:
        sandbox.run([sys.executable, "-c", "open('ran', 'w')"], work_dir=tmp_path / "w")
    assert ("unavailable", []) == (caught.value.reason, os.listdir(tmp_path / "w"))


def test_a_limit_must_be_positive() -> None:
    """A zero limit is a usage mistake, caught where the limits are made."""
    with pytest.raises(ValueError, match="cpu_seconds must be positive"):
        SandboxLimits(cpu_seconds=0)


def test_a_fork_bomb_stops_at_the_process_limit(tmp_path: Path) -> None:
    """Forking for ever ends with the process limit named and nothing left running."""
    code = """
    import os
    while True:
        os.fork()
    """
    assert "processes" in run(code, tmp_path / "w").limits_hit


def test_an_infinite_loop_stops_at_the_cpu_limit(tmp_path: Path) -> None:
    """A busy loop is stopped by its CPU seconds."""
    assert ("cpu_seconds",) == run("while True: pass", tmp_path / "w").limits_hit


def test_a_sleeping_loop_stops_at_the_wall_limit(tmp_path: Path) -> None:
    """Code that waits without using the CPU is stopped at the wall time."""
    limits = SandboxLimits(wall_seconds=1.0)
    result = run("import time\nwhile True: time.sleep(0.1)", tmp_path / "w", limits)
    assert ("wall_seconds",) == result.limits_hit


def test_allocating_10_gb_stops_at_the_memory_limit(tmp_path: Path) -> None:
    """A 10 GB allocation fails inside the sandbox, naming the memory limit."""
    result = run("x = bytearray(10 * 1024**3)", tmp_path / "w")
    assert ("memory_bytes", 1) == (*result.limits_hit, result.returncode)


def test_writing_10_gb_of_output_stops_at_the_output_limit(tmp_path: Path) -> None:
    """Printing without end is cut at the output bound and the command stopped."""
    result = run("import sys\nwhile True: sys.stdout.write('x' * 65536)", tmp_path / "w")
    assert ("output_bytes",) == result.limits_hit
    assert len(result.stdout) <= SMALL.output_bytes


def test_writing_a_10_gb_file_stops_at_the_file_limit(tmp_path: Path) -> None:
    """One file past the file-size limit ends the writer."""
    code = "f = open('big', 'wb')\nwhile True: f.write(b'x' * 65536)"
    assert ("file_bytes",) == run(code, tmp_path / "w").limits_hit


def test_writing_10_gb_of_files_stops_at_the_work_dir_limit(tmp_path: Path) -> None:
    """Many files below the file limit fill the work directory's tmpfs, not the host's disk."""
    code = "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * 512 * 1024); i += 1"
    result = run(code, tmp_path / "w")
    total = sum(size for size, _ in result.files.values())
    assert ("work_dir_bytes", True) == (*result.limits_hit, total <= SMALL.work_dir_bytes)


def test_no_socket_reaches_the_host_loopback_or_outside(
    tmp_path: Path, echo_server: LoopbackServer
) -> None:
    """The sandbox's network namespace has only its own loopback, with no route out."""
    code = f"""
    import socket
    print(sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]))
    for host in ('127.0.0.1', '192.0.2.1'):
        try:
            socket.create_connection((host, {echo_server.port}), timeout=2)
            print(host, 'reached')
        except OSError as error:
            print(host, type(error).__name__)
    """
    result = run(code, tmp_path / "w")
    expected = "['lo']\n127.0.0.1 ConnectionRefusedError\n192.0.2.1 OSError\n"
    assert expected == result.stdout


def test_secrets_of_the_host_are_not_readable(tmp_path: Path) -> None:
    """/proc/1/environ, the home, a planted key file and the run directory are out of view."""
    key = tmp_path / "run" / "key.pem"
    key.parent.mkdir()
    key.write_text("PRIVATE KEY")
    code = f"""
    import os
    for path in ('/proc/1/environ', {str(key)!r}, {str(key.parent)!r}, {str(Path.home() / ".ssh")!r}):
        try:
            print(path, 'read', open(path, 'rb').read()[:40] if os.path.isfile(path) else os.listdir(path))
        except OSError as error:
            print(type(error).__name__)
    """
    lines = run(code, tmp_path / "w").stdout.splitlines()
    assert "PRIVATE KEY" not in "".join(lines) and "TWINFLOW" not in "".join(lines)
    assert ["FileNotFoundError"] * 3 == lines[1:]


def test_writing_outside_the_work_directory_changes_nothing(tmp_path: Path) -> None:
    """The system and the interpreter are read-only; a file of the host is out of reach."""
    target = tmp_path / "outside.txt"
    target.write_text("original")
    code = f"""
    import sys
    for path in ({str(target)!r}, sys.executable, '/usr/bin/env', '/etc/passwd'):
        try:
            open(path, 'w').write('changed')
            print('wrote', path)
        except OSError as error:
            print(type(error).__name__)
    """
    result = run(code, tmp_path / "w")
    assert "wrote" not in result.stdout and "original" == target.read_text()


def test_a_symlink_pointing_out_is_not_carried_out(tmp_path: Path) -> None:
    """A link to a host path left in the work directory is refused when the directory returns."""
    target = tmp_path / "secret.txt"
    target.write_text("secret")
    code = f"import os\nos.symlink({str(target)!r}, 'escape')\nos.symlink('/etc', 'etc')"
    result = run(code, tmp_path / "w")
    assert (("escape", "etc"), []) == (result.refused, os.listdir(tmp_path / "w"))


def test_killing_the_parent_and_ptrace_are_refused(tmp_path: Path) -> None:
    """The command cannot signal or trace the launcher above it."""
    code = """
    import ctypes, os, signal
    try:
        os.kill(os.getppid(), signal.SIGKILL)
        print('killed')
    except OSError as error:
        print(type(error).__name__)
    libc = ctypes.CDLL(None, use_errno=True)
    print(libc.ptrace(16, os.getppid(), 0, 0), ctypes.get_errno() != 0)
    """
    result = run(code, tmp_path / "w")
    assert "PermissionError\n-1 True\n" == result.stdout


def test_a_detached_child_does_not_outlive_the_call(tmp_path: Path) -> None:
    """A setsid double-forked child is killed with the sandbox (the helper checks the host)."""
    code = """
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    print('parent done')
    """
    assert "parent done\n" == run(code, tmp_path / "w").stdout
