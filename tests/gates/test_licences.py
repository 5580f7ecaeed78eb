"""The licence gate: the real closures pass, throw-away workspaces with bad licences fail."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
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
    """twinflow-models's table lists exactly itself, kernel, vocab, trace and pydantic's own tree."""
    done = run_gate("licences", "--member", "twinflow-models")
    assert 0 == done.returncode, done.stdout + done.stderr
    expected = [
        "annotated-types",
        "pydantic",
        "pydantic-core",
        "twinflow-kernel",
        "twinflow-models",
        "twinflow-trace",
        "twinflow-vocab",
        "typing-extensions",
        "typing-inspection",
    ]
    assert expected == _table(done.stdout, "twinflow-models")


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
            "licences",
            "--member",
            "twinflow-models",
            "--member",
            "twinflow-vocab",
            "--sbom",
            target,
        )
        assert 0 == done.returncode, done.stdout + done.stderr
    names = sorted(p.name for p in first.iterdir())
    assert [
        "twinflow-models+embedded.cdx.json",
        "twinflow-models.cdx.json",
        "twinflow-vocab+datapizza.cdx.json",
        "twinflow-vocab.cdx.json",
    ] == names
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes()
    bom = json.loads((first / "twinflow-models.cdx.json").read_text(encoding="utf-8"))
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


def _workspace(
    tmp_path: Path,
    repo_root: Path,
    uv: str,
    members: dict[str, str],
    *,
    root_extra: str = "",
    where: str = "packages",
) -> Path:
    """A workspace of `members` (name -> extra pyproject text), locked and synced offline."""
    root = tmp_path / "ws"
    _write(
        root / "pyproject.toml",
        '[project]\nname = "fixture"\nversion = "0"\nrequires-python = ">=3.11"\n'
        f'[tool.uv]\npackage = false\n[tool.uv.workspace]\nmembers = ["{where}/*"]\n' + root_extra,
    )
    # The certifi exceptions pin the fixture's licence file instead of the real one.
    policy = (repo_root / "CONTRIBUTING.md").read_text(encoding="utf-8")
    exceptions = gate.load_policy(repo_root / "CONTRIBUTING.md").exceptions
    real_pin = next(e.sha256 for e in exceptions if e.distribution == "certifi")
    _write(root / "CONTRIBUTING.md", policy.replace(real_pin, FIXTURE_LICENCE_SHA256))
    for name, body in members.items():
        _package(root, f"{where}/{name}", name, "Apache-2.0", body)
    _package(root, "vendor/gpl-thing", "gpl-thing", "GPL-3.0-only")
    # A version inside the certifi exception's range, so only the scope decides.
    _write(root / "vendor" / "certifi" / "LICENSE", FIXTURE_LICENCE)
    _package(
        root,
        "vendor/certifi",
        "certifi",
        "MPL-2.0",
        'license-files = ["LICENSE"]\n',
        version="2025.1.1",
    )
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(root / ".venv")}
    for command in (
        ["lock", "--offline"],
        ["sync", "--offline", "--frozen", "--all-packages", "--all-extras", "--all-groups"],
    ):
        done = subprocess.run(
            [uv, *command], cwd=root, env=env, capture_output=True, text=True, check=False
        )
        assert 0 == done.returncode, done.stderr
    return root


FIXTURE_LICENCE = "Mozilla Public License Version 2.0 (the fixture's copy)\n"
FIXTURE_LICENCE_SHA256 = hashlib.sha256(FIXTURE_LICENCE.encode()).hexdigest()

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


# ------------------------------------------------------- pinned licence files


def _datapizza_workspace(tmp_path: Path, repo_root: Path, uv: str) -> Path:
    members = {
        "twinflow-vocab": '[project.optional-dependencies]\ndatapizza = ["certifi"]\n' + SOURCES
    }
    return _workspace(tmp_path, repo_root, uv, members)


def _installed_licence(root: Path) -> Path:
    (path,) = (root / ".venv").glob(
        "lib/python*/site-packages/certifi-*.dist-info/licenses/LICENSE"
    )
    return path


def test_the_pinned_licence_file_passes_when_unchanged(
    tmp_path: Path, repo_root: Path, uv: str, run_gate: GateRunner
) -> None:
    """An exception whose licence file is installed with the pinned hash admits the distribution."""
    root = _datapizza_workspace(tmp_path, repo_root, uv)
    done = run_gate("licences", "--root", root, "--python", root / ".venv" / "bin" / "python")
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "1 pinned licence files checked" in done.stdout


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ("rewrite", "LICENSE in the installed certifi 2025.1.1 has sha256:{actual}, the exception "
         "pins sha256:{pinned}: the licence changed, review the exception"),
        ("rename", "the exception pins LICENSE sha256:{pinned} but the installed certifi "
         "2025.1.1 has no such file"),
        ("delete", "the exception pins LICENSE sha256:{pinned} but the installed certifi "
         "2025.1.1 has no such file"),
    ],
)  # fmt: skip
def test_a_changed_or_missing_licence_file_fails_naming_the_hashes(
    tmp_path: Path, repo_root: Path, uv: str, run_gate: GateRunner, change: str, complaint: str
) -> None:
    """A licence file that differs from the pin, or is gone, fails the exception it backs."""
    root = _datapizza_workspace(tmp_path, repo_root, uv)
    licence = _installed_licence(root)
    new_text = b"GNU General Public License version 3\n"
    if change == "rewrite":
        licence.write_bytes(new_text)
    elif change == "rename":
        licence.rename(licence.with_name("COPYING"))
    else:
        licence.unlink()
    done = run_gate("licences", "--root", root, "--python", root / ".venv" / "bin" / "python")
    assert 1 == done.returncode, done.stdout + done.stderr
    expected = complaint.format(
        actual=hashlib.sha256(new_text).hexdigest(), pinned=FIXTURE_LICENCE_SHA256
    )
    assert f"twinflow-vocab[datapizza]: certifi 2025.1.1 [MPL-2.0]: {expected}" in done.stderr


def test_every_pin_of_the_real_policy_matches_what_is_installed(repo_root: Path) -> None:
    """The real CONTRIBUTING.md: each pinned licence file installed here has its pinned hash,
    and the Windows-only ones are reported unread, not passed."""
    policy = gate.load_policy(repo_root / "CONTRIBUTING.md")
    files = gate.LicenceFiles(str(repo_root / ".venv" / "bin" / "python"), download=False)
    installed = {
        name: importlib.metadata.version(name)
        for name in ("certifi", "jinja2", "click-default-group")
    }
    # Windows-only: the versions the lock resolves for Windows.
    installed |= {"colorama": "0.4.6", "pyreadline3": "3.5.6"}
    failures = [
        files.check(name, version, exc, policy)
        for exc in policy.exceptions
        for name, version in installed.items()
        if exc.distribution == name
    ]
    assert [None] * 6 == failures
    assert {"colorama 0.4.6 LICENSE.txt", "pyreadline3 3.5.6 LICENSE.md"} == files.unread
    assert {
        f"certifi {installed['certifi']} LICENSE",
        f"jinja2 {installed['jinja2']} LICENSE.txt",
        f"click-default-group {installed['click-default-group']} LICENSE",
    } == files.read


def test_a_windows_only_pin_is_checked_in_its_downloaded_wheel(repo_root: Path) -> None:
    """With download (the full run), colorama's Windows wheel is fetched and its pin checked;
    a wrong pin fails naming the wheel."""
    policy = gate.load_policy(repo_root / "CONTRIBUTING.md")
    (colorama,) = (e for e in policy.exceptions if e.distribution == "colorama")
    files = gate.LicenceFiles(None, download=True)
    assert None is files.check("colorama", "0.4.6", colorama, policy)
    wrong = dataclasses.replace(colorama, sha256="0" * 64)
    failure = gate.LicenceFiles(None, download=True).check("colorama", "0.4.6", wrong, policy)
    assert failure is not None
    assert "LICENSE.txt in the colorama 0.4.6 wheel for Windows has sha256:" in failure


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (["x-1.dist-info/licenses/LICENSE", "x/LICENSE"], "x-1.dist-info/licenses/LICENSE"),
        (["x-1.dist-info/LICENSE", "x-1.dist-info/RECORD"], "x-1.dist-info/LICENSE"),
        (["x/LICENSE", "y/LICENSE"], None),
        (["x-1.dist-info/licenses/COPYING"], None),
        (["x-1.dist-info/licenses/NOT_LICENSE"], None),
    ],
)
def test_the_licence_file_is_found_in_the_licenses_folder_or_alone(
    paths: list[str], expected: str | None
) -> None:
    """The dist-info licenses/ copy wins; otherwise one path must end in the name, or none is found."""
    assert expected == gate.pick_licence_file(paths, "LICENSE")


def test_an_exception_row_without_its_licence_file_is_refused(tmp_path: Path) -> None:
    """A five-cell exception row (no licence file), or a file without a sha256, is a policy error."""
    head = (
        f"{gate.POLICY_BEGIN}\n| SPDX id | scope | decision | reason |\n|---|---|---|---|\n"
        f"| MIT | run-time | allow | because |\n{gate.POLICY_END}\n{gate.EXCEPTIONS_BEGIN}\n"
        "| a | b | c | d | e | f |\n|---|---|---|---|---|---|\n"
    )
    for row, complaint in [
        ("| jinja2 | >=3.1 | BSD-3-Clause | development | because |", "has 5 cells, expected 6"),
        ("| jinja2 | >=3.1 | BSD-3-Clause | LICENSE | development | because |", "is not 'FILE"),
        (f"| jinja2 | >=3.1 | BSD-3-Clause | LICENSE sha256:{'a' * 63} | development | why |", "is not 'FILE"),
    ]:  # fmt: skip
        policy = tmp_path / "CONTRIBUTING.md"
        policy.write_text(f"{head}{row}\n{gate.EXCEPTIONS_END}\n", encoding="utf-8")
        with pytest.raises(gate.PolicyError, match=complaint):
            gate.load_policy(policy)


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


# ------------------------------------------- class 14: every platform and Python version


def test_a_dependency_behind_a_windows_marker_is_checked(
    tmp_path: Path, repo_root: Path, uv: str, run_gate: GateRunner
) -> None:
    """A GPL dependency only Windows gets is in the closure, though this machine is Linux."""
    body = "dependencies = [\"gpl-thing; sys_platform == 'win32'\"]\n" + SOURCES
    root = _workspace(tmp_path, repo_root, uv, {"twinflow-agent": body})
    done = run_gate("licences", "--root", root, "--python", root / ".venv" / "bin" / "python")
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "twinflow-agent: gpl-thing" in done.stderr
    assert "only on windows" in done.stderr


def test_markers_are_evaluated_for_every_declared_environment() -> None:
    """One export line per marker reaches exactly the platforms and Pythons it names."""
    export = (
        "colorama==0.4.6 ; sys_platform == 'win32'\n"
        "numpy==2.4.6 ; python_full_version < '3.12' and platform_machine == 'aarch64'\n"
        "tomli==2.0 ; python_full_version < '3.11'\n"
        "pydantic==2.14.4\n"
    )
    dists = gate.parse_export(export, [], ROOT)
    assert [
        ("colorama", "0.4.6", "windows-amd64 cpython py3.11,3.12,3.13,3.14"),
        ("numpy", "2.4.6", "linux-aarch64 cpython py3.11; linux-aarch64 pypy py3.11"),
        ("pydantic", "2.14.4", ""),
    ] == [(d.name, d.version, d.where.split("; windows-amd64 pypy")[0]) for d in dists]


# A dependency behind each of these markers reaches some supported environment, so it is in the
# closure, however narrow the environment.
MARKERS_THAT_REACH_SOMEONE = {
    "ARM Linux": "platform_machine == 'aarch64'",
    "ARM Linux, spelt in a list": "platform_machine in 'aarch64 armv8l'",
    "Intel macOS": "sys_platform == 'darwin' and platform_machine == 'x86_64'",
    "Apple silicon": "sys_platform == 'darwin' and platform_machine == 'arm64'",
    "Windows on ARM": "platform_machine == 'ARM64'",
    "PyPy": "platform_python_implementation == 'PyPy'",
    "PyPy by implementation name": "implementation_name == 'pypy'",
    "an early micro release": "python_full_version < '3.11.4'",
    "a late micro release": "python_full_version >= '3.13.9'",
    "one micro release": "python_full_version == '3.12.7'",
    "a newer Python": "python_version >= '3.14'",
    "not CPython on Linux": "implementation_name != 'cpython' and sys_platform == 'linux'",
    "an os_name": "os_name == 'nt'",
    "a platform release the grid cannot model": "platform_release >= '6'",
    "a negated machine": "platform_machine != 'x86_64'",
}


@pytest.mark.parametrize(
    "marker", MARKERS_THAT_REACH_SOMEONE.values(), ids=MARKERS_THAT_REACH_SOMEONE
)
def test_a_dependency_counts_unless_its_marker_is_false_everywhere(marker: str) -> None:
    """A GPL dependency behind any marker true in some supported environment is in the closure."""
    dists = gate.parse_export(f"gpl-thing==1.0 ; {marker}\n", [], ROOT)
    assert ["gpl-thing"] == [d.name for d in dists]


MARKERS_FALSE_EVERYWHERE = {
    "Python 2": "python_version < '3'",
    "before the supported floor": "python_full_version < '3.11'",
    "Jython": "platform_python_implementation == 'Jython'",
    "an unsupported platform": "sys_platform == 'cygwin'",
}


@pytest.mark.parametrize("marker", MARKERS_FALSE_EVERYWHERE.values(), ids=MARKERS_FALSE_EVERYWHERE)
def test_a_marker_false_in_every_supported_environment_drops_the_dependency(marker: str) -> None:
    """Only a marker false in the whole grid keeps a dependency out of the closure."""
    assert () == gate.parse_export(f"gpl-thing==1.0 ; {marker}\n", [], ROOT)


def test_a_release_not_installed_here_is_read_from_its_published_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another platform's release is judged by the METADATA PyPI serves for it, not skipped."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cached = tmp_path / "twinflow-licences" / "winonly-1.0.METADATA"
    cached.parent.mkdir(parents=True)
    cached.write_text(
        "Metadata-Version: 2.4\nName: winonly\nVersion: 1.0\nLicense-Expression: GPL-3.0-only\n",
        encoding="utf-8",
    )
    closure = gate.Closure(
        "twinflow-agent", "run-time", "twinflow-agent", (gate.Dist("winonly", "1.0", "windows"),)
    )
    rows = gate.check_closure(closure, {}, _policy(), gate.Usage())
    assert [("GPL-3.0-only", "VIOLATION")] == [(r.expression, r.verdict) for r in rows]


def test_the_pip_view_is_checked_and_compared(run_gate: GateRunner) -> None:
    """--pip-view resolves each published extra without the workspace's overrides; on this
    tree pip's demo extra and the workspace's agree (llm's tree is in both)."""
    done = run_gate("licences", "--member", "twinflow-cli", "--pip-view")
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "llm" in _table(done.stdout, "twinflow-cli[demo] (pip)")
    assert "llm" in _table(done.stdout, "twinflow-cli[demo]")


def test_a_distribution_only_pip_installs_is_a_violation() -> None:
    """What pip brings and the workspace closure lacks (an override hid it) fails, named."""
    ours = gate.Closure("twinflow-cli[demo]", "run-time", "twinflow-cli", (gate.Dist("a", "1"),))
    pip = gate.Closure(
        "twinflow-cli[demo] (pip)",
        "run-time",
        "twinflow-cli",
        (gate.Dist("a", "1"), gate.Dist("llm", "0.36")),
    )
    rows = gate.compare_views(ours, pip, [])
    assert [("llm", "VIOLATION")] == [(r.name, r.verdict) for r in rows]


# ------------------------------------------------------------ conflicting or vague metadata

# Each reading cannot be evaluated: it fails, naming the fields it read.
UNREADABLE_METADATA = {
    "a copyleft classifier without a version beside License: MIT": (
        None,
        "MIT",
        ("GNU General Public License (GPL)",),
        "copyleft family without a version",
    ),
    "LGPL without a version": (
        None,
        None,
        ("GNU Library or Lesser General Public License (LGPL)",),
        "without a version",
    ),
    "License: GPL": (None, "GPL", (), "without a version"),
    "License: AGPL beside an expression": ("MIT", "AGPL", (), "without a version"),
    "License: LGPL": (None, "LGPL", ("MIT License",), "without a version"),
    "Mozilla without a version": (None, "Mozilla Public License", (), "without a version"),
    "a licence text whose first line names GPL": (
        None,
        "GNU GENERAL PUBLIC LICENSE\nterms...",
        (),
        "without a version",
    ),
    "License-Expression and License disagree": ("MIT", "GPL-3.0-only", (), "disagree"),
    "License-Expression and a classifier disagree": (
        "MIT",
        None,
        ("GNU General Public License v3 (GPLv3)",),
        "disagree",
    ),
    "License and a classifier disagree": (
        None,
        "MIT",
        ("Mozilla Public License 2.0 (MPL 2.0)",),
        "disagree",
    ),
    "a dual licence against one classifier": (
        "MIT OR GPL-3.0-only",
        None,
        ("GNU General Public License v3 (GPLv3)",),
        "disagree",
    ),
    "an unreadable License beside a classifier": (
        None,
        "Custom-Licence-1",
        ("MIT License",),
        "cannot be read",
    ),
    "an unreadable classifier beside an expression": (
        "MIT",
        None,
        ("Other/Proprietary License",),
        "cannot be read",
    ),
    "only a vague name": (None, None, ("BSD License",), "no readable licence"),
    "no field at all": (None, None, (), "no readable licence"),
}


@pytest.mark.parametrize(
    ("expression", "license_", "classifiers", "complaint"),
    UNREADABLE_METADATA.values(),
    ids=UNREADABLE_METADATA,
)
def test_vague_conflicting_or_unreadable_metadata_fails_naming_the_fields(
    expression: str | None, license_: str | None, classifiers: tuple[str, ...], complaint: str
) -> None:
    """No reading is taken from metadata that cannot be evaluated; the fields read are named."""
    installed = gate.Installed("x", "1", expression, license_, classifiers)
    found, source = gate.licence_of(installed)
    assert (None, True) == (found, complaint in source), source
    for value in (expression, *classifiers):
        if value:
            assert value in source
    closure = gate.Closure("twinflow-agent", "run-time", "twinflow-agent", (gate.Dist("x", "1"),))
    rows = gate.check_closure(closure, {"x": installed}, _policy(), gate.Usage())
    assert ["VIOLATION"] == [row.verdict for row in rows]


@pytest.mark.parametrize(
    ("expression", "license_", "classifiers", "expected"),
    [
        ("Apache-2.0", "Apache 2.0", ("Apache Software License",), "Apache-2.0"),
        (
            "MIT OR Apache-2.0",
            None,
            ("MIT License", "Apache Software License"),
            "MIT OR Apache-2.0",
        ),
        ("BSD-3-Clause", None, ("BSD License",), "BSD-3-Clause"),
        (None, "PSF", ("Python Software Foundation License",), "PSF-2.0"),
        (None, None, ("GNU General Public License v3 (GPLv3)",), "GPL-3.0-only"),
    ],
)
def test_fields_that_agree_give_one_reading(
    expression: str | None, license_: str | None, classifiers: tuple[str, ...], expected: str
) -> None:
    """Fields naming the same licences agree; a vague name its family settles is no conflict."""
    installed = gate.Installed("x", "1", expression, license_, classifiers)
    assert expected == gate.licence_of(installed)[0]


# ------------------------------------------------- overrides and a stale lock, in the fast run


def _locked(tmp_path: Path, uv: str, root_extra: str = "") -> Path:
    """A workspace of one member without dependencies, locked offline."""
    root = tmp_path / "locked"
    _write(
        root / "pyproject.toml",
        '[tool.uv.workspace]\nmembers = ["packages/*"]\n' + root_extra,
    )
    _write(
        root / "packages" / "one" / "pyproject.toml",
        '[project]\nname = "one"\nversion = "0"\nrequires-python = ">=3.11"\ndependencies = []\n',
    )
    done = subprocess.run(
        [uv, "lock", "--offline"], cwd=root, capture_output=True, text=True, check=False
    )
    assert 0 == done.returncode, done.stderr
    return root


def test_a_fresh_lock_without_overrides_passes(tmp_path: Path, uv: str) -> None:
    """The resolution check finds nothing in a locked workspace without overrides."""
    root = _locked(tmp_path, uv)
    assert [] == gate.check_resolution(uv, root, gate.workspace_members(root))


def test_override_dependencies_fail_in_the_fast_run(tmp_path: Path, uv: str) -> None:
    """[tool.uv] override-dependencies is named, in the root or in a member."""
    root = _locked(tmp_path, uv, '[tool.uv]\noverride-dependencies = ["colorama==0.4.6"]\n')
    problems = gate.check_resolution(uv, root, gate.workspace_members(root))
    assert any("override-dependencies" in p for p in problems), problems


def test_a_stale_lock_fails_in_the_fast_run(tmp_path: Path, uv: str) -> None:
    """A pyproject changed after the lock was written is named."""
    root = _locked(tmp_path, uv)
    member = root / "packages" / "one" / "pyproject.toml"
    member.write_text(
        member.read_text(encoding="utf-8").replace('version = "0"', 'version = "1"'),
        encoding="utf-8",
    )
    problems = gate.check_resolution(uv, root, gate.workspace_members(root))
    assert any("does not match" in p for p in problems), problems


# ------------------------------------------- class 16: members anywhere, every group


def test_a_member_outside_packages_is_checked(
    tmp_path: Path, repo_root: Path, uv: str, run_gate: GateRunner
) -> None:
    """A member the workspace lists under libs/ has its closure checked like any other."""
    body = 'dependencies = ["gpl-thing"]\n' + SOURCES
    root = _workspace(tmp_path, repo_root, uv, {"twinflow-extra": body}, where="libs")
    done = run_gate("licences", "--root", root, "--python", root / ".venv" / "bin" / "python")
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "twinflow-extra: gpl-thing 1.0 [GPL-3.0-only]" in done.stderr


def test_every_dependency_group_is_checked(
    tmp_path: Path, repo_root: Path, uv: str, run_gate: GateRunner
) -> None:
    """A GPL package in a non-default group (docs) fails the development closure."""
    extra = (
        '[dependency-groups]\ndocs = ["gpl-thing"]\n'
        '[tool.uv.sources]\ngpl-thing = { path = "vendor/gpl-thing" }\n'
    )
    root = _workspace(tmp_path, repo_root, uv, {"twinflow-agent": ""}, root_extra=extra)
    done = run_gate("licences", "--root", root, "--python", root / ".venv" / "bin" / "python")
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "development: gpl-thing 1.0 [GPL-3.0-only]" in done.stderr
