"""One lazy-export helper for every twinflow package's ``__init__`` (PEP 562).

A package that resolves its public names on first access (so that importing it does not build
pydantic's model machinery, or load the agent to print a command's help) hands this helper a
map from each private module to the names it defines, and takes back the module's
``__getattr__`` and ``__dir__``. The trace leaf holds it because it is the lowest layer, stdlib
only, and every package depends on it (ADR 0074). Whether each package's ``__all__`` matches
what the package really exports is checked for all of them at once, from the modules
themselves, by ``tests/gates/test_exported_members.py``.

The map is where a package's lazy names are written; its ``__all__`` is derived from it and
from the public names already bound when the helper is called (the eager ones, such as its
errors). For type checkers, the package imports each name under ``if TYPE_CHECKING:`` in the
re-export form ``from pkg._module import Name as Name``, which is what marks it public to them
without a literal ``__all__``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from importlib import import_module
from types import ModuleType

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: MutableMapping[str, object],
    modules: Mapping[str, Iterable[str]],
) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """The ``__getattr__``, ``__dir__`` and ``__all__`` of a package whose names resolve lazily.

    Use it as the package's last statement::

        __getattr__, __dir__, __all__ = lazy_exports(
            globals(), {"_clock": ("FixedClock", "SystemClock")}
        )

    Args:
        namespace: The package's ``globals()``: its ``__name__`` names the package, and each
            name resolved is cached in it, so ``__getattr__`` runs once per name.
        modules: Each private module (relative to the package, e.g. ``"_clock"``) and the
            public names it defines.

    Returns:
        ``__getattr__``, importing the module that defines a name on its first access and
        raising `AttributeError` for any other name; ``__dir__``, listing the package's
        attributes with the names not yet resolved; and ``__all__``, the sorted public names:
        those of the map and the public names (not modules) already in ``namespace``.

    Raises:
        ValueError: A name is given for two modules or is bound already, or a module is not a private submodule
            name (``_clock``, not ``os`` or ``_a.b``).
    """
    package = str(namespace["__name__"])
    where: dict[str, str] = {}
    for module, names in modules.items():
        if not (module.startswith("_") and module.isidentifier()):
            # The determinism and layers gates read each map as imports of the package's own
            # private submodules; a dotted or public name would reach past them.
            raise ValueError(
                f"{package}: {module!r} is not a private submodule name (like '_clock'); "
                "lazy_exports imports only the package's own private modules"
            )
        for name in names:
            if where.setdefault(name, module) != module:
                raise ValueError(
                    f"{package}: {name!r} is exported from both {where[name]!r} and {module!r}; "
                    "name each public name once"
                )

    def __getattr__(name: str) -> object:
        """Import the private module that defines `name` on first access, then cache the name."""
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        """The package's attributes, the not yet resolved public names included."""
        return sorted({*namespace, *where})

    bound = [
        name
        for name, value in namespace.items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    ]
    for name in bound:
        if name in where:
            raise ValueError(
                f"{package}: {name!r} is bound already and given for {where[name]!r} too; "
                "name each public name once"
            )
    return __getattr__, __dir__, sorted({*bound, *where})
