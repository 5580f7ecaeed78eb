"""`lazy_exports`: the one PEP 562 hook pair (and ``__all__``) behind every lazy twinflow package."""

from __future__ import annotations

import pytest

from twinflow._base._lazy import lazy_exports


def _package() -> dict[str, object]:
    """A namespace standing for twinflow._base, whose ``_lazy`` module defines ``lazy_exports``."""
    return {"__name__": "twinflow._base"}


def test_a_name_resolves_on_first_access_and_is_cached() -> None:
    """The first access imports the defining module and stores the name in the namespace."""
    namespace = _package()
    getattr_, _, _ = lazy_exports(namespace, {"_lazy": ("lazy_exports",)})
    assert (lazy_exports, lazy_exports) == (getattr_("lazy_exports"), namespace["lazy_exports"])


def test_dir_lists_the_names_not_yet_resolved() -> None:
    """``dir`` shows every lazy name before any is resolved, with the namespace's own."""
    namespace = _package()
    _, dir_, _ = lazy_exports(namespace, {"_lazy": ("lazy_exports",)})
    assert ["__name__", "lazy_exports"] == dir_()


def test_all_is_the_map_and_the_public_names_bound_already() -> None:
    """``__all__`` is derived: the map's names and the bound public ones, not modules or _names."""
    namespace = {**_package(), "Bound": ValueError, "_private": 1, "pytest": pytest}
    _, _, all_ = lazy_exports(namespace, {"_lazy": ("lazy_exports",)})
    assert ["Bound", "lazy_exports"] == all_


def test_a_name_bound_and_in_the_map_is_refused() -> None:
    """A name bound already and given in the map too would be written twice: refused."""
    with pytest.raises(ValueError, match="'X' is bound already and given for '_a' too"):
        lazy_exports({**_package(), "X": 1}, {"_a": ("X",)})


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name no module was given for is refused as a module refuses it."""
    getattr_, _, _ = lazy_exports(_package(), {"_lazy": ("lazy_exports",)})
    with pytest.raises(AttributeError, match=r"module 'twinflow\._base' has no attribute 'Nope'"):
        getattr_("Nope")


def test_a_name_given_for_two_modules_is_refused() -> None:
    """Each public name comes from one module."""
    with pytest.raises(ValueError, match="'X' is exported from both '_a' and '_b'"):
        lazy_exports(_package(), {"_a": ("X",), "_b": ("X",)})


@pytest.mark.parametrize("module", ["os", "_a.b", "..x", "_x y"])
def test_only_private_submodule_names_are_taken(module: str) -> None:
    """A public, dotted or relative module name would reach past the package: refused."""
    with pytest.raises(ValueError, match="not a private submodule name"):
        lazy_exports(_package(), {module: ("X",)})
