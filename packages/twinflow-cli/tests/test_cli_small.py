"""The small things a first hour hits: pasteable hints, the eval progress line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twinflow.cli._eval_cli import _ProgressLine
from twinflow.cli._output import invocation
from twinflow.eval import Summary


def test_hints_under_uv_run_say_uv_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `uv run` (which sets UV_RUN_RECURSION_DEPTH) a hint starts with `uv run`."""
    monkeypatch.setenv("UV_RUN_RECURSION_DEPTH", "1")
    monkeypatch.chdir(Path(sys.prefix).resolve().parent)
    assert "uv run --frozen twinflow" == invocation()


def test_hints_under_uv_run_from_outside_the_workspace_name_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """From a directory outside the workspace, a `uv run` hint carries `--project` naming it."""
    monkeypatch.setenv("UV_RUN_RECURSION_DEPTH", "1")
    monkeypatch.chdir(tmp_path)
    workspace = Path(sys.prefix).resolve().parent
    assert f"uv run --project {workspace} --frozen twinflow" == invocation()


def test_hints_use_twinflow_when_the_shell_finds_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Outside uv, a `twinflow` on PATH is used as is; without one, the running interpreter with
    -P (so the current directory, maybe a received bundle, is not on sys.path)."""
    monkeypatch.delenv("UV_RUN_RECURSION_DEPTH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert f"{sys.executable} -P -m twinflow.cli" == invocation()
    assert f"{sys.executable} -P -m twinflow.trace" == invocation(
        "twinflow-trace", "twinflow.trace"
    )
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


def test_a_spec_with_a_yaml_syntax_error_is_one_readable_line(tmp_path: Path) -> None:
    """The spec's YAML error names file:line:column and the problem, without PyYAML's caret."""
    from twinflow.agent import SpecError, load_spec

    path = tmp_path / "spec.yaml"
    path.write_text("prompt: hi\nmodel:\n  url: [http://127.0.0.1:9\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    expected = (
        f"{path}:4:1: not valid YAML: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence at line 3)"
    )
    assert expected == str(info.value)


def test_a_misspelt_tool_attribute_gets_a_suggestion(tmp_path: Path) -> None:
    """`calc:ad` where calc defines `add`: the error suggests `add`."""
    from twinflow.agent import ModelSpec, RunSpec, SpecError

    (tmp_path / "calc_sugg.py").write_text("def add(a, b):\n    return a + b\n")
    sys.path.insert(0, str(tmp_path))
    spec = RunSpec(prompt="p", model=ModelSpec(url="http://127.0.0.1:9"), tools=("calc_sugg:ad",))
    try:
        with pytest.raises(SpecError) as info:
            spec.load_tools()
    finally:
        sys.path.remove(str(tmp_path))
    assert str(info.value).endswith("(did you mean 'add'?)")


def test_an_aborted_eval_prints_its_reason_on_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model that cannot be reached: the progress line ends before the abort message."""
    from twinflow.cli._main import main

    (tmp_path / "d.yaml").write_text("cases:\n- {id: a, input: x, expected: y}\n")
    (tmp_path / "s.yaml").write_text("prompt: '{input}'\nmodel:\n  url: http://127.0.0.1:9\n")
    out = tmp_path / "run"
    code = main(
        [
            "eval",
            "run",
            str(tmp_path / "d.yaml"),
            "--spec",
            str(tmp_path / "s.yaml"),
            "--out",
            str(out),
        ]
    )
    lines = capsys.readouterr().err.split("\n")
    assert 2 == code
    assert lines[-2].startswith(
        "twinflow eval: RunAborted: case a@1: the model could not be reached"
    )
    assert lines[-3].endswith("0/1 cases done: 0 passed, 0 failed, 0 errored, 0 flagged")
