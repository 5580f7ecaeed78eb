"""`SubprocessLauncher`: starts a local server, waits for its health URL, and never leaks it.

The command runs under a small watchdog process (`_guard.py`, see docs/adr/0010) that leads a
new process group and holds the read end of a "lifeline" pipe whose write end only this process
holds. Stopping closes the lifeline; so does this process dying, even by SIGKILL. Either way the
watchdog sends SIGTERM to the group, waits, then SIGKILLs it, so the server and every child it
started in its group are gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from twinflow.kernel._errors import LaunchError
from twinflow.kernel._netpolicy import is_loopback
from twinflow.kernel._ports import Closing
from twinflow.trace import PlantedLinkError
from twinflow.vocab import UserError

_GUARD = Path(__file__).with_name("_guard.py")
_TAIL_BYTES = 2000


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
        log: IO[bytes],
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
        end = time.monotonic() + self._grace + 2.0
        while not self._exited() and time.monotonic() < end:
            time.sleep(0.02)
        if self._popen.returncode is None:
            self._kill_group()
            self._popen.wait()
        self._log.close()

    def close(self) -> None:
        """`stop()`, under the name `Closing` gives a ``with`` block's exit."""
        self.stop()


class SubprocessLauncher:
    """Starts server commands as subprocesses, under a watchdog that never leaves orphans."""

    def __init__(
        self,
        *,
        grace: float = 5.0,
        poll_interval: float = 0.1,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        """Create the launcher.

        Args:
            grace: Seconds between SIGTERM and SIGKILL when stopping.
            poll_interval: Seconds between health checks.
            env: Environment of the server (default: this process's).
            cwd: Working directory of the server (default: this process's).
        """
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
        log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a link planted at the log's name must not redirect the server's output.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            log = os.fdopen(os.open(log_path, flags, 0o644), "ab")
        except OSError as exc:
            if log_path.is_symlink():
                raise PlantedLinkError(
                    f"{log_path} is a symbolic link; the server log is not written through it: "
                    "remove the link, or pick another directory",
                    path=log_path,
                ) from None
            raise LaunchError(f"cannot open the server log {log_path}: {exc.strerror}") from None
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
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(lifeline_read,),
                start_new_session=True,
                env=self._env,
                cwd=self._cwd,
            )
        except OSError as error:
            os.close(lifeline_write)
            log.close()
            raise LaunchError(f"cannot start the watchdog for {command[0]!r}: {error}") from error
        finally:
            os.close(lifeline_read)
        server = ServerProcess(
            popen,
            lifeline_write,
            log,
            command=command,
            health_url=health_url,
            log_path=log_path,
            grace=self._grace,
        )
        try:
            self._wait_healthy(server, deadline)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_healthy(self, server: ServerProcess, deadline: float) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        start = time.monotonic()
        end = start + deadline
        last = "no answer yet"
        while True:
            code = server.returncode
            if code is not None:
                raise LaunchError(
                    f"server {' '.join(server.command)!r} exited with status {code} before "
                    f"{server.health_url} answered; fix the command. End of its log "
                    f"({server.log_path}):\n{_tail(server.log_path)}"
                )
            remaining = end - time.monotonic()
            if remaining <= 0:
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
