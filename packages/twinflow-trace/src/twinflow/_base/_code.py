"""User code from named directories: the one way twinflow imports a tool, a model or a scorer.

A run spec names its tools and output type, a dataset its custom scorers and schema models, by
dotted path (``package.module:name``). `resolve_dotted` imports one from the directories the
caller names (a spec's or a dataset's own directory, those a run directory recorded), then
from the installed packages, and never implicitly from the current directory: a file dropped
there (or in a received bundle) is not code the user asked for. `importing_from` is the same
search order for a block, for a whole command whose tools may import their siblings when they
run. The import path is restored when the block ends, keeping what the imported code added.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from twinflow._base._errors import UserError
from twinflow._base._suggest import did_you_mean

__all__ = ["importing_from", "module_file", "resolve_dotted", "split_dotted"]


def _current_directory_entries() -> set[str]:
    """The ``sys.path`` entries that mean the current directory (``''`` under ``python -m``)."""
    return {"", ".", os.getcwd()}


def _named(directories: Sequence[str | os.PathLike[str]]) -> list[str]:
    return list(dict.fromkeys(str(Path(d).resolve()) for d in directories))


_open_blocks: list[list[str]] = []
"""The directories of the `importing_from` blocks open now, outermost first (for messages)."""


def _outer() -> list[str]:
    return [d for named in _open_blocks for d in named]


@contextlib.contextmanager
def importing_from(directories: Sequence[str | os.PathLike[str]] = ()) -> Iterator[None]:
    """Imports in the block look in ``directories`` first, then the installed packages.

    The current directory is left out of ``sys.path`` for the block unless it is one of
    ``directories``. When the block ends ``sys.path`` is what it was, plus any entry the
    imported code added itself.

    Args:
        directories: Where the user's code lives, searched in this order.
    """
    named = _named(directories)
    saved = list(sys.path)
    hidden = _current_directory_entries() - set(named)
    if saved[: len(named)] == named and not hidden.intersection(saved):
        # Already so (inside a command's block): nothing to change, so calls from the threads
        # of a run (a scorer resolved per case) never rewrite sys.path under each other.
        yield
        return
    sys.path[:] = [*named, *(p for p in saved if p not in hidden and p not in named)]
    inside = list(sys.path)
    _open_blocks.append(named)
    try:
        yield
    finally:
        _open_blocks.remove(named)
        added = [p for p in sys.path if p not in inside and p not in saved]
        sys.path[:] = [*added, *saved]


def split_dotted(path: str, error: Callable[[str], UserError] = UserError) -> tuple[str, str]:
    """``package.module:name`` (or ``package.module.name``) as (module, attribute path).

    Raises:
        UserError: As ``error``: ``path`` is not a dotted path.
    """
    module_name, sep, attribute = path.partition(":")
    if not sep:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise error(f"{path!r} is not a dotted path: write 'package.module:name'")
    return module_name, attribute


def _searched(named: Sequence[str]) -> str:
    first = ", ".join(named)
    where = f"{first}, then the installed packages" if named else "the installed packages"
    return f"searched {where}; never the current directory"


def resolve_dotted(
    path: str,
    directories: Sequence[str | os.PathLike[str]] = (),
    error: Callable[[str], UserError] = UserError,
) -> object:
    """Import ``package.module:attribute`` (or ``package.module.attribute``) and return it.

    The one resolver of the workspace's dotted paths: a dataset's scorers and schema models,
    a run spec's tools and output type.

    Args:
        path: The dotted path.
        directories: Where to look first (`importing_from`); then the installed packages.
        error: Makes the caller's error (a scorer's, a spec's) from one line.

    Raises:
        UserError: As ``error``: not a dotted path, the module or attribute does not exist (naming the
            directories searched), or importing the module raised.
    """
    module_name, attribute = split_dotted(path, error)
    with importing_from(directories):
        try:
            # gate: loads user code (the module the user named; scripts/checks/determinism)
            target: object = importlib.import_module(module_name)
        except ImportError as exc:
            raise error(
                f"cannot import {module_name!r} for {path!r}: {exc} "
                f"({_searched(list(dict.fromkeys([*_named(directories), *_outer()])))}); is it "
                "installed in this "
                "environment?"
            ) from exc
        except Exception as exc:
            # The user's module itself is broken (a syntax error, code that raises at import):
            # a mistake in their code to fix, reported in one line like a missing module.
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise error(f"cannot import {module_name!r} for {path!r}: {reason}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            known = [name for name in dir(target) if not name.startswith("_")]
            raise error(
                f"{module_name!r} has no attribute {attribute!r} (from {path!r})"
                + did_you_mean(part, known)
            ) from None
    return target


def module_file(
    name: str,
    directories: Sequence[str | os.PathLike[str]] = (),
    error: type[UserError] = UserError,
) -> Path | None:
    """The source file importing module ``name`` would run, found without running it.

    Looked up as `resolve_dotted` imports: ``directories`` first, then the installed packages.
    Finding ``a.b`` imports its parent ``a`` (a caller checking files checks parents first).

    Returns:
        The file, or None for a module without one of its own (a namespace package, a built-in).

    Raises:
        UserError: As ``error``: the module is not found (naming the directories searched), or importing
            a parent package raised.
    """
    with importing_from(directories):
        try:
            # gate: loads user code (finds the module the user named; its parents are imported)
            found = importlib.util.find_spec(name)
        except ImportError:
            found = None
        except Exception as exc:  # a parent package's own code raised
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise error(f"cannot import {name!r}: {reason}") from exc
        if found is None:
            searched = _searched(list(dict.fromkeys([*_named(directories), *_outer()])))
            raise error(f"cannot find module {name!r} ({searched})")
    if found.origin is None or not found.has_location:
        return None
    return Path(found.origin)
