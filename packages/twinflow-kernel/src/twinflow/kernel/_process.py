"""`run_process`: run a command to completion and collect its exit code and output;
`start_process`: start one in the background, to stop it (SIGKILL) at a point the caller chooses.

The kernel is the one home of processes; tests above it that must run the real ``twinflow``
command (exit codes, stderr, ``--json``) do it through here rather than importing
``subprocess`` themselves.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from twinflow.kernel._errors import LaunchError

__all__ = ["ProcessResult", "StartedProcess", "run_process", "start_process"]


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
