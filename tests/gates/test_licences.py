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
import tomllib
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
    and the Windows-only one is reported unread, not passed."""
    policy = gate.load_policy(repo_root / "CONTRIBUTING.md")
    files = gate.LicenceFiles(str(repo_root / ".venv" / "bin" / "python"), download=False)
    # colorama is installed here too: the docs site's theme needs it on every platform.
    installed = {
        name: importlib.metadata.version(name)
        for name in ("certifi", "jinja2", "click-default-group", "colorama")
    }
    # Windows-only: the version the lock resolves for Windows.
    installed |= {"pyreadline3": "3.5.6"}
    failures = [
        files.check(name, version, exc, policy)
        for exc in policy.exceptions
        for name, version in installed.items()
        if exc.distribution == name
    ]
    assert [None] * 6 == failures
    assert {"pyreadline3 3.5.6 LICENSE.md"} == files.unread
    assert {
        f"certifi {installed['certifi']} LICENSE",
        f"jinja2 {installed['jinja2']} LICENSE.txt",
        f"click-default-group {installed['click-default-group']} LICENSE",
        f"colorama {installed['colorama']} LICENSE.txt",
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
    assert "only on sys_platform == 'win32'" in done.stderr


def test_a_dependency_keeps_the_markers_that_reach_it() -> None:
    """Each export line's marker is kept as where it applies; one below the floor is dropped."""
    export = (
        "colorama==0.4.6 ; sys_platform == 'win32'\n"
        "numpy==2.4.6 ; python_full_version < '3.12' and platform_machine == 'aarch64'\n"
        "numpy==2.4.6 ; sys_platform == 'emscripten'\n"
        "tomli==2.0 ; python_full_version < '3.11'\n"
        "pydantic==2.14.4\n"
    )
    dists = gate.parse_export(export, [], ROOT)
    assert [
        ("colorama", "0.4.6", "sys_platform == 'win32'"),
        (
            "numpy",
            "2.4.6",
            "python_full_version < '3.12' and platform_machine == 'aarch64' or "
            "sys_platform == 'emscripten'",
        ),
        ("pydantic", "2.14.4", ""),
    ] == [(d.name, d.version, d.where) for d in dists]


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
    "WebAssembly": "sys_platform == 'emscripten'",
    "GraalPy": "implementation_name == 'graalpy'",
    "IBM Z": "platform_machine == 's390x'",
    "a Python not yet released": "python_version >= '3.15'",
    "Jython": "platform_python_implementation == 'Jython'",
    "Cygwin": "sys_platform == 'cygwin'",
    "a platform spelt by a substring": "'win' in sys_platform and sys_platform != 'win32'",
    "a micro release inside a minor": (
        "python_version == '3.12' and python_full_version >= '3.12.4'"
    ),
    "a release candidate": (
        "python_full_version >= '3.14.0rc1' and python_full_version < '3.14.0rc3'"
    ),
    "an unreleased PyPy": "implementation_name == 'pypy' and implementation_version >= '8'",
    "an either-or beside a machine": (
        "(sys_platform == 'win32' or sys_platform == 'emscripten') and platform_machine == 'wasm32'"
    ),
    "an unknown os_name": "os_name == 'java'",
    "an ordering of plain strings the solver does not model": (
        "platform_release >= '6' and platform_release < '5'"
    ),
    "the literal on the left": "'3.15' <= python_version",
    "newer Pythons spelt in a list": "python_version in '3.13 3.14'",
    "a full version spelt in a list": "python_full_version in '3.12.1, 3.12.2'",
}


@pytest.mark.parametrize(
    "marker", MARKERS_THAT_REACH_SOMEONE.values(), ids=MARKERS_THAT_REACH_SOMEONE
)
def test_a_dependency_counts_unless_its_marker_is_false_everywhere(marker: str) -> None:
    """A GPL dependency behind any marker some environment satisfies is in the closure."""
    dists = gate.parse_export(f"gpl-thing==1.0 ; {marker}\n", [], ROOT)
    assert ["gpl-thing"] == [d.name for d in dists]


MARKERS_FALSE_EVERYWHERE = {
    "Python 2": "python_version < '3'",
    "before the supported floor": "python_full_version < '3.11'",
    "two platforms at once": "sys_platform == 'linux' and sys_platform == 'win32'",
    "Python 2 and 3.11 at once": "python_version < '3' and python_version >= '3.11'",
    "a minor and a full version that disagree": (
        "python_version == '3.12' and python_full_version < '3.12'"
    ),
    "an either-or, then neither": (
        "(sys_platform == 'a' or sys_platform == 'b') and sys_platform != 'a' and "
        "sys_platform != 'b'"
    ),
    "a substring that cannot be": "sys_platform == 'linux' and 'win' in sys_platform",
    "in and not in the same list": (
        "platform_machine in 'x86_64 amd64' and platform_machine not in 'x86_64 amd64'"
    ),
    "between two adjacent releases": (
        "python_full_version > '3.11.4' and python_full_version < '3.11.5'"
    ),
    "an extra uv export has applied": "extra == 'docs'",
    "the literal on the left, below the floor": "'3.11' > python_version",
}


@pytest.mark.parametrize("marker", MARKERS_FALSE_EVERYWHERE.values(), ids=MARKERS_FALSE_EVERYWHERE)
def test_a_marker_false_in_every_supported_environment_drops_the_dependency(marker: str) -> None:
    """Only a marker no value of any variable satisfies keeps a dependency out of the closure."""
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


SETTINGS_THAT_CHANGE_WHAT_RESOLVES = {
    "environments": "[\"sys_platform == 'linux'\"]",
    "required-environments": "[\"sys_platform == 'win32'\"]",
    "dependency-metadata": '[{ name = "colorama", version = "0.4.6", requires-dist = [] }]',
    "exclude-dependencies": '["colorama"]',
    "override-dependencies": '["colorama==0.4.6"]',
    "constraint-dependencies": '["colorama<1"]',
}


def _with_setting(tmp_path: Path, uv: str, name: str, value: str) -> Path:
    """A locked workspace whose root pyproject then gains `[tool.uv] name = value`."""
    root = _locked(tmp_path, uv)
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(f"[tool.uv]\n{name} = {value}\n{text}", encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("name", "value"),
    SETTINGS_THAT_CHANGE_WHAT_RESOLVES.items(),
    ids=list(SETTINGS_THAT_CHANGE_WHAT_RESOLVES),
)
def test_a_setting_that_changes_what_resolves_fails_unless_listed(
    tmp_path: Path, uv: str, name: str, value: str
) -> None:
    """Each [tool.uv] setting that narrows or rewrites the resolution fails the fast run; listed
    with its value and a reason it passes; listed with another value it fails again."""
    root = _with_setting(tmp_path, uv, name, value)
    members = gate.workspace_members(root)
    named = [p for p in gate.check_resolution(uv, root, members) if f"[tool.uv] {name} =" in p]
    kept = gate.Setting(name, tomllib.loads(f"v = {value}")["v"], "because")
    other = gate.Setting(name, [], "because")
    listed = gate.check_resolution(uv, root, members, [kept])
    wrong = gate.check_resolution(uv, root, members, [other])
    assert (1, [], 1) == (
        len(named),
        [p for p in listed if f"[tool.uv] {name} =" in p],
        len([p for p in wrong if f"[tool.uv] {name} =" in p]),
    )


def test_the_resolution_settings_table_is_read_with_its_reasons(tmp_path: Path) -> None:
    """A row names a setting, its TOML value and a reason; an unknown setting is refused."""
    head = (
        f"{gate.POLICY_BEGIN}\n| a | b | c | d |\n|---|---|---|---|\n"
        f"| MIT | run-time | allow | because |\n{gate.POLICY_END}\n{gate.EXCEPTIONS_BEGIN}\n"
        f"| a | b | c | d | e | f |\n|---|---|---|---|---|---|\n{gate.EXCEPTIONS_END}\n"
        f"{gate.SETTINGS_BEGIN}\n| setting | value | reason |\n|---|---|---|\n"
    )
    policy = tmp_path / "CONTRIBUTING.md"
    policy.write_text(
        head
        + "| environments | `[\"sys_platform == 'linux'\"]` | we ship for Linux |\n"
        + gate.SETTINGS_END
        + "\n",
        encoding="utf-8",
    )
    expected = (gate.Setting("environments", ["sys_platform == 'linux'"], "we ship for Linux"),)
    assert expected == gate.load_policy(policy).settings
    policy.write_text(
        head + '| index-url | `"x"` | because |\n' + gate.SETTINGS_END + "\n", encoding="utf-8"
    )
    with pytest.raises(gate.PolicyError, match="'index-url' is not one of"):
        gate.load_policy(policy)


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


# ----------------------------------------------- copyleft text behind permissive metadata

# Each is the distinctive part of a copyleft licence's text or standard notice, as it appears in
# a licence file (line breaks and indentation included).
COPYLEFT_TEXT = {
    "GPL-3.0 heading": (
        "                    GNU GENERAL PUBLIC LICENSE\n     Version 3, 29 June 2007",
        "GNU GPL",
    ),
    "GPL-2.0 heading": ("GNU GENERAL PUBLIC LICENSE\n   Version 2, June 1991", "GNU GPL"),
    "GPL notice": (
        "you can redistribute it and/or modify it under the terms of the GNU General Public\n"
        "License as published by the Free Software Foundation, either version 3",
        "GNU GPL",
    ),
    "LGPL-2.1 heading": (
        "GNU LESSER GENERAL PUBLIC LICENSE\n Version 2.1, February 1999",
        "GNU LGPL",
    ),
    "LGPL-2.0 heading": ("GNU LIBRARY GENERAL PUBLIC LICENSE\nVersion 2, June 1991", "GNU LGPL"),
    "AGPL-3.0 heading": (
        "GNU AFFERO GENERAL PUBLIC LICENSE\nVersion 3, 19 November 2007",
        "GNU AGPL",
    ),
    "MPL-2.0 heading": (
        "Mozilla Public License Version 2.0\n==================================",
        "Mozilla Public License",
    ),
    "MPL-2.0 file header": (
        "This Source Code Form is subject to the terms of the Mozilla Public\nLicense, v. 2.0.",
        "Mozilla Public License",
    ),
    "EPL-2.0": (
        "Eclipse Public License - v 2.0\n\nTHE ACCOMPANYING PROGRAM",
        "Eclipse Public License",
    ),
    "CDDL-1.0": ("COMMON DEVELOPMENT AND DISTRIBUTION LICENSE (CDDL) Version 1.0", "CDDL"),
    "EUPL-1.2": (
        "EUROPEAN UNION PUBLIC LICENCE v. 1.2\nEUPL (c) the European Union 2007, 2016\n"
        "This European Union Public Licence (the 'EUPL')",
        "EUPL",
    ),
}


@pytest.mark.parametrize(("text", "family"), COPYLEFT_TEXT.values(), ids=list(COPYLEFT_TEXT))
def test_a_copyleft_text_is_recognised_by_its_phrases(text: str, family: str) -> None:
    """Each copyleft family is recognised in a licence file by a phrase only its text carries."""
    assert [family] == gate.copyleft_families(f"Copyright (c) someone\n\n{text}\n...")


@pytest.mark.parametrize(
    "text",
    [
        "MIT License\n\nPermission is hereby granted, free of charge, to any person",
        "This library is not GPL compatible; see the GNU project for why",
        "Apache License\nVersion 2.0, January 2004\nhttp://www.apache.org/licenses/",
        "Licensed under the BSD 3-Clause License, unlike the MPL",
    ],
)
def test_a_permissive_text_that_mentions_copyleft_is_not_copyleft(text: str) -> None:
    """A permissive licence, or one that names a copyleft licence in passing, is no copyleft text."""
    assert [] == gate.copyleft_families(text)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("x-1.dist-info/licenses/anything.txt", True),
        ("x/_vendor/y-2.dist-info/LICENSE", True),
        ("x/config/NOTICE", True),
        ("x/COPYING.LESSER", True),
        ("x/licence.md", True),
        ("x/__init__.py", False),
        ("x-1.dist-info/METADATA", False),
    ],
)
def test_licence_files_are_found_wherever_they_lie(path: str, expected: bool) -> None:
    """The dist-info licenses folder and every LICENSE, COPYING or NOTICE file is read."""
    assert expected == gate.is_licence_file(path)


def test_the_real_policy_records_what_the_installed_licence_files_say(repo_root: Path) -> None:
    """numpy, pip, setuptools and check-jsonschema ship copyleft texts their metadata omits; the
    exceptions name each family, and nothing else installed hides one."""
    files = gate.LicenceFiles(str(repo_root / ".venv" / "bin" / "python"), download=False)
    installed = gate.read_installed(
        str(repo_root / ".venv" / "bin" / "python"),
        str(Path(sys.executable).with_name("pip-licenses")),
    )
    policy = _policy()
    hidden = {}
    for name, meta in sorted(installed.items()):
        found = files.copyleft(name, meta.version) or []
        exceptions = [e for e in policy.exceptions if e.applies(name, meta.version, "development")]
        expression = exceptions[0].expression if exceptions else gate.licence_of(meta)[0] or ""
        families = sorted({f for _, f in found if not gate.names_family(expression, f)})
        if found:
            hidden[name] = (bool(exceptions), families)
    assert {
        "certifi": (False, []),
        "check-jsonschema": (True, []),
        "hypothesis": (False, []),
        "numpy": (True, []),
        "pathspec": (False, []),
        "pip": (True, []),
        "setuptools": (True, []),
    } == hidden


def _sneaky_workspace(tmp_path: Path, repo_root: Path, uv: str, files: dict[str, str]) -> Path:
    """A workspace whose agent depends on `sneaky`, MIT by its metadata, holding `files`."""
    vendor = tmp_path / "sneaky"
    for relative, text in files.items():
        _write(vendor / relative, text)
    licence_files = [f for f in files if not f.startswith("src/")]
    _package(
        tmp_path,
        "sneaky",
        "sneaky",
        "MIT",
        f"license-files = {json.dumps(licence_files)}\n",
    )
    body = 'dependencies = ["sneaky"]\n[tool.uv.sources]\nsneaky = { path = "../../../sneaky" }\n'
    return _workspace(tmp_path, repo_root, uv, {"twinflow-agent": body})


@pytest.mark.parametrize(
    ("files", "named"),
    [
        (
            {"LICENSE": "MIT License\n", "COPYING": "GNU GENERAL PUBLIC LICENSE\nVersion 3\n"},
            "sneaky-1.0.dist-info/licenses/COPYING holds the text of the GNU GPL",
        ),
        (
            {
                "LICENSE": "MIT License\n",
                "src/sneaky/_vendor/NOTICE": "This Source Code Form is subject to the terms "
                "of the Mozilla Public License, v. 2.0.\n",
            },
            "sneaky/_vendor/NOTICE holds the text of the Mozilla Public License",
        ),
    ],
    ids=["a GPL COPYING beside an MIT LICENSE", "a vendored MPL notice in the package"],
)
def test_a_copyleft_licence_file_behind_permissive_metadata_fails_naming_it(
    tmp_path: Path,
    repo_root: Path,
    uv: str,
    run_gate: GateRunner,
    files: dict[str, str],
    named: str,
) -> None:
    """A distribution whose metadata says MIT while a licence file it installs is copyleft fails,
    naming the file and the family."""
    root = _sneaky_workspace(tmp_path, repo_root, uv, files)
    done = run_gate("licences", "--root", root, "--python", root / ".venv" / "bin" / "python")
    line = next((x for x in done.stderr.splitlines() if "twinflow-agent: sneaky 1.0" in x), "")
    assert (1, True) == (done.returncode, named in line), done.stdout + done.stderr
