"""Tools from MCP servers end to end through ``twinflow run``, ``replay`` and ``approve``.

The servers are real: the official SDK's `MCPServer` (over stdio and Streamable HTTP) and a
hostile one; the model is a scripted OpenAI-compatible server on loopback that calls one tool
and then answers.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import chat_answer

from twinflow.agent import McpServerSpec, ModelSpec, PolicySpec, RunSpec, connect, replay_run
from twinflow.kernel import LoopbackServer, SubprocessLauncher
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.trace._testing import events_of, rechain

SERVERS = Path(__file__).resolve().parents[2] / "twinflow-kernel" / "tests" / "mcp_servers"


def twinflow(*args: str, cwd: Path, env: dict[str, str] | None = None) -> ProcessResult:
    """Run `python -m twinflow.cli ARGS` in a fresh interpreter (``env`` added to ours)."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        timeout=300,
    )


def calling(tool: str, arguments: dict[str, Any]) -> Callable[[LoopbackRequest], LoopbackResponse]:
    """A structured-action model that calls ``tool`` once, then answers ``done``."""

    def answer(request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        assert isinstance(body, dict)
        called = any(m.get("role") == "assistant" for m in body["messages"])
        action: dict[str, Any] = (
            {"action": "final", "answer": "done"}
            if called
            else {"action": "call_tool", "tool": tool, "arguments": arguments}
        )
        reply = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": json.dumps(action)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return chat_answer(body, reply)

    return answer


@pytest.fixture
def model() -> Iterator[Callable[[str, dict[str, Any]], str]]:
    """Starts scripted model servers; yields a function giving one's URL."""
    servers: list[LoopbackServer] = []

    def start(tool: str, arguments: dict[str, Any]) -> str:
        server = LoopbackServer(calling(tool, arguments))
        server.__enter__()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def spec_text(url: str, servers: str, allow: str, extra: str = "") -> str:
    """A run spec with the given ``mcp_servers`` block (YAML) and ``policy.allow`` list."""
    return (
        f"prompt: use the tool\nmodel:\n  url: {url}\n  dialect: llama.cpp\n"
        f"mcp_servers:\n{servers}policy:\n  allow: [{allow}]\n{extra}max_steps: 3\n"
    )


def stdio_server(name: str, script: str, *args: str) -> str:
    """A ``mcp_servers`` entry running ``script`` (relative to the spec) with this Python."""
    argv = json.dumps([sys.executable, script, *args])
    return f"  - name: {name}\n    command: {argv}\n"


def events(trace: Path) -> list[dict[str, Any]]:
    """The bodies of a trace's events."""
    return [json.loads(line)["event"]["body"] for line in trace.read_text().splitlines()]


def seen(log: Path) -> list[dict[str, Any]]:
    """The calls the calc server received, from its own log."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory holding a copy of the calc server (so a test can remove it) and the spec."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(SERVERS / "calc_server.py", project / "calc_server.py")
    return project


def test_stdio_server_end_to_end_and_recorded_replay_without_the_server(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """run offers calc.add and records its list; replay --mode recorded works with the server
    removed from the machine, --mode live then cannot start it, and a changed server diverges."""
    log = project / "seen.jsonl"
    servers = stdio_server("calc", "calc_server.py", "stdio", "--log", str(log))
    spec = project / "spec.yaml"
    spec.write_text(spec_text(model("calc.add", {"a": 2, "b": 3}), servers, "calc.add"))
    made = twinflow("run", str(spec), "--out", str(project / "run"), "--quiet", cwd=project)
    assert 0 == made.returncode, made.stderr
    trace = project / "run" / "trace.jsonl"
    bodies = events(trace)
    assert ["run_started", "tools_listed"] == [b["kind"] for b in bodies[:2]]
    assert "calc.add" in [t["name"] for t in bodies[1]["tools"]]
    assert ["5"] == [b["result"]["content"] for b in bodies if b["kind"] == "tool_returned"]
    assert [{"tool": "add", "arguments": {"a": 2, "b": 3}}] == seen(log)
    assert (project / "run" / "mcp-calc.log").exists()  # the server's stderr, beside the trace
    for command in (
        ["show", str(trace)],
        ["show", str(trace), "--html", str(project / "page.html")],
        ["diff", str(trace), str(trace)],
        ["verify", str(trace)],
    ):
        shown = twinflow(*command, cwd=project)
        assert (command, 0) == (command, shown.returncode), shown.stderr
        assert "Traceback" not in shown.stderr
    assert "calc" in twinflow("show", str(trace), cwd=project).stdout
    source = (project / "calc_server.py").read_text()
    (project / "calc_server.py").unlink()
    replayed = twinflow("replay", str(trace), "--spec", str(spec), cwd=project)
    assert 0 == replayed.returncode, replayed.stderr
    assert [{"tool": "add", "arguments": {"a": 2, "b": 3}}] == seen(log)  # nothing called
    live = twinflow("replay", str(trace), "--spec", str(spec), "--mode", "live", cwd=project)
    # The notice of what live replay runs, then one line: the server could not start.
    assert 2 == live.returncode, live.stderr
    assert "McpError" in live.stderr.strip().splitlines()[-1]
    assert "Traceback" not in live.stderr
    (project / "calc_server.py").write_text(source.replace('"calc", version="1.0.0"', '"calc"'))
    changed = twinflow("replay", str(trace), "--spec", str(spec), "--mode", "live", cwd=project)
    assert 1 == changed.returncode, changed.stderr
    assert "seq 1" in changed.stderr or "event 1" in changed.stderr, changed.stderr


def test_a_denied_mcp_call_never_reaches_the_server(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """The policy denies calc.echo (only calc.add is allowed): the server's log shows no call."""
    log = project / "seen.jsonl"
    servers = stdio_server("calc", "calc_server.py", "stdio", "--log", str(log))
    spec = project / "spec.yaml"
    spec.write_text(spec_text(model("calc.echo", {"text": "hi"}), servers, "calc.add"))
    made = twinflow("run", str(spec), "--out", str(project / "run"), "--quiet", cwd=project)
    assert 0 == made.returncode, made.stderr
    decided = [b for b in events(project / "run" / "trace.jsonl") if b["kind"] == "policy_decided"]
    assert [("calc.echo", "deny")] == [(b["tool"], b["decision"]) for b in decided]
    assert [] == seen(log)


def test_streamable_http_server_end_to_end(
    tmp_path: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """A server over Streamable HTTP: its port read from its own output, its tool called."""
    log = tmp_path / "seen.jsonl"
    process = SubprocessLauncher().spawn(
        [sys.executable, str(SERVERS / "calc_server.py"), "http", "--log", str(log)],
        log_path=tmp_path / "http.log",
    )
    with process:
        line = process.read_line(timeout=120, limit=100)
        assert line is not None and line.startswith(b"PORT ")
        url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        spec = tmp_path / "spec.yaml"
        servers = f"  - name: calc\n    url: {url}\n"
        spec.write_text(spec_text(model("calc.add", {"a": 4, "b": 5}), servers, "calc.add"))
        made = twinflow("run", str(spec), "--out", str(tmp_path / "run"), "--quiet", cwd=tmp_path)
    assert 0 == made.returncode, made.stderr
    assert [{"tool": "add", "arguments": {"a": 4, "b": 5}}] == seen(log)


@pytest.mark.parametrize(
    ("servers", "allow", "words"),
    [
        (stdio_server("calc", "calc_server.py", "stdio"), "calc.nope", "not registered"),
        (stdio_server("calc", "missing_server.py", "stdio"), "calc.add", "exited"),
        (
            stdio_server("calc", "calc_server.py", "stdio") * 2,
            "calc.add",
            "two MCP servers are named 'calc'",
        ),
        (stdio_server("calc", str(SERVERS / "hostile_server.py"), "homoglyph"), "", "ASCII"),
        (stdio_server("calc", str(SERVERS / "hostile_server.py"), "many"), "", "1000 tools"),
        (
            stdio_server("calc", str(SERVERS / "hostile_server.py"), "init-garbage"),
            "",
            "not JSON",
        ),
        ("  - name: calc.x\n    command: [x]\n", "", "name"),
        ("  - name: calc\n    command: [x]\n    url: http://127.0.0.1:1/\n", "", "not both"),
        (
            "  - name: calc\n    command: [x]\n    env: {GITHUB_TOKEN: ghp_0123456789abcdef}\n",
            "",
            "GITHUB_TOKEN looks like a credential",
        ),
        ("  - name: calc\n    command: [x]\n    env: {db_password: x}\n", "", "pass_env"),
        (
            stdio_server("calc", "calc_server.py", "stdio")
            + "    pass_env: [TWINFLOW_TEST_MCP_UNSET_VARIABLE]\n",
            "calc.add",
            "pass_env names TWINFLOW_TEST_MCP_UNSET_VARIABLE, which is unset",
        ),
    ],
)
def test_a_server_that_cannot_serve_refuses_the_run_before_it_starts(
    project: Path, servers: str, allow: str, words: str
) -> None:
    """A tool the server does not list, a server that fails, garbage, a collision: one line,
    exit 2, no trace."""
    spec = project / "spec.yaml"
    spec.write_text(spec_text("http://127.0.0.1:9/", servers, allow))
    made = twinflow("run", str(spec), "--out", str(project / "run"), "--quiet", cwd=project)
    assert 2 == made.returncode, made.stderr
    assert 1 == len(made.stderr.strip().splitlines()), made.stderr
    assert words in made.stderr
    assert not (project / "run" / "trace.jsonl").exists()
    assert "Traceback" not in made.stderr


def test_pass_env_forwards_a_key_that_reaches_no_file_of_the_run(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """The server gets the pass_env variable; the spec copy names it, and the trace holds the
    scrub marker where the server echoed its value."""
    token = "tok-cli-pass-env-0123456789"
    servers = stdio_server("bad", str(SERVERS / "hostile_server.py"), "echo-env")
    servers += "    pass_env: [TWINFLOW_TEST_MCP_TOKEN]\n"
    spec = project / "spec.yaml"
    spec.write_text(spec_text(model("bad.add", {"a": 1, "b": 2}), servers, "bad.add"))
    made = twinflow(
        "run",
        str(spec),
        "--out",
        str(project / "run"),
        "--quiet",
        cwd=project,
        env={"TWINFLOW_TEST_MCP_TOKEN": token},
    )
    assert 0 == made.returncode, made.stderr
    returned = [b for b in events(project / "run" / "trace.jsonl") if b["kind"] == "tool_returned"]
    assert ["[REDACTED:secret]"] == [b["result"]["content"] for b in returned]
    written = [p for p in (project / "run").rglob("*") if p.is_file()]
    assert [] == [p.name for p in written if token.encode() in p.read_bytes()]
    assert "TWINFLOW_TEST_MCP_TOKEN" in (project / "run" / "spec.yaml").read_text()


@pytest.mark.parametrize(
    ("mode", "error_type"), [("exit", "McpError"), ("sampling", "McpToolFailed")]
)
def test_a_server_failing_mid_run_is_a_recorded_tool_error(
    project: Path, model: Callable[[str, dict[str, Any]], str], mode: str, error_type: str
) -> None:
    """A server that exits mid-call, or asks to sample: the call's error result is recorded,
    the run goes on, and the server's stderr stays in its log, out of the trace."""
    servers = stdio_server("bad", str(SERVERS / "hostile_server.py"), mode)
    spec = project / "spec.yaml"
    spec.write_text(spec_text(model("bad.add", {"a": 1, "b": 2}), servers, "bad.add"))
    made = twinflow("run", str(spec), "--out", str(project / "run"), "--quiet", cwd=project)
    assert 0 == made.returncode, made.stderr
    trace = project / "run" / "trace.jsonl"
    returned = [b for b in events(trace) if b["kind"] == "tool_returned"]
    assert [error_type] == [b["error_type"] for b in returned]
    assert "stderr marker" in (project / "run" / "mcp-bad.log").read_text()
    assert "stderr marker" not in trace.read_text()


def test_a_resumed_prefix_starts_no_server(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """A run waiting for approval of an MCP call is continued with its server removed: the
    prefix takes the tool list from the trace; only the approved call needs the server."""
    log = project / "seen.jsonl"
    servers = stdio_server("calc", "calc_server.py", "stdio", "--log", str(log))
    spec = project / "spec.yaml"
    spec.write_text(
        spec_text(model("calc.add", {"a": 2, "b": 3}), servers, "", "  ask: [calc.add]\n")
    )
    made = twinflow("run", str(spec), "--out", str(project / "run"), "--quiet", cwd=project)
    assert 3 == made.returncode, made.stderr
    trace = project / "run" / "trace.jsonl"
    (project / "calc_server.py").unlink()
    approved = twinflow("approve", str(trace), "--all", "--spec", str(spec), cwd=project)
    assert 0 == approved.returncode, approved.stderr
    returned = [b for b in events(trace) if b["kind"] == "tool_returned"]
    # The prefix needed no server; the approved call found none, and that is its result.
    assert ["McpError"] == [b["error_type"] for b in returned]
    assert 1 == sum(b["kind"] == "tools_listed" for b in events(trace))


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mcp-calculator"


@pytest.mark.real_model
def test_the_mcp_example_runs_on_the_embedded_model_and_replays(tmp_path: Path) -> None:
    """examples/mcp-calculator on SmolLM2: the server's list is traced, and recorded replay of
    the run matches with the server's file removed."""
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    spec = work / "spec.yaml"
    # The interpreter running the tests has the `mcp` package the example's server needs.
    spec.write_text(spec.read_text().replace("[python,", f"[{json.dumps(sys.executable)},"))
    made = twinflow("run", str(spec), "--out", str(tmp_path / "run"), "--quiet", cwd=work)
    assert 0 == made.returncode, made.stderr
    trace = tmp_path / "run" / "trace.jsonl"
    listed = [b for b in events(trace) if b["kind"] == "tools_listed"]
    assert [["calc.add", "calc.multiply"]] == [[t["name"] for t in b["tools"]] for b in listed]
    (work / "calc_server.py").unlink()
    replayed = twinflow("replay", str(trace), "--spec", str(spec), cwd=work)
    assert 0 == replayed.returncode, replayed.stderr


def test_the_python_front_door_takes_mcp_servers_from_the_run_spec(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """connect() starts the spec's servers for the block; replay_run replays without them."""
    log = project / "seen.jsonl"
    spec = RunSpec(
        prompt="add",
        model=ModelSpec(url=model("calc.add", {"a": 1, "b": 1}), dialect="llama.cpp"),
        mcp_servers=(
            McpServerSpec(
                name="calc",
                command=(
                    sys.executable,
                    str(project / "calc_server.py"),
                    "stdio",
                    "--log",
                    str(log),
                ),
            ),
        ),
        policy=PolicySpec(allow=("calc.add",)),
        max_steps=3,
    )
    with connect(spec, project / "py" / "trace.jsonl") as agent:
        assert "done" == agent.run(spec.prompt).output
    assert [{"tool": "add", "arguments": {"a": 1, "b": 1}}] == seen(log)
    (project / "calc_server.py").unlink()
    trace = project / "py" / "trace.jsonl"
    assert replay_run(trace, spec).events == len(trace.read_text().splitlines())


def test_a_command_that_does_not_start_mcp_servers_refuses_a_spec_naming_them() -> None:
    """eval run does not start MCP servers yet: a spec with mcp_servers is refused, not run
    without its tools."""
    from twinflow.agent import RunSpec, SpecError
    from twinflow.cli._wiring import check_agent

    spec = RunSpec.parse(
        spec_text("http://127.0.0.1:9/", "  - name: calc\n    command: [x]\n", "calc.add"), "s"
    )
    with pytest.raises(SpecError) as caught:
        check_agent(spec, [], "eval run")
    assert "does not start MCP servers" in str(caught.value)


def test_a_stateless_only_server_with_resources_runs_and_replays_without_the_server(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """A 2026-07-28-only server: read_resource from the spec's resources key, replay offline."""
    servers = stdio_server("calc", "calc_server.py", "stdio", "--era", "current") + (
        '    resources: ["notes://*"]\n'
    )
    spec = project / "spec.yaml"
    url = model("calc.read_resource", {"uri": "notes://readme"})
    spec.write_text(spec_text(url, servers, "calc.read_resource"))
    made = twinflow("run", str(spec), "--out", str(project / "run"), "--quiet", cwd=project)
    assert 0 == made.returncode, made.stderr
    trace = project / "run" / "trace.jsonl"
    bodies = events(trace)
    assert ("2026-07-28", 0) == (bodies[1]["protocol_version"], bodies[1]["ttl_ms"])
    assert ["read me"] == [b["result"]["content"] for b in bodies if b["kind"] == "tool_returned"]
    (project / "calc_server.py").unlink()
    replayed = twinflow("replay", str(trace), "--spec", str(spec), cwd=project)
    assert 0 == replayed.returncode, replayed.stderr


def _paused_on_a_form(project: Path, url: str) -> tuple[Path, Path]:
    """``twinflow run`` of a spec whose call to calc.pay pauses on the server's form (exit
    3); the spec and the trace."""
    log = project / "seen.jsonl"
    servers = stdio_server("calc", "calc_server.py", "stdio", "--era", "current", "--log", str(log))
    spec = project / "spec.yaml"
    spec.write_text(spec_text(url, servers, "calc.pay"))
    made = twinflow("run", str(spec), "--out", str(project / "run"), cwd=project)
    assert 3 == made.returncode, made.stderr
    assert "approve" in made.stderr and "--answer" in made.stderr
    trace = project / "run" / "trace.jsonl"
    assert "input_requested" == events(trace)[-1]["kind"]
    return spec, trace


def test_a_form_pauses_the_run_approve_answer_resumes_it_and_replay_needs_no_server(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """run exits 3 at the form; approve --answer --sign answers, resumes and is checked by
    verify --key; recorded replay reproduces the trace with the server removed."""
    spec, trace = _paused_on_a_form(project, model("calc.pay", {"amount": 3}))
    assert [] == seen(project / "seen.jsonl")
    assert 0 == twinflow("keygen", "lab.example/ann", "--out", "ann", cwd=project).returncode
    answered = twinflow(
        "approve",
        str(trace),
        "--answer",
        '{"yes": true}',
        "--sign",
        "ann.key",
        "--by",
        "ann",
        "--spec",
        str(spec),
        cwd=project,
    )
    assert 0 == answered.returncode, answered.stderr
    [paid] = seen(project / "seen.jsonl")
    assert ({"action": "accept", "content": {"yes": True}, "meta": None}, "pay:3") == (
        paid["arguments"]["answer"],
        paid["arguments"]["state"],
    )
    bodies = events(trace)
    assert ["paid 3"] == [b["result"]["content"] for b in bodies if b["kind"] == "tool_returned"]
    [answer] = [b for b in bodies if b["kind"] == "input_answered"]
    assert ("ann", {"yes": True}) == (answer["by"], answer["content"])
    checked = twinflow("verify", str(trace), "--key", "ann.pub", "--json", cwd=project)
    assert (0, 1) == (checked.returncode, json.loads(checked.stdout)["signed_decisions"])
    page = twinflow("show", str(trace), "--html", str(project / "page.html"), cwd=project)
    assert 0 == page.returncode, page.stderr
    shown = twinflow("show", str(trace), cwd=project).stdout
    assert "calc.pay asks (call c" in shown and "accepted by ann, signed" in shown
    (project / "calc_server.py").unlink()
    replayed = twinflow("replay", str(trace), "--spec", str(spec), cwd=project)
    assert 0 == replayed.returncode, replayed.stderr
    again = twinflow(
        "approve", str(trace), "--answer", '{"yes": true}', "--spec", str(spec), cwd=project
    )
    assert 2 == again.returncode
    assert "no request for input is waiting: call 'c" in again.stderr
    assert "was answered already" in again.stderr


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["--answer", '{"yes": "sure"}'], "does not match the schema calc.pay asked for at '/yes'"),
        (["--answer", '{"note": "hi"}'], "at '': 'yes' is a required property"),
        (["--answer", "yes"], "--answer is not JSON"),
        (["--answer", "[true]"], "--answer must be a JSON object"),
        (["--answer", '{"yes": true}', "--call", "c-other"], "no one request for input matches"),
        (["--answer", '{"yes": true}', "--request", "other"], "no one request for input matches"),
        ([], "the run waits for an answer to call"),
        (["--all"], "--all decides calls waiting for approval"),
    ],
)
def test_a_bad_answer_is_one_line_and_writes_nothing(
    project: Path, model: Callable[[str, dict[str, Any]], str], given: list[str], expected: str
) -> None:
    """Off-schema (by JSON pointer), not JSON, another call or request, none: exit 2, one line."""
    spec, trace = _paused_on_a_form(project, model("calc.pay", {"amount": 3}))
    before = trace.read_bytes()
    refused = twinflow("approve", str(trace), *given, "--spec", str(spec), cwd=project)
    assert (2, 1) == (refused.returncode, len(refused.stderr.strip().splitlines())), refused.stderr
    assert expected in refused.stderr
    assert before == trace.read_bytes()
    resumed = twinflow("resume", str(trace), "--spec", str(spec), cwd=project)
    assert 2 == resumed.returncode
    assert "waits for an answer to call" in resumed.stderr
    assert before == trace.read_bytes()


def test_an_answer_given_twice_or_edited_after_signing_is_refused(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """approve --no-resume records the answer once; a second is refused; an answer edited in a
    re-chained trace fails verify --key and resume --require-signed naming its answer line."""
    spec, trace = _paused_on_a_form(project, model("calc.pay", {"amount": 3}))
    assert 0 == twinflow("keygen", "lab.example/ann", "--out", "ann", cwd=project).returncode
    first = twinflow(
        "approve",
        str(trace),
        "--answer",
        '{"yes": false}',
        "--sign",
        "ann.key",
        "--no-resume",
        cwd=project,
    )
    assert 0 == first.returncode, first.stderr
    twice = twinflow("approve", str(trace), "--answer", '{"yes": true}', "--no-resume", cwd=project)
    assert 2 == twice.returncode
    assert "was answered already" in twice.stderr
    edited = events_of(trace.read_bytes())
    edited[-1]["body"]["content"] = {"yes": True}
    trace.write_bytes(rechain(edited))
    checked = twinflow("verify", str(trace), "--key", "ann.pub", "--allow-incomplete", cwd=project)
    assert 1 == checked.returncode
    assert "its 'answer' line differs" in checked.stderr
    resumed = twinflow(
        "resume", str(trace), "--spec", str(spec), "--require-signed", "ann.pub", cwd=project
    )
    assert 1 == resumed.returncode
    assert "its 'answer' line differs" in resumed.stderr
    assert [] == seen(project / "seen.jsonl")


def test_an_answer_recorded_alone_is_acted_on_by_a_later_resume_here_not_elsewhere(
    project: Path, model: Callable[[str, dict[str, Any]], str], tmp_path: Path
) -> None:
    """approve --no-resume --deny declines the form; resume on another machine refuses the
    answer it cannot check; resume here sends the decline."""
    spec, trace = _paused_on_a_form(project, model("calc.pay", {"amount": 3}))
    declined = twinflow("approve", str(trace), "--deny", "--no-resume", cwd=project)
    assert 0 == declined.returncode, declined.stderr
    assert "declined the form of c" in declined.stdout
    elsewhere = {"TWINFLOW_STATE_DIR": str(tmp_path / "elsewhere")}
    refused = twinflow("resume", str(trace), "--spec", str(spec), cwd=project, env=elsewhere)
    assert 2 == refused.returncode
    assert "decline call 'c" in refused.stderr and "not recorded on this machine" in refused.stderr
    resumed = twinflow("resume", str(trace), "--spec", str(spec), cwd=project)
    assert 0 == resumed.returncode, resumed.stderr
    paid = [b for b in events(trace) if b["kind"] == "tool_returned"]
    assert ["not paid (decline)"] == [b["result"]["content"] for b in paid]


def test_an_answer_to_a_run_paused_for_approval_is_refused(
    project: Path, model: Callable[[str, dict[str, Any]], str]
) -> None:
    """A run waiting on policy.ask takes --call, not a form's values: one line, nothing written."""
    servers = stdio_server("calc", "calc_server.py", "stdio", "--era", "current")
    spec = project / "spec.yaml"
    url = model("calc.pay", {"amount": 3})
    spec.write_text(spec_text(url, servers, "calc.pay", "  ask: [calc.pay]\n"))
    made = twinflow("run", str(spec), "--out", str(project / "run"), "--quiet", cwd=project)
    assert 3 == made.returncode, made.stderr
    trace = project / "run" / "trace.jsonl"
    before = trace.read_bytes()
    refused = twinflow("approve", str(trace), "--answer", '{"yes": true}', cwd=project)
    assert 2 == refused.returncode
    assert "no request for input is waiting: it waits for a decision on c" in refused.stderr
    assert before == trace.read_bytes()
