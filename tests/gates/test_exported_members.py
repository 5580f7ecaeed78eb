"""Every package's ``__all__`` is exactly its public names, each of which resolves.

Derived from the modules themselves (like httpx's test_exported_members), so a name is added
to a package in its ``__init__`` alone: nothing here lists them again. Subpackages
(``twinflow.vocab.wire``) are modules, not exports, and are left out.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types

import pytest

PACKAGES = ("trace", "vocab", "kernel", "models", "agent", "views", "eval", "cli")


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_exactly_the_public_names_and_each_resolves(package: str) -> None:
    """Each name of ``__all__`` resolves (lazy ones too), once, and nothing public is unlisted."""
    module = importlib.import_module(f"twinflow.{package}")
    # A package without ``__all__`` exports what its ``from ... import X as X`` lines name.
    exported: list[str] = (
        list(module.__all__) if hasattr(module, "__all__") else sorted(_imported_names(module)[0])
    )
    unresolved = [name for name in exported if not hasattr(module, name)]
    public = {
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    }
    assert ([], sorted(set(exported)), sorted(exported)) == (
        unresolved,
        sorted(public),
        sorted(set(exported)),
    )


@pytest.mark.parametrize("package", ["agent", "kernel", "models", "vocab"])
def test_the_lazy_packages_share_the_one_hook(package: str) -> None:
    """The packages that resolve names on first access take their hooks from one helper."""
    module = importlib.import_module(f"twinflow.{package}")
    assert "twinflow.trace._lazy" == module.__getattr__.__module__


def _imported_names(module: types.ModuleType) -> tuple[set[str], set[str]]:
    """The public names a package imports: at the top (eager), under ``if TYPE_CHECKING:``."""
    eager: set[str] = set()
    typing_only: set[str] = set()
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.ImportFrom):
            eager |= {alias.asname or alias.name for alias in node.names}
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    typing_only |= {alias.asname or alias.name for alias in statement.names}
    return {name for name in eager if not name.startswith("_")}, typing_only


@pytest.mark.parametrize("package", ["agent", "kernel", "models", "trace", "vocab"])
def test_type_checkers_see_exactly_the_lazy_names(package: str) -> None:
    """The names imported for type checkers are the lazy ones, each in the re-export form."""
    module = importlib.import_module(f"twinflow.{package}")
    eager, typing_only = _imported_names(module)
    assert sorted(set(module.__all__) - eager) == sorted(typing_only)
