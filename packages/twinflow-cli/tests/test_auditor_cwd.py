"""The auditor's command is immune to the current directory: run inside a received bundle that
plants ``twinflow/trace/__main__.py``, ``argparse.py`` and ``pathlib.py`` beside the trace, the
``twinflow-trace`` console script and ``python -P -m twinflow.trace`` run none of them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from twinflow.kernel._process import run_process
from twinflow.trace import canonical_bytes
from twinflow.trace._format import encode_line

ROOT = Path(__file__).resolve().parents[3]
PLANTED = ("twinflow/trace/__main__.py", "twinflow/__init__.py", "argparse.py", "pathlib.py")


def _bundle(tmp_path: Path) -> Path:
    """A received directory: a real trace, and modules that leave a mark if they are imported."""
    bundle = tmp_path / "bundle"
    for name in PLANTED:
        path = bundle / name
        path.parent.mkdir(parents=True, exist_ok=True)
        mark = bundle / ("RAN-" + name.replace("/", "-"))
        path.write_text(f"open({str(mark)!r}, 'w').close()\nraise SystemExit(99)\n")
    event = {
        "at": "2026-01-01T00:00:00Z",
        "body": {"kind": "run_finished"},
        "prev": "0" * 64,
        "seq": 0,
    }
    (bundle / "t.jsonl").write_bytes(encode_line(canonical_bytes(event))[0])
    return bundle


def _marks(bundle: Path) -> list[str]:
    return sorted(p.name for p in bundle.glob("RAN-*"))


def test_plain_python_m_runs_the_planted_code(tmp_path: Path) -> None:
    """The hazard is real: `python -m twinflow.trace` inside the bundle imports its modules."""
    bundle = _bundle(tmp_path)
    result = run_process([sys.executable, "-m", "twinflow.trace", "verify", "t.jsonl"], cwd=bundle)
    assert 0 != result.returncode
    assert [] != _marks(bundle)


@pytest.mark.parametrize("form", ["console script", "python -P", "uv run console script"])
def test_the_documented_auditor_commands_run_none_of_it(tmp_path: Path, form: str) -> None:
    """The console script and `python -P -m` (directly and through uv run) verify the trace and
    import nothing from the directory they run in."""
    bundle = _bundle(tmp_path)
    script = Path(sys.executable).parent / "twinflow-trace"
    argv = {
        "console script": [str(script), "verify", "t.jsonl"],
        "python -P": [sys.executable, "-P", "-m", "twinflow.trace", "verify", "t.jsonl"],
        # --no-sync: the test must not change the environment it runs in.
        "uv run console script": [
            shutil.which("uv") or "uv",
            "run",
            "--frozen",
            "--no-sync",
            "--project",
            str(ROOT),
            "twinflow-trace",
            "verify",
            "t.jsonl",
        ],
    }[form]
    result = run_process(argv, cwd=bundle)
    assert (0, []) == (result.returncode, _marks(bundle)), result.stderr[-2000:]
    assert "ok: t.jsonl: 1 events verify" in result.stdout
