"""The runtime nondeterminism guard: what the static gate cannot see is refused at run time."""

from __future__ import annotations

import contextlib
import importlib
import os
import time

import pytest

from twinflow.kernel import (
    GUARDED_ENTRY_POINTS,
    NondeterminismError,
    SystemClock,
    nondeterminism_guard,
)


def test_getattr_on_time_is_refused_and_names_the_entry_point_and_caller() -> None:
    """`getattr(time, "time")()`, invisible to ruff, raises NondeterminismError under the guard."""
    name = "time"  # a computed attribute name, as evasive code would use
    with nondeterminism_guard(), pytest.raises(NondeterminismError) as caught:
        getattr(time, name)()
    assert "time.time" == caught.value.entry_point
    assert __name__ == caught.value.caller


def test_importlib_reached_modules_are_refused() -> None:
    """A module reached through importlib is the same module object, so it is guarded too."""
    with nondeterminism_guard(), pytest.raises(NondeterminismError, match=r"random\.random"):
        importlib.import_module("random").random()
    with nondeterminism_guard(), pytest.raises(NondeterminismError, match=r"uuid\.uuid4"):
        importlib.import_module("uuid").uuid4()
    with nondeterminism_guard(), pytest.raises(NondeterminismError, match=r"os\.urandom"):
        os.urandom(4)


def test_network_entry_points_are_refused_outside_the_kernel() -> None:
    """socket and urllib.request entry points raise when called from outside the kernel."""
    socket_module = importlib.import_module("socket")
    request_module = importlib.import_module("urllib.request")
    with nondeterminism_guard(), pytest.raises(NondeterminismError, match=r"socket\.socket"):
        socket_module.socket()
    with nondeterminism_guard(), pytest.raises(NondeterminismError, match="urlopen"):
        request_module.urlopen("http://127.0.0.1:9/")


def test_calls_made_by_the_kernel_are_allowed() -> None:
    """The kernel's own adapters keep working: it is the one legitimate home of time."""
    with nondeterminism_guard() as record:
        first = SystemClock().monotonic()
        second = SystemClock().monotonic()
    assert second >= first
    assert [] == record.violations


def test_refusals_are_recorded_even_when_the_caller_swallows_them() -> None:
    """Replayed code may catch the error; the record still holds it for the harness."""
    with nondeterminism_guard() as record, contextlib.suppress(NondeterminismError):
        time.perf_counter()
    assert ["time.perf_counter"] == [v.entry_point for v in record.violations]


def test_everything_is_restored_on_exit_even_after_an_error() -> None:
    """Leaving the block, normally or by an exception, puts every original back."""
    originals = {
        (m, a): getattr(importlib.import_module(m), a, None) for m, a in GUARDED_ENTRY_POINTS
    }
    with pytest.raises(ZeroDivisionError), nondeterminism_guard():
        _ = 1 / 0
    restored = {
        (m, a): getattr(importlib.import_module(m), a, None) for m, a in GUARDED_ENTRY_POINTS
    }
    assert originals == restored
    assert isinstance(time.time(), float)
