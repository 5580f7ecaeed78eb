"""The runtime nondeterminism guard used during replay.

The static gate (ruff's banned-api rule) sees imports and attribute access in source text.
It cannot see ``getattr(time, "time")()``, ``importlib.import_module("random")`` or a
third-party library reaching the clock on a tool's behalf. During replay every such entry
point is swapped, for the duration of a ``with nondeterminism_guard():`` block, for a
sentinel that raises :class:`NondeterminismError` unless the call comes from
``twinflow.kernel`` (the one legitimate home of time, randomness, network and processes).

"Comes from" means: walking outward from the call, the first frame whose module is not part
of the standard library (or this guard) belongs to ``twinflow.kernel``. So the kernel's
transport may open a socket through ``urllib.request``, while a tool that calls
``urllib.request.urlopen`` directly is refused.

The guard patches module attributes, so it catches every lookup that goes through the module
(``time.time()``, ``getattr(time, "time")()``, a module imported later by name). A name bound
before the guard started (``from time import time`` at import time) keeps the original
function; the static gate is what holds that form.
"""

from __future__ import annotations

import os
import random
import sys
import sysconfig
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, ModuleType
from typing import Any, Final

from twinflow.kernel._errors import KernelError

__all__ = [
    "GUARDED_ENTRY_POINTS",
    "GuardRecord",
    "NondeterminismError",
    "nondeterminism_guard",
]


class NondeterminismError(KernelError, RuntimeError):
    """A nondeterministic entry point was reached from outside the kernel during replay.

    Attributes:
        entry_point: the dotted name that was called, e.g. ``"time.time"``.
        caller: the module that made the call.
    """

    def __init__(self, entry_point: str, caller: str) -> None:
        self.entry_point = entry_point
        self.caller = caller
        super().__init__(
            f"{caller} called {entry_point} during replay: replayed code must receive time, "
            "randomness, ids and network through twinflow.kernel ports (Clock, Ids, Transport) "
            "so a replay sees the recorded values; inject the port instead of calling it directly"
        )


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths["stdlib"], paths["platstdlib"]}
    return tuple(sorted(os.path.normcase(os.path.realpath(d)) + os.sep for d in dirs))


_STDLIB_DIRS: Final = _stdlib_dirs()
_THIS_FILE: Final = os.path.normcase(os.path.realpath(__file__))

# (module, attribute) pairs swapped while the guard is active.
GUARDED_ENTRY_POINTS: Final[tuple[tuple[str, str], ...]] = (
    ("time", "time"),
    ("time", "time_ns"),
    ("time", "monotonic"),
    ("time", "monotonic_ns"),
    ("time", "perf_counter"),
    ("time", "perf_counter_ns"),
    ("time", "sleep"),
    ("random", "random"),
    ("random", "randint"),
    ("random", "randrange"),
    ("random", "choice"),
    ("random", "choices"),
    ("random", "shuffle"),
    ("random", "sample"),
    ("random", "uniform"),
    ("random", "getrandbits"),
    ("random", "randbytes"),
    ("random", "seed"),
    ("uuid", "uuid1"),
    ("uuid", "uuid4"),
    ("os", "urandom"),
    ("os", "getrandom"),
    ("socket", "socket"),
    ("socket", "create_connection"),
    ("socket", "getaddrinfo"),
    ("urllib.request", "urlopen"),
    ("urllib.request", "build_opener"),
)

_MODULES: Final[dict[str, ModuleType]] = {"time": time, "random": random, "uuid": uuid, "os": os}


def _module(name: str) -> ModuleType:
    found = _MODULES.get(name)
    if found is not None:
        return found
    # socket and urllib.request are imported on demand: importing them costs start-up time
    # for every user of the agent package, and the guard only needs them while active.
    __import__(name)
    return sys.modules[name]


def _is_stdlib_or_guard(frame: FrameType) -> bool:
    filename = frame.f_code.co_filename
    if filename.startswith("<"):
        # Frozen stdlib modules (importlib's bootstrap) have no real file.
        return filename.startswith("<frozen ")
    real = os.path.normcase(os.path.realpath(filename))
    if real == _THIS_FILE:
        return True
    return real.startswith(_STDLIB_DIRS) and "site-packages" not in real


def _calling_module(frame: FrameType | None) -> str:
    while frame is not None and _is_stdlib_or_guard(frame):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) else "<unknown>"


def _from_kernel(module: str) -> bool:
    return module == "twinflow.kernel" or module.startswith("twinflow.kernel.")


class GuardRecord:
    """What the guard refused while it was active.

    Code under replay may catch the error (the agent turns a raising tool into an error
    result the model sees), so the harness reads the refusals from here as well.
    """

    def __init__(self) -> None:
        self.violations: list[NondeterminismError] = []
        """Every refusal, in order."""


def _sentinel(dotted: str, original: Callable[..., Any], record: GuardRecord) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        caller = _calling_module(sys._getframe(1))
        if _from_kernel(caller):
            return original(*args, **kwargs)
        error = NondeterminismError(dotted, caller)
        record.violations.append(error)
        raise error

    guarded.__name__ = getattr(original, "__name__", dotted.rpartition(".")[2])
    guarded.__qualname__ = guarded.__name__
    guarded.__doc__ = f"{dotted}, refused outside twinflow.kernel while replaying."
    guarded.__wrapped__ = original  # type: ignore[attr-defined]  # functools convention, read by inspect
    return guarded


@contextmanager
def nondeterminism_guard() -> Iterator[GuardRecord]:
    """Refuse nondeterministic entry points reached from outside the kernel.

    Every attribute listed in :data:`GUARDED_ENTRY_POINTS` is replaced while the block runs
    and restored when it exits, whatever way it exits. Not re-entrant across threads: the
    replay harness runs the agent on the calling thread.

    Yields:
        The record of refusals, complete when the block exits.

    Raises:
        NondeterminismError: from inside the block, when guarded code is reached.
    """
    record = GuardRecord()
    saved: list[tuple[ModuleType, str, Any]] = []
    try:
        for module_name, attribute in GUARDED_ENTRY_POINTS:
            module = _module(module_name)
            original = getattr(module, attribute, None)
            if original is None:  # e.g. os.getrandom is Linux-only
                continue
            saved.append((module, attribute, original))
            setattr(module, attribute, _sentinel(f"{module_name}.{attribute}", original, record))
        yield record
    finally:
        for module, attribute, original in reversed(saved):
            setattr(module, attribute, original)
