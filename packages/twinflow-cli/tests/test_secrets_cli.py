"""Secrets and processes of ``twinflow run`` and ``eval run`` with hostile servers, as real processes.

The MCP server (`secret_server.py` beside the kernel's tests) leaks its ``pass_env`` key in
every form it can (its stderr, split across two writes; a result split across two text blocks;
upper-cased in an error) and leaves a grandchild outside its process group and session. The
model is a scripted OpenAI-compatible server on loopback, which puts the key in a tool's
arguments, or in its answers to an eval's cases.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import EVAL_PROMPT, SUMS, calc_project, chat_answer, completion, scripted_chat
from test_mcp_cli import SERVERS, calling, events, spec_text, stdio_server, twinflow

from twinflow.kernel import LoopbackServer
from twinflow.kernel._launcher import wait_exit
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

KEY = "sk-mcp-Secret-Key-7c1d9e40b2f8"
"""The server's key (``TWINFLOW_TEST_MCP_TOKEN``): mixed case, so its case variants differ."""
MARKER = "[REDACTED:secret]"


@pytest.fixture
def model() -> Iterator[Callable[[str, dict[str, Any]], str]]:
    """Starts scripted model servers calling one tool; yields a function giving one's URL."""
    with contextlib.ExitStack() as stack:

        def start(tool: str, arguments: dict[str, Any]) -> str:
            return stack.enter_context(LoopbackServer(calling(tool, arguments))).url

        yield start


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A directory holding the secret server; its escaped grandchild is killed if it survived."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(SERVERS / "secret_server.py", project / "secret_server.py")
    yield project
    pid_file = project / "daemon.pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def secret_spec(project: Path, url: str, allow: str) -> Path:
    """A spec running the secret server (key forwarded, grandchild started) allowed ``allow``."""
    servers = stdio_server("secret", "secret_server.py", "--daemon", str(project / "daemon.pid"))
    servers += "    pass_env: [TWINFLOW_TEST_MCP_TOKEN]\n"
    spec = project / "spec.yaml"
    spec.write_text(spec_text(url, servers, allow))
    return spec


def leaks(texts: list[str]) -> list[str]:
    """The texts holding the key, or nine characters of it, in any case."""
    pattern = re.compile("|".join(re.escape(KEY[i : i + 9]) for i in range(len(KEY) - 8)), re.I)
    return [text[:200] for text in texts if pattern.search(text)]


@pytest.mark.parametrize(("tool", "expected"), [("secret.echo", None), ("secret.fail", "McpError")])
def test_no_form_of_the_key_leaves_the_run_and_no_process_outlives_it(
    project: Path, model: Callable[[str, dict[str, Any]], str], tool: str, expected: str | None
) -> None:
    """The key in the server's log (cased, split across writes), in a result split across
    blocks, upper-cased in an error and in the tool's arguments: no file, output or page holds
    any of it; the grandchild that left the server's group and session is gone once the run
    has ended."""
    spec = secret_spec(project, model(tool, {"text": f"arg {KEY.upper()}"}), tool)
    out = project / "run"
    made = twinflow(
        "run", str(spec), "--out", str(out), cwd=project, env={"TWINFLOW_TEST_MCP_TOKEN": KEY}
    )
    assert 0 == made.returncode, made.stderr
    pid = int((project / "daemon.pid").read_text())
    assert wait_exit(pid, 60)
    page = twinflow(
        "show", str(out / "trace.jsonl"), "--html", str(project / "page.html"), cwd=project
    )
    assert 0 == page.returncode, page.stderr
    written = [p.read_text() for p in out.rglob("*") if p.is_file()]
    outputs = [made.stdout, made.stderr, page.stdout, page.stderr]
    assert [] == leaks([*written, *outputs, (project / "page.html").read_text()])
    assert 4 == (out / "mcp-secret.log").read_text().count(MARKER)
    returned = [b for b in events(out / "trace.jsonl") if b["kind"] == "tool_returned"]
    assert [expected] == [b["error_type"] for b in returned]
    assert MARKER in str(returned[0]["result"])


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        ("postgres://app:hunter2-pass@db.internal:5432/app", "user:password@"),
        ("https://deploy:glpat-0123456789abcdefghij@gitlab.example/x.git", "user:password@"),
        ("sk-proj-0123456789abcdefghijKLMN", "well-known prefix"),
        ("ghp_0123456789abcdefghijklmnopqrstuvwxyz", "well-known prefix"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijk", "well-known prefix"),
        ("xoxb-1234567890-0987654321-abcdefABCDEF", "well-known prefix"),
        ("glpat-0123456789abcdefghij", "well-known prefix"),
        ("AKIAIOSFODNN7EXAMPLE", "AWS access key id"),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.payload", "Authorization value"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXk=\\n", "PEM block"),
    ],
)
def test_an_env_value_shaped_like_a_credential_is_refused_naming_the_variable(
    project: Path, value: str, shape: str
) -> None:
    """A credential by its shape under an innocent name: exit 2, one line naming the variable
    and pass_env, the value nowhere, nothing written."""
    servers = stdio_server("calc", "secret_server.py") + f'    env: {{DATABASE_URL: "{value}"}}\n'
    (project / "spec.yaml").write_text(spec_text("http://127.0.0.1:9/", servers, "calc.echo"))
    made = twinflow("run", "spec.yaml", "--out", "run", cwd=project)
    assert (2, 1) == (made.returncode, len(made.stderr.strip().splitlines())), made.stderr
    assert "env: DATABASE_URL holds" in made.stderr and shape in made.stderr
    assert "pass_env ([DATABASE_URL])" in made.stderr
    assert value.split("\\n")[0][-12:] not in made.stderr + made.stdout
    assert not (project / "run").exists()


@pytest.mark.parametrize("dummy", ["x", "ma", "key"])
def test_a_very_short_dummy_key_never_breaks_a_run_or_its_replay(
    tmp_path: Path, dummy: str
) -> None:
    """A keyless local server given a one- to three-letter key: the run, its replay and its
    verification succeed, and no field or value of the trace is touched."""
    with LoopbackServer(scripted_chat) as server:
        project = calc_project(tmp_path, server.url, prompt=f"add 2 and 3 ({dummy} max text)")
        spec = project / "spec.yaml"
        spec.write_text(
            spec.read_text().replace("  dialect:", "  api_key_env: TWINFLOW_DUMMY\n  dialect:")
        )
        env = {"TWINFLOW_DUMMY": dummy}
        made = twinflow("run", "spec.yaml", "--out", "run", "--quiet", cwd=project, env=env)
        assert 0 == made.returncode, made.stderr
        trace = project / "run" / "trace.jsonl"
        replayed = twinflow("replay", str(trace), "--spec", "spec.yaml", cwd=project, env=env)
        verified = twinflow("verify", str(trace), cwd=project, env=env)
    assert (0, 0) == (replayed.returncode, verified.returncode), replayed.stderr + verified.stderr
    assert MARKER not in trace.read_text()
    assert f"({dummy} max text)" in trace.read_text()


def leaky_answers(request: LoopbackRequest) -> LoopbackResponse:
    """A model answering every case with the key upper-cased, lower-cased and split by a line."""
    body = request.json_value()
    assert isinstance(body, dict)
    answer = f"5 {KEY.upper()} {KEY.lower()} {KEY[:9]}\n{KEY[9:]}"
    action = {"action": "final", "answer": answer}
    return chat_answer(body, completion({"role": "assistant", "content": json.dumps(action)}))


def test_no_form_of_the_model_key_reaches_an_eval_run_directory(tmp_path: Path) -> None:
    """Answers holding the model's key in three forms: results, case files, traces, trace
    pages and both lab notes hold none of it."""
    with LoopbackServer(leaky_answers) as server:
        project = calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=SUMS)
        spec = project / "spec.yaml"
        spec.write_text(
            spec.read_text().replace("  dialect:", "  api_key_env: TWINFLOW_MODEL_KEY\n  dialect:")
        )
        made = twinflow(
            "eval",
            "run",
            "dataset.yaml",
            "--spec",
            "spec.yaml",
            "--out",
            "out",
            cwd=project,
            env={"TWINFLOW_MODEL_KEY": KEY},
        )
    assert made.returncode in (0, 1), made.stderr
    written = {p.name: p.read_text() for p in (project / "out").rglob("*") if p.is_file()}
    assert {"results.json", "lab-notes.md", "lab-notes.html"} <= set(written)
    assert [] == leaks([*written.values(), made.stdout, made.stderr])
    # Lab Notes escape square brackets in a cell (a model's text is never a Markdown link).
    assert 3 <= written["lab-notes.md"].count(MARKER.replace("[", "\\[").replace("]", "\\]"))
