"""Hostile-input campaign: received bundles, hostile servers, planted links, concurrent runs, secrets.

Thirteen attacks, each counted, each with the invariant it must not break:

1. **Hostile bundles.** A received directory holds a real trace, a spec naming a tool module
   that marks its own import (beside the trace, and as a `json`-like name in the working
   directory), and `twinflow.kernel:run_process` as a tool. `verify`, `checkpoint`, `prove`,
   `diff` and `replay` (without `--spec`) run inside it: no module of the bundle is imported,
   no process is started.
2. **Hostile servers on loopback.** A real HTTP server answers with deep nesting (in the
   content, in tool arguments, as the whole body), giant strings, 5000-digit numbers, `NaN`,
   `1e400` and garbage, in native and structured-action mode, through the real transport
   and the agent loop: every outcome is an answer or a typed `TwinflowError` (never a
   `RecursionError` or another traceback), and every trace verifies. A model repeating a
   tool-call id is refused before its tool runs.
3. **Planted links.** A symbolic link planted at every name twinflow writes (the spec copy,
   `run.json`, `results.json`, a case result, the reports, the server log, the run directory
   itself): the write is refused with `FileWriteError` (reason ``link``) and the link's target is unchanged.
4. **Concurrent runs.** Several `twinflow run` processes into one `--out`, held together by a
   file barrier inside their tool call: each printed trace holds its own run, its spec
   beside it is its own, and its printed root is the root `verify` computes.
5. **Secrets.** A run with `api_key_env`, a run whose server is down, a URL with the key in
   userinfo or query: the key reaches the server as a bearer header, and appears in no file
   of the run directory, no stdout, no stderr.
6. **Slow heads.** Socket servers that dribble the status line, send headers or `1xx` answers
   forever, redirect before a dribbled head, or stream inside the idle timeout forever: every
   exchange ends with `TransportError "timeout"` at its deadline.
7. **Keys in error paths, terminal escapes.** A server echoes the key (exact, url-encoded,
   base64 of `user:key`, split across deltas) and OSC / CSI / OSC 52 / `\r` / C1 / bidi escapes
   in reply content, a streamed error event, a non-JSON event, a bad field and an error status,
   and a lone surrogate: no form of the key in stdout, stderr, any file of the run or the trace
   page; no raw control on the terminal; no traceback.
8. **Special files.** A FIFO, `/dev/zero`, `/dev/tty` and `/dev/urandom` named as the trace,
   spec, dataset or checkpoint of each command (and the stdlib verifier): exit 2 at once.
9. **Spec credentials.** Keys in headers of other names, in a URL's fragment or path: refused
   before any file is written. **One writer**: eval run, rescore and merge into a directory
   another process writes exit 2.
10. **Received run directories.** A shard's or run's ``results.json`` names its trace as an
    absolute path, a climbing path, through a link (file, ``traces/`` directory), at a FIFO, or
    under a key its case does not make: `merge_runs`, `rescore` and `compare_runs` refuse with a
    typed error, read nothing outside the directory, and merge creates no output directory; a
    scored trace rewritten, removed or swapped after scoring makes compare refuse.
11. **Prefix and foreign checkpoints.** A checkpoint (signed note, unsigned note) of the first
    events, or of every size short of the whole, against a trace whose tail was rewritten and
    re-chained, and notes signed for another origin: `twinflow-trace verify` fails each (exit 1)
    unless the tail is accepted explicitly or the origin named.
12. **Planted auditor modules.** ``twinflow/trace/__main__.py``, ``argparse.py``, ``pathlib.py``
    beside a trace: the ``twinflow-trace`` script and ``python -P -m twinflow.trace`` run none.
13. **Signed evidence** (`_hostile_signed.py`): forged, copied and moved signed decisions,
    received unsigned ones, shared call ids, one witness key under two names, and witness
    states edited by hand: none is accepted.
13. **Secrets as a class, processes that end with the run** (`_hostile_secrets.py`).
14. **Code in the sandbox** (`_hostile_sandbox.py`): twenty classes of hostile ``run_python`` code.
15. **Simulated users** (`_hostile_simuser.py`): forged links from turns to a simulator's trace.

    .venv/bin/python reliability/hostile.py --short | --full
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import Figures, parse_mode, twinflow
from _hostile_continue import continuations
from _hostile_conversations import conversations
from _hostile_evidence import eval_evidence
from _hostile_modules import guard_lends_nothing, modules_off_the_allowlist
from _hostile_secrets import secrets_as_a_class
from _hostile_signed import signed_evidence

from twinflow._base._errors import FileWriteError, UnsafePathError
from twinflow._base._files import hold_directory, write_new, write_replace
from twinflow.agent import (
    Agent,
    FunctionModel,
    Policy,
    RunError,
    Trace,
    verify_agent_trace,
)
from twinflow.cli._run import claim_run_files
from twinflow.eval import Case, Dataset, RunDirError, run_eval
from twinflow.eval._errors import TraceMismatchError
from twinflow.eval._rescore import merge_runs, rescore
from twinflow.eval._results import Shard
from twinflow.eval._stats import compare_runs
from twinflow.kernel import (
    CountingIds,
    HttpTransport,
    LoopbackServer,
    SteppingClock,
    SubprocessLauncher,
    TransportError,
)
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._netpolicy import free_port
from twinflow.models import OpenAICompatibleChatModel
from twinflow.trace import (
    MemoryTraceSink,
    TraceSink,
    TwinflowError,
    canonical_bytes,
    read_checkpoint,
)
from twinflow.trace.__main__ import main as trace_main
from twinflow.trace._format import GENESIS, encode_line
from twinflow.trace._keys import generate_key
from twinflow.trace._note import CheckpointBody, sign_checkpoint_note
from twinflow.vocab import CallId, Message, ToolCallPart

KEY = "sk-reliability-hostile-7f3a9c"
START = datetime(2026, 1, 1, tzinfo=UTC)
TOOL = '''
import os, time

def add(a: int, b: int) -> int:
    """Add two integers."""
    barrier = os.environ.get("MEET_DIR")
    if barrier:
        open(os.path.join(barrier, str(os.getpid())), "w").close()
        give_up = time.monotonic() + 300
        while len(os.listdir(barrier)) < int(os.environ["MEET_N"]):
            if time.monotonic() > give_up:
                raise RuntimeError("the other runs never arrived")
            time.sleep(0.01)
    return a + b
'''
PLANTED = '''
import pathlib
pathlib.Path(__file__).with_name("PWNED-" + __name__).write_text("imported")

def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
SPEC = """\
prompt: {prompt}
model:
  url: {url}
  dialect: llama.cpp
  mode: {mode}
{extra}tools: [{tools}]
policy:
  allow: [add]
max_steps: 3
"""


def scripted(request: LoopbackRequest) -> LoopbackResponse:
    """An OpenAI-compatible server: call `add`, then answer with its result."""
    body = request.json_value()
    assert isinstance(body, dict)
    messages = body["messages"]
    assert isinstance(messages, list)
    done = any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
    call = {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    message: dict[str, Any] = (
        {"role": "assistant", "content": "five"}
        if done
        else {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": call}],
        }
    )
    if not body.get("stream"):
        return LoopbackResponse.json_body(
            {"model": "scripted", "choices": [{"index": 0, "message": message}], "usage": {}}
        )
    # `twinflow run` streams unless --quiet: the same message as one delta, then the finish.
    delta = dict(message)
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": 0, **delta["tool_calls"][0]}]
    events = [
        {"model": "scripted", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"model": "scripted", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    sse = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
    return LoopbackResponse(
        headers=(("Content-Type", "text/event-stream"),), stream=lambda: iter([sse])
    )


# -- 1. hostile bundles ----------------------------------------------------------------------


def bundles(figures: Figures, work: Path, url: str, rounds: int) -> None:
    user = work / "user"
    user.mkdir()
    (user / "calc.py").write_text(TOOL)
    (user / "spec.yaml").write_text(
        SPEC.format(prompt="add", url=url, mode="native", extra="", tools="calc:add")
    )
    made = twinflow("run", "spec.yaml", "--out", "out", cwd=user)
    if made.returncode != 0:
        figures.fail(f"the bundle's source run failed: {made.stderr}")
        return
    attempts = imported = 0
    variants = {
        "planted-module": "calc:add",
        "kernel-process": "twinflow.kernel:run_process",
        "shadowing-name": "helpers:add",
    }
    for round_ in range(rounds):
        for name, tools in variants.items():
            bundle = work / f"bundle-{round_}-{name}"
            bundle.mkdir()
            shutil.copy(user / "out" / "trace.jsonl", bundle / "trace.jsonl")
            (bundle / "spec.yaml").write_text(
                SPEC.format(prompt="add", url=url, mode="native", extra="", tools=tools)
            )
            for module in ("calc", "helpers"):
                (bundle / f"{module}.py").write_text(PLANTED)
            commands = [
                ("verify", "trace.jsonl"),
                ("checkpoint", "trace.jsonl"),
                ("prove", "trace.jsonl", "--seq", "0", "--origin", "example.org/lab"),
                ("diff", "trace.jsonl", "trace.jsonl"),
                ("replay", "trace.jsonl", "--mode", "live"),
                ("replay", "trace.jsonl", "--spec", str(user / "spec.yaml"), "--mode", "live"),
            ]
            for command in commands:
                attempts += 1
                result = twinflow(*command, cwd=bundle)
                marks = sorted(p.name for p in bundle.glob("PWNED-*"))
                if marks:
                    imported += 1
                    figures.fail(f"{name}: `{' '.join(command)}` imported {marks}")
                    for mark in bundle.glob("PWNED-*"):
                        mark.unlink()
                expected = 2 if command[0] == "replay" and "--spec" not in command else 0
                if result.returncode != expected or "Traceback" in result.stderr:
                    figures.fail(
                        f"{name}: `{' '.join(command)}` exited {result.returncode}: {result.stderr[-300:]}"
                    )
    figures.values["bundle commands run inside hostile bundles"] = attempts
    figures.values["bundle modules imported"] = imported


# -- 2. hostile servers -----------------------------------------------------------------------

DEEP = "[" * 5000 + "]" * 5000


def _reply(content: Any = None, arguments: str | None = None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if arguments is not None:
        call = {"name": "add", "arguments": arguments}
        message["tool_calls"] = [{"id": "c1", "type": "function", "function": call}]
    return json.dumps({"model": "hostile", "choices": [{"index": 0, "message": message}]}).encode()


def payloads(scale: int) -> dict[str, bytes]:
    big = "x" * (2 * 1024 * 1024)
    return {
        "deep content": _reply(DEEP),
        "deep arguments": _reply(None, '{"a": ' + DEEP + "}"),
        "deep body": DEEP.encode(),
        "deep decoded body": ('{"choices": ' + "[" * 900 + "]" * 900 + "}").encode(),
        "giant content": _reply(big),
        "giant arguments": _reply(None, '{"a": "' + big + '"}'),
        "5000-digit number": _reply(
            '{"action": "final", "answer": "x", "n": ' + "9" * 5000 * scale + "}"
        ),
        "5000-digit argument": _reply(None, '{"a": ' + "9" * 5000 + ', "b": 1}'),
        "NaN action": _reply(
            '{"action": "call_tool", "tool": "add", "arguments": {"a": NaN, "b": 1}}'
        ),
        "1e400 argument": _reply(None, '{"a": 1e400, "b": 1}'),
        "garbage": b"\x00\xff not json at all",
        "string body": b'"just a string"',
        "no choices": b"{}",
    }


def servers(figures: Figures, scale: int) -> None:
    cases = payloads(scale)
    outcomes: dict[str, int] = {}
    runs = 0
    for name, body in cases.items():
        with LoopbackServer(
            lambda _r, body=body: LoopbackResponse(
                body=body, headers=(("Content-Type", "application/json"),)
            )
        ) as server:
            for mode in ("native", "structured-action"):
                transport = HttpTransport()
                model = OpenAICompatibleChatModel(
                    transport,
                    base_url=server.url,
                    dialect="llama.cpp",
                    mode=mode,
                    max_attempts=2,  # type: ignore[arg-type]
                )
                sink = MemoryTraceSink()

                def add(a: int, b: int) -> int:
                    """Add two integers."""
                    return a + b

                agent = Agent(
                    model,
                    clock=SteppingClock(
                        __import__("datetime").datetime(
                            2026, 1, 1, tzinfo=__import__("datetime").UTC
                        )
                    ),
                    ids=CountingIds(),
                    tools=[add],
                    policy=Policy(allow=frozenset({"add"})),
                    max_steps=2,
                    trace=sink,
                )
                runs += 1
                try:
                    agent.run("add 2 and 3")
                    kind = "answered"
                except TwinflowError as exc:
                    kind = type(exc).__name__
                except BaseException as exc:  # the invariant: nothing else escapes
                    kind = f"UNTYPED {type(exc).__name__}"
                    figures.fail(f"{name} ({mode}): {type(exc).__name__}: {str(exc)[:200]}")
                finally:
                    transport.close()
                outcomes[kind] = outcomes.get(kind, 0) + 1
                report = verify_agent_trace(sink.data)
                if report.problem is not None:
                    figures.fail(f"{name} ({mode}): the trace does not verify: {report.problem}")
    figures.values["hostile server runs (payloads x modes)"] = f"{runs} ({len(cases)} x 2)"
    figures.values["hostile server outcomes"] = dict(sorted(outcomes.items()))

    # A model repeating a tool-call id: refused before the tool of the repeating reply runs.
    ran: list[int] = []

    def counted(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(1)
        return a + b

    replies: Iterator[Message] = iter(
        [
            Message(
                role="assistant",
                parts=(
                    ToolCallPart(id=CallId("same"), name="counted", arguments={"a": 1, "b": 2}),
                ),
            )
        ]
        * 2
    )
    agent = Agent(
        FunctionModel(lambda _r: next(replies)),
        clock=SteppingClock(
            __import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").UTC)
        ),
        ids=CountingIds(),
        tools=[counted],
        policy=Policy(allow=frozenset({"counted"})),
    )
    try:
        agent.run("go")
        figures.fail("a repeated tool-call id was accepted")
    except RunError as exc:
        if exc.reason != "invalid_reply":
            raise
    figures.values["tool runs after a repeated call id"] = len(ran) - 1
    if len(ran) != 1:
        figures.fail(f"the tool ran {len(ran)} times; only the first call may run")


# -- 3. planted links -------------------------------------------------------------------------


def links(figures: Figures, work: Path) -> None:
    writers: dict[str, Callable[[Path], object]] = {
        "spec copy (claim_run_files)": lambda d: claim_run_files(d, "prompt: x"),
        "run.json": lambda d: write_replace(d / "run.json", b"{}"),
        "results.json": lambda d: write_replace(d / "results.json", b"{}"),
        "case result": lambda d: write_replace(d / "a@1.json", b"{}"),
        "lab-notes.md": lambda d: write_replace(d / "lab-notes.md", b"# notes"),
        "trace-style exclusive file": lambda d: write_new(d / "spec.yaml", b"x"),
    }
    names = {
        "spec copy (claim_run_files)": "spec.yaml",
        "run.json": "run.json",
        "results.json": "results.json",
        "case result": "a@1.json",
        "lab-notes.md": "lab-notes.md",
        "trace-style exclusive file": "spec.yaml",
    }
    refused = 0
    for what, write in writers.items():
        for dangling in (False, True):
            for as_directory in (False, True):
                case = work / f"link-{len(os.listdir(work))}"
                case.mkdir()
                victim = case / "victim"
                if not dangling:
                    victim.write_bytes(b"precious") if not as_directory else victim.mkdir()
                target = case / "run"
                if as_directory:
                    target.symlink_to(victim, target_is_directory=True)
                else:
                    target.mkdir()
                    (target / names[what]).symlink_to(victim)
                try:
                    write(target)
                    figures.fail(
                        f"{what}: a planted link ({'dir' if as_directory else 'file'}, dangling={dangling}) was written through"
                    )
                except FileNotFoundError:
                    refused += 1
                except FileWriteError as exc:
                    if exc.reason != "link":
                        raise
                    refused += 1
                after = (
                    None
                    if not victim.exists()
                    else (sorted(os.listdir(victim)) if victim.is_dir() else victim.read_bytes())
                )
                expected = None if dangling else ([] if as_directory else b"precious")
                if after != expected:
                    figures.fail(f"{what}: the link's target changed: {after!r}")
    # The embedded server's log, opened by the kernel's launcher.
    case = work / "link-log"
    case.mkdir()
    (case / "victim").write_bytes(b"precious")
    (case / "model-server.log").symlink_to(case / "victim")
    try:
        SubprocessLauncher().launch(
            [sys.executable, "-c", "pass"],
            health_url=f"http://127.0.0.1:{free_port()}/",
            deadline=5,
            log_path=case / "model-server.log",
        )
        figures.fail("the server log was opened through a planted link")
    except FileWriteError as exc:
        if exc.reason != "link":
            raise
        refused += 1
    if (case / "victim").read_bytes() != b"precious":
        figures.fail("the server log's link target changed")
    figures.values["planted links refused"] = f"{refused} of {len(writers) * 4 + 1}"


# -- 4. concurrent runs -----------------------------------------------------------------------


def concurrent(figures: Figures, work: Path, url: str, runs: int, rounds: int) -> None:
    project = work / "concurrent"
    project.mkdir()
    (project / "calc.py").write_text(TOOL)
    mismatched = total = 0
    for round_ in range(rounds):
        meet = project / f"meet-{round_}"
        meet.mkdir()
        processes = []
        for k in range(runs):
            spec = project / f"spec-{round_}-{k}.yaml"
            spec.write_text(
                SPEC.format(
                    prompt=f"round {round_} run {k}",
                    url=url,
                    mode="native",
                    extra="",
                    tools="calc:add",
                )
            )
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "twinflow.cli",
                        "run",
                        str(spec),
                        "--out",
                        "out",
                        "--json",
                    ],
                    cwd=project,
                    env={**os.environ, "MEET_DIR": str(meet), "MEET_N": str(runs)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for k, process in enumerate(processes):
            stdout, stderr = process.communicate(timeout=300)
            total += 1
            if process.returncode != 0:
                mismatched += 1
                figures.fail(f"round {round_} run {k} exited {process.returncode}: {stderr[-300:]}")
                continue
            outcome = json.loads(stdout)
            trace = project / outcome["trace"]
            spec = trace.with_name(trace.name.replace("trace", "spec").replace(".jsonl", ".yaml"))
            mine = f"round {round_} run {k}"
            root = Trace.load(trace).checkpoint().root
            if (
                mine not in trace.read_text()
                or mine not in spec.read_text()
                or root != outcome["root"]
            ):
                mismatched += 1
                figures.fail(
                    f"{mine}: printed {trace.name} / root {outcome['root'][:12]} is not its own"
                )
    figures.values["concurrent runs into one --out"] = f"{total} ({rounds} rounds of {runs})"
    figures.values["runs whose trace, spec or root was not their own"] = mismatched


# -- 5. secrets -------------------------------------------------------------------------------


def secrets(figures: Figures, work: Path) -> None:
    seen: list[str] = []

    def keyed(request: LoopbackRequest) -> LoopbackResponse:
        seen.extend(v for k, v in request.headers if k.lower() == "authorization")
        return scripted(request)

    project = work / "secrets"
    project.mkdir()
    (project / "calc.py").write_text(TOOL)
    extra = "  api_key_env: TWINFLOW_RELIABILITY_KEY\n"
    outputs: list[str] = []
    dead = f"http://127.0.0.1:{free_port()}"
    with LoopbackServer(keyed) as server:
        runs = {
            "keyed": SPEC.format(
                prompt="add", url=server.url, mode="native", extra=extra, tools="calc:add"
            ),
            "keyed, server down": SPEC.format(
                prompt="add", url=dead, mode="native", extra=extra, tools="calc:add"
            ),
            "key in userinfo": SPEC.format(
                prompt="add",
                url=server.url.replace("//", f"//u:{KEY}@"),
                mode="native",
                extra="",
                tools="calc:add",
            ),
            "key in query": SPEC.format(
                prompt="add",
                url=f"{server.url}/?api_key={KEY}",
                mode="native",
                extra="",
                tools="calc:add",
            ),
        }
        for name, text in runs.items():
            spec = project / f"{name.replace(' ', '-').replace(',', '')}.yaml"
            spec.write_text(text)
            result = twinflow(
                "run", spec.name, "--out", "out", cwd=project, env={"TWINFLOW_RELIABILITY_KEY": KEY}
            )
            outputs += [result.stdout, result.stderr]
            if "Traceback" in result.stderr:
                figures.fail(f"{name}: a traceback: {result.stderr[-300:]}")
            eval_out = twinflow(
                "run",
                spec.name,
                "--out",
                "out",
                "--json",
                cwd=project,
                env={"TWINFLOW_RELIABILITY_KEY": KEY},
            )
            outputs += [eval_out.stdout, eval_out.stderr]
    files = (
        [p for p in (project / "out").rglob("*") if p.is_file()]
        if (project / "out").exists()
        else []
    )
    leaks = [str(p.relative_to(project)) for p in files if KEY.encode() in p.read_bytes()]
    leaks += [f"output {i}" for i, text in enumerate(outputs) if KEY in text]
    figures.values["artefacts and outputs grepped for the key"] = len(files) + len(outputs)
    figures.values["artefacts or outputs holding the key"] = len(leaks)
    figures.values["requests carrying the bearer key"] = (
        f"{seen.count(f'Bearer {KEY}')} of {len(seen)}"
    )
    for leak in leaks:
        figures.fail(f"the key leaked into {leak}")
    if not seen or any(v != f"Bearer {KEY}" for v in seen):
        figures.fail(f"the server saw authorization headers {sorted(set(seen))[:3]}")


# -- 6. received run directories -------------------------------------------------------------

SECRET = b"SECRET-KEY-MATERIAL-hostile\n"


def _yes_agent(case: Case, sink: TraceSink, seed: int = 0) -> Agent[Any]:
    return Agent(
        FunctionModel(lambda request: Message.assistant("yes")),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        trace=sink,
    )


def _plant_path(run_dir: Path, secret: Path, variant: str) -> None:
    """Make the first case of ``run_dir`` name its trace the way ``variant`` says."""
    results = json.loads((run_dir / "results.json").read_bytes())
    case = results["cases"][0]
    trace = run_dir / case["trace"]
    outside = secret.parent / f"outside-{variant}-{run_dir.name}"
    outside.mkdir()
    if variant == "absolute":
        case["trace"] = str(secret)
    elif variant == "climbing":
        case["trace"] = os.path.relpath(secret, run_dir)
    elif variant == "climbing-inside":
        case["trace"] = f"traces/../../{run_dir.name}/../{secret.name}"
    elif variant == "dot-component":
        case["trace"] = "./" + case["trace"]
    elif variant == "link":
        trace.unlink()
        trace.symlink_to(secret)
    elif variant == "dangling-link":
        trace.unlink()
        trace.symlink_to(outside / "nowhere")
    elif variant == "traces-dir-link":
        shutil.move(str(run_dir / "traces"), str(outside / "traces"))
        (run_dir / "traces").symlink_to(outside / "traces")
    elif variant == "fifo":
        trace.unlink()
        os.mkfifo(trace)
    elif variant == "key":
        case["key"] = "../../escape"
    (run_dir / "results.json").write_text(json.dumps(results))


PATH_VARIANTS = (
    "absolute",
    "climbing",
    "climbing-inside",
    "dot-component",
    "link",
    "dangling-link",
    "traces-dir-link",
    "fifo",
    "key",
)


RECORDED_PATH_ONLY = ("absolute", "climbing", "climbing-inside", "dot-component")


def received_paths(figures: Figures, work: Path) -> None:
    """Merge, rescore and compare of run directories whose results name paths that leave them."""
    root = work / "received"
    root.mkdir()
    secret = root / "secret.key"
    secret.write_bytes(SECRET)
    dataset = Dataset(
        name="yesno",
        cases=tuple(Case(id=f"q{i}", input=f"q {i}", expected="yes") for i in range(4)),
    )
    refused = tried = 0
    for variant in PATH_VARIANTS:
        base = root / variant
        shards = [base / "s1", base / "s2"]
        for i, path in enumerate(shards, start=1):
            run_eval(
                dataset, _yes_agent, path, clock=SteppingClock(START), shard=Shard(index=i, count=2)
            )
        whole = base / "whole"
        other = base / "other"
        for path in (whole, other):
            run_eval(dataset, _yes_agent, path, clock=SteppingClock(START))
        _plant_path(shards[1], secret, variant)
        _plant_path(whole, secret, variant)
        attempts: dict[str, Callable[[], object]] = {
            "merge": functools.partial(merge_runs, shards, base / "merged"),
            "compare": functools.partial(compare_runs, other, whole),
            "rescore": functools.partial(rescore, whole),
        }
        for command, attempt in attempts.items():
            if (command == "rescore" and variant in RECORDED_PATH_ONLY) or (
                command == "compare" and variant == "key"
            ):
                continue  # rescore reads traces/<key>.jsonl, compare the recorded path
            tried += 1
            try:
                attempt()
                figures.fail(f"{command} accepted a received path ({variant})")
            except (UnsafePathError, RunDirError, TraceMismatchError):
                refused += 1
            written = [
                p
                for p in base.rglob("*")
                if not p.is_symlink() and p.is_file() and p.read_bytes() == SECRET
            ]
            if written or (base / "merged").exists() or (whole / "rescore.json").exists():
                figures.fail(f"{command} ({variant}) wrote something: {written[:2]}")
    tampered = 0
    for change in ("rewritten", "removed", "swapped"):
        base = root / f"tamper-{change}"
        for name in ("a", "b"):
            run_eval(dataset, _yes_agent, base / name, clock=SteppingClock(START))
        traces = sorted((base / "b" / "traces").glob("*.jsonl"))
        if change == "rewritten":
            traces[0].write_bytes(traces[0].read_bytes().replace(b'"yes"', b'"no!"', 1))
        elif change == "removed":
            traces[0].unlink()
        else:
            traces[0].write_bytes(traces[1].read_bytes())
        try:
            compare_runs(base / "a", base / "b")
            figures.fail(f"compare accepted a {change} trace")
        except TraceMismatchError:
            tampered += 1
    figures.values["received paths refused (merge, rescore, compare)"] = f"{refused} of {tried}"
    figures.values["traces altered after scoring refused by compare"] = f"{tampered} of 3"


# -- 7. prefix and foreign checkpoints ----------------------------------------------------------


def _auditor(*argv: str, cwd: Path) -> int:
    """`twinflow-trace ARGV` in this process, its output swallowed; the exit code."""
    with (
        contextlib.chdir(cwd),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        return trace_main(list(argv))


def prefix_checkpoints(figures: Figures, work: Path, sizes: Iterable[int]) -> None:
    """Checkpoints of every prefix against a trace whose tail was forged, and foreign origins."""
    root = work / "prefix"
    root.mkdir()
    sink = MemoryTraceSink()
    agent: Agent[str] = Agent(
        FunctionModel(lambda request: Message.assistant("hello")),
        clock=SteppingClock(START),
        ids=CountingIds(),
        trace=sink,
    )
    for _ in range(3):
        agent.run("hi")
    genuine = sink.data
    lines = genuine.splitlines(keepends=True)
    total = len(lines)
    signer = generate_key("example.org/lab", bytes(range(32)))
    (root / "lab.pub").write_text(signer.verifier.text + "\n")
    refused = tried = 0
    for n in sizes:
        if n >= total:
            continue
        # The forger keeps events 0..n-1 and rewrites the rest, the chain recomputed.
        kept = lines[:n]
        forged = b"".join(kept) + _rechained_tail(lines, n)
        (root / f"forged-{n}.jsonl").write_bytes(forged)
        cp = read_checkpoint(genuine, n)
        body = CheckpointBody("example.org/lab", n, bytes.fromhex(cp.root))
        (root / f"cp{n}.note").write_bytes(sign_checkpoint_note(body, [signer]))
        (root / f"cp{n}.body").write_text(body.text)
        for trace in (f"forged-{n}.jsonl",):
            for form, keys in ((f"cp{n}.note", ("--key", "lab.pub")), (f"cp{n}.body", ())):
                tried += 1
                code = _auditor(
                    "verify", trace, "--checkpoint", form, *keys, "--allow-incomplete", cwd=root
                )
                if code == 1:
                    refused += 1
                else:
                    figures.fail(f"a checkpoint of {n} of {total} events vouched for a forged tail")
    whole = read_checkpoint(genuine)
    (root / "genuine.jsonl").write_bytes(genuine)
    for origin in ("example.org/other", "example.org/lab/", "example.org/Lab", "x"):
        body = CheckpointBody(origin, whole.size, bytes.fromhex(whole.root))
        (root / "foreign.note").write_bytes(sign_checkpoint_note(body, [signer]))
        tried += 1
        code = _auditor(
            "verify", "genuine.jsonl", "--checkpoint", "foreign.note", "--key", "lab.pub", cwd=root
        )
        if code == 1:
            refused += 1
        else:
            figures.fail(f"a note signed for origin {origin!r} was accepted")
    figures.values["prefix / foreign-origin checkpoints refused"] = f"{refused} of {tried}"


def _rechained_tail(lines: list[bytes], n: int) -> bytes:
    head, infix = b'{"digest":"', b'","event":'
    prev = lines[n - 1][len(head) : len(head) + 64].decode() if n else GENESIS
    out = []
    for line in lines[n:]:
        event = json.loads(line)["event"]
        event["prev"] = prev
        if event["body"].get("kind") == "model_responded":
            event["body"] = json.loads(json.dumps(event["body"]).replace("hello", "FORGED"))
        data = canonical_bytes(event)
        prev = hashlib.sha256(data).hexdigest()
        out.append(head + prev.encode() + infix + data + b"}\n")
    return b"".join(out)


# -- 8. planted auditor modules -----------------------------------------------------------------


def planted_auditor(figures: Figures, work: Path) -> None:
    """The auditor's command inside a bundle that plants the modules it would import."""
    bundle = work / "planted-auditor"
    planted = ("twinflow/trace/__main__.py", "twinflow/__init__.py", "argparse.py", "pathlib.py")
    for name in planted:
        path = bundle / name
        path.parent.mkdir(parents=True, exist_ok=True)
        mark = bundle / ("RAN-" + name.replace("/", "-"))
        path.write_text(f"open({str(mark)!r}, 'w').close()\nraise SystemExit(99)\n")
    event = {
        "at": "2026-01-01T00:00:00Z",
        "body": {"kind": "run_finished"},
        "prev": GENESIS,
        "seq": 0,
    }
    (bundle / "t.jsonl").write_bytes(encode_line(canonical_bytes(event))[0])
    commands = [
        [str(Path(sys.executable).parent / "twinflow-trace"), "verify", "t.jsonl"],
        [sys.executable, "-P", "-m", "twinflow.trace", "verify", "t.jsonl"],
    ]
    clean = 0
    for argv in commands:
        result = subprocess.run(
            argv, cwd=bundle, capture_output=True, text=True, timeout=120, check=False
        )
        ran = sorted(p.name for p in bundle.glob("RAN-*"))
        if result.returncode != 0 or ran:
            figures.fail(f"{argv[0]} in a planted bundle: exit {result.returncode}, ran {ran}")
        else:
            clean += 1
    figures.values["auditor commands clean in a planted bundle"] = f"{clean} of {len(commands)}"


# -- round two: slow heads, keys in error paths, terminal escapes, special files, spec
#    credentials, one writer per run directory, live replay's notice ----------------------------

SAFETY_S = 60.0


def _raw_server(script: Callable[[Any, Any], None]) -> tuple[str, Callable[[], None]]:
    """A loopback socket server answering each connection with `script(conn, stop)`."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(SAFETY_S)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        break
                    data += more
                with contextlib.suppress(OSError):
                    script(conn, stop)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        listener.close()
        thread.join(SAFETY_S)

    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1", close


def _dribble(data: bytes, gap: float) -> Callable[[Any, Any], None]:
    def script(conn: Any, stop: Any) -> None:
        for i in range(int(SAFETY_S / gap)):
            if stop.is_set():
                return
            conn.sendall(data[i % len(data) : i % len(data) + 1])
            stop.wait(gap)

    return script


def _flood(chunk: bytes, head: bytes = b"") -> Callable[[Any, Any], None]:
    def script(conn: Any, stop: Any) -> None:
        conn.sendall(head)
        for _ in range(int(SAFETY_S * 1000)):
            if stop.is_set():
                return
            conn.sendall(chunk)
            stop.wait(0.001)

    return script


def slow_heads(figures: Figures) -> None:
    """Servers that never finish their head (or body): each exchange must end at its deadline."""

    def status_then(script: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
        def both(conn: Any, stop: Any) -> None:
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            script(conn, stop)

        return both

    def redirect_then(conn: Any, stop: Any) -> None:
        conn.sendall(
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n"
        )
        _dribble(b"HTTP/1.1 200 OK\r\n", 0.05)(conn, stop)

    sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    variants: dict[str, tuple[Callable[[Any, Any], None], bool]] = {
        "status line a byte per 50 ms": (_dribble(b"HTTP/1.1 200 OK\r\n", 0.05), False),
        "status line a byte per 500 ms": (_dribble(b"HTTP/1.1 200 OK\r\n", 0.5), False),
        "headers forever": (status_then(_dribble(b"X-Pad: a\r\n", 0.02)), False),
        "100 Continue forever": (_flood(b"HTTP/1.1 100 Continue\r\n\r\n"), False),
        "102 Processing forever": (_flood(b"HTTP/1.1 102 Processing\r\n\r\n"), False),
        "103 Early Hints forever": (
            _flood(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"),
            False,
        ),
        "redirect, then a dribbled head": (redirect_then, False),
        "stream: status dribbled": (_dribble(b"HTTP/1.1 200 OK\r\n", 0.05), True),
        "stream: 100 Continue forever": (_flood(b"HTTP/1.1 100 Continue\r\n\r\n"), True),
        "stream: body inside idle_timeout forever": (_flood(b":\n", head=sse), True),
    }
    timeout = 1.0
    late = 0
    worst = 0.0
    for name, (script, stream) in variants.items():
        url, close = _raw_server(script)
        started = time.monotonic()
        try:
            with HttpTransport(follow_redirects=True, max_redirects=50) as transport:
                if stream:
                    for _ in transport.post_stream(url, {}, timeout=timeout, idle_timeout=30.0):
                        pass
                else:
                    transport.post_json(url, {}, timeout=timeout)
            late += 1
            figures.fail(f"slow head {name}: answered instead of timing out")
        except TransportError as exc:
            if exc.reason != "timeout":
                late += 1
                figures.fail(f"slow head {name}: {exc.reason}: {str(exc)[:200]}")
        except Exception as exc:  # a typed error that is not the deadline's
            late += 1
            figures.fail(f"slow head {name}: {type(exc).__name__}: {str(exc)[:200]}")
        finally:
            close()
        worst = max(worst, time.monotonic() - started)
    figures.values["slow heads: exchanges (timeout 1 s)"] = len(variants)
    figures.values["slow heads: not ended by the deadline"] = late
    figures.values["slow heads: longest exchange, s"] = round(worst, 1)


KEY_FORMS = (
    KEY,
    urllib.parse.quote(KEY, safe=""),
    base64.b64encode(f"user:{KEY}".encode()).decode()[8:-4],
)
TERMINAL = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07ok\rFAIL\u202e\x9b\x1b[31m"


def _echo_server(name: str) -> Callable[[LoopbackRequest], LoopbackResponse]:
    """A model server that echoes the key (and terminal escapes) along the path `name` names."""
    keyed = (
        f"{KEY_FORMS[0]} {KEY_FORMS[1]} Basic {base64.b64encode(f'user:{KEY}'.encode()).decode()}"
    )

    def events(*items: object) -> LoopbackResponse:
        body = b"".join(
            f"data: {i if isinstance(i, str) else json.dumps(i)}\n\n".encode() for i in items
        )
        return LoopbackResponse(
            headers=(("Content-Type", "text/event-stream"),), stream=lambda: iter([body])
        )

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def answer(request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        stream = isinstance(body, dict) and body.get("stream") is True
        text = {
            "content": f"your key {keyed} {TERMINAL}",
            "split key": f"a {KEY} b",
            "lone surrogate": "a \ud800 b \udfff",
        }.get(name)
        if text is not None:
            if not stream:
                message = {"role": "assistant", "content": text}
                return LoopbackResponse.json_body(
                    {
                        "model": "m",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    }
                )
            cut = text.index(KEY) + 5 if KEY in text else len(text) // 2
            return events(
                chunk({"role": "assistant", "content": text[:cut]}),
                chunk({"content": text[cut:]}),
                chunk({}, "stop"),
                "[DONE]",
            )
        if name == "streamed error event":
            return events({"error": {"message": f"bad key {keyed} {TERMINAL}"}})
        if name == "non-JSON event":
            return events(f"oops {keyed} {TERMINAL.replace(chr(13), '')}")
        if name == "bad field":
            return events(chunk({"role": keyed}, finish=7))  # type: ignore[arg-type]  # a bad field on purpose
        if name == "error status":
            return LoopbackResponse(status=401, body=f"denied {keyed} {TERMINAL}".encode())
        raise AssertionError(name)

    return answer


def keys_and_escapes(figures: Figures, work: Path, modes: tuple[tuple[str, ...], ...]) -> None:
    """The key echoed, and terminal escapes sent, along every path: no form of the key in any
    output or file, no raw control character on the terminal, no traceback."""
    project = work / "echo"
    project.mkdir()
    variants = (
        "content",
        "split key",
        "lone surrogate",
        "streamed error event",
        "non-JSON event",
        "bad field",
        "error status",
    )
    runs = leaks = raw = tracebacks = 0
    asked: list[int] = []
    for name in variants:
        answer = _echo_server(name)

        def counted(request: LoopbackRequest, answer: Any = answer) -> LoopbackResponse:
            asked.append(1)
            return answer(request)

        with LoopbackServer(counted) as server:
            spec = project / "spec.yaml"
            spec.write_text(
                SPEC.format(
                    prompt="say",
                    url=server.url,
                    mode="native",
                    extra="  api_key_env: TWINFLOW_RELIABILITY_KEY\n",
                    tools="calc:add",
                ).replace("tools: [calc:add]\npolicy:\n  allow: [add]\n", "")
            )
            for mode in modes:
                out = project / f"out-{runs}"
                before = len(asked)
                result = twinflow(
                    "run",
                    "spec.yaml",
                    "--out",
                    out.name,
                    *mode,
                    cwd=project,
                    env={"TWINFLOW_RELIABILITY_KEY": KEY, "PYTHONIOENCODING": "utf-8"},
                )
                runs += 1
                if len(asked) == before:
                    figures.fail(
                        f"key echo ({name}): the run never reached the server: {result.stderr[-200:]}"
                    )
                texts = [result.stdout, result.stderr]
                if out.exists():
                    texts += [
                        p.read_bytes().decode("utf-8", "replace")
                        for p in out.rglob("*")
                        if p.is_file()
                    ]
                    page = twinflow(
                        "show",
                        str(out / "trace.jsonl"),
                        "--html",
                        str(out / "page.html"),
                        cwd=project,
                    )
                    texts += [page.stdout, page.stderr]
                    if (out / "page.html").exists():
                        texts.append((out / "page.html").read_text())
                found = [f for f in KEY_FORMS for t in texts if f in t]
                if found:
                    leaks += 1
                    figures.fail(
                        f"key echo ({name}{' --json' if mode else ''}): {found[0][:12]}... leaked"
                    )
                controls = [
                    c for c in ("\x1b", "\r", "\u202e", "\x9b") for t in texts[:2] if c in t
                ]
                if controls:
                    raw += 1
                    figures.fail(f"terminal ({name}): raw {controls[0]!r} printed")
                if "Traceback" in result.stderr:
                    tracebacks += 1
                    figures.fail(f"{name}: a traceback: {result.stderr[-200:]}")
    figures.values["key echoes: runs (7 paths x output modes)"] = runs
    figures.values["key echoes: runs leaking a key form"] = leaks
    figures.values["terminal escapes: runs printing a raw control"] = raw
    figures.values["key echoes and escapes: tracebacks"] = tracebacks


def special_files(figures: Figures, work: Path, devices: tuple[str, ...]) -> None:
    """A FIFO or a device named as every input path: each command refuses at once (exit 2)."""
    place = work / "special"
    place.mkdir()
    fifo = place / "trace.jsonl"
    os.mkfifo(fifo)
    commands = [
        ("verify", "{p}"),
        ("checkpoint", "{p}"),
        ("prove", "{p}", "--seq", "0", "--origin", "example.org/lab"),
        ("prove", "--check", "{p}"),
        ("diff", "{p}", "{p}"),
        ("show", "{p}"),
        ("replay", "{p}"),
        ("run", "{p}"),
        ("eval", "run", "{p}", "--spec", "{p}", "--out", "out"),
        ("verify", "x.jsonl", "--checkpoint", "{p}"),
    ]
    tried = hung = wrong = 0
    for target in (str(fifo), *devices):
        if not os.path.exists(target):
            continue
        for command in commands:
            args = [a.format(p=target) for a in command]
            tried += 1
            try:
                result = subprocess.run(
                    [sys.executable, "-m", "twinflow.cli", *args],
                    cwd=place,
                    capture_output=True,
                    text=True,
                    timeout=SAFETY_S,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
            except subprocess.TimeoutExpired:
                hung += 1
                figures.fail(f"`{' '.join(args)}` hung")
                continue
            if result.returncode != 2 or len(result.stderr.strip().splitlines()) != 1:
                wrong += 1
                figures.fail(
                    f"`{' '.join(args)}`: exit {result.returncode}: {result.stderr[-200:]}"
                )
        stdlib = subprocess.run(
            [sys.executable, "-m", "twinflow.trace", "verify", target],
            cwd=place,
            capture_output=True,
            text=True,
            timeout=SAFETY_S,
            check=False,
        )
        tried += 1
        if stdlib.returncode != 2:
            wrong += 1
            figures.fail(f"python -m twinflow.trace verify {target}: exit {stdlib.returncode}")
    figures.values["special files: commands given a FIFO or device"] = tried
    figures.values["special files: hung / not a one-line exit 2"] = f"{hung} / {wrong}"


def spec_credentials(figures: Figures, work: Path) -> None:
    """Keys in headers of any name, in a URL's fragment or path: refused before any file."""
    project = work / "spec-credentials"
    project.mkdir()
    (project / "calc.py").write_text(TOOL)
    headers = (
        "X-Auth-Token",
        "Ocp-Apim-Subscription-Key",
        "X-Gateway-Key",
        "api_key",
        "X-Amz-Security-Token",
        "Private-Token",
    )
    urls = (
        f"http://127.0.0.1:9/v1#{KEY}",
        f"http://127.0.0.1:9/v1/{KEY}/chat",
        f"http://127.0.0.1:9/key/{KEY}",
        "http://127.0.0.1:9/v1/AIzaSyA1b2C3d4E5f6G7h8i9J0/chat",
        "http://127.0.0.1:9/t/3f2a9c1e-7b4d-4e8a-9f0c-2d6b8a1e5c7f/v1",
    )
    specs = [
        SPEC.format(
            prompt="add",
            url="http://127.0.0.1:9",
            mode="native",
            extra=f"  headers:\n    {h}: {KEY}\n",
            tools="calc:add",
        )
        for h in headers
    ] + [SPEC.format(prompt="add", url=u, mode="native", extra="", tools="calc:add") for u in urls]
    accepted = 0
    for i, text in enumerate(specs):
        (project / "spec.yaml").write_text(text)
        result = twinflow("run", "spec.yaml", "--out", f"out-{i}", cwd=project)
        written = (project / f"out-{i}").exists()
        if result.returncode != 2 or written or KEY in result.stdout + result.stderr:
            accepted += 1
            figures.fail(f"spec credential {i}: exit {result.returncode}, written {written}")
    figures.values["spec credentials: header names and URL parts tried"] = len(specs)
    figures.values["spec credentials: accepted, written or echoed"] = accepted


def one_writer(figures: Figures, work: Path) -> None:
    """A second writer of an eval run directory is refused at once with one line."""
    run_dir = work / "locked-run"
    data = Dataset.model_validate(
        {"name": "d", "scorers": [], "cases": [{"id": "c", "input": "hi"}]}
    )

    def factory(case: Any, sink: Any, seed: int = 0) -> Agent[str]:
        model = FunctionModel(lambda request: Message.assistant("hi"))
        return Agent(model, clock=SteppingClock(START), ids=CountingIds(), trace=sink)

    run_eval(data, factory, run_dir, clock=SteppingClock(START))
    commands = [
        ("eval", "rescore", str(run_dir)),
        ("eval", "merge", str(run_dir), "--out", str(run_dir)),
    ]
    let_in = 0
    with hold_directory(run_dir):
        for command in commands:
            result = twinflow(*command, cwd=work)
            if result.returncode != 2 or "another twinflow process" not in result.stderr:
                let_in += 1
                figures.fail(
                    f"`{' '.join(command[:2])}` on a held directory: exit {result.returncode}: "
                    f"{result.stderr[-200:]}"
                )
        # run_eval itself, in this process: a second holder of the same directory.
        try:
            run_eval(data, factory, run_dir, clock=SteppingClock(START))
            let_in += 1
            figures.fail("run_eval wrote a directory another writer held")
        except FileWriteError as exc:
            if exc.reason != "busy":
                raise
    figures.values["one writer: second writers tried / let in"] = f"{len(commands) + 1} / {let_in}"


def main() -> int:
    args = parse_mode(__doc__ or "")
    full = args.mode == "full"
    figures = Figures("hostile", args.mode)
    with (
        tempfile.TemporaryDirectory(prefix="twinflow-hostile-") as tmp,
        LoopbackServer(scripted) as server,
    ):
        work = Path(tmp)
        bundles(figures, work, server.url, rounds=3 if full else 1)
        servers(figures, scale=1)
        links(figures, work)
        concurrent(figures, work, server.url, runs=4 if full else 3, rounds=8 if full else 2)
        secrets(figures, work)
        slow_heads(figures)
        keys_and_escapes(figures, work, ((), ("--json",)) if full else ((),))
        special_files(
            figures, work, ("/dev/zero", "/dev/tty", "/dev/urandom") if full else ("/dev/zero",)
        )
        spec_credentials(figures, work)
        one_writer(figures, work)
        received_paths(figures, work)
        prefix_checkpoints(figures, work, sizes=range(0, 12) if full else range(0, 12, 5))
        planted_auditor(figures, work)
        continuations(figures, work)
        conversations(figures, work)
        from _hostile_simuser import simulated_users

        simulated_users(figures, work)
        signed_evidence(figures, work)
        from _hostile_disclose import disclose

        disclose(figures, work, server.url)
        from _hostile_mcp import mcp_eras

        mcp_eras(figures, work)
        secrets_as_a_class(figures, work, full)
        modules_off_the_allowlist(figures, work)
        guard_lends_nothing(figures)
        from _hostile_sandbox import sandboxed_code

        sandboxed_code(figures, work, rounds=3 if full else 1)
        eval_evidence(figures, work)
        from _hostile_hosted_models import hosted_models

        hosted_models(figures, work, full)
        from _hostile_limits import hostile_limits

        hostile_limits(figures, full)
        from _hostile_cost import hostile_cost

        hostile_cost(figures, work, full)
        from _hostile_recorder import recorder

        recorder(figures, work)
        from _hostile_elicit import elicit_answers

        elicit_answers(figures, work)
    return figures.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
