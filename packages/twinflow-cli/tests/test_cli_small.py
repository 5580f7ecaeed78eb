"""The small things a first hour hits: pasteable hints, the eval progress line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twinflow.cli._eval_cli import _ProgressLine
from twinflow.cli._main import invocation
from twinflow.eval import Summary


def test_hints_under_uv_run_say_uv_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `uv run` (which sets UV_RUN_RECURSION_DEPTH) a hint starts with `uv run`."""
    monkeypatch.setenv("UV_RUN_RECURSION_DEPTH", "1")
    assert "uv run --frozen twinflow" == invocation()


def test_hints_use_twinflow_when_the_shell_finds_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Outside uv, a `twinflow` on PATH is used as is; without one, the running interpreter."""
    monkeypatch.delenv("UV_RUN_RECURSION_DEPTH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert f"{sys.executable} -m twinflow.cli" == invocation()
    script = tmp_path / "twinflow"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert "twinflow" == invocation()


def test_the_progress_line_separates_cases_done_from_verdicts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`6/6 cases done: 5 passed, 1 failed ...`, and a message after it gets its own line."""
    progress = _ProgressLine()
    progress(2, 6, Summary(total=6, passed=1, failed=1, errored=0, flagged=0))
    progress.message("twinflow eval: aborted")
    expected = (
        "\r[########................] 2/6 cases done: 1 passed, 1 failed, 0 errored, 0 flagged"
        "\ntwinflow eval: aborted\n"
    )
    assert expected == capsys.readouterr().err
