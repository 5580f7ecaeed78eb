"""No package imports itself round in a circle at run time.

A cycle inside a package (module A imports B, which imports A, at the top or inside a function)
makes what works depend on which module is imported first. The graph is grimp's (the one
import-linter builds), with imports under ``if TYPE_CHECKING:`` left out: they never run. The
packages are the workspace's (every ``packages/*/src/twinflow/*``).
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = tuple(
    sorted(init.parent.name for init in ROOT.glob("packages/*/src/twinflow/*/__init__.py"))
)


def in_package_cycles(top: str, packages: tuple[str, ...]) -> list[list[str]]:
    """Each import, inside one of ``packages``, that leads back to its importer: the cycle."""
    graph = grimp.build_graph(
        top, include_external_packages=False, exclude_type_checking_imports=True
    )
    cycles: list[list[str]] = []
    for package in packages:
        inside = {m for m in graph.modules if m == package or m.startswith(f"{package}.")}
        for importer in sorted(inside):
            for imported in sorted(graph.find_modules_directly_imported_by(importer) & inside):
                back = graph.find_shortest_chain(importer=imported, imported=importer)
                if back is not None and set(back) <= inside:
                    cycles.append([importer, *back])
    return cycles


def test_no_package_imports_itself_in_a_circle() -> None:
    """No twinflow package has an import cycle among its own modules at run time."""
    assert [] == in_package_cycles("twinflow", tuple(f"twinflow.{p}" for p in PACKAGES))


def _package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"_a.py": "import cyc._b\n", "_b.py": "def f():\n    import cyc._a\n"},
            [["cyc._a", "cyc._b", "cyc._a"], ["cyc._b", "cyc._a", "cyc._b"]],
        ),
        (
            {
                "_a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import cyc._b\n",
                "_b.py": "import cyc._a\n",
            },
            [],
        ),
    ],
    ids=["in-a-function", "type-only"],
)
def test_a_cycle_is_found(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    expected: list[list[str]],
) -> None:
    """A cycle through a function's import is found; a type-only one is not."""
    name = f"cyc_{tmp_path.name}"  # one name per case: an imported package stays cached
    _package(tmp_path / name, {"__init__.py": "", **files})
    for path in (tmp_path / name).iterdir():
        path.write_text(path.read_text(encoding="utf-8").replace("cyc", name), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    renamed = [[m.replace("cyc", name) for m in cycle] for cycle in expected]
    assert renamed == in_package_cycles(name, (name,))
