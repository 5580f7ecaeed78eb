"""The runtime guard, in fresh interpreters: classes 7 (no crash unless ssl came first),
8 (what the static gate cannot see is refused) and 9 (no false alarms) of ADR 0004's guard."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twinflow.kernel._process import run_process

# A user's script: it imports twinflow and nothing else (no ssl, no CLI), records a run, then
# replays it live twice: once unchanged, once with a tool that starts a process by a computed
# name. The process must be refused, never started: the marker file must not appear.
SCRIPT = """
import importlib, sys
from datetime import UTC, datetime, timedelta
from pydantic import BaseModel
from twinflow.agent import Agent, FunctionModel, Policy, Trace, replay
from twinflow.kernel import CountingIds, NondeterminismError, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import CallId, Message, StructuredPart, ToolCallPart

class Total(BaseModel):
    total: int

def script(request):
    results = [m for m in request.transcript.messages if m.role == "tool"]
    if not results:
        call = ToolCallPart(id=CallId("c0"), name="add", arguments={"a": 2, "b": 3})
        return Message(role="assistant", parts=(call,))
    value = {"total": int(results[-1].tool_results[0].content)}
    return Message(role="assistant", parts=(StructuredPart(schema_name="Total", value=value),))

def add(a: int, b: int) -> int:
    "Add two integers."
    return a + b

def spawning(a: int, b: int) -> int:
    "Add two integers."
    name = "sub" + "process"
    importlib.import_module(name).run(["touch", sys.argv[1]])
    return a + b

def agent(tool, ports=None):
    tool.__name__ = "add"
    common = dict(tools=[tool], policy=Policy(allow=frozenset({"add"})), output_type=Total)
    if ports is None:
        start = datetime(2024, 1, 1, tzinfo=UTC)
        return Agent(FunctionModel(script), clock=SteppingClock(start, timedelta(seconds=1)),
                     ids=CountingIds(), trace=MemoryTraceSink(), **common)
    return Agent(ports.model, clock=ports.clock, ids=ports.ids, trace=ports.trace,
                 model_label=ports.model_label, tool_results=ports.tool_results, **common)

recorder = agent(add)
recorder.run("add 2 and 3")
trace = Trace.load(recorder.writer.sink.data)
print("replayed", replay(trace, lambda ports: agent(add, ports), mode="live").events)
try:
    replay(trace, lambda ports: agent(spawning, ports), mode="live")
except NondeterminismError as error:
    print("refused", error.entry_point)
"""


def _run(script: str, tmp_path: Path, *args: str) -> list[str]:
    path = tmp_path / "user_script.py"
    path.write_text(script, encoding="utf-8")
    done = run_process([sys.executable, str(path), *args], cwd=tmp_path, timeout=120)
    assert 0 == done.returncode, done.stderr
    return done.stdout.splitlines()


def test_live_replay_works_from_a_script_that_imports_nothing_else(tmp_path: Path) -> None:
    """A fresh interpreter replays live, and a tool's process is a NondeterminismError."""
    marker = tmp_path / "started"
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = run_process([sys.executable, str(script), str(marker)], cwd=tmp_path, timeout=120)
    lines = done.stdout.splitlines()
    assert (0, "refused subprocess.Popen") == (done.returncode, lines[-1]), done.stderr
    assert lines[0].startswith("replayed ")
    assert not marker.exists()


# A tool reaching each family by a route ruff cannot see, run under a live replay in a fresh
# interpreter: the replay must fail with NondeterminismError naming the entry point.
HIDDEN = {
    "wall-clock datetime by import_module": (
        "importlib.import_module('datetime').datetime.now()",
        "datetime.datetime.now",
    ),
    "a datetime subclass": (
        "type('D', (importlib.import_module('datetime').date,), {}).today()",
        "datetime.date.today",
    ),
    "random by getattr": (
        "getattr(importlib.import_module('random'), 'random')()",
        "random.random",
    ),
    "an unseeded Random()": ("importlib.import_module('random').Random()", "random.Random.seed"),
    "SystemRandom": (
        "importlib.import_module('random').SystemRandom().getrandbits(8)",
        "random.SystemRandom.getrandbits",
    ),
    "secrets by __import__": ("__import__('secrets').token_bytes(4)", "secrets.token_bytes"),
    "a process by __import__": ("__import__('os').system('true')", "os.system"),
    "a thread": (
        "importlib.import_module('threading').Thread(target=print).start()",
        "threading.Thread.start",
    ),
    "a socket": ("importlib.import_module('socket').socket()", "socket.__new__"),
}

TOOL_SCRIPT = SCRIPT.replace(
    '    name = "sub" + "process"\n    importlib.import_module(name).run(["touch", sys.argv[1]])\n',
    "    HIDDEN_CALL\n",
)


@pytest.mark.parametrize(("call", "entry_point"), HIDDEN.values(), ids=HIDDEN.keys())
def test_a_tool_reaching_a_family_dynamically_fails_live_replay(
    call: str, entry_point: str, tmp_path: Path
) -> None:
    """Class 8: each family, reached through import_module, getattr or __import__, is refused."""
    assert "HIDDEN_CALL" in TOOL_SCRIPT
    lines = _run(TOOL_SCRIPT.replace("HIDDEN_CALL", call), tmp_path, str(tmp_path / "m"))
    assert f"refused {entry_point}" == lines[-1]


NO_FALSE_ALARM = """
import asyncio, logging
from twinflow.kernel import nondeterminism_guard
logging.basicConfig(level=logging.INFO)
with nondeterminism_guard() as record:
    logging.getLogger("tool").info("a log line under the guard")
    loop = asyncio.new_event_loop()
    loop.close()
print("violations", len(record.violations))
"""


def test_logging_and_an_event_loop_raise_no_false_alarm(tmp_path: Path) -> None:
    """Class 9: logging and creating an asyncio event loop work under the guard."""
    assert ["violations 0"] == _run(NO_FALSE_ALARM, tmp_path)


FRESH_SSL = """
from twinflow.kernel import nondeterminism_guard
with nondeterminism_guard():
    import ssl
    import socket
print(issubclass(ssl.SSLSocket, socket.socket))
"""


def test_importing_ssl_under_the_guard_does_not_crash(tmp_path: Path) -> None:
    """Class 7: a fresh interpreter may import ssl inside the guard (it subclasses socket)."""
    assert ["True"] == _run(FRESH_SSL, tmp_path)


# ------------------------------------------ a guard that cannot be disarmed or routed around

# Each variant runs inside its own guard, in one fresh interpreter; what it printed is judged
# below. `refused X`: a NondeterminismError naming X; `passed R`: it ran and returned R.
VARIANTS_SCRIPT = """
import asyncio, datetime, gc, importlib, importlib.util, inspect, os, random, select, signal
import ssl, sys, time
from twinflow.kernel import (
    MockTransport, NondeterminismError, SerialExecutor, ThreadExecutor, nondeterminism_guard,
)

made_before = datetime.datetime(2024, 1, 1)
import functools
early_urandom = functools.partial(os.urandom)
early_localtime = time.localtime
class MadeBefore(datetime.datetime):
    pass

def fresh(name):
    spec = importlib.util.find_spec(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def renamed(name):
    namespace = {"__name__": name}
    exec("import time\\ndef f():\\n    return time.time()\\n", namespace)
    return namespace["f"]()

async def settles():
    await asyncio.sleep(0)
    return 3

async def reads_the_loop_clock():
    return asyncio.get_running_loop().time()

VARIANTS = {
    VARIANTS_BODY
}
for name, action in VARIANTS.items():
    with nondeterminism_guard():
        try:
            outcome = f"passed {action()!r}"
        except NondeterminismError as error:
            outcome = f"refused {error.entry_point}"
        except Exception as error:
            outcome = f"raised {type(error).__name__}"
    print(f"{name}: {outcome}")
"""

GUARD_VARIANTS = {
    # the originals are out of reach
    "__wrapped__": ("time.time.__wrapped__()", "raised AttributeError"),
    "inspect.unwrap of os.urandom": ("inspect.unwrap(os.urandom)(4)", "refused os.urandom"),
    "inspect.unwrap of time.time": ("inspect.unwrap(time.time)()", "refused time.time"),
    "gc.get_referents": ("gc.get_referents(time.time)", "refused gc.get_referents"),
    "inspect.getclosurevars": (
        "inspect.getclosurevars(time.time)",
        "refused inspect.getclosurevars",
    ),
    # the kernel is known by its file, not its name
    "__name__ claiming the kernel": ("renamed('twinflow.kernel._x')", "refused time.time"),
    "__name__ claiming the kernel package": ("renamed('twinflow.kernel')", "refused time.time"),
    # adapters that take a callable lend it nothing
    "SerialExecutor as a deputy": (
        "list(SerialExecutor().map_bounded(os.urandom, [4], 1))",
        "refused os.urandom",
    ),
    "ThreadExecutor as a deputy": (
        "list(ThreadExecutor().map_bounded(time.time_ns, [None], 1))",
        "refused time.time_ns",
    ),
    "ThreadExecutor with a clock": (
        "list(ThreadExecutor().map_bounded(time.localtime, [None], 1))",
        "refused time.localtime",
    ),
    "SerialExecutor with a stdlib function": (
        "list(SerialExecutor().map_bounded(random.randbytes, [4], 1))",
        "refused random.randbytes",
    ),
    "an entry point taken before the guard, handed to an adapter": (
        "list(SerialExecutor().map_bounded(early_localtime, [None], 1))",
        "refused time.localtime",
    ),
    "a partial of an entry point taken before the guard": (
        "list(ThreadExecutor().map_bounded(early_urandom, [4], 1))",
        "refused os.urandom",
    ),
    "MockTransport's handler as a deputy": (
        "MockTransport(lambda url, body: time.time()).post_json('http://x', {}, timeout=1)",
        "refused time.time",
    ),
    # datetime's constructors however reached
    "datetime.min.now()": ("datetime.datetime.min.now()", "refused datetime.datetime.now"),
    "type(d).now()": ("type(made_before).now()", "refused datetime.datetime.now"),
    "an instance's utcnow()": ("made_before.utcnow()", "refused datetime.datetime.utcnow"),
    "a subclass made before the guard": ("MadeBefore.now()", "refused datetime.datetime.now"),
    "a subclass's today()": ("MadeBefore.today()", "refused datetime.datetime.today"),
    "date.max.today()": ("datetime.date.max.today()", "refused datetime.date.today"),
    "_datetime directly": (
        "importlib.import_module('_datetime').datetime.now()",
        "refused datetime.datetime.now",
    ),
    # fresh copies of a guarded module
    "a fresh random": ("fresh('random').random()", "refused a fresh copy of"),
    "a fresh secrets": ("fresh('secrets').token_hex(4)", "refused a fresh copy of"),
    "a fresh time (built in)": ("fresh('time').time()", "refused a fresh copy of time"),
    "a fresh select (an extension)": ("fresh('select')", "refused a fresh copy of select"),
    "reloading random": ("importlib.reload(random)", "refused a fresh copy of"),
    "reloading time": ("importlib.reload(time)", "refused a fresh copy of time"),
    # the C modules and APIs the table now names
    "ssl.RAND_bytes": ("ssl.RAND_bytes(4)", "refused ssl.RAND_bytes"),
    "os.times": ("os.times()", "refused os.times"),
    "select's timeout": ("select.select([], [], [], 0)", "refused select.select"),
    "signal.setitimer": ("signal.setitimer(signal.ITIMER_REAL, 0)", "refused signal.setitimer"),
    "threading._start_new_thread": (
        "importlib.import_module('threading')._start_new_thread(print, ())",
        "refused threading._start_new_thread",
    ),
    "opening /dev/urandom": ("open('/dev/urandom', 'rb').read(4)", "refused open('/dev/urandom')"),
    "os.open of /dev/random": (
        "os.open(b'/dev/random', os.O_RDONLY)",
        "refused open('/dev/random')",
    ),
    "a link to /dev/urandom": ("open(LINK, 'rb').read(4)", "refused open('/dev/urandom')"),
    # no false alarm
    "asyncio.run of a coroutine that waits on nothing real": ("asyncio.run(settles())", "passed 3"),
    "a coroutine reading the loop's clock": (
        "asyncio.run(reads_the_loop_clock())",
        "refused time.monotonic",
    ),
    "a pure datetime constructor": (
        "datetime.datetime.fromtimestamp(0, datetime.UTC).year",
        "passed 1970",
    ),
    "an ordinary file": ("len(open(__file__, 'rb').read()) > 0", "passed True"),
}


@pytest.fixture(scope="module")
def guard_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every variant's outcome, from one fresh interpreter."""
    folder = tmp_path_factory.mktemp("guard")
    link = folder / "entropy"
    link.symlink_to("/dev/urandom")
    body = "".join(f"    {name!r}: lambda: {call},\n" for name, (call, _) in GUARD_VARIANTS.items())
    script = VARIANTS_SCRIPT.replace("    VARIANTS_BODY\n", body).replace("LINK", repr(str(link)))
    lines = _run(script, folder)
    return dict(line.split(": ", 1) for line in lines if ": " in line)


@pytest.mark.parametrize(("call", "expected"), GUARD_VARIANTS.values(), ids=GUARD_VARIANTS.keys())
def test_the_guard_holds_against_each_variant(
    call: str, expected: str, request: pytest.FixtureRequest, guard_outcomes: dict[str, str]
) -> None:
    """Disarming, forging the kernel's name, deputies, datetime, fresh copies: refused."""
    name = request.node.callspec.id
    assert call
    assert guard_outcomes[name].startswith(expected), guard_outcomes[name]
