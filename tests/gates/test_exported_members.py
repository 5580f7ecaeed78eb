"""The public surface: what each package exports, how much, and how many error classes there are.

A package's public names are the names its ``__init__`` binds that start with no underscore and
are not modules; its ``from twinflow.x._mod import Name as Name`` lines are their one source
(no ``__all__``, no list restated here). Packages are found from the workspace, not listed, with
the standard library alone (``ast``, ``importlib``), so a new package is counted the day it lands.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import tomllib
import types
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_PUBLIC_NAMES = 199
MAX_EXCEPTION_CLASSES = 50


def _members() -> list[Path]:
    """The workspace's member directories, as the root pyproject's globs name them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["uv"]["workspace"]["members"]
    return sorted(path for pattern in globs for path in ROOT.glob(pattern) if path.is_dir())


def _package_dirs() -> dict[str, Path]:
    """Every package and subpackage under the members' ``twinflow`` namespace, by dotted name."""
    found: dict[str, Path] = {}
    for member in _members():
        for namespace in (member / "src" / "twinflow", member / "twinflow"):
            for init in sorted(namespace.glob("**/__init__.py")):
                parts = init.parent.relative_to(namespace.parent).parts
                found[".".join(parts)] = init.parent
    return found


def public_packages() -> list[str]:
    """The packages a user imports: no part of the dotted name starts with an underscore."""
    return sorted(
        name
        for name in _package_dirs()
        if not any(part.startswith("_") for part in name.split("."))
    )


def public_modules() -> list[str]:
    """The public modules of the public packages: their names count too."""
    return sorted(
        f"{package}.{path.stem}"
        for package, directory in _package_dirs().items()
        if not any(part.startswith("_") for part in package.split("."))
        for path in directory.glob("*.py")
        if not path.stem.startswith("_")
    )


def public_names(package: str) -> set[str]:
    """What ``package`` exports: its bound names without an underscore that are not modules."""
    module = importlib.import_module(package)
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def _reexported(package: str) -> set[str]:
    """The names ``package``'s ``__init__`` binds with ``from ... import Name as Name``."""
    source = (_package_dirs()[package] / "__init__.py").read_text(encoding="utf-8")
    return {
        alias.name
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }


@pytest.mark.parametrize("package", public_packages())
def test_the_import_lines_are_the_public_names(package: str) -> None:
    """A package exports exactly its ``import Name as Name`` lines: no ``__all__``, no lazy hook."""
    module = importlib.import_module(package)
    hooks = sorted(name for name in ("__all__", "__getattr__", "__dir__") if name in vars(module))
    if package == "twinflow.cli" and hooks == ["__getattr__"]:
        # The one hook allowed: the names the command package exported before the library
        # moved resolve for one release, each with a DeprecationWarning (`_moved`).
        with pytest.warns(DeprecationWarning, match="twinflow.agent"):
            _ = module.RunSpec
        hooks = []
    # A line may also name one of the package's public modules: not a name.
    names = {n for n in _reexported(package) if not isinstance(vars(module)[n], types.ModuleType)}
    assert ([], sorted(names)) == (hooks, sorted(public_names(package)))


def test_the_public_names_never_grow_past_the_ratchet() -> None:
    """The packages, their public subpackages and modules export at most the ratchet's names."""
    counts = {name: len(public_names(name)) for name in public_packages() + public_modules()}
    assert sum(counts.values()) <= MAX_PUBLIC_NAMES, counts


def test_no_name_is_exported_by_two_packages() -> None:
    """A public name has one home: no two packages export it."""
    homes: dict[str, list[str]] = defaultdict(list)
    for package in public_packages() + public_modules():
        for name in public_names(package):
            homes[name].append(package)
    assert {} == {name: where for name, where in sorted(homes.items()) if len(where) > 1}


def _class_defs(tree: ast.Module) -> list[tuple[str, ast.ClassDef, bool]]:
    """Each class of a module: its dotted path, its node, whether it is reachable by that path."""
    found: list[tuple[str, ast.ClassDef, bool]] = []

    def visit(node: ast.AST, prefix: str, reachable: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                path = f"{prefix}{child.name}"
                found.append((path, child, reachable))
                visit(child, f"{path}.", reachable)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, f"{prefix}{child.name}.<locals>.", False)
            else:
                visit(child, prefix, reachable)

    visit(tree, "", True)
    return found


def _is_exception(module: types.ModuleType, path: str, node: ast.ClassDef, reachable: bool) -> bool:
    """Whether the class derives from BaseException (a class inside a function: by its bases)."""
    if reachable:
        value: object = module
        for part in path.split("."):
            value = getattr(value, part)
        return isinstance(value, type) and issubclass(value, BaseException)
    namespace = {**vars(builtins), **vars(module)}
    for base in node.bases:
        try:
            value = eval(compile(ast.Expression(base), "<base>", "eval"), namespace)
        except NameError:
            continue
        if isinstance(value, type) and issubclass(value, BaseException):
            return True
    return False


def exception_classes() -> list[str]:
    """Every exception class defined under ``packages/*/src``, as ``module:qualified name``."""
    found: list[str] = []
    for package, directory in _package_dirs().items():
        for path in sorted(directory.glob("*.py")):
            if path.name == "__main__.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            classes = _class_defs(tree)
            if not classes:
                continue
            name = package if path.name == "__init__.py" else f"{package}.{path.stem}"
            module = importlib.import_module(name)
            found += [
                f"{name}:{qualified}"
                for qualified, node, reachable in classes
                if _is_exception(module, qualified, node, reachable)
            ]
    return found


def test_at_most_50_exception_classes() -> None:
    """At most 50 exception classes are defined in the packages' sources, in all."""
    found = exception_classes()
    assert len(found) <= MAX_EXCEPTION_CLASSES, found


def test_the_surface_counters_see_what_they_count() -> None:
    """The counters find this workspace's packages, names and errors (a test that can fail)."""
    packages = public_packages()
    errors = exception_classes()
    assert (True, True, True) == (
        "twinflow.trace" in packages,
        "TwinflowError" in public_names("twinflow.trace"),
        "twinflow._base._errors:TwinflowError" in errors,
    )
