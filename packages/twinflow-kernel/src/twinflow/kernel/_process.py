"""`run_process`: run a command to completion and collect its exit code and output;
`start_process`: start one in the background, to stop it (SIGKILL) at a point the caller chooses;
`start_on_terminal`: start one on a pseudo-terminal, to type to it as a person would.

The kernel is the one home of processes; tests above it that must run the real ``twinflow``
command (exit codes, stderr, ``--json``) do it through here rather than importing
``subprocess`` themselves.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from twinflow.kernel._errors import LaunchError

__all__ = [
    "ProcessResult",
    "StartedProcess",
    "TerminalProcess",
    "run_process",
    "start_on_terminal",
    "start_process",
]


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """How a finished command ended."""

    returncode: int
    """The exit status (negative: killed by that signal)."""
    stdout: str
    """Everything it wrote to standard output (UTF-8, undecodable bytes replaced)."""
    stderr: str
    """Everything it wrote to standard error."""


def run_process(
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    stdin: bytes = b"",
) -> ProcessResult:
    """Run ``command`` to completion.

    Args:
        command: The program and its arguments.
        cwd: Working directory (default: this process's).
        env: Extra environment variables, on top of this process's environment.
        timeout: Seconds before the command is killed.
        stdin: Bytes given on its standard input.

    Returns:
        The exit status and the captured output.

    Raises:
        LaunchError: The command cannot be started, or ran past ``timeout`` (it was killed).
    """
    try:
        completed = subprocess.run(
            list(command),
            cwd=cwd,
            env={**os.environ, **env} if env is not None else None,
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise LaunchError(f"{command[0]!r} ran past {timeout:g} s and was killed") from error
    except OSError as error:
        raise LaunchError(f"cannot start {command[0]!r}: {error}") from error
    return ProcessResult(
        returncode=completed.returncode,
        stdout=completed.stdout.decode("utf-8", errors="replace"),
        stderr=completed.stderr.decode("utf-8", errors="replace"),
    )


class StartedProcess:
    """A command running in the background (`start_process`); its output is collected by `wait`."""

    def __init__(self, popen: subprocess.Popen[bytes], command: Sequence[str]) -> None:
        """Wrap a started process (use `start_process`)."""
        self._popen = popen
        self._command = tuple(command)
        self.pid = popen.pid
        """The process id."""

    def kill(self) -> None:
        """Send SIGKILL: the process ends at once, without running any of its cleanup."""
        if self._popen.returncode is None:
            self._popen.send_signal(signal.SIGKILL)

    def wait(self, timeout: float = 300.0) -> ProcessResult:
        """Wait for the process to end and collect its output.

        Raises:
            LaunchError: It ran past ``timeout`` (it was killed).
        """
        try:
            out, err = self._popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as error:
            self._popen.kill()
            self._popen.communicate()
            raise LaunchError(
                f"{self._command[0]!r} ran past {timeout:g} s and was killed"
            ) from error
        return ProcessResult(
            returncode=self._popen.returncode,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
        )


def start_process(
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    pass_fds: Sequence[int] = (),
) -> StartedProcess:
    """Start ``command`` in the background, its output captured.

    Args:
        command: The program and its arguments.
        cwd: Working directory (default: this process's).
        env: Extra environment variables, on top of this process's environment.
        pass_fds: File descriptors the command inherits (say, the write end of a pipe whose
            reader learns both what the command writes and, at its end, that it exited).

    Returns:
        The running process: `StartedProcess.kill` stops it, `StartedProcess.wait` collects it.

    Raises:
        LaunchError: The command cannot be started.
    """
    try:
        popen = subprocess.Popen(
            list(command),
            cwd=cwd,
            env={**os.environ, **env} if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=tuple(pass_fds),
        )
    except OSError as error:
        raise LaunchError(f"cannot start {command[0]!r}: {error}") from error
    return StartedProcess(popen, command)


class TerminalProcess:
    """A command on a pseudo-terminal (its stdin, stdout and stderr): type to it, read what it
    prints until a text appears (a barrier on its output, not a delay)."""

    def __init__(self, popen: subprocess.Popen[bytes], master: int) -> None:
        self._popen = popen
        self._master = master
        self._seen = ""

    def until(self, text: str, timeout: float = 300.0) -> str:
        """Read until ``text`` is printed; what was printed up to and including it (consumed;
        the terminal's ``\\r\\n`` read as ``\\n``).

        Raises:
            AssertionError: The command ended, or printed nothing for ``timeout`` seconds,
                before ``text`` (the message holds what it printed).
        """
        while text not in self._seen:
            ready, _, _ = select.select([self._master], [], [], timeout)
            if not ready:
                raise AssertionError(
                    f"nothing printed for {timeout} s before {text!r}: {self._seen!r}"
                )
            try:
                data = os.read(self._master, 4096)
            except OSError:  # EIO: every holder of the terminal's other end closed it
                data = b""
            if not data:
                raise AssertionError(f"the command ended before printing {text!r}: {self._seen!r}")
            self._seen += data.decode("utf-8", "replace").replace("\r\n", "\n")
        cut = self._seen.index(text) + len(text)
        shown, self._seen = self._seen[:cut], self._seen[cut:]
        return shown

    def type(self, text: str) -> None:
        """Type ``text`` (``"\\x04"`` at the start of a line is Ctrl-D: the end of input)."""
        os.write(self._master, text.encode())

    def close(self, timeout: float = 300.0) -> int:
        """Wait for the command to end (killing it after ``timeout`` seconds); its exit status."""
        try:
            return self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            return self._popen.wait()
        finally:
            os.close(self._master)


def start_on_terminal(
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> TerminalProcess:
    """Start ``command`` with a new pseudo-terminal as its stdin, stdout and stderr.

    Args:
        command: The program and its arguments.
        cwd: Working directory (default: this process's).
        env: Extra environment variables, on top of this process's environment.

    Raises:
        LaunchError: The command cannot be started.
    """
    master, slave = pty.openpty()
    try:
        popen = subprocess.Popen(
            list(command),
            cwd=cwd,
            env={**os.environ, **env} if env is not None else None,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
    except OSError as exc:
        os.close(master)
        raise LaunchError(f"cannot start {command[0]!r}: {exc}") from exc
    finally:
        os.close(slave)
    return TerminalProcess(popen, master)
