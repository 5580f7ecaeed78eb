"""The licence gate: the real closures pass, throw-away workspaces with bad licences fail."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

GateRunner = Callable[..., subprocess.CompletedProcess[str]]
ROOT = Path(__file__).resolve().parents[2]


def _load_gate() -> ModuleType:
    path = str(ROOT / "scripts" / "checks" / "licences")
    loader = importlib.machinery.SourceFileLoader("twinflow_licence_gate", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


gate = _load_gate()


def _table(output: str, label: str) -> list[str]:
    """The distribution names listed in the table of closure `label`."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"== {label} ["))
    names = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        names.append(line.split()[0])
    return names


# ------------------------------------------------------------------ the real tree


def test_local_closure_is_pydantic_and_two_leaves(run_gate: GateRunner) -> None:
    """twinflow-local's table lists exactly itself, kernel, vocab, trace and pydantic's own tree."""
    done = run_gate("licences", "--member", "twinflow-local")
    assert 0 == done.returncode, done.stdout + done.stderr
    expected = [
        "annotated-types",
        "pydantic",
        "pydantic-core",
        "twinflow-kernel",
        "twinflow-local",
        "twinflow-trace",
        "twinflow-vocab",
        "typing-extensions",
        "typing-inspection",
    ]
    assert expected == _table(done.stdout, "twinflow-local")


def test_certifi_is_admitted_only_in_the_datapizza_extra(run_gate: GateRunner) -> None:
    """On the real lock, certifi appears under twinflow-vocab[datapizza] by exception, nowhere else."""
    done = run_gate("licences", "--member", "twinflow-vocab")
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "certifi" not in _table(done.stdout, "twinflow-vocab")
    assert "certifi" in _table(done.stdout, "twinflow-vocab[datapizza]")
    certifi = next(line for line in done.stdout.splitlines() if line.startswith("certifi "))
    assert "MPL-2.0" in certifi
    assert "exception" in certifi


def test_sbom_is_byte_identical_between_runs(tmp_path: Path, run_gate: GateRunner) -> None:
    """Two runs of --sbom write the same bytes, a CycloneDX 1.5 document per member closure."""
    first, second = tmp_path / "a", tmp_path / "b"
    for target in (first, second):
        done = run_gate(
            "licences", "--member", "twinflow-local", "--member", "twinflow-vocab", "--sbom", target
        )
        assert 0 == done.returncode, done.stdout + done.stderr
    names = sorted(p.name for p in first.iterdir())
    assert [
        "twinflow-local.cdx.json",
        "twinflow-vocab+datapizza.cdx.json",
        "twinflow-vocab.cdx.json",
    ] == names
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes()
    bom = json.loads((first / "twinflow-local.cdx.json").read_text(encoding="utf-8"))
    assert ("CycloneDX", "1.5") == (bom["bomFormat"], bom["specVersion"])
    licences = {c["name"]: c["licenses"] for c in bom["components"]}
    assert [{"expression": "MIT"}] == licences["pydantic"]
    assert [{"expression": "Apache-2.0"}] == bom["metadata"]["component"]["licenses"]


# ------------------------------------------------------------- throw-away workspaces


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _package(
    root: Path, relative: str, name: str, licence: str, body: str = "", version: str = "1.0"
) -> None:
    module = name.replace("-", "_")
    _write(root / relative / "src" / module / "__init__.py", "")
    _write(
        root / relative / "pyproject.toml",
        f'[project]\nname = "{name}"\nversion = "{version}"\nlicense = "{licence}"\n'
        f'requires-python = ">=3.11"\n{body}\n'
        '[build-system]\nrequires = ["uv_build>=0.9,<0.14"]\nbuild-backend = "uv_build"\n',
    )


def _workspace(tmp_path: Path, repo_root: Path, uv: str, members: dict[str, str]) -> Path:
    """A workspace of `members` (name -> extra pyproject text), locked and synced offline."""
    root = tmp_path / "ws"
    _write(
        root / "pyproject.toml",
        '[project]\nname = "fixture"\nversion = "0"\nrequires-python = ">=3.11"\n'
        '[tool.uv]\npackage = false\n[tool.uv.workspace]\nmembers = ["packages/*"]\n',
    )
    shutil.copy(repo_root / "CONTRIBUTING.md", root / "CONTRIBUTING.md")
    for name, body in members.items():
        _package(root, f"packages/{name}", name, "Apache-2.0", body)
    _package(root, "vendor/gpl-thing", "gpl-thing", "GPL-3.0-only")
    # A version inside the certifi exception's range, so only the scope decides.
    _package(root, "vendor/certifi", "certifi", "MPL-2.0", version="2025.1.1")
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(root / ".venv")}
    for command in (
        ["lock", "--offline"],
        ["sync", "--offline", "--frozen", "--all-packages", "--all-extras"],
    ):
        done = subprocess.run(
            [uv, *command], cwd=root, env=env, capture_output=True, text=True, check=False
        )
        assert 0 == done.returncode, done.stderr
    return root


SOURCES = (
    '[tool.uv.sources]\ngpl-thing = { path = "../../vendor/gpl-thing" }\n'
    'certifi = { path = "../../vendor/certifi" }\n'
)


def test_a_gpl_runtime_dependency_of_agent_fails_naming_it(
    tmp_path: Path, repo_root: Path, uv: str, run_gate: GateRunner
) -> None:
    """A GPL-3.0 run-time dependency of twinflow-agent fails the gate, which names it."""
    root = _workspace(
        tmp_path, repo_root, uv, {"twinflow-agent": 'dependencies = ["gpl-thing"]\n' + SOURCES}
    )
    done = run_gate("licences", "--root", root, "--python", root / ".venv" / "bin" / "python")
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "twinflow-agent: gpl-thing 1.0 [GPL-3.0-only]: GPL-3.0-only denied" in done.stderr


def test_certifi_outside_the_datapizza_extra_fails(
    tmp_path: Path, repo_root: Path, uv: str, run_gate: GateRunner
) -> None:
    """The certifi exception holds only for twinflow-vocab[datapizza]: the kernel may not ship it."""
    members = {
        "twinflow-vocab": '[project.optional-dependencies]\ndatapizza = ["certifi"]\n' + SOURCES,
        "twinflow-kernel": 'dependencies = ["certifi"]\n' + SOURCES,
    }
    root = _workspace(tmp_path, repo_root, uv, members)
    done = run_gate("licences", "--root", root, "--python", root / ".venv" / "bin" / "python")
    assert 1 == done.returncode, done.stdout + done.stderr
    violations = [line.strip() for line in done.stderr.splitlines() if line.startswith("  ")]
    assert ["twinflow-kernel: certifi 2025.1.1 [MPL-2.0]"] == [
        v.split(": MPL-2.0 denied")[0] for v in violations
    ]
    assert "certifi" in _table(done.stdout, "twinflow-vocab[datapizza]")
    certifi = next(line for line in done.stdout.splitlines() if line.startswith("certifi "))
    assert "MPL-2.0" in certifi
    assert "exception" in certifi


# --------------------------------------------------------------------- the policy


def test_a_missing_policy_table_exits_2(tmp_path: Path, run_gate: GateRunner) -> None:
    """A CONTRIBUTING.md without the policy markers is an unreadable policy: exit 2."""
    policy = tmp_path / "CONTRIBUTING.md"
    policy.write_text("# no tables here\n", encoding="utf-8")
    done = run_gate("licences", "--policy", policy)
    assert 2 == done.returncode
    assert "unreadable policy" in done.stderr


@pytest.mark.parametrize(
    ("row", "complaint"),
    [
        ("| MIT | run-time | maybe | because |", "decision 'maybe'"),
        ("| MIT | shipping | allow | because |", "scope 'shipping'"),
        ("| Not A Licence | run-time | allow | because |", "is not an SPDX id"),
        ("| MIT | run-time | allow | |", "gives no reason"),
    ],
)
def test_a_malformed_policy_row_is_refused(tmp_path: Path, row: str, complaint: str) -> None:
    """Each malformed policy row makes the policy unreadable, with a message naming the fault."""
    text = (
        f"{gate.POLICY_BEGIN}\n| SPDX id | scope | decision | reason |\n|---|---|---|---|\n{row}\n"
        f"{gate.POLICY_END}\n{gate.EXCEPTIONS_BEGIN}\n| a | b | c | d | e |\n|---|---|---|---|---|\n"
        f"{gate.EXCEPTIONS_END}\n"
    )
    policy = tmp_path / "CONTRIBUTING.md"
    policy.write_text(text, encoding="utf-8")
    with pytest.raises(gate.PolicyError, match=complaint):
        gate.load_policy(policy)


def _policy() -> object:
    return gate.load_policy(ROOT / "CONTRIBUTING.md")


@pytest.mark.parametrize(
    ("expression", "scope", "allowed"),
    [
        ("MIT", "run-time", True),
        ("MIT OR GPL-3.0-only", "run-time", True),
        ("MIT AND GPL-3.0-only", "run-time", False),
        ("Apache-2.0 WITH LLVM-exception", "run-time", True),
        ("GPL-2.0-or-later WITH Classpath-exception-2.0", "run-time", False),
        ("MPL-2.0", "run-time", False),
        ("MPL-2.0", "development", True),
        ("MIT AND MPL-2.0", "development", True),
        ("GPL-3.0-only", "development", False),
        ("EUPL-1.2", "run-time", False),
    ],
)
def test_expressions_are_evaluated_against_the_scope(
    expression: str, scope: str, allowed: bool
) -> None:
    """AND needs every operand allowed, OR any, WITH follows its licence; rows are per scope."""
    ok, _ = gate.evaluate(expression, scope, _policy(), gate.Usage())
    assert allowed == ok


@pytest.mark.parametrize(
    ("expression", "license_", "classifiers", "expected"),
    [
        ("MIT", None, (), "MIT"),
        (None, "Apache 2.0", ("Apache Software License",), "Apache-2.0"),
        (None, "3-Clause BSD License", (), "BSD-3-Clause"),
        (None, None, ("MIT License",), "MIT"),
        (None, None, ("Python Software Foundation License",), "PSF-2.0"),
        (None, None, ("BSD License",), None),
        (None, "Some custom licence, see LICENSE", (), None),
        (None, None, (), None),
        ("Not-A-Licence-7", None, (), None),
    ],
)
def test_metadata_is_normalised_to_spdx(
    expression: str | None, license_: str | None, classifiers: tuple[str, ...], expected: str | None
) -> None:
    """License-Expression first, then License, then classifiers; an ambiguous name stays unknown."""
    installed = gate.Installed("x", "1", expression, license_, classifiers)
    assert expected == gate.licence_of(installed)[0]


def test_an_unknown_licence_is_a_violation() -> None:
    """A distribution whose metadata names no known licence is a violation, not a pass."""
    closure = gate.Closure(
        "twinflow-agent", "run-time", "twinflow-agent", (gate.Dist("mystery", "1.0"),)
    )
    installed = {"mystery": gate.Installed("mystery", "1.0", None, None, ("BSD License",))}
    rows = gate.check_closure(closure, installed, _policy(), gate.Usage())
    assert ["VIOLATION"] == [row.verdict for row in rows]
