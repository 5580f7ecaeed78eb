"""`run_process`: one-shot commands with their exit code and output."""

from __future__ import annotations

import sys

import pytest

from twinflow.kernel._errors import LaunchError
from twinflow.kernel._process import run_process, start_process


def test_exit_code_stdout_stderr_and_stdin_are_all_carried() -> None:
    """What the command reads, writes and returns comes back whole."""
    script = "import sys; d = sys.stdin.read(); print(d.upper()); print('warn', file=sys.stderr); sys.exit(3)"
    result = run_process([sys.executable, "-c", script], stdin=b"hello")
    assert (3, "HELLO\n", "warn\n") == (result.returncode, result.stdout, result.stderr)


def test_environment_is_added_to_ours() -> None:
    """`env` adds to this process's environment instead of replacing it."""
    script = "import os; print(os.environ['TWINFLOW_X'], 'PATH' in os.environ)"
    result = run_process([sys.executable, "-c", script], env={"TWINFLOW_X": "1"})
    assert "1 True\n" == result.stdout


def test_a_command_past_its_timeout_is_killed_with_a_typed_error() -> None:
    """A hung command does not hang the caller."""
    with pytest.raises(LaunchError, match=r"ran past 0\.5 s"):
        run_process([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)


def test_a_missing_program_is_a_typed_error() -> None:
    """An unknown program raises LaunchError naming it, not a bare OSError."""
    with pytest.raises(LaunchError, match="no-such-program"):
        run_process(["no-such-program-twinflow"])


def test_a_started_process_killed_with_sigkill_reports_the_signal() -> None:
    """start_process runs in the background; kill() ends it at once and wait() says by SIGKILL."""
    script = "import sys; print('up', flush=True); sys.stdin.read()"
    process = start_process([sys.executable, "-c", script])
    process.kill()
    assert -9 == process.wait().returncode


def test_a_started_process_that_exits_hands_back_its_output() -> None:
    """wait() collects the exit status and output of a process left to finish."""
    process = start_process([sys.executable, "-c", "print('done')"], env={"TWINFLOW_X": "1"})
    assert (0, "done\n") == (process.wait().returncode, process.wait().stdout)
