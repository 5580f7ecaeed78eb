"""The local-model leaf's import closure: the standard library, pydantic, twinflow's lower layers."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import twinflow.models

PACKAGE = Path(twinflow.models.__file__).parent
ALLOWED_ROOTS = frozenset({"pydantic"})
ALLOWED_TWINFLOW = (
    "twinflow._base",
    "twinflow.trace",
    "twinflow.kernel",
    "twinflow.vocab",
    "twinflow.models",
)


def imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            assert node.module is not None
            names.append(node.module)
    return names


def test_the_local_path_costs_no_third_party_dependency() -> None:
    """Every import in the package is stdlib, pydantic, or twinflow's trace, vocab and kernel."""
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 7
    offending = []
    for path in modules:
        for name in imported_modules(path):
            root = name.split(".")[0]
            if root in sys.stdlib_module_names and root != "twinflow":
                continue
            if root in ALLOWED_ROOTS or name.startswith(ALLOWED_TWINFLOW):
                continue
            offending.append(f"{path.name}: {name}")
    assert offending == []


def test_the_dependency_check_sees_a_third_party_import(tmp_path: Path) -> None:
    """The import walk finds `from httpx import Client` and a nested `import ollama`."""
    source = tmp_path / "m.py"
    source.write_text("from httpx import Client\n\ndef f():\n    import ollama\n")
    assert imported_modules(source) == ["httpx", "ollama"]
