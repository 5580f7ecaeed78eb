"""The runtime nondeterminism guard: what the static gate cannot see is refused at run time."""

from __future__ import annotations

import contextlib
import datetime
import importlib
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from twinflow.kernel import NondeterminismError, SystemClock, nondeterminism_guard
from twinflow.kernel._nondeterminism import GUARDED_ENTRY_POINTS


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
    with nondeterminism_guard(), pytest.raises(NondeterminismError, match=r"socket\.__new__"):
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


def _current(name: str) -> object:
    path, _, attribute = name.rpartition(".")
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            owner = getattr(owner, part)
        found = vars(owner).get(attribute) if isinstance(owner, type) else None
        return found if found is not None else getattr(owner, attribute, None)
    raise AssertionError(name)


def test_everything_is_restored_on_exit_even_after_an_error() -> None:
    """Leaving the block, normally or by an exception, puts every original back."""
    swapped = [name for kind, name in GUARDED_ENTRY_POINTS if kind != "audit"]
    originals = {name: _current(name) for name in swapped}
    classes = (datetime.datetime, datetime.date)
    with pytest.raises(ZeroDivisionError), nondeterminism_guard():
        _ = 1 / 0
    assert originals == {name: _current(name) for name in swapped}
    assert classes == (datetime.datetime, datetime.date)
    assert isinstance(time.time(), float)


def test_the_guarded_entry_points_are_the_banned_tables_runtime_rows() -> None:
    """The guard's entry points derive from banned.toml, the one table (docs/adr/0004)."""
    table = tomllib.loads(
        resources.files("twinflow.kernel").joinpath("banned.toml").read_text(encoding="utf-8")
    )
    expected = [
        (kind, entry[kind])
        for row in table["banned"]
        for entry in row.get("runtime", ())
        for kind in ("call", "classmethod", "audit")
        if kind in entry
    ]
    assert expected == list(GUARDED_ENTRY_POINTS)


def test_classes_stay_classes_so_subclassing_works_under_the_guard() -> None:
    """socket.socket and threading.Thread are still classes a module can subclass (ssl does)."""
    import socket
    import threading

    with nondeterminism_guard():
        assert isinstance(socket.socket, type)
        assert isinstance(threading.Thread, type)

        class Sub(socket.socket):
            pass

        with pytest.raises(NondeterminismError, match=r"socket\.__new__"):
            Sub()


def _refused(action: Callable[[], object]) -> str:
    with nondeterminism_guard() as record, pytest.raises(NondeterminismError) as caught:
        action()
    assert [caught.value] == record.violations
    return caught.value.entry_point


WALL_CLOCK_AND_RANDOMNESS: dict[str, tuple[str, Callable[[], object]]] = {
    "datetime.now by import_module": (
        "datetime.datetime.now",
        lambda: importlib.import_module("datetime").datetime.now(),
    ),
    "datetime.utcnow by getattr": (
        "datetime.datetime.utcnow",
        lambda: getattr(importlib.import_module("datetime").datetime, "utcnow")(),  # noqa: B009
    ),
    "date.today by __import__": (
        "datetime.date.today",
        lambda: __import__("datetime").date.today(),
    ),
    "a datetime subclass made under the guard": (
        "datetime.datetime.now",
        lambda: type("Mine", (importlib.import_module("datetime").datetime,), {}).now(),
    ),
    "an instance's now()": (
        "datetime.datetime.today",
        lambda: importlib.import_module("datetime").datetime(2024, 1, 1).today(),
    ),
    "time.gmtime without a time": ("time.gmtime", lambda: time.gmtime()),
    "time.strftime without a time": ("time.strftime", lambda: time.strftime("%Y")),
    "clock_gettime": ("time.clock_gettime", lambda: time.clock_gettime(time.CLOCK_REALTIME)),
    "an unseeded Random()": (
        "random.Random.seed",
        lambda: importlib.import_module("random").Random(),
    ),
    "SystemRandom()": (
        "random.SystemRandom.random",
        lambda: importlib.import_module("random").SystemRandom().random(),
    ),
    "secrets through import_module": (
        "secrets.token_hex",
        lambda: importlib.import_module("secrets").token_hex(8),
    ),
}


@pytest.mark.parametrize(
    ("entry_point", "action"), WALL_CLOCK_AND_RANDOMNESS.values(), ids=WALL_CLOCK_AND_RANDOMNESS
)
def test_clock_and_randomness_are_refused_however_reached(
    entry_point: str, action: Callable[[], object]
) -> None:
    """Wall-clock datetime, time without a time, Random(), SystemRandom and secrets raise."""
    assert entry_point == _refused(action)


def _loop_time() -> float:
    loop = importlib.import_module("asyncio").new_event_loop()
    try:
        return float(loop.time())
    finally:
        loop.close()


PROCESSES_THREADS_SOCKETS: dict[str, tuple[str, Callable[[], object]]] = {
    "subprocess.run": (
        "subprocess.Popen",
        lambda: importlib.import_module("subprocess").run(["true"], check=False),
    ),
    "os.system": ("os.system", lambda: getattr(os, "system")("true")),  # noqa: B009
    "os.posix_spawn": (
        "os.posix_spawn",
        lambda: getattr(os, "posix_spawn")("/bin/true", ["true"], {}),  # noqa: B009
    ),
    "a Thread subclass": (
        "threading.Thread.start",
        lambda: type("T", (importlib.import_module("threading").Thread,), {})().start(),
    ),
    "_thread.start_new_thread": (
        "_thread.start_new_thread",
        lambda: __import__("_thread").start_new_thread(print, ()),
    ),
    "the private _socket module": (
        "socket.__new__",
        lambda: importlib.import_module("_socket").socket(),
    ),
    "posix.urandom": ("posix.urandom", lambda: importlib.import_module("posix").urandom(4)),
    "_posixsubprocess directly": (
        "_posixsubprocess.fork_exec",
        lambda: importlib.import_module("_posixsubprocess").fork_exec(),
    ),
    "an event loop's clock": ("time.monotonic", lambda: _loop_time()),
    "a DNS lookup": (
        "socket.getaddrinfo",
        lambda: importlib.import_module("socket").getaddrinfo("localhost", 80),
    ),
}


@pytest.mark.parametrize(
    ("entry_point", "action"), PROCESSES_THREADS_SOCKETS.values(), ids=PROCESSES_THREADS_SOCKETS
)
def test_processes_threads_and_sockets_are_refused_before_they_exist(
    entry_point: str, action: Callable[[], object]
) -> None:
    """A process, thread or socket asked for under the guard is an error, not a resource."""
    assert entry_point == _refused(action)


def test_explicit_times_and_seeds_are_not_refused() -> None:
    """Formatting a given time and a seeded Random are deterministic and pass."""
    with nondeterminism_guard() as record:
        year = time.strftime("%Y", time.gmtime(0))
        draw = importlib.import_module("random").Random(7).random()
    assert ("1970", importlib.import_module("random").Random(7).random()) == (year, draw)
    assert [] == record.violations


def test_logging_and_a_new_event_loop_raise_no_false_alarm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A log call (which stamps the time) and creating an asyncio loop work under the guard."""
    import asyncio
    import logging

    with nondeterminism_guard() as record:
        logging.getLogger("twinflow.test").warning("still logging")
        loop = asyncio.new_event_loop()
        loop.close()
    assert [] == record.violations
    assert ["still logging"] == [r.getMessage() for r in caplog.records]


FRESH_GUARD = """
import importlib
from twinflow.kernel import NondeterminismError, nondeterminism_guard
with nondeterminism_guard():
    import ssl
    try:
        importlib.import_module("subprocess").run(["true"])
    except NondeterminismError as error:
        print("refused", error.entry_point)
print("ssl", issubclass(ssl.SSLSocket, importlib.import_module("socket").socket))
"""


def test_the_guard_works_in_a_fresh_interpreter_that_imports_ssl_under_it() -> None:
    """Entering the guard before ssl was ever imported no longer breaks `import ssl`."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH_GUARD], capture_output=True, text=True, check=False
    )
    assert (0, "refused subprocess.Popen\nssl True\n") == (done.returncode, done.stdout), (
        done.stderr
    )


def test_a_call_shipped_to_another_process_is_guarded_there() -> None:
    """What RayExecutor ships under a guard refuses in a worker that has no guard of its own."""
    from twinflow.kernel._nondeterminism import guard_active, guarded_elsewhere

    assert (False, 3) == (guard_active(), guarded_elsewhere(len, "abc"))
    with pytest.raises(NondeterminismError) as refused:
        guarded_elsewhere(os.urandom, 4)
    assert ("os.urandom", False) == (refused.value.entry_point, guard_active())


def _run_on_a_loop(schedule: Callable[[Any], object]) -> None:
    """Run one step of a new loop after `schedule(loop)`; a callback's error is raised here."""
    loop = importlib.import_module("asyncio").new_event_loop()
    errors: list[BaseException] = []
    loop.set_exception_handler(lambda _, context: errors.append(context["exception"]))
    try:
        schedule(loop)
        loop.call_soon(loop.stop)
        loop.run_forever()
    finally:
        loop.close()
    if errors:
        raise errors[0]


def _as_logging(source: str) -> None:
    """Run `source` in a namespace that calls itself `logging` (any module may set __name__)."""
    exec(compile(source, "<spoof>", "exec"), {"__name__": "logging", "time": time})


NO_EXEMPTION_LENT: dict[str, tuple[str, Callable[[], object]]] = {
    "loop.call_soon(time.time)": (
        "time.time",
        lambda: _run_on_a_loop(lambda loop: loop.call_soon(time.time)),
    ),
    "loop.call_soon(time.monotonic), the clock the loop's step may read": (
        "time.monotonic",
        lambda: _run_on_a_loop(lambda loop: loop.call_soon(time.monotonic)),
    ),
    "loop.call_soon(os.system)": (
        "os.system",
        lambda: _run_on_a_loop(lambda loop: loop.call_soon(getattr(os, "system"), "true")),  # noqa: B009  reached at run time on purpose: the guard must refuse it
    ),
    "loop.call_later(0, os.urandom): a timer the tool sets reads the clock": (
        "time.monotonic",
        lambda: _run_on_a_loop(lambda loop: loop.call_later(0, os.urandom, 4)),
    ),
    "logging.FileHandler('/dev/urandom')": (
        "open('/dev/urandom')",
        lambda: importlib.import_module("logging").FileHandler("/dev/" + "urandom"),
    ),
    "a LogRecord subclass that reads the clock itself": (
        "time.time",
        lambda: type(
            "LogRecord",
            (importlib.import_module("logging").LogRecord,),
            {"__init__": lambda self: time.time()},
        )(),
    ),
    "code that calls itself logging": (
        "time.time",
        lambda: _as_logging(
            "class LogRecord:\n    def __init__(self):\n        time.time()\nLogRecord()"
        ),
    ),
}


@pytest.mark.parametrize(
    ("entry_point", "action"), NO_EXEMPTION_LENT.values(), ids=NO_EXEMPTION_LENT
)
def test_an_allowed_caller_lends_no_exemption_to_what_it_calls(
    entry_point: str, action: Callable[[], object]
) -> None:
    """An event loop's step or logging's internals running someone's callable pass nothing."""
    assert entry_point == _refused(action)


def test_an_event_loop_run_without_real_waits_raises_no_false_alarm() -> None:
    """asyncio.run of a coroutine that schedules a pure callback still passes under the guard."""
    asyncio = importlib.import_module("asyncio")

    async def main() -> int:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        loop.call_soon(done.set_result, 3)
        return int(await done)

    with nondeterminism_guard() as record:
        result = asyncio.run(main())
    assert (3, []) == (result, record.violations)


def _subclass_of_object(module: str, name: str) -> Any:
    return next(c for c in object.__subclasses__() if (c.__module__, c.__name__) == (module, name))


SOURCES_ONLY_THE_GUARD_SEES: dict[str, tuple[str, Callable[[], object]]] = {
    "cProfile": (
        "sys.setprofile",
        lambda: importlib.import_module("cProfile").Profile().enable(),
    ),
    "sys.setprofile": ("sys.setprofile", lambda: sys.setprofile(lambda *a: None)),
    "profile.Profile().runcall": (
        "time.process_time",
        lambda: importlib.import_module("profile").Profile().runcall(len, ""),
    ),
    "sqlite3.connect": (
        "sqlite3.connect",
        lambda: importlib.import_module("sqlite3").connect(":memory:"),
    ),
    "_sqlite3.connect": (
        "sqlite3.connect",
        lambda: importlib.import_module("_sqlite3").connect(":memory:"),
    ),
    "open('/proc/uptime')": ("open('/proc/uptime')", lambda: open("/proc/uptime").close()),
    "os.open('/proc/stat')": (
        "open('/proc/stat')",
        lambda: os.close(os.open("/proc/stat", os.O_RDONLY)),
    ),
    "Path('/proc/self/stat').read_bytes()": (
        f"open('/proc/{os.getpid()}/stat')",
        lambda: importlib.import_module("pathlib").Path("/proc/self/stat").read_bytes(),
    ),
    "queue.Queue().get(timeout=...)": (
        "queue.Queue.get",
        lambda: importlib.import_module("queue").Queue().get(timeout=0.01),
    ),
    "queue.Queue().get(True, 0)": (
        "queue.Queue.get",
        lambda: importlib.import_module("queue").Queue().get(True, 0),
    ),
    "queue.SimpleQueue().get(timeout=...)": (
        "_queue.SimpleQueue.get",
        lambda: importlib.import_module("queue").SimpleQueue().get(timeout=0.01),
    ),
    "threading.Event().wait(0)": (
        "threading.Event.wait",
        lambda: importlib.import_module("threading").Event().wait(0),
    ),
    "threading.Lock().acquire(timeout=0)": (
        "_thread.LockType.acquire",
        lambda: importlib.import_module("threading").Lock().acquire(timeout=0),
    ),
    "threading.RLock().acquire(True, 0)": (
        "_thread.RLock.acquire",
        lambda: importlib.import_module("threading").RLock().acquire(True, 0),
    ),
    "a Semaphore's timeout": (
        "threading.Semaphore.acquire",
        lambda: importlib.import_module("threading").Semaphore(0).acquire(timeout=0),
    ),
    "_random.Random through object.__subclasses__()": (
        "_random.Random.random",
        lambda: _subclass_of_object("_random", "Random")().random(),
    ),
    "a direct subclass of _random.Random": (
        "_random.Random.getrandbits",
        lambda: type("R", (_subclass_of_object("_random", "Random"),), {})().getrandbits(8),
    ),
}


@pytest.mark.parametrize(
    ("entry_point", "action"),
    SOURCES_ONLY_THE_GUARD_SEES.values(),
    ids=SOURCES_ONLY_THE_GUARD_SEES,
)
def test_profilers_sqlite_clock_files_real_waits_and_the_c_generator_are_refused(
    entry_point: str, action: Callable[[], object]
) -> None:
    """A profiler, SQLite, a clock file, a timeout and the C generator raise under the guard."""
    assert entry_point == _refused(action)


def test_waiting_for_nothing_and_seeded_draws_raise_no_false_alarm() -> None:
    """A lock without a timeout, a queue drained without waiting and seeded draws pass."""
    queue = importlib.import_module("queue")
    threading = importlib.import_module("threading")
    random = importlib.import_module("random")
    with nondeterminism_guard() as record:
        lock = threading.Lock()
        taken = (lock.acquire(), lock.acquire(False), threading.Lock().acquire(timeout=-1))
        waiting = queue.Queue()
        waiting.put("x", timeout=None)
        drained = (waiting.get_nowait(), waiting.empty())
        draws = (random.Random(7).getrandbits(8), random.Random(7).random())
    expected_draws = (random.Random(7).getrandbits(8), random.Random(7).random())
    assert ((True, False, True), ("x", True), expected_draws, []) == (
        taken,
        drained,
        draws,
        record.violations,
    )


def test_a_timeout_on_another_thread_is_not_the_guarded_codes() -> None:
    """A thread started before the guard may wait with a timeout; the guarded thread may not."""
    threading = importlib.import_module("threading")
    go, done, results = threading.Event(), threading.Event(), []

    def worker() -> None:
        go.wait()
        try:
            results.append(threading.Event().wait(0))
        except NondeterminismError as error:
            results.append(error)
        finally:
            done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    with nondeterminism_guard() as record:
        go.set()
        done.wait()
    thread.join()
    assert ([False], []) == (results, record.violations)


def test_the_kernel_is_the_files_its_distribution_lists() -> None:
    """Every kernel module is a listed kernel file; a file beside them that is not listed is not."""
    from importlib import metadata

    from twinflow.kernel import _nondeterminism

    listed = _nondeterminism._kernel_files()
    kernel = importlib.import_module("twinflow.kernel")
    modules = [
        importlib.import_module(f"twinflow.kernel.{m}") for m in ("_clock", "_nondeterminism")
    ]
    assert all(os.path.realpath(m.__file__ or "") in listed for m in [kernel, *modules])
    assert os.path.realpath(pytest.__file__) not in listed
    assert metadata.distribution("twinflow-kernel").files


def test_a_module_planted_in_the_kernels_folder_of_an_install_is_not_the_kernel(
    tmp_path: Path,
) -> None:
    """An installed distribution's files are its RECORD's, not what its folder holds."""
    from importlib import metadata

    from twinflow.kernel import _nondeterminism

    package = tmp_path / "twinflow" / "kernel"
    package.mkdir(parents=True)
    for name in ("_clock.py", "_planted.py"):
        (package / name).write_text("", encoding="utf-8")
    info = tmp_path / "twinflow_kernel-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: twinflow-kernel\nVersion: 0.1.0\n", encoding="utf-8")
    (info / "RECORD").write_text("twinflow/kernel/_clock.py,,\n", encoding="utf-8")
    found = _nondeterminism._listed_python_files(metadata.PathDistribution(info))
    assert {os.path.realpath(package / "_clock.py")} == set(found)
