"""The names `twinflow.cli` exported before the library moved keep working for one release."""

from __future__ import annotations

import pytest

import twinflow.agent
import twinflow.cli
from twinflow.cli._moved import MOVED

SAME_OBJECT = {
    "connect": (lambda: twinflow.cli.connect, twinflow.agent.connect),
    "replay_run": (lambda: twinflow.cli.replay_run, twinflow.agent.replay_run),
    "RunSpec": (lambda: twinflow.cli.RunSpec, twinflow.agent.RunSpec),
    "ModelSpec": (lambda: twinflow.cli.ModelSpec, twinflow.agent.ModelSpec),
    "PolicySpec": (lambda: twinflow.cli.PolicySpec, twinflow.agent.PolicySpec),
    "McpServerSpec": (lambda: twinflow.cli.McpServerSpec, twinflow.agent.McpServerSpec),
    "load_spec": (lambda: twinflow.cli.load_spec, twinflow.agent.load_spec),
    "SpecError": (lambda: twinflow.cli.SpecError, twinflow.agent.SpecError),
}


def test_the_command_package_lists_only_its_entry_point() -> None:
    """`dir(twinflow.cli)` shows `main` and no moved name."""
    assert ["main"] == [name for name in dir(twinflow.cli) if not name.startswith("_")]


def test_every_moved_name_is_checked_below() -> None:
    """The moved names this test resolves are the ones the shim knows."""
    assert set(MOVED) == {*SAME_OBJECT, "trace_path_of", "embedded_model"}


@pytest.mark.parametrize("name", SAME_OBJECT)
def test_an_old_import_warns_naming_the_new_one_and_gives_the_same_object(name: str) -> None:
    """`from twinflow.cli import RunSpec` warns `from twinflow.agent import RunSpec`."""
    old, new = SAME_OBJECT[name]
    with pytest.warns(DeprecationWarning, match=f"from twinflow.agent import {name}"):
        resolved = old()
    assert new is resolved


def test_trace_path_of_warns_naming_what_replaces_it() -> None:
    """A name with no object of its own any more still resolves, and says what to use."""
    with pytest.warns(DeprecationWarning, match="use twinflow.agent.RunResult.trace_path"):
        old = twinflow.cli.trace_path_of
    assert callable(old)


def test_embedded_model_warns_naming_what_replaces_it() -> None:
    """The embedded server's old helper resolves and points at the model string."""
    with pytest.warns(DeprecationWarning, match=r'use twinflow\.agent\.Agent\(model="embedded"\)'):
        old = twinflow.cli.embedded_model
    assert callable(old)


def test_a_name_never_exported_is_an_attribute_error() -> None:
    """Only the moved names resolve: a typo is still an AttributeError."""
    with pytest.raises(AttributeError, match="no attribute 'conect'"):
        twinflow.cli.conect  # noqa: B018  # the access is the test
