"""The runtime guard, in fresh interpreters: classes 7 (no crash unless ssl came first),
8 (what the static gate cannot see is refused) and 9 (no false alarms) of ADR 0004's guard."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twinflow.kernel import run_process

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
