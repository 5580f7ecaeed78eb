"""twinflow.trace's modules import only the stdlib (its names: tests/gates/test_exported_members.py)."""

import ast
import sys
from pathlib import Path

import pytest

import twinflow.trace

# pytester runs a fresh interpreter: the import test needs one with nothing imported yet.
pytest_plugins = ["pytester"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    """The lazy `__getattr__` refuses names outside __all__ as a module would."""
    with pytest.raises(AttributeError, match="no attribute 'Trace'"):
        _ = twinflow.trace.Trace


def test_importing_the_package_loads_only_the_errors(pytester: pytest.Pytester) -> None:
    """`import twinflow.trace` in a fresh interpreter loads the errors and the lazy-export helper, no other module of it;
    `verify_trace` loads what verification needs, not signatures, repair or the writer."""
    script = (
        "import sys, twinflow.trace\n"
        "def mine(): return sorted(m for m in sys.modules if m.startswith('twinflow.trace.'))\n"
        "print(mine())\n"
        "twinflow.trace.verify_trace\n"
        "print(mine())\n"
    )
    result = pytester.run(sys.executable, "-c", script)
    loaded = [
        f"twinflow.trace._{name}"
        for name in (
            "canonical",
            "checkpoint",
            "errors",
            "format",
            "merkle",
            "verify",
        )
    ]
    first = "['twinflow.trace._errors']"
    assert (0, [first, str(loaded)]) == (result.ret, result.outlines)


def test_the_leaf_imports_only_the_standard_library_at_module_level() -> None:
    """Module-level imports of every twinflow.trace and twinflow._base module are stdlib or theirs."""
    package = Path(twinflow.trace.__file__).parent
    found: set[str] = set()
    for source in [*package.glob("*.py"), *package.parent.joinpath("_base").glob("*.py")]:
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
        and not name.startswith(("twinflow.trace.", "twinflow._base."))
        and name != "twinflow.trace"
    }
    assert set() == outside
