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
of the standard library (or this guard) runs a file the ``twinflow-kernel`` distribution
installed (its own file list, not a folder or a ``__name__``). So the kernel's transport may
open a socket through ``http.client``, while a tool that calls ``urllib.request.urlopen``
directly is refused. Standard-library bookkeeping named in the table's ``allowed_caller`` rows
(a log record's timestamp, an event loop's wake-up socket pair) is let through for the entries
its row names and only when it asked itself; it lends nothing to a callback it runs
(``loop.call_soon(time.time)``), which is judged further out (docs/adr/0166).

What it cannot see: a name bound before the guard started (``from time import time``, a class
or instance made from ``datetime.datetime`` before the block) keeps the original; C extensions
that read the clock or entropy themselves. The static gate holds the first; the second is why
third-party libraries are banned by name.
"""

from __future__ import annotations

import _thread
import fnmatch
import functools
import gc
import importlib
import os
import sys
import sysconfig
import tomllib
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from types import FrameType
from typing import Any, Final, Literal, ParamSpec, TypeVar

from twinflow.kernel._errors import NondeterminismError

__all__ = [
    "GUARDED_ENTRY_POINTS",
    "GuardRecord",
    "nondeterminism_guard",
]


_P = ParamSpec("_P")
_R = TypeVar("_R")


Kind = Literal["call", "classmethod", "audit"]
_KINDS: Final[tuple[Kind, ...]] = ("call", "classmethod", "audit")


@dataclass(frozen=True)
class _Target:
    kind: Kind
    name: str
    unless_argument: int | None
    paths: tuple[str, ...] = ()
    """For an ``open`` audit event: the files (or folders, or ``fnmatch`` patterns) it
    refuses; empty: every event."""
    if_argument: tuple[int, str] | None = None
    """Refused only when this argument (position, keyword) is given: a timeout is a real wait."""
    unless_instance: str | None = None
    """A C type's method refused unless its instance is of this class (``_random.Random``'s
    draws pass for ``random.Random``, whose seeding the guard sees; not for the C type itself)."""


@dataclass(frozen=True)
class _Bookkeeping:
    """An ``[[allowed_caller]]`` row: a standard-library function that may reach `entries`
    itself, for its own bookkeeping; it lends nothing to what it calls on anyone's behalf."""

    module: str
    function: str
    entries: frozenset[str]


def _load_table() -> tuple[tuple[_Target, ...], tuple[_Bookkeeping, ...]]:
    text = resources.files("twinflow.kernel").joinpath("banned.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text)
    targets: list[_Target] = []
    for row in table["banned"]:
        for entry in row.get("runtime", ()):
            kind: Kind
            (kind,) = (k for k in _KINDS if k in entry)
            given = entry.get("if_argument")
            targets.append(
                _Target(
                    kind,
                    entry[kind],
                    entry.get("unless_argument"),
                    tuple(entry.get("paths", ())),
                    None if given is None else (int(given[0]), str(given[1])),
                    entry.get("unless_instance"),
                )
            )
    allowed = tuple(
        _Bookkeeping(row["module"], row["function"], frozenset(row["entries"]))
        for row in table.get("allowed_caller", ())
    )
    return tuple(targets), allowed


_TARGETS, _ALLOWED_CALLERS = _load_table()

GUARDED_ENTRY_POINTS: Final[tuple[tuple[str, str], ...]] = tuple((t.kind, t.name) for t in _TARGETS)
"""Every (kind, name) the guard refuses, derived from ``banned.toml``'s ``runtime`` entries."""


def _audit_events() -> dict[str, tuple[str, ...]]:
    """event -> the paths it is refused for (empty: always); rows naming the same event (an
    entropy device, a clock file: both ``open``) add their paths up."""
    events: dict[str, tuple[str, ...]] = {}
    for target in _TARGETS:
        if target.kind == "audit":
            events[target.name] = events.get(target.name, ()) + target.paths
    return events


_AUDIT_EVENTS: Final = _audit_events()


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


def _frame_module(frame: FrameType) -> str:
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) else "<unknown>"


def _bookkeeping(frame: FrameType, entry: str, between: list[str]) -> bool:
    """Whether `frame` is an allowed caller reaching `entry` for its own bookkeeping: its row
    names the entry, and every frame between it and the entry point (`between`) is its own
    module's or the entry point's. A callback it runs (``Handle._run`` under an event loop's
    step, a handler a logger calls) is someone else's asking, judged further out."""
    module = _frame_module(frame)
    code = frame.f_code
    entry_module = entry.partition(".")[0]
    for row in _ALLOWED_CALLERS:
        named = getattr(code, "co_qualname", code.co_name) if "." in row.function else code.co_name
        if module != row.module or row.function != named or entry not in row.entries:
            continue
        if all(inner in (row.module, entry_module) for inner in between):
            return _runs_its_module(frame)
    return False


def _runs_its_module(frame: FrameType) -> bool:
    """Whether the frame's globals are the namespace of the module its ``__name__`` names,
    imported from the very file its code came from (a module may set any ``__name__``)."""
    filename = frame.f_code.co_filename
    name = frame.f_globals.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    loaded_from = getattr(module, "__file__", None)
    return (
        module is not None
        and vars(module) is frame.f_globals
        and isinstance(loaded_from, str)
        and not filename.startswith("<")
        and _real(loaded_from) == _real(filename)
    )


_KERNEL_DISTRIBUTION: Final = "twinflow-kernel"


@functools.lru_cache(maxsize=1)
def _kernel_files() -> frozenset[str]:
    """The real paths of the Python files the kernel's distribution installed.

    Read from the distribution's own file list (``RECORD``), never from a folder: a module
    another distribution ships into ``twinflow/kernel/`` is not the kernel. An editable
    install lists a ``.pth`` naming its source root instead of the files; the distribution's
    files are then the Python files under that root (the member's own ``src`` folder, which
    holds the kernel package alone). No distribution: no kernel, and every call is refused.
    """
    from importlib import metadata  # the kernel's own: who owns which file

    try:
        distribution = metadata.distribution(_KERNEL_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return frozenset()
    return _listed_python_files(distribution)


def _listed_python_files(distribution: Any) -> frozenset[str]:
    """The real paths of the Python files an installed distribution lists (see _kernel_files)."""
    found: set[str] = set()
    for listed in distribution.files or ():
        path = str(distribution.locate_file(listed))
        if listed.suffix == ".py":
            found.add(_real(path))
        elif listed.suffix == ".pth" and os.path.isfile(path):
            with open(path, encoding="utf-8") as lines:
                roots = [line.strip() for line in lines if line.strip()]
            for root in roots:
                if root.startswith(("#", "import ")) or not os.path.isdir(root):
                    continue
                for folder, _, names in os.walk(root):
                    found.update(_real(os.path.join(folder, n)) for n in names if n.endswith(".py"))
    return frozenset(found)


@functools.lru_cache(maxsize=4096)
def _real(filename: str) -> str:
    return os.path.normcase(os.path.realpath(filename))


def _is_kernel_frame(frame: FrameType) -> bool:
    """Whether the frame runs code loaded from a file of the kernel's distribution, in that
    module.

    Identity is the file, not ``__name__`` (which any module may set) nor a folder: the code
    object's file is one the kernel's distribution lists (`_kernel_files`), and the frame's
    globals are the namespace of the module imported from that very file.
    """
    filename = frame.f_code.co_filename
    if filename.startswith("<") or _real(filename) not in _kernel_files():
        return False
    return _runs_its_module(frame)


def on_behalf_of_caller(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Call a callable handed to the kernel (an executor's function, a mock's handler).

    What it reaches is judged as its caller's, never the kernel's: a kernel adapter does not
    lend its exemption to ``SerialExecutor().map_bounded(os.urandom, ...)``.
    """
    return _as_guarded(fn)(*args, **kwargs)


def _as_guarded(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """`fn`, or the guard's wrapper when `fn` is an entry point the guard swapped out (taken
    before the guard began: a callable shipped to another process and loaded there first)."""
    if not _swapped:
        return fn
    if isinstance(fn, functools.partial):
        inner = _swapped[-1].get(id(fn.func))
        if inner is not None:
            return functools.partial(inner, *fn.args, **fn.keywords)
        return fn
    wrapper: Callable[_P, _R] | None = _swapped[-1].get(id(fn))
    return fn if wrapper is None else wrapper


def guarded_elsewhere(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """`on_behalf_of_caller` in another process (a Ray worker), under a guard of its own.

    An executor whose calls leave the process ships this around the function while a guard is
    active in the caller, so the call is refused there as it would be here.

    Raises:
        NondeterminismError: the call reached a guarded entry point.
    """
    with nondeterminism_guard() as record:
        result = on_behalf_of_caller(fn, *args, **kwargs)
    if record.violations:
        raise record.violations[0]
    return result


def guard_active() -> bool:
    """Whether a guard is active in this process."""
    return bool(_active)


_BOUNDARIES: Final = frozenset({on_behalf_of_caller.__code__})


def _verdict(frame: FrameType | None, entry: str) -> tuple[bool, str]:
    """(allowed, calling module) for a guarded call of `entry` whose innermost frame is
    `frame`."""
    # Walk out through the standard library to the first caller outside it. An allowed
    # bookkeeping caller (banned.toml's [[allowed_caller]] rows) passes only for the entries
    # its row names and only when it asked itself (`_bookkeeping`); otherwise the walk goes on
    # past it, so an event loop's step or a logger lends nothing to a callback it runs. A
    # callable the kernel calls on someone's behalf (on_behalf_of_caller) is that someone's.
    between: list[str] = []
    while frame is not None:
        if frame.f_code in _BOUNDARIES:
            return False, "a callable handed to a twinflow.kernel adapter"
        if _bookkeeping(frame, entry, between):
            return True, _frame_module(frame)
        if not _is_stdlib_or_guard_file(frame.f_code.co_filename):
            break
        if _real(frame.f_code.co_filename) != _THIS_FILE:
            between.append(_frame_module(frame))
        frame = frame.f_back
    if frame is None:
        return False, "<unknown>"
    name = frame.f_globals.get("__name__")
    module = name if isinstance(name, str) else "<unknown>"
    return _is_kernel_frame(frame), module


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


def _refuse(
    dotted: str, frame: FrameType | None, record: GuardRecord, entry: str | None = None
) -> None:
    allowed, caller = _verdict(frame, dotted if entry is None else entry)
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
    hit = any(
        real == p or real.startswith(p.rstrip("/") + "/") or fnmatch.fnmatchcase(real, p)
        for p in paths
    )
    return real if hit else None


# Per active guard (parallel to _active): the originals it swapped out (by id) -> its wrappers.
_swapped: list[dict[int, Any]] = []
# Per active guard (parallel to _active): the guarded modules' names and files.
_fresh_names: list[frozenset[str]] = []
_fresh_files: list[frozenset[str]] = []


def _fresh_copy(event: str, args: tuple[object, ...]) -> str | None:
    """What an ``exec`` or ``import`` event makes a fresh copy of, if it is a guarded module."""
    first = args[0] if args else None
    if event == "exec" and isinstance(first, types.CodeType):
        filename = first.co_filename
        module_code = first.co_name == "<module>" and not filename.startswith("<")
        if module_code and _real(filename) in _fresh_files[-1]:
            return filename
    # An `import` event with a file is an extension module being loaded from it.
    loaded_from = args[1] if len(args) > 1 else None
    if event == "import" and isinstance(first, str) and loaded_from is not None:
        return first if first in _fresh_names[-1] else None
    return None


def _audit_hook(event: str, args: tuple[object, ...]) -> None:
    if not _active:
        return
    if event in ("exec", "import"):
        copied = _fresh_copy(event, args)
        if copied is not None:
            _refuse(f"a fresh copy of {copied}", sys._getframe(1), _active[-1])
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
    _refuse(what, sys._getframe(1), _active[-1], event)


def _argument_given(args: tuple[Any, ...], kwargs: dict[str, Any], index: int) -> bool:
    if len(args) > index:
        return args[index] is not None
    return any(value is not None for value in kwargs.values())


def _waits(args: tuple[Any, ...], kwargs: dict[str, Any], given: tuple[int, str]) -> bool:
    """Whether a timeout argument is given: present, not None and not negative (a lock's
    ``acquire(timeout=-1)`` waits for nothing but the lock)."""
    index, keyword = given
    value = args[index] if len(args) > index else kwargs.get(keyword)
    return value is not None and not (isinstance(value, (int, float)) and value < 0)


def _instance_of(dotted: str) -> type | None:
    module, _, name = dotted.rpartition(".")
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) else None


def _wrapper(
    dotted: str,
    original: Callable[..., Any],
    record: GuardRecord,
    unless_argument: int | None,
    target: _Target | None = None,
) -> Callable[..., Any]:
    given = None if target is None else target.if_argument
    instance = None if target is None or target.unless_instance is None else target.unless_instance
    passes = None if instance is None else _instance_of(instance)
    # A timeout is refused on the guarded thread only: threads cannot start under the guard, so
    # another one is the kernel's or an adapter's (Ray's workers wait with timeouts of their own).
    guarded_thread = _thread.get_ident()

    def guarded(*args: Any, **kwargs: Any) -> Any:
        if given is not None:
            refused = _thread.get_ident() == guarded_thread and _waits(args, kwargs, given)
        elif instance is not None:
            refused = passes is None or not (args and isinstance(args[0], passes))
        else:
            refused = unless_argument is None or not _argument_given(args, kwargs, unless_argument)
        if refused:
            _refuse(dotted, sys._getframe(1), record)
        return original(*args, **kwargs)

    guarded.__name__ = getattr(original, "__name__", dotted.rpartition(".")[2])
    guarded.__qualname__ = getattr(original, "__qualname__", guarded.__name__)
    guarded.__doc__ = f"{dotted}, refused outside twinflow.kernel while replaying."
    # No __wrapped__: inspect.unwrap would hand the original to the code the guard refuses.
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


def _type_dict(cls: type) -> dict[str, Any] | None:
    """The writable dict behind a C type's read-only ``__dict__`` (CPython), or None.

    A C type's methods cannot be set by assignment; its dict can be written, after which
    CPython's method cache is told with ``PyType_Modified``. This is how the clock
    constructors of ``datetime`` are guarded however they are reached: the class, a subclass
    or instance made at any time, ``_datetime`` directly, ``datetime.min.now()``.
    """
    if sys.implementation.name != "cpython":
        return None
    referents = gc.get_referents(cls.__dict__)
    if len(referents) != 1 or not isinstance(referents[0], dict):
        return None
    return referents[0]


def _type_modified(cls: type) -> None:
    import ctypes  # the kernel's own: the guard tells CPython a C type changed

    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


def _guarded_modules() -> tuple[frozenset[str], frozenset[str]]:
    """(names, real source files) of the modules that hold a guarded entry point: a fresh copy
    of one (find_spec + exec_module, importlib.reload) would hold the originals."""
    names: set[str] = set()
    files: set[str] = set()
    for target in _TARGETS:
        if target.kind == "audit":
            continue
        parts = target.name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = sys.modules.get(".".join(parts[:cut]))
            if module is not None:
                names.add(module.__name__)
                filename = getattr(module, "__file__", None)
                if isinstance(filename, str):
                    files.add(_real(filename))
                break
    return frozenset(names), frozenset(files)


def _fresh_copy_hooks(record: GuardRecord, names: frozenset[str]) -> list[tuple[Any, str, Any]]:
    """Wrappers for ``_imp``'s builtin-module constructors: a second ``time`` module made from
    its spec would hold the original clocks (C modules built in have no audit event)."""
    import _imp

    patched: list[tuple[Any, str, Any]] = []
    for attribute in ("create_builtin", "exec_builtin", "create_dynamic", "exec_dynamic"):
        original = getattr(_imp, attribute, None)
        if original is None:
            continue

        def refusing(spec: Any, *args: Any, _o: Any = original, _a: str = attribute) -> Any:
            name = getattr(spec, "name", None) or getattr(spec, "__name__", None)
            if name in names:
                _refuse(f"a fresh copy of {name} ({_a})", sys._getframe(1), record)
            return _o(spec, *args)

        patched.append((_imp, attribute, original))
        setattr(_imp, attribute, refusing)
    return patched


class _Swaps:
    """What one guard swapped for a refusing wrapper, and how to put each back."""

    def __init__(self, record: GuardRecord) -> None:
        self.record = record
        self.saved: list[tuple[Any, str, Any]] = []
        self.type_dicts: list[tuple[type, dict[str, Any], str, Any]] = []
        self.swapped: dict[int, Any] = {}
        self.classmethods: dict[tuple[Any, str], dict[str, object]] = {}

    def install(self) -> None:
        """Swap every ``call`` and ``classmethod`` target of the banned list."""
        for target in _TARGETS:
            if target.kind == "audit":
                continue
            try:
                owner, attribute = _owner(target.name)
            except (ImportError, AttributeError):  # a module or name this platform lacks
                continue
            if target.kind == "call":
                self._call(target, owner, attribute)
            elif (real := _type_dict(owner)) is not None:
                self._type_method(target, owner, attribute, real)
            else:
                self._classmethod(target, owner, attribute)
        for (holder, class_name), methods in self.classmethods.items():
            original_class = getattr(holder, class_name)
            self.saved.append((holder, class_name, original_class))
            setattr(holder, class_name, _guarded_class(original_class, methods))

    def _call(self, target: _Target, owner: Any, attribute: str) -> None:
        original = vars(owner).get(attribute) if isinstance(owner, type) else None
        if original is None:
            original = getattr(owner, attribute, None)
        if original is None:  # e.g. os.getrandom is Linux-only
            return
        wrapper = _wrapper(target.name, original, self.record, target.unless_argument, target)
        self.swapped.setdefault(id(original), wrapper)  # os.urandom is posix.urandom
        try:
            setattr(owner, attribute, wrapper)
        except TypeError:
            # A C type's method (a lock's acquire, _random.Random's draws): written into the
            # type's own dict, as the datetime constructors are.
            real = _type_dict(owner) if isinstance(owner, type) else None
            if real is None or attribute not in real:
                return
            self.type_dicts.append((owner, real, attribute, real[attribute]))
            real[attribute] = wrapper
            _type_modified(owner)
            return
        self.saved.append((owner, attribute, original))

    def _type_method(
        self, target: _Target, owner: type, attribute: str, real: dict[str, Any]
    ) -> None:
        if any(owner is t and attribute == a for t, _, a, _ in self.type_dicts):
            return  # _datetime.datetime is datetime.datetime
        # An inherited method (datetime.today is date.today) is set on the class itself, so
        # the refusal names it, and deleted again on the way out.
        descriptor = real.get(attribute)
        inherited = next(vars(base)[attribute] for base in owner.__mro__ if attribute in vars(base))
        refusing = _wrapper(
            target.name,
            lambda cls, *a, _d=inherited, **k: _d.__get__(None, cls)(*a, **k),
            self.record,
            None,
        )
        self.type_dicts.append((owner, real, attribute, descriptor))
        real[attribute] = classmethod(refusing)
        _type_modified(owner)

    def _classmethod(self, target: _Target, owner: Any, attribute: str) -> None:
        holder, class_name = _owner(target.name.rpartition(".")[0])
        refusing = _wrapper(target.name, getattr(owner, attribute), self.record, None)
        self.classmethods.setdefault((holder, class_name), {})[attribute] = classmethod(
            lambda _cls, *a, _f=refusing, **k: _f(*a, **k)
        )

    def restore(self) -> None:
        """Put back everything swapped, last first."""
        for owner, attribute, original in reversed(self.saved):
            setattr(owner, attribute, original)
        for cls, real, attribute, descriptor in reversed(self.type_dicts):
            if descriptor is None:
                del real[attribute]
            else:
                real[attribute] = descriptor
            _type_modified(cls)


@contextmanager
def nondeterminism_guard() -> Iterator[GuardRecord]:
    """Refuse nondeterministic entry points reached from outside the kernel.

    Every ``call`` and ``classmethod`` target of the banned list is swapped while the block
    runs and restored when it exits, whatever way it exits; every ``audit`` target is refused
    by an audit hook that is silent outside a guard. A fresh copy of a module holding a guarded
    entry point (re-executed from its file or spec) is refused too. Not re-entrant across
    threads: the replay harness runs the agent on the calling thread.

    Yields:
        The record of refusals, complete when the block exits.

    Raises:
        NondeterminismError: from inside the block, when guarded code is reached.
    """
    global _audit_hook_added
    record = GuardRecord()
    swaps = _Swaps(record)
    try:
        swaps.install()
        names, files = _guarded_modules()
        swaps.saved.extend(_fresh_copy_hooks(record, names))
        if not _audit_hook_added:
            sys.addaudithook(_audit_hook)
            _audit_hook_added = True
        _fresh_names.append(names)
        _fresh_files.append(files)
        _swapped.append(swaps.swapped)
        _active.append(record)
        yield record
    finally:
        if record in _active:
            index = _active.index(record)
            del _active[index], _fresh_names[index], _fresh_files[index], _swapped[index]
        swaps.restore()
