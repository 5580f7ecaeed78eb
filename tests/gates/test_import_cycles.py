"""No package imports itself round in a circle at run time.

A cycle inside a package (module A imports B, which imports A, at the top or inside a function)
makes what works depend on which module is imported first. The graph is grimp's (the one
import-linter builds), with imports under ``if TYPE_CHECKING:`` left out: they never run. A
package that resolves its names on first access (``lazy_exports``) imports each module of its
map when a name is asked for, so those edges are added from the map.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import grimp
import pytest

PACKAGES = ("trace", "vocab", "kernel", "models", "agent", "views", "eval", "cli")


def _lazy_modules(package: str) -> list[str]:
    """The private modules a package's ``lazy_exports`` map names (none for an eager package)."""
    source = Path(importlib.import_module(package).__file__ or "").read_text(encoding="utf-8")
    modules: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if "lazy_exports" in node.func.id and len(node.args) == 2:
            mapping = node.args[1]
            if isinstance(mapping, ast.Dict):
                keys = [k.value for k in mapping.keys if isinstance(k, ast.Constant)]
                modules += [f"{package}.{key}" for key in keys if isinstance(key, str)]
    return modules


def in_package_cycles(top: str, packages: tuple[str, ...]) -> list[list[str]]:
    """Each import, inside one of ``packages``, that leads back to its importer: the cycle."""
    graph = grimp.build_graph(
        top, include_external_packages=False, exclude_type_checking_imports=True
    )
    for package in packages:
        for module in _lazy_modules(package):
            graph.add_import(importer=package, imported=module)
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
                "__init__.py": "from twinflow._base._lazy import lazy_exports\n"
                "__getattr__, __dir__, __all__ = lazy_exports(globals(), {'_a': ('x',)})\n",
                "_a.py": "from cyc import y\n",
            },
            [["cyc", "cyc._a", "cyc"], ["cyc._a", "cyc", "cyc._a"]],
        ),
        (
            {
                "_a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import cyc._b\n",
                "_b.py": "import cyc._a\n",
            },
            [],
        ),
    ],
    ids=["in-a-function", "through-the-lazy-map", "type-only"],
)
def test_a_cycle_is_found(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    expected: list[list[str]],
) -> None:
    """A cycle through a function's import or a lazy map is found; a type-only one is not."""
    name = f"cyc_{tmp_path.name}"  # one name per case: an imported package stays cached
    _package(tmp_path / name, {"__init__.py": "", **files})
    for path in (tmp_path / name).iterdir():
        path.write_text(path.read_text(encoding="utf-8").replace("cyc", name), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    renamed = [[m.replace("cyc", name) for m in cycle] for cycle in expected]
    assert renamed == in_package_cycles(name, (name,))
