"""An MCP tool's image and resource link as content parts, end to end through the commands.

The server is real (the official SDK's `MCPServer`, ``media_server.py``); the model is a scripted
OpenAI-compatible server on loopback that calls ``media.gallery`` once and then answers, and
keeps every request it received so a test can read what the wire sent for the parts.
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

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process

SERVERS = Path(__file__).resolve().parents[2] / "twinflow-kernel" / "tests" / "mcp_servers"
PARTS = [
    {"kind": "text", "text": "a picture"},
    {"kind": "media", "media_type": "image/png", "uri": "data:image/png;base64,cG5n"},
    {"kind": "resource_link", "name": "full.png", "uri": "file:///pictures/full.png"},
]


def twinflow(*args: str, cwd: Path) -> ProcessResult:
    """Run `python -m twinflow.cli ARGS` in a fresh interpreter."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )


class Model:
    """A scripted structured-action model: one call of ``tool``, then ``done``."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        """Serve on loopback; `requests` collects every request body."""
        self.tool = tool
        self.arguments = arguments
        self.requests: list[dict[str, Any]] = []
        self.server = LoopbackServer(self.answer)

    def answer(self, request: LoopbackRequest) -> LoopbackResponse:
        """The reply to one chat request."""
        body = request.json_value()
        assert isinstance(body, dict)
        self.requests.append(body)
        called = any(m.get("role") == "assistant" for m in body["messages"])
        action: dict[str, Any] = (
            {"action": "final", "answer": "done"}
            if called
            else {"action": "call_tool", "tool": self.tool, "arguments": self.arguments}
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


@pytest.fixture
def model() -> Iterator[Callable[[str, dict[str, Any]], Model]]:
    """Starts scripted model servers; every one is stopped afterwards."""
    started: list[Model] = []

    def start(tool: str, arguments: dict[str, Any]) -> Model:
        scripted = Model(tool, arguments)
        scripted.server.__enter__()
        started.append(scripted)
        return scripted

    yield start
    for scripted in started:
        scripted.server.__exit__(None, None, None)


def spec_text(url: str, tool: str, script: str, *args: str) -> str:
    """A run spec with one stdio MCP server running ``script``, ``<server>.<tool>`` allowed."""
    server = tool.split(".")[0]
    argv = json.dumps([sys.executable, script, *args])
    return (
        f"prompt: use the tool\nmodel:\n  url: {url}\n  dialect: llama.cpp\n"
        f"mcp_servers:\n  - name: {server}\n    command: {argv}\n"
        f"policy:\n  allow: [{tool}]\nmax_steps: 3\n"
    )


def returned(trace: Path) -> list[dict[str, Any]]:
    """The bodies of a trace's tool_returned events."""
    bodies = [json.loads(line)["event"]["body"] for line in trace.read_text().splitlines()]
    return [b for b in bodies if b["kind"] == "tool_returned"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory holding a copy of the media server (so a test can remove it)."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(SERVERS / "media_server.py", project / "media_server.py")
    return project


def run(project: Path, model: Model, name: str, *args: str) -> tuple[Path, Path]:
    """Run the media server's gallery under ``model``; the trace and the spec."""
    spec = project / f"{name}.yaml"
    spec.write_text(spec_text(model.server.url, "media.gallery", "media_server.py", *args))
    made = twinflow("run", str(spec), "--out", str(project / name), "--quiet", cwd=project)
    assert 0 == made.returncode, made.stderr
    return project / name / "trace.jsonl", spec


def test_an_image_and_a_link_are_parts_through_every_command(
    project: Path, model: Callable[[str, dict[str, Any]], Model]
) -> None:
    """The result holds the parts; the wire sent their fallback; verify (both), show, the page,
    diff and recorded replay with the server removed all take the trace."""
    scripted = model("media.gallery", {})
    trace, spec = run(project, scripted, "run")
    result = returned(trace)[0]["result"]
    assert ("a picture", PARTS) == (result["content"], result["parts"])
    sent = json.dumps(scripted.requests[1]["messages"])
    assert (
        "[image/png: 3 bytes]" in sent and "[resource full.png: file:///pictures/full.png]" in sent
    )
    assert "cG5n" not in sent  # the image's data never reached a wire that cannot carry it
    assert 0 == twinflow("verify", str(trace), cwd=project).returncode
    auditor = run_process(
        [sys.executable, "-P", "-m", "twinflow.trace", "verify", str(trace)], cwd=project.parent
    )
    assert 0 == auditor.returncode, auditor.stderr
    shown = twinflow("show", str(trace), cwd=project)
    assert 0 == shown.returncode, shown.stderr
    assert "part (media): " in shown.stdout and "part (resource_link): " in shown.stdout
    page = project / "page.html"
    assert 0 == twinflow("show", str(trace), "--html", str(page), cwd=project).returncode
    assert "resultParts(result, into)" in page.read_text()
    other = model("media.gallery", {})
    changed, _ = run(project, other, "changed", "--pixel", "PNG")
    diffed = twinflow("diff", str(trace), str(changed), "--json", cwd=project)
    assert 1 == diffed.returncode, diffed.stderr
    # The runs' models are two servers (their URLs differ in run_started); the result differs
    # at the image's bytes.
    divergences = json.loads(diffed.stdout)["divergences"]
    assert ["/result/parts/1/uri"] == [
        d["pointer"] for d in divergences if d["kind"] == "tool_returned"
    ]
    (project / "media_server.py").unlink()
    replayed = twinflow(
        "replay", str(trace), "--spec", str(spec), "--mode", "recorded", cwd=project
    )
    assert 0 == replayed.returncode, replayed.stderr


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("bad-base64", "data is not valid base64"),
        ("huge-image", "over the limit of 1048576"),
        ("unknown-block", "unknown content block type 'hologram'"),
    ],
)
def test_a_malformed_image_is_a_recorded_typed_tool_error(
    project: Path, model: Callable[[str, dict[str, Any]], Model], mode: str, words: str
) -> None:
    """Bad base64, a 2 MiB image, an unknown block: the call's error result, the run goes on."""
    scripted = model("bad.add", {"a": 1, "b": 2})
    spec = project / "spec.yaml"
    spec.write_text(
        spec_text(scripted.server.url, "bad.add", str(SERVERS / "hostile_server.py"), mode)
    )
    made = twinflow("run", str(spec), "--out", str(project / "run"), "--quiet", cwd=project)
    assert 0 == made.returncode, made.stderr
    assert "Traceback" not in made.stderr
    got = returned(project / "run" / "trace.jsonl")
    assert ["McpToolFailed"] == [b["error_type"] for b in got]
    assert words in got[0]["result"]["content"]
    assert "parts" not in got[0]["result"]
