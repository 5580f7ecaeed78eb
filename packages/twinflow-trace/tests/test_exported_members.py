"""twinflow.trace's modules import only the stdlib (its names: tests/gates/test_exported_members.py)."""

import ast
import sys
from pathlib import Path

import twinflow.trace


def test_the_leaf_imports_only_the_standard_library_at_module_level() -> None:
    """Module-level imports of every twinflow.trace module are stdlib or twinflow.trace itself."""
    package = Path(twinflow.trace.__file__).parent
    found: set[str] = set()
    for source in package.glob("*.py"):
        for node in ast.parse(source.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
    outside = {
        name
        for name in found
        if name.split(".")[0] not in sys.stdlib_module_names
        and name.split(".")[0] != "__future__"
        and not (name == "twinflow.trace" or name.startswith("twinflow.trace."))
    }
    assert set() == outside
