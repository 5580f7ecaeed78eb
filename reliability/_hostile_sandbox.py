"""Hostile-input campaign: code run by ``run_python`` in the bubblewrap sandbox.

Each class is one run of a scripted agent whose first call runs hostile code through the
built-in ``run_python`` and whose second call prints ``alive``. For every class: the hostile
call ends as the call's result (an error result naming the limit, for a limit), the second call
still runs (the run goes on), no process carrying the class's marker is left on the host, a
sentinel file outside the work directory is unchanged, no planted secret reaches the trace,
and the network is out of reach.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import Figures

from twinflow._base._untrusted import register_secret
from twinflow.agent import Agent, FunctionModel, Policy, ToolReturned, Trace
from twinflow.agent._sandboxed import SandboxSession, SandboxSpec, builtin_tools
from twinflow.kernel import CountingIds, LoopbackServer, SteppingClock
from twinflow.kernel._loopback import LoopbackResponse
from twinflow.kernel._sandbox import interpreter_paths
from twinflow.trace import FileTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, TextPart, ToolCallPart

SMALL = SandboxSpec(
    cpu_seconds=2,
    wall_seconds=120,
    memory_bytes=256 * 1024 * 1024,
    processes=32,
    file_bytes=1024 * 1024,
    output_bytes=64 * 1024,
    work_dir_bytes=4 * 1024 * 1024,
)
SECRET = "sk-hostile-sandbox-5c1f0e9d7a3b4e6f"


def _model(code: str) -> FunctionModel:
    def reply(request: ModelRequest) -> Message:
        step = sum(m.role == "assistant" for m in request.transcript.messages)
        if step >= 2:
            return Message(role="assistant", parts=(TextPart(text="done"),))
        arguments = {"code": code if step == 0 else "print('alive')"}
        call = ToolCallPart(id=CallId(f"c{step}"), name="run_python", arguments=arguments)
        return Message(role="assistant", parts=(call,))

    return FunctionModel(reply)


def _leftovers(marker: str) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
    return count


def _classes(work: Path, port: int) -> dict[str, tuple[str, Callable[[bool, str], bool]]]:
    """Each class: its code, and whether the hostile call's (is_error, content) is contained."""
    key = work / "keys" / "id_ed25519"
    trace = work / "runs" / "trace.jsonl"
    home = Path.home()
    shown = {p.relative_to(home).parts[0] for p in interpreter_paths() if p.is_relative_to(home)}

    def limit(name: str) -> Callable[[bool, str], bool]:
        return lambda error, text: error and f"hit its limit: {name}" in text

    def printed(expected: str) -> Callable[[bool, str], bool]:
        return lambda error, text: not error and json.loads(text)["stdout"] == expected

    read = "try:\n    print(open({!r}).read())\nexcept OSError as e:\n    print(type(e).__name__)"
    return {
        "fork bomb": ("import os\nwhile True: os.fork()", limit("processes")),
        "infinite loop": ("while True: pass", limit("cpu_seconds")),
        "allocate 10 GB": ("x = bytearray(10 * 1024**3)", limit("memory_bytes")),
        "10 GB of output": ("while True: print('x' * 65536)", limit("output_bytes")),
        "a 10 GB file": (
            "f = open('big', 'wb')\nwhile True: f.write(b'x' * 65536)",
            limit("file_bytes"),
        ),
        "10 GB of files": (
            "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * 512 * 1024); i += 1",
            limit("work_dir_bytes"),
        ),
        "socket to host loopback": (
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n"
            "    print('reached')\nexcept OSError as e:\n    print(type(e).__name__)",
            printed("ConnectionRefusedError\n"),
        ),
        "socket outside": (
            "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), 2)\n"
            "    print('reached')\nexcept OSError as e:\n    print(e.errno)",
            printed("101\n"),
        ),
        "/proc/1/environ": (
            "print(open('/proc/1/environ', 'rb').read().count(b'='))",
            lambda error, text: not error and json.loads(text)["stdout"] in ("0\n", ""),
        ),
        "home": (
            f"import os\nprint(sorted(os.listdir({str(home)!r})))",
            printed(f"{sorted(shown)}\n"),
        ),
        "planted key file": (read.format(str(key)), printed("FileNotFoundError\n")),
        "run directory": (read.format(str(trace.parent)), printed("FileNotFoundError\n")),
        "trace": (read.format(str(trace)), printed("FileNotFoundError\n")),
        "write outside": (
            f"import sys\nfor p in ({str(work / 'sentinel')!r}, sys.executable, '/usr/bin/env'):\n"
            "    try:\n        open(p, 'a').write('x'); print('wrote')\n"
            "    except OSError:\n        pass",
            printed(""),
        ),
        "symlink escape": (
            f"import os\nos.symlink({str(work / 'sentinel')!r}, 'out')\nos.symlink('/', 'root')",
            lambda error, text: not error and json.loads(text)["links_refused"] == ["out", "root"],
        ),
        "kill the parent": (
            "import os\ntry:\n    os.kill(os.getppid(), 9); print('killed')\n"
            "except OSError as e:\n    print(type(e).__name__)",
            printed("PermissionError\n"),
        ),
        "ptrace": (
            "import ctypes, os\nlibc = ctypes.CDLL(None)\nprint(libc.ptrace(16, os.getppid(), 0, 0))",
            printed("-1\n"),
        ),
        "setsid and double fork": (
            "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        time.sleep(600)\n    os._exit(0)\nprint('parent')",
            printed("parent\n"),
        ),
        "terminal escapes": (
            "print('\\x1b]52;c;b3duZWQ=\\x07\\x1b[2J\\x9b31m')",
            lambda error, text: not error and "\x1b" not in text and "\x9b" not in text,
        ),
        "registered secret": (
            f"print({SECRET[:10]!r} + {SECRET[10:]!r})",
            lambda error, text: not error and SECRET not in text,
        ),
    }


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sandboxed_code(figures: Figures, work: Path, rounds: int = 1) -> None:
    """Every class of hostile code is contained, and the run goes on after it."""
    root = work / "sandbox-campaign"
    (root / "keys").mkdir(parents=True)
    (root / "runs").mkdir()
    (root / "keys" / "id_ed25519").write_text(f"PRIVATE {SECRET}\n")
    (root / "sentinel").write_text("unchanged\n")
    before = _digest(root / "sentinel")
    register_secret(SECRET)
    tally = [0, 0, 0]  # hostile calls, contained, processes left behind
    with LoopbackServer(lambda _r: LoopbackResponse.json_body({})) as server:
        classes = _classes(root, server.port)
        for number in range(rounds):
            for name, (code, contained) in classes.items():
                marker = f"hostile-sandbox-{os.getpid()}-{number}-{len(name)}-{name[:6]}"
                _one(figures, root, name, f"{code}\n# {marker}", contained, marker, tally)
    figures.values["sandbox: classes of hostile code"] = len(classes)
    figures.values["sandbox: hostile calls / contained"] = f"{tally[0]} / {tally[1]}"
    figures.values["sandbox: processes left behind"] = tally[2]
    if _digest(root / "sentinel") != before:
        figures.fail("sandbox: the sentinel outside the work directory changed")


def _one(
    figures: Figures,
    root: Path,
    name: str,
    code: str,
    contained: Callable[[bool, str], bool],
    marker: str,
    tally: list[int],
) -> None:
    path = root / "runs" / "trace.jsonl"
    path.unlink(missing_ok=True)
    agent = Agent(
        _model(code),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(milliseconds=1)),
        ids=CountingIds(),
        tools=builtin_tools(("run_python",), SandboxSession(SMALL)),
        policy=Policy(allow=frozenset({"run_python"})),
        trace=FileTraceSink(path),
    )
    with agent:
        answer = agent.run("go").output
    results = [
        (e.body.result.is_error, e.body.result.content)
        for e in Trace.load(path).events
        if isinstance(e.body, ToolReturned)
    ]
    (error, text), (_, alive) = results
    ok = contained(error, text) and "alive" in alive and answer == "done"
    tally[0] += 1
    tally[1] += ok
    if not ok:
        figures.fail(f"sandbox: {name} was not contained: error={error} {text[:300]!r}")
    if SECRET in path.read_text():
        figures.fail(f"sandbox: {name}: the planted secret reached the trace")
    left = _leftovers(marker)
    tally[2] += left
    if left:
        figures.fail(f"sandbox: {name} left {left} process(es) behind")
