"""Replay of your own runs: the run directory records where its code came from, and its digests."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from cli_testkit import CALC, calc_project, calc_spec

from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import ProcessResult, run_process

# The same tool, edited after the run; importing it leaves a mark.
EDITED = """
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("edited calc ran")

def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b + 1
"""


def twinflow(*args: str, cwd: Path) -> ProcessResult:
    """Run `python -m twinflow.cli ARGS` in a fresh interpreter (the cwd is on its sys.path)."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )


@pytest.fixture
def layout(tmp_path: Path, server: LoopbackServer) -> dict[str, Path]:
    """The README's layout: tool module beside the spec, the run written elsewhere, a third cwd."""
    project, runs, elsewhere = tmp_path / "project", tmp_path / "runs", tmp_path / "elsewhere"
    for directory in (project, runs, elsewhere):
        directory.mkdir()
    calc_project(project, server.url)
    made = twinflow("run", str(project / "spec.yaml"), "--out", str(runs / "r1"), cwd=tmp_path)
    assert 0 == made.returncode, made.stderr
    return {"project": project, "trace": runs / "r1" / "trace.jsonl", "cwd": elsewhere}


def test_a_run_records_its_code_directory_and_module_digests(layout: dict[str, Path]) -> None:
    """code.json beside the spec copy names the spec's directory and calc.py's sha256."""
    record = json.loads((layout["trace"].parent / "code.json").read_text())
    digest = hashlib.sha256((layout["project"] / "calc.py").read_bytes()).hexdigest()
    assert {
        "code_dir": str(layout["project"].resolve()),
        "modules": [{"module": "calc", "origin": "code_dir", "sha256": digest}],
    } == record


def test_trust_spec_replays_the_readme_layout_from_another_directory(
    layout: dict[str, Path],
) -> None:
    """replay --trust-spec finds calc beside the original spec, from a cwd that holds neither."""
    for mode in ("recorded", "live"):
        result = twinflow(
            "replay", str(layout["trace"]), "--trust-spec", "--mode", mode, cwd=layout["cwd"]
        )
        assert 0 == result.returncode, result.stderr
    assert f"from {layout['project'].resolve()} first" in result.stdout.splitlines()[0]


def test_trust_spec_refuses_a_changed_module_before_importing_it(layout: dict[str, Path]) -> None:
    """An edited calc.py: exit 1 naming the module and both digests; the edited code never ran."""
    (layout["project"] / "calc.py").write_text(EDITED)
    result = twinflow("replay", str(layout["trace"]), "--trust-spec", "--json", cwd=layout["cwd"])
    assert 1 == result.returncode
    assert "calc" == json.loads(result.stdout)["module"]
    # --json says on stderr what it imports, then the refusal in one line.
    announced, refused = result.stderr.strip().splitlines()
    assert "twinflow replay: importing calc (tools: calc:add)" == announced
    assert "module 'calc' changed since the run" in refused
    assert not (layout["project"] / "IMPORTED").exists()


def test_a_missing_module_lists_the_directories_searched(layout: dict[str, Path]) -> None:
    """calc.py gone: exit 2, and the error names the directory it looked in first."""
    (layout["project"] / "calc.py").unlink()
    result = twinflow("replay", str(layout["trace"]), "--trust-spec", cwd=layout["cwd"])
    assert 2 == result.returncode
    assert "cannot find module 'calc'" in result.stderr
    assert f"searched {layout['project'].resolve()}, " in result.stderr


def test_run_lists_the_directories_searched_for_a_missing_tool(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """A spec naming a module that is nowhere: the one-line error lists where it was looked for."""
    (tmp_path / "spec.yaml").write_text(calc_spec(server.url).replace("calc:", "nocalc:"))
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 2 == result.returncode
    assert f"(searched {tmp_path.resolve()}, " in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["relative", "link", "nul"])
def test_a_received_record_naming_a_relative_or_linked_directory_is_refused(
    layout: dict[str, Path], where: str
) -> None:
    """A code record is received input: a path relative to the cwd or through a link is refused."""
    cwd, project = layout["cwd"], layout["project"]
    (cwd / "calc.py").write_text(EDITED)
    (cwd / "via").symlink_to(project, target_is_directory=True)
    named = {"relative": ".", "link": str(cwd / "via"), "nul": f"{project}\0x"}[where]
    record_path = layout["trace"].parent / "code.json"
    record = json.loads(record_path.read_text())
    record_path.write_text(json.dumps({**record, "code_dir": named}))
    result = twinflow("replay", str(layout["trace"]), "--trust-spec", cwd=cwd)
    assert 2 == result.returncode
    assert "is not an absolute path free of links" in result.stderr
    assert not (cwd / "IMPORTED").exists()


def test_a_record_whose_directory_is_gone_looks_in_the_run_directory(
    layout: dict[str, Path],
) -> None:
    """A bundle that ships its modules: the recorded directory absent, calc.py beside the trace."""
    run_dir = layout["trace"].parent
    (run_dir / "calc.py").write_text(CALC)
    (layout["project"] / "calc.py").unlink()
    layout["project"].joinpath("spec.yaml").unlink()
    layout["project"].rmdir()
    result = twinflow("replay", str(layout["trace"]), "--trust-spec", cwd=layout["cwd"])
    assert 0 == result.returncode, result.stderr
    (run_dir / "calc.py").write_text(EDITED)
    changed = twinflow("replay", str(layout["trace"]), "--trust-spec", cwd=layout["cwd"])
    assert (1, False) == (changed.returncode, (run_dir / "IMPORTED").exists())


LONG = '''
import os


def add(a: int, b: int) -> str:
    """Add two integers, at length."""
    return "x" * 700 + os.environ["TWIST"] + "y" * 300
'''


def test_diff_shows_where_two_long_tool_results_differ(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """Two runs whose 1000-character tool results differ at 700: `diff` prints that place."""
    (tmp_path / "calc.py").write_text(LONG)
    (tmp_path / "spec.yaml").write_text(calc_spec(server.url))
    for out, twist in (("a", "EXPECTED"), ("b", "ACTUAL")):
        made = run_process(
            [sys.executable, "-m", "twinflow.cli", "run", "spec.yaml", "--out", out, "--quiet"],
            cwd=tmp_path,
            env={"PYTHONDONTWRITEBYTECODE": "1", "TWIST": twist},
            timeout=300,
        )
        assert 0 == made.returncode, made.stderr
    result = twinflow("diff", "a/trace.jsonl", "b/trace.jsonl", cwd=tmp_path)
    assert 1 == result.returncode
    assert f'..."{"x" * 30}EXPECTED{"y" * 52}"...' in result.stdout
    assert f'..."{"x" * 30}ACTUAL{"y" * 54}"...' in result.stdout
    assert "more characters" not in result.stdout + result.stderr


def test_run_warns_up_front_about_tools_the_policy_never_allows(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """A policy allowing none of the registered tools: one stderr line names them first."""
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "spec.yaml").write_text(
        calc_spec(server.url).replace("  allow: [add]\n", "  allow: []\n")
    )
    result = twinflow("run", "spec.yaml", "--out", "out", "--quiet", cwd=tmp_path)
    expected = (
        "twinflow run: warning: the policy allows no call to add (registered tools not in "
        "policy.allow): every call to them will be denied"
    )
    assert (0, expected) == (result.returncode, result.stderr.splitlines()[0])
    (tmp_path / "allowed.yaml").write_text(calc_spec(server.url))
    allowed = twinflow("run", "allowed.yaml", "--out", "out2", "--quiet", cwd=tmp_path)
    assert (0, "") == (allowed.returncode, allowed.stderr)


def test_a_changed_parent_package_is_refused_before_it_runs(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """tools: [pkg.calc:add]: pkg/__init__.py is recorded too, and an edit to it never runs."""
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "calc.py").write_text(CALC)
    (project / "spec.yaml").write_text(calc_spec(server.url).replace("calc:", "pkg.calc:"))
    made = twinflow("run", str(project / "spec.yaml"), "--out", "run", cwd=tmp_path)
    assert 0 == made.returncode, made.stderr
    record = json.loads((tmp_path / "run" / "code.json").read_text())
    assert ["pkg", "pkg.calc"] == [m["module"] for m in record["modules"]]
    (project / "pkg" / "__init__.py").write_text(EDITED)
    result = twinflow("replay", "run/trace.jsonl", "--trust-spec", cwd=tmp_path)
    assert (1, False) == (result.returncode, (project / "pkg" / "IMPORTED").exists())
    assert "module 'pkg' changed since the run" in result.stderr
