"""The commands import user code from the spec's and dataset's directories, and leave sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twinflow.cli._main import main

TOOL = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def _files(tmp_path: Path) -> tuple[Path, Path]:
    code = tmp_path / "code"
    code.mkdir()
    (code / "uc_tools.py").write_text(TOOL)
    spec = code / "spec.yaml"
    # Port 9 (discard) refuses the connection at once: the run aborts after the tools imported.
    spec.write_text(
        "prompt: add 2 and 3\nmodel: {url: 'http://127.0.0.1:9', timeout: 5}\n"
        "tools: [uc_tools:add]\npolicy: {allow: [add]}\n"
    )
    dataset = code / "dataset.yaml"
    dataset.write_text("name: d\ncases:\n- id: a\n  input: b\n")
    return spec, dataset


def test_eval_run_leaves_sys_path_as_it_found_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval run` imports the spec's tools from its directory and takes the directory off again."""
    spec, dataset = _files(tmp_path)
    before = list(sys.path)
    code = main(["eval", "run", str(dataset), "--spec", str(spec), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert "could not be reached" in err, err
    assert (2, before) == (code, sys.path)
    assert "uc_tools" in sys.modules


def test_run_leaves_sys_path_as_it_found_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run` imports the spec's tools from its directory and takes the directory off again."""
    spec, _ = _files(tmp_path)
    before = list(sys.path)
    main(["run", str(spec), "--out", str(tmp_path / "r")])
    capsys.readouterr()
    assert before == sys.path


def test_a_missing_tool_module_names_the_directory_searched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool module that is not there: one line naming the spec's directory searched, exit 2."""
    spec, _ = _files(tmp_path)
    spec.write_text(spec.read_text().replace("uc_tools:add", "uc_absent:add"))
    code = main(["run", str(spec), "--out", str(tmp_path / "r")])
    lines = capsys.readouterr().err.splitlines()
    assert (2, 1) == (code, len(lines)), lines
    assert f"searched {spec.parent.resolve()}, then the installed packages" in lines[0]
