"""Hostile-input campaign: received bundles, hostile servers, planted links, concurrent runs, secrets.

Five attacks, each counted, each with the invariant it must not break:

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
   itself): the write is refused with `PlantedLinkError` and the link's target is unchanged.
4. **Concurrent runs.** Several `twinflow run` processes into one `--out`, held together by a
   file barrier inside their tool call: each printed trace holds its own run, its spec
   beside it is its own, and its printed root is the root `verify` computes.
5. **Secrets.** A run with `api_key_env`, a run whose server is down, a URL with the key in
   userinfo or query: the key reaches the server as a bearer header, and appears in no file
   of the run directory, no stdout, no stderr.

    .venv/bin/python reliability/hostile.py --short | --full
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import Figures, parse_mode

from twinflow.agent import (
    Agent,
    FunctionModel,
    InvalidModelReply,
    Policy,
    Trace,
    verify_agent_trace,
)
from twinflow.cli._run import claim_run_files
from twinflow.kernel import (
    CountingIds,
    HttpTransport,
    LoopbackRequest,
    LoopbackResponse,
    LoopbackServer,
    SteppingClock,
    SubprocessLauncher,
    free_port,
)
from twinflow.local_model import OpenAICompatibleChatModel
from twinflow.trace import MemoryTraceSink, PlantedLinkError, write_new, write_replace
from twinflow.vocab import CallId, Message, ToolCallPart, TwinflowError

KEY = "sk-reliability-hostile-7f3a9c"
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


def twinflow(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command, as `python -m` (so the working directory is on sys.path)."""
    return subprocess.run(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


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
                ("prove", "trace.jsonl", "--seq", "0"),
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
    except InvalidModelReply:
        pass
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
                except (PlantedLinkError, FileNotFoundError):
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
    except PlantedLinkError:
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
    return figures.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
