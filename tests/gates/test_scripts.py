"""scripts/check and scripts/install-hooks: help, modes and the pre-push hook they install."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def _run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_every_script_has_help(repo_root: Path) -> None:
    """scripts/check, each gate and install-hooks answer --help with exit 0 and a usage text."""
    scripts = [
        "check",
        "install-hooks",
        "checks/licences",
        "checks/determinism",
        "checks/layers",
        "checks/shipped",
        "checks/workflows",
    ]
    for script in scripts:
        done = _run(repo_root / "scripts" / script, "--help", cwd=repo_root)
        assert (script, 0) == (script, done.returncode), done.stderr
        assert "usage" in done.stdout.lower()


def test_check_refuses_an_unknown_option(repo_root: Path) -> None:
    """scripts/check exits 2 on an option it does not know instead of running everything."""
    done = _run(repo_root / "scripts" / "check", "--bogus", cwd=repo_root)
    assert 2 == done.returncode
    assert "unknown option" in done.stderr


def test_install_hooks_writes_a_pre_push_hook_running_the_gates(
    tmp_path: Path, repo_root: Path
) -> None:
    """install-hooks puts an executable pre-push hook that runs scripts/check --fast."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(repo_root / "scripts" / "install-hooks", repo / "scripts" / "install-hooks")
    assert 0 == _run("git", "init", "-q", cwd=repo).returncode
    done = _run(repo / "scripts" / "install-hooks", cwd=repo)
    assert 0 == done.returncode, done.stderr
    hook = repo / ".git" / "hooks" / "pre-push"
    assert hook.stat().st_mode & 0o111
    assert 'exec "$root/scripts/check" --fast' in hook.read_text(encoding="utf-8")


def test_check_fast_prints_each_gates_time(tmp_path: Path, repo_root: Path) -> None:
    """--fast prints a time line as each gate ends, the failing one marked, then the summary."""
    repo = tmp_path / "repo"
    (repo / "scripts" / "checks").mkdir(parents=True)
    shutil.copy(repo_root / "scripts" / "check", repo / "scripts" / "check")
    (repo / ".venv" / "bin").mkdir(parents=True)
    # Stand-ins: the venv's python runs a gate by exiting 0, unless the gate is `layers`.
    python = repo / ".venv" / "bin" / "python"
    python.write_text('#!/bin/sh\ncase "$1" in *layers) exit 1 ;; esac\nexit 0\n')
    licences = repo / "scripts" / "checks" / "licences"
    licences.write_text("#!/bin/sh\nexit 0\n")
    for stub in (python, licences):
        stub.chmod(0o755)
    done = _run(repo / "scripts" / "check", "--fast", cwd=repo)
    timed = [line.rsplit(" in ", 1)[0] for line in done.stdout.splitlines() if line[:4] == "--- "]
    expected = [
        "--- licences: ok",
        "--- determinism: ok",
        "--- layers: FAILED",
        "--- shipped: ok",
        "--- workflows: ok",
    ]
    assert (1, expected) == (done.returncode, timed), done.stdout + done.stderr
