"""`SubprocessLauncher`: starts a local server, waits for its health URL, and never leaks it.

The command runs under a small watchdog process (`_guard.py`, see docs/adr/0010 and 0165) that
leads a new process group, is the subreaper of everything the command starts, and holds the read
end of a "lifeline" pipe whose write end only this process holds. Stopping closes the lifeline;
so does this process dying, even by SIGKILL. Either way the watchdog sends SIGTERM to the group
and its whole process tree, waits, then SIGKILLs them, so the server and every process it
started are gone, even one that left the group with ``setsid`` and a double fork.

What the server writes to its log (stderr; stdout too for `SubprocessLauncher.launch`) comes
through a pipe that this process copies into the log file (`_LogPump`): scrubbed of every
secret the process has read (`twinflow._base._untrusted.scrub_bytes`, a key split across two
writes included) and bounded (`SubprocessLauncher`'s ``max_log_bytes``, 10 MiB by default); past
the bound the rest is read and dropped, and the log says so in its last line.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from twinflow._base._errors import FileWriteError
from twinflow._base._untrusted import scrub_bytes, unfinished_secret
from twinflow.kernel._errors import LaunchError
from twinflow.kernel._netpolicy import is_loopback
from twinflow.kernel._ports import Closing
from twinflow.trace import UserError

_GUARD = Path(__file__).with_name("_guard.py")
_TAIL_BYTES = 2000
MAX_LOG_BYTES = 10 * 1024 * 1024
"""The most a launched server writes to its log (what is past it is read and dropped)."""
_READ_BYTES = 65536


def wait_exit(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for process ``pid`` to exit; whether it has.

    Any process, not only a child: on Linux the wait is on the process itself (a pidfd turns
    readable when it exits; a zombie has exited), elsewhere on ``kill(pid, 0)`` every 20 ms.
    The caller makes sure ``pid`` is not yet reaped (a reaped pid may be another process's).
    """
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):
        end = time.monotonic() + timeout
        while _signalable(pid) and time.monotonic() < end:
            time.sleep(0.02)
        return not _signalable(pid)
    try:
        readable, _, _ = select.select([pidfd], [], [], max(timeout, 0.0))
        return bool(readable)
    finally:
        os.close(pidfd)


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _LogPump:
    """Copies what a server writes to a pipe into its log: scrubbed of secrets, bounded.

    A thread reads the pipe until every writer has closed it (the server and all it started
    are gone) or `finish` gives up waiting. The end of a piece that begins a secret is held back
    until the next, so a key split across two writes is still replaced whole.
    """

    def __init__(self, source: int, log: IO[bytes], limit: int) -> None:
        self._source = source
        self._log = log
        self._limit = limit
        self._written = 0
        self._dropped = 0
        self._wake_read, self._wake_write = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._copy, name="twinflow-log", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        held = b""
        while True:
            readable, _, _ = select.select([self._source, self._wake_read], [], [])
            if self._source not in readable:
                break
            try:
                chunk = os.read(self._source, _READ_BYTES)
            except OSError:
                break
            if not chunk:
                break
            data = scrub_bytes(held + chunk)
            text = data.decode("utf-8", "surrogateescape")
            keep = len(
                text[len(text) - unfinished_secret(text) :].encode("utf-8", "surrogateescape")
            )
            held = data[len(data) - keep :] if keep else b""
            self._put(data[: len(data) - keep])
        self._put(scrub_bytes(held))
        self._close_log()

    def _put(self, data: bytes) -> None:
        room = self._limit - self._written
        if len(data) > room:
            self._dropped += len(data) - max(room, 0)
            data = data[: max(room, 0)]
        if data:
            self._written += len(data)
            self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            self._log.write(data)
            self._log.flush()
        except (OSError, ValueError):
            # A full disk or a closed log: the server's output is dropped, never its run.
            self._dropped += len(data)

    def _close_log(self) -> None:
        if self._dropped:
            self._write(
                f"\n[twinflow: this log reached its limit of {self._limit} bytes; "
                f"{self._dropped} more bytes the server wrote were dropped]\n".encode()
            )
        with contextlib.suppress(OSError):
            self._log.close()

    def finish(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the copy to reach the pipe's end, then stop it."""
        if self._wake_write < 0:
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            # A process outside our reach still holds the pipe: stop copying, keep what is in.
            os.write(self._wake_write, b"x")
            self._thread.join()
        for fd in (self._source, self._wake_read, self._wake_write):
            os.close(fd)
        self._wake_write = -1


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - _TAIL_BYTES))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


class ServerProcess(Closing):
    """A running server started by `SubprocessLauncher`; a context manager that stops it.

    Attributes:
        command: The server command.
        health_url: The URL that answered 200.
        log_path: The file receiving the server's stdout and stderr.
        pid: Process id of the watchdog, which is also the id of the server's process group.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        lifeline: int,
        log: _LogPump,
        *,
        command: tuple[str, ...],
        health_url: str,
        log_path: Path,
        grace: float,
    ) -> None:
        """Wrap a started watchdog process (use `SubprocessLauncher.launch`, not this)."""
        self._popen = popen
        self._lifeline: int | None = lifeline
        self._log = log
        self._grace = grace
        self.command = command
        self.health_url = health_url
        self.log_path = log_path
        self.pid = popen.pid

    @property
    def returncode(self) -> int | None:
        """The watchdog's exit status once stopped or exited; `None` while running."""
        return self._popen.poll()

    def running(self) -> bool:
        """Tell whether the server's watchdog is still running."""
        return self._popen.poll() is None

    def _exited(self) -> bool:
        # WNOWAIT leaves the watchdog a zombie, so its pid (the group id) cannot be reused
        # while we may still signal the group.
        if self._popen.returncode is not None:
            return True
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop the server and every process in its group: SIGTERM, then SIGKILL after the grace.

        Safe to call more than once.
        """
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        if not self._exited():
            wait_exit(self.pid, self._grace + 2.0)
        if self._popen.returncode is None:
            self._kill_group()
            self._popen.wait()
        # The watchdog stopped the whole tree, so every writer of the log's pipe is gone.
        self._log.finish(self._grace + 2.0)

    def close(self) -> None:
        """`stop()`, under the name `Closing` gives a ``with`` block's exit."""
        self.stop()


def _open_log(log_path: Path) -> IO[bytes]:
    """Open a server's log for appending, refusing a link planted at its name."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a link planted at the log's name must not redirect the server's output.
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.fdopen(os.open(log_path, flags, 0o644), "ab")
    except OSError as exc:
        if log_path.is_symlink():
            raise FileWriteError(
                f"{log_path} is a symbolic link; the server log is not written through it: "
                "remove the link, or pick another directory",
                path=log_path,
                reason="link",
            ) from None
        raise LaunchError(f"cannot open the server log {log_path}: {exc.strerror}") from None


class PipedProcess(ServerProcess):
    """A command started by `SubprocessLauncher.spawn`, spoken to over its stdin and stdout.

    Every read and write waits at most the time it is given: a process that stops reading or
    never answers raises `TimeoutError`, never blocks the caller for ever.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        lifeline: int,
        log: _LogPump,
        *,
        command: tuple[str, ...],
        log_path: Path,
        grace: float,
        stdin: int,
        stdout: int,
    ) -> None:
        """Wrap a started watchdog and the pipes to its command (use `SubprocessLauncher.spawn`)."""
        super().__init__(
            popen, lifeline, log, command=command, health_url="", log_path=log_path, grace=grace
        )
        os.set_blocking(stdin, False)
        os.set_blocking(stdout, False)
        self._stdin: int | None = stdin
        self._stdout: int | None = stdout
        self._buffer = bytearray()
        self._eof = False

    def write(self, data: bytes, *, timeout: float) -> None:
        """Write all of `data` to the command's stdin.

        Raises:
            TimeoutError: The command did not take it all within `timeout` seconds.
            BrokenPipeError: The command closed its stdin (it exited).
        """
        if self._stdin is None:
            raise BrokenPipeError("the command's stdin is closed")
        view = memoryview(data)
        end = time.monotonic() + timeout
        while view:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the command took no input for {timeout:g} s")
            _, writable, _ = select.select([], [self._stdin], [], remaining)
            if writable:
                try:
                    sent = os.write(self._stdin, view)
                except BlockingIOError:
                    continue
                view = view[sent:]

    def read_line(self, *, timeout: float, limit: int) -> bytes | None:
        """Read the next line of the command's stdout (without its end), or None at its end.

        Raises:
            TimeoutError: No whole line came within `timeout` seconds.
            ValueError: The line is longer than `limit` bytes (reading stopped there).
        """
        end = time.monotonic() + timeout
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                if newline > limit:
                    raise ValueError(f"a line of more than {limit} bytes")
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                return line
            if len(self._buffer) > limit:
                raise ValueError(f"a line of more than {limit} bytes")
            if self._eof or self._stdout is None:
                return None
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no whole line from the command within {timeout:g} s")
            readable, _, _ = select.select([self._stdout], [], [], remaining)
            if readable:
                try:
                    chunk = os.read(self._stdout, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._eof = True
                self._buffer += chunk

    def stop(self) -> None:
        """Close the command's stdin, give it the grace to exit, then stop it as `ServerProcess`."""
        if self._stdin is not None:
            os.close(self._stdin)
            self._stdin = None
            if not self._exited():
                wait_exit(self.pid, self._grace)
        super().stop()
        if self._stdout is not None:
            os.close(self._stdout)
            self._stdout = None


class SubprocessLauncher:
    """Starts server commands as subprocesses, under a watchdog that never leaves orphans."""

    def __init__(
        self,
        *,
        grace: float = 5.0,
        poll_interval: float = 0.1,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        max_log_bytes: int = MAX_LOG_BYTES,
    ) -> None:
        """Create the launcher.

        Args:
            grace: Seconds between SIGTERM and SIGKILL when stopping.
            poll_interval: Seconds between health checks.
            env: Environment of the server (default: this process's).
            cwd: Working directory of the server (default: this process's).
            max_log_bytes: The most of a server's output its log keeps (the rest is dropped,
                and the log says how much).
        """
        self._max_log = max_log_bytes
        self._grace = grace
        self._poll = poll_interval
        self._env = dict(env) if env is not None else None
        self._cwd = cwd

    def launch(
        self, command: Sequence[str], *, health_url: str, deadline: float, log_path: Path
    ) -> ServerProcess:
        """Start `command`, wait until GET `health_url` answers 2xx, and return the server.

        Args:
            command: The program and its arguments, e.g.
                `[python, "-m", "llama_cpp.server", "--model", gguf, "--port", str(port)]`.
            health_url: A loopback http URL, e.g. `http://127.0.0.1:<port>/v1/models`.
            deadline: Seconds to wait for the server to become healthy.
            log_path: File that receives the server's stdout and stderr (appended to).

        Returns:
            The running server; use it as a context manager to stop it.

        Raises:
            UserError: The command is empty or the health URL is not a loopback http URL.
            LaunchError: The server could not start, exited, or was not healthy in time; it has
                been stopped and the message shows the end of its log.
        """
        command = tuple(command)
        parsed = urllib.parse.urlsplit(health_url)
        if not command:
            raise UserError("SubprocessLauncher.launch(command=()): pass the server command")
        if parsed.scheme != "http" or not parsed.hostname or not is_loopback(parsed.hostname):
            raise UserError(
                f"health URL {health_url!r} is not a loopback http URL: a launched server is local, "
                "so pass one like http://127.0.0.1:<port>/v1/models"
            )
        popen, lifeline, log = self._start_guarded(command, subprocess.DEVNULL, None, log_path)
        server = ServerProcess(
            popen,
            lifeline,
            log,
            command=command,
            health_url=health_url,
            log_path=Path(log_path),
            grace=self._grace,
        )
        try:
            self._wait_healthy(server, deadline)
        except BaseException:
            server.stop()
            raise
        return server

    def spawn(self, command: Sequence[str], *, log_path: Path) -> PipedProcess:
        """Start `command` with its stdin and stdout as pipes to this process (an MCP server).

        The same watchdog as `launch` guards it, so it never outlives this process; its stderr
        (and the watchdog's own complaints) go to `log_path`.

        Args:
            command: The program and its arguments.
            log_path: File that receives the command's stderr (appended to).

        Returns:
            The running process; `PipedProcess.write` and `PipedProcess.read_line` talk to it,
            and using it as a context manager stops it.

        Raises:
            UserError: The command is empty.
            LaunchError: The watchdog could not be started or the log opened.
        """
        command = tuple(command)
        if not command:
            raise UserError("SubprocessLauncher.spawn(command=()): pass the command")
        # (read end, write end): the child reads `child_in` and writes `child_out`.
        child_in, ours_in = os.pipe2(os.O_CLOEXEC)
        ours_out, child_out = os.pipe2(os.O_CLOEXEC)
        try:
            popen, lifeline, log = self._start_guarded(command, child_in, child_out, log_path)
        except BaseException:
            for fd in (child_in, ours_in, ours_out, child_out):
                os.close(fd)
            raise
        os.close(child_in)  # the child's ends live in the child now
        os.close(child_out)
        return PipedProcess(
            popen,
            lifeline,
            log,
            command=command,
            log_path=Path(log_path),
            grace=self._grace,
            stdin=ours_in,
            stdout=ours_out,
        )

    def _start_guarded(
        self,
        command: tuple[str, ...],
        stdin: int,
        stdout: int | None,
        log_path: Path,
    ) -> tuple[subprocess.Popen[bytes], int, _LogPump]:
        """Start the watchdog running `command`; returns it, the lifeline's write end and the
        pump copying its stderr (and its stdout, when ``stdout`` is None) into the log."""
        log = _open_log(Path(log_path))
        output_read, output_write = os.pipe2(os.O_CLOEXEC)
        lifeline_read, lifeline_write = os.pipe()
        try:
            popen = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    str(_GUARD),
                    str(lifeline_read),
                    str(self._grace),
                    "--",
                    *command,
                ],
                stdin=stdin,
                stdout=output_write if stdout is None else stdout,
                stderr=output_write,
                pass_fds=(lifeline_read,),
                start_new_session=True,
                env=self._env,
                cwd=self._cwd,
            )
        except OSError as error:
            for fd in (lifeline_write, output_read):
                os.close(fd)
            log.close()
            raise LaunchError(f"cannot start the watchdog for {command[0]!r}: {error}") from error
        finally:
            os.close(lifeline_read)
            os.close(output_write)
        return popen, lifeline_write, _LogPump(output_read, log, self._max_log)

    def _wait_healthy(self, server: ServerProcess, deadline: float) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        start = time.monotonic()
        end = start + deadline
        last = "no answer yet"
        while True:
            code = server.returncode
            if code is not None:
                server.stop()  # the log is whole once the server's tree is gone
                raise LaunchError(
                    f"server {' '.join(server.command)!r} exited with status {code} before "
                    f"{server.health_url} answered; fix the command. End of its log "
                    f"({server.log_path}):\n{_tail(server.log_path)}"
                )
            remaining = end - time.monotonic()
            if remaining <= 0:
                server.stop()
                raise LaunchError(
                    f"server {' '.join(server.command)!r} did not answer 2xx at {server.health_url} "
                    f"within {deadline:g} s (last: {last}); it was stopped. Raise the deadline if it "
                    f"loads slowly, or read its log ({server.log_path}):\n{_tail(server.log_path)}"
                )
            try:
                with opener.open(server.health_url, timeout=min(2.0, remaining)) as response:
                    if 200 <= response.status < 300:
                        return
                    last = f"HTTP {response.status}"
            except urllib.error.HTTPError as error:
                last = f"HTTP {error.code}"
                error.close()
            except (urllib.error.URLError, OSError) as error:
                last = f"{type(error).__name__}: {error}"
            time.sleep(min(self._poll, max(0.0, end - time.monotonic())))
