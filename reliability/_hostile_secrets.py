"""Hostile-input classes for secrets as a class, and for processes that must end with the run.

Four attacks, through the real `twinflow` command, each counted:

1. **Key forms.** A model server answers (whole, and streamed in deltas that cut the key) with
   the run's key upper-, lower- and swap-cased, cut by a line break, url-encoded in a
   ``?api_key=`` query and base64'd after ``user:``; and a model calls an MCP tool with the key
   in its arguments, whose server echoes it on stderr (cased, split across two writes), in a
   result split across two text blocks and upper-cased in an error. No 9-character piece of the
   key, in any case, nor its base64, reaches stdout, stderr, a file of the run or the trace page.
2. **Escaped processes.** That MCP server leaves a grandchild outside its process group and
   session (``setsid`` and a double fork, SIGTERM ignored): it is gone when the run has ended.
3. **Credentials in ``env``.** Values shaped like credentials under innocent names: refused
   (exit 2) naming the variable, the value not echoed, nothing written.
4. **Dummy keys.** A one- or two-letter key for a keyless server: the run and its replay pass.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import select
import signal
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import Figures, twinflow

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

# No nine characters of it in any path the campaign writes to (the work directory is named
# twinflow-hostile-...): `_leaked` looks for any nine of them, in any case.
KEY = "sk-Qv8Rm3-Secret-Key-4e8b1c07d9a2"
SERVER = Path(__file__).resolve().parents[1] / "packages/twinflow-kernel/tests/mcp_servers"
FORMS = (
    f"{KEY.upper()} {KEY.lower()} {KEY.swapcase()} {KEY[:10]}\n{KEY[10:]} "
    f"?api_key={urllib.parse.quote(KEY, safe='')} "
    f"Basic {base64.b64encode(f'user:{KEY}'.encode()).decode()}"
)
ENV_VALUES = (
    "postgres://app:hunter2-pass@db.internal:5432/app",
    "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
    "xoxb-1234567890-0987654321-abcdefABCDEF",
    "AKIAIOSFODNN7EXAMPLE",
    "glpat-0123456789abcdefghij",
    "sk-proj-0123456789abcdefghijKLMN",
    "-----BEGIN RSA PRIVATE KEY-----",
    "Bearer eyJhbGciOiJIUzI1NiJ9.payload",
)


def _leaked(texts: list[str]) -> int:
    """How many texts hold 9 characters of the key in any case, or the base64 of user:key."""
    pieces = "|".join(re.escape(KEY[i : i + 9]) for i in range(len(KEY) - 8))
    encoded = base64.b64encode(f"user:{KEY}".encode()).decode()[8:-4]
    return sum(bool(re.search(pieces, t, re.I)) or encoded in t for t in texts)


def _answer(
    body: dict[str, Any], action: dict[str, Any], cut: int | None = None
) -> LoopbackResponse:
    """A structured action as a completion; streamed, it is cut at ``cut`` into two deltas."""
    content = json.dumps(action)
    if not body.get("stream"):
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return LoopbackResponse.json_body({"model": "m", "choices": [choice], "usage": {}})
    at = len(content) // 2 if cut is None else cut
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": content[:at]}}]},
        {"choices": [{"index": 0, "delta": {"content": content[at:]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    sse = b"".join(f"data: {json.dumps({'model': 'm', **c})}\n\n".encode() for c in chunks)
    return LoopbackResponse(
        headers=(("Content-Type", "text/event-stream"),),
        stream=lambda: iter([sse + b"data: [DONE]\n\n"]),
    )


def _model(request: LoopbackRequest) -> LoopbackResponse:
    """Calls ``secret.echo`` with the key in its arguments when offered it, then answers with
    every form of the key (streamed: cut inside the upper-cased key)."""
    body = request.json_value()
    assert isinstance(body, dict)
    called = any(m.get("role") == "assistant" for m in body["messages"])
    if "secret.echo" in json.dumps(body) and not called:
        arguments = {"text": f"arg {KEY.swapcase()}"}
        return _answer(body, {"action": "call_tool", "tool": "secret.echo", "arguments": arguments})
    action = {"action": "final", "answer": FORMS}
    return _answer(body, action, cut=json.dumps(action).index(KEY.upper()) + 7)


def _spec(url: str, extra: str = "", key_env: str = "TWINFLOW_HOSTILE_KEY") -> str:
    return (
        f"prompt: say\nmodel:\n  url: {url}\n  dialect: llama.cpp\n  api_key_env: {key_env}\n"
        f"{extra}max_steps: 3\n"
    )


def _mcp(pid_file: Path) -> str:
    command = json.dumps(
        [sys.executable, str(SERVER / "secret_server.py"), "--daemon", str(pid_file)]
    )
    return (
        f"mcp_servers:\n  - name: secret\n    command: {command}\n"
        "    pass_env: [TWINFLOW_TEST_MCP_TOKEN]\npolicy:\n  allow: [secret.echo]\n"
    )


def _exited(pid: int, within: float) -> bool:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([pidfd], [], [], within)[0])
    finally:
        os.close(pidfd)


@contextlib.contextmanager
def _reaped(pid_file: Path) -> Iterator[None]:
    """Kill the escaped grandchild at the end if it survived (so a failure leaks nothing)."""
    try:
        yield
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def secrets_as_a_class(figures: Figures, work: Path, full: bool) -> None:
    """Key forms, escaped processes, credentials in env, dummy keys (the module's docstring)."""
    project = work / "secrets-class"
    project.mkdir()
    env = {"TWINFLOW_HOSTILE_KEY": KEY, "TWINFLOW_TEST_MCP_TOKEN": KEY, "PYTHONIOENCODING": "utf-8"}
    runs = leaks = survivors = 0
    with LoopbackServer(_model) as server:
        for n, (mcp, mode) in enumerate(
            [(False, ()), (True, ()), (False, ("--quiet",)), (True, ("--json",))][
                : 4 if full else 2
            ]
        ):
            pid_file = project / f"daemon-{n}.pid"
            (project / f"spec-{n}.yaml").write_text(
                _spec(server.url, _mcp(pid_file) if mcp else "")
            )
            out = project / f"out-{n}"
            with _reaped(pid_file):
                made = twinflow(
                    "run", f"spec-{n}.yaml", "--out", out.name, *mode, cwd=project, env=env
                )
                runs += 1
                if made.returncode != 0:
                    figures.fail(f"key forms run {n}: exit {made.returncode}: {made.stderr[-300:]}")
                if mcp and not (pid_file.exists() and _exited(int(pid_file.read_text()), 60)):
                    survivors += 1
                    figures.fail(f"run {n}: the escaped grandchild outlived the run")
            trace_text = (out / "trace.jsonl").read_text() if (out / "trace.jsonl").exists() else ""
            if mcp and '"tool_returned"' not in trace_text:
                figures.fail(f"run {n}: the MCP tool was never called")
            page = twinflow(
                "show", str(out / "trace.jsonl"), "--html", str(out / "page.html"), cwd=project
            )
            texts = [made.stdout, made.stderr, page.stdout, page.stderr]
            texts += [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()]
            found = _leaked(texts)
            leaks += bool(found)
            if found:
                figures.fail(f"key forms run {n}: {found} texts hold a form of the key")
    figures.values["secrets: runs echoing the key in 8 forms (2 with an MCP server)"] = runs
    figures.values["secrets: runs leaking a form of the key"] = leaks
    figures.values["processes: escaped grandchildren alive after the run"] = survivors

    accepted = 0
    values = ENV_VALUES if full else ENV_VALUES[::2]
    for i, value in enumerate(values):
        servers = (
            f'mcp_servers:\n  - name: s\n    command: [x]\n    env: {{DATABASE_URL: "{value}"}}\n'
        )
        (project / "env.yaml").write_text(_spec("http://127.0.0.1:9", servers))
        made = twinflow("run", "env.yaml", "--out", f"env-{i}", cwd=project, env=env)
        echoed = value[-10:] in made.stdout + made.stderr
        if (
            made.returncode != 2
            or "DATABASE_URL" not in made.stderr
            or echoed
            or (project / f"env-{i}").exists()
        ):
            accepted += 1
            figures.fail(f"env credential {i}: exit {made.returncode}, echoed {echoed}")
    figures.values["secrets: env values shaped like credentials"] = len(values)
    figures.values["secrets: env credentials accepted, written or echoed"] = accepted

    broken = 0
    dummies = ("x", "ma") if full else ("x",)
    with LoopbackServer(_model) as server:
        for dummy in dummies:
            (project / "dummy.yaml").write_text(_spec(server.url, key_env="TWINFLOW_DUMMY"))
            keyed = {"TWINFLOW_DUMMY": dummy}
            made = twinflow(
                "run", "dummy.yaml", "--out", f"dummy-{dummy}", "--quiet", cwd=project, env=keyed
            )
            trace = project / f"dummy-{dummy}" / "trace.jsonl"
            replayed = twinflow(
                "replay", str(trace), "--spec", "dummy.yaml", cwd=project, env=keyed
            )
            if (made.returncode, replayed.returncode) != (0, 0):
                broken += 1
                figures.fail(
                    f"dummy key {dummy!r}: run {made.returncode}, replay {replayed.returncode}"
                )
    figures.values["secrets: dummy keys run and replayed / broken"] = f"{len(dummies)} / {broken}"
