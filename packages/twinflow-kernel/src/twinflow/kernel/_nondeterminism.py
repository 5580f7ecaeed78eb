"""The runtime nondeterminism guard used during replay.

The static gate (ruff's banned-api rule) sees imports and attribute access in source text.
It cannot see ``getattr(time, "time")()``, ``importlib.import_module("random")`` or a
third-party library reaching the clock on a tool's behalf. During replay every entry point the
banned list (``banned.toml`` beside this module, the one table; docs/adr/0004) names under
``runtime`` is refused, for the duration of a ``with nondeterminism_guard():`` block, with
:class:`NondeterminismError` unless the call comes from ``twinflow.kernel`` (the one
legitimate home of time, randomness, network and processes). Three mechanisms, one per kind:

- ``call``: a module function or a Python class's method is swapped for a refusing wrapper.
  A method is patched on its class, so subclasses and instances made at any time see it.
- ``classmethod``: a C type's clock constructor (``datetime.datetime.now``). C types cannot be
  patched, so the module's class is swapped for a subclass whose method refuses; classes and
  instances made from the module while the guard is active get it.
- ``audit``: a CPython audit event (``socket.__new__``, ``subprocess.Popen``, ``os.fork``...).
  An audit hook raising stops the operation before the socket or process exists, however it
  was reached (a subclass, a private C module, asyncio, multiprocessing). Audit hooks cannot be
  removed: the hook is added once, on first use, and does nothing while no guard is active.

"Comes from" means: walking outward from the call, the first frame whose module is not part
of the standard library (or this guard) belongs to ``twinflow.kernel``. So the kernel's
transport may open a socket through ``http.client``, while a tool that calls
``urllib.request.urlopen`` directly is refused. Standard-library bookkeeping named in the
table's ``allowed_caller`` rows (a log record's timestamp, an event loop's wake-up socket pair)
is let through, because it never reaches a replayed value.

What it cannot see: a name bound before the guard started (``from time import time``, a class
or instance made from ``datetime.datetime`` before the block) keeps the original; C extensions
that read the clock or entropy themselves. The static gate holds the first; the second is why
third-party libraries are banned by name.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import sysconfig
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from types import FrameType
from typing import Any, Final, Literal

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
            "randomness, ids, network and processes through twinflow.kernel ports (Clock, Ids, "
            "Transport, Launcher) so a replay sees the recorded values; inject the port instead "
            "of calling it directly"
        )


Kind = Literal["call", "classmethod", "audit"]
_KINDS: Final[tuple[Kind, ...]] = ("call", "classmethod", "audit")


@dataclass(frozen=True)
class _Target:
    kind: Kind
    name: str
    unless_argument: int | None
    paths: tuple[str, ...] = ()
    """For an ``open`` audit event: the files (or folders) it refuses; empty: every event."""


def _load_table() -> tuple[tuple[_Target, ...], tuple[tuple[str, str], ...]]:
    text = resources.files("twinflow.kernel").joinpath("banned.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text)
    targets: list[_Target] = []
    for row in table["banned"]:
        for entry in row.get("runtime", ()):
            kind: Kind
            (kind,) = (k for k in _KINDS if k in entry)
            targets.append(
                _Target(
                    kind, entry[kind], entry.get("unless_argument"), tuple(entry.get("paths", ()))
                )
            )
    allowed = tuple((row["module"], row["function"]) for row in table.get("allowed_caller", ()))
    return tuple(targets), allowed


_TARGETS, _ALLOWED_CALLERS = _load_table()

GUARDED_ENTRY_POINTS: Final[tuple[tuple[str, str], ...]] = tuple((t.kind, t.name) for t in _TARGETS)
"""Every (kind, name) the guard refuses, derived from ``banned.toml``'s ``runtime`` entries."""

# event -> the paths it is refused for (empty: always).
_AUDIT_EVENTS: Final = {t.name: t.paths for t in _TARGETS if t.kind == "audit"}


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths["stdlib"], paths["platstdlib"]}
    return tuple(sorted(os.path.normcase(os.path.realpath(d)) + os.sep for d in dirs))


_STDLIB_DIRS: Final = _stdlib_dirs()
_THIS_FILE: Final = os.path.normcase(os.path.realpath(__file__))


@functools.lru_cache(maxsize=4096)
def _is_stdlib_or_guard_file(filename: str) -> bool:
    if filename.startswith("<"):
        # Frozen stdlib modules (importlib's bootstrap) have no real file.
        return filename.startswith("<frozen ")
    real = os.path.normcase(os.path.realpath(filename))
    if real == _THIS_FILE:
        return True
    return real.startswith(_STDLIB_DIRS) and "site-packages" not in real


def _allowed_bookkeeping(frame: FrameType) -> bool:
    module = frame.f_globals.get("__name__")
    for allowed_module, function in _ALLOWED_CALLERS:
        if module == allowed_module and function in ("*", frame.f_code.co_name):
            return True
    return False


def _verdict(frame: FrameType | None) -> tuple[bool, str]:
    """(allowed, calling module) for a guarded call whose innermost frame is `frame`."""
    # Walk out through the standard library to the first caller outside it; an allowed
    # bookkeeping caller (banned.toml's [[allowed_caller]] rows) on the way, or as that first
    # caller, is let through.
    while frame is not None:
        if _allowed_bookkeeping(frame):
            return True, str(frame.f_globals.get("__name__"))
        if not _is_stdlib_or_guard_file(frame.f_code.co_filename):
            break
        frame = frame.f_back
    if frame is None:
        return False, "<unknown>"
    name = frame.f_globals.get("__name__")
    module = name if isinstance(name, str) else "<unknown>"
    return module == "twinflow.kernel" or module.startswith("twinflow.kernel."), module


class GuardRecord:
    """What the guard refused while it was active.

    Code under replay may catch the error (the agent turns a raising tool into an error
    result the model sees), so the harness reads the refusals from here as well.
    """

    def __init__(self) -> None:
        self.violations: list[NondeterminismError] = []
        """Every refusal, in order."""


# The records of the guards now active, innermost last: what the audit hook reports to.
_active: list[GuardRecord] = []
_audit_hook_added = False


def _refuse(dotted: str, frame: FrameType | None, record: GuardRecord) -> None:
    allowed, caller = _verdict(frame)
    if allowed:
        return
    error = NondeterminismError(dotted, caller)
    record.violations.append(error)
    raise error


def _named_path(args: tuple[object, ...], paths: tuple[str, ...]) -> str | None:
    """The real path of an ``open`` event when it is (or is under) one of `paths`, links
    followed; None otherwise."""
    path = args[0] if args else None
    if not isinstance(path, (str, bytes)):
        return None  # a file descriptor: what it names was opened, and judged, before
    try:
        real = os.path.realpath(os.fsdecode(path))
    except (OSError, ValueError):
        return None
    hit = any(real == p or real.startswith(p.rstrip("/") + "/") for p in paths)
    return real if hit else None


def _audit_hook(event: str, args: tuple[object, ...]) -> None:
    if not _active:
        return
    paths = _AUDIT_EVENTS.get(event)
    if paths is None:
        return
    what = event
    if paths:
        real = _named_path(args, paths)
        if real is None:
            return
        what = f"{event}({real!r})"
    _refuse(what, sys._getframe(1), _active[-1])


def _argument_given(args: tuple[Any, ...], kwargs: dict[str, Any], index: int) -> bool:
    if len(args) > index:
        return args[index] is not None
    return any(value is not None for value in kwargs.values())


def _wrapper(
    dotted: str, original: Callable[..., Any], record: GuardRecord, unless_argument: int | None
) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if unless_argument is None or not _argument_given(args, kwargs, unless_argument):
            _refuse(dotted, sys._getframe(1), record)
        return original(*args, **kwargs)

    guarded.__name__ = getattr(original, "__name__", dotted.rpartition(".")[2])
    guarded.__qualname__ = getattr(original, "__qualname__", guarded.__name__)
    guarded.__doc__ = f"{dotted}, refused outside twinflow.kernel while replaying."
    guarded.__wrapped__ = original  # type: ignore[attr-defined]  # functools convention, read by inspect
    return guarded


def _owner(dotted: str) -> tuple[Any, str]:
    """The object holding the last attribute of `dotted` (a module or a class), and its name."""
    path, _, attribute = dotted.rpartition(".")
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            owner = getattr(owner, name)
        return owner, attribute
    raise ImportError(f"no module in {dotted!r}")


def _guarded_class(cls: type, methods: dict[str, object]) -> type:
    return type(cls.__name__, (cls,), {"__module__": cls.__module__, **methods})


@contextmanager
def nondeterminism_guard() -> Iterator[GuardRecord]:
    """Refuse nondeterministic entry points reached from outside the kernel.

    Every ``call`` and ``classmethod`` target of the banned list is swapped while the block
    runs and restored when it exits, whatever way it exits; every ``audit`` target is refused
    by an audit hook that is silent outside a guard. Not re-entrant across threads: the
    replay harness runs the agent on the calling thread.

    Yields:
        The record of refusals, complete when the block exits.

    Raises:
        NondeterminismError: from inside the block, when guarded code is reached.
    """
    global _audit_hook_added
    record = GuardRecord()
    saved: list[tuple[Any, str, Any]] = []
    classmethods: dict[tuple[Any, str], dict[str, object]] = {}
    try:
        for target in _TARGETS:
            if target.kind == "audit":
                continue
            try:
                owner, attribute = _owner(target.name)
            except (ImportError, AttributeError):  # a module or name this platform lacks
                continue
            if target.kind == "call":
                original = vars(owner).get(attribute) if isinstance(owner, type) else None
                if original is None:
                    original = getattr(owner, attribute, None)
                if original is None:  # e.g. os.getrandom is Linux-only
                    continue
                wrapper = _wrapper(target.name, original, record, target.unless_argument)
                saved.append((owner, attribute, original))
                setattr(owner, attribute, wrapper)
            else:
                holder, class_name = _owner(target.name.rpartition(".")[0])
                function = getattr(owner, attribute)
                refusing = _wrapper(target.name, function, record, None)
                classmethods.setdefault((holder, class_name), {})[attribute] = classmethod(
                    lambda _cls, *a, _f=refusing, **k: _f(*a, **k)
                )
        for (holder, class_name), methods in classmethods.items():
            original_class = getattr(holder, class_name)
            saved.append((holder, class_name, original_class))
            setattr(holder, class_name, _guarded_class(original_class, methods))
        if not _audit_hook_added:
            sys.addaudithook(_audit_hook)
            _audit_hook_added = True
        _active.append(record)
        yield record
    finally:
        if record in _active:
            _active.remove(record)
        for owner, attribute, original in reversed(saved):
            setattr(owner, attribute, original)
