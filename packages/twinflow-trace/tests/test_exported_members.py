"""twinflow.trace's modules import only the stdlib (its names: tests/gates/test_exported_members.py)."""

import ast
import sys
from pathlib import Path

import pytest

import twinflow.trace

# pytester runs a fresh interpreter: the import test needs one with nothing imported yet.
pytest_plugins = ["pytester"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name the package does not import is an AttributeError, as for any module."""
    with pytest.raises(AttributeError, match="no attribute 'Trace'"):
        _ = twinflow.trace.Trace


def test_importing_the_package_loads_the_standard_library_only(pytester: pytest.Pytester) -> None:
    """`import twinflow.trace` in a fresh interpreter loads no module outside stdlib and twinflow."""
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import twinflow.trace\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - set(sys.stdlib_module_names) - {'twinflow'}))\n"
    )
    result = pytester.run(sys.executable, "-c", script)
    assert (0, ["[]"]) == (result.ret, result.outlines)


def test_the_public_names_fit_the_budget() -> None:
    """The auditor's leaf exports at most 50 names, its errors and submodules included."""
    public = [name for name in vars(twinflow.trace) if not name.startswith("_")]
    assert (True, []) == (
        len(public) <= 50,
        [n for n in public if n == "testing"],
    )


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
