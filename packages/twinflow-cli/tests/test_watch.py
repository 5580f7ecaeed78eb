"""`twinflow run` prints the model's text as it streams (read while the command runs), and
`--quiet` turns it off.

The command runs in-process through `main`, its stdout a writer the test reads as the command
writes; a scripted server holds the rest of the reply until that writer has shown the first
words, so the text is proved to arrive before the reply is complete, with no timing window.
"""

from __future__ import annotations

import io
import json
import queue
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow.cli._main import main
from twinflow.cli._watch import REPLY_PREFIX
from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

SPEC = """\
prompt: say something
model:
  url: {url}
  dialect: llama.cpp
  mode: native
max_steps: 1
"""

# FIRST ends with a character no secret's form begins with: the printer holds back the end of
# a piece that could begin a secret registered by another test in this process (`TextPrinter`).
FIRST, REST = "The first words;", " and the rest of the reply."
MARKER = REPLY_PREFIX + FIRST


def event(delta: dict[str, object], finish: str | None = None) -> bytes:
    """One chat.completion.chunk as a server-sent event."""
    chunk = {"model": "held", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


class Terminal(io.StringIO):
    """The command's stdout: keeps what was written and signals when the first words appear."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: queue.Queue[str] = queue.Queue()

    def write(self, text: str) -> int:
        written = super().write(text)
        if MARKER in self.getvalue() and self.shown.empty():
            self.shown.put(self.getvalue())
        return written


class HeldServer:
    """An OpenAI-compatible server that streams the first words, then holds the rest until
    `terminal` shows them (a minute at most, so a client that does not stream fails rather
    than hangs). Plain requests get the whole reply at once."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self.streamed: list[bool] = []
        self.held_until_shown: list[bool] = []
        self.server = LoopbackServer(self.answer)

    def answer(self, request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        assert isinstance(body, dict)
        self.streamed.append(bool(body.get("stream")))
        if body.get("stream"):
            return LoopbackResponse(stream=self.events)
        message = {"role": "assistant", "content": FIRST + REST}
        return LoopbackResponse.json_body(
            {
                "model": "held",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )

    def events(self) -> Iterator[bytes]:
        yield event({"role": "assistant", "content": FIRST})
        try:
            self.terminal.shown.get(timeout=60)
            self.held_until_shown.append(True)
        except queue.Empty:
            self.held_until_shown.append(False)
        yield event({"content": REST})
        yield event({}, "stop")
        yield b"data: [DONE]\n\n"


def run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str
) -> tuple[int, str, HeldServer]:
    """`twinflow run spec.yaml FLAGS` against a held server; the exit code, stdout and server."""
    terminal = Terminal()
    held = HeldServer(terminal)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdout", terminal)
    with held.server:
        (tmp_path / "spec.yaml").write_text(SPEC.format(url=held.server.url))
        code = main(["run", "spec.yaml", "--out", "out", *flags])
    return code, terminal.getvalue(), held


def test_run_prints_the_models_text_before_the_reply_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first words reach stdout while the server still holds the rest of the reply."""
    code, output, held = run(tmp_path, monkeypatch)
    assert 0 == code
    assert [True] == held.streamed
    assert [True] == held.held_until_shown
    assert f"{REPLY_PREFIX}{FIRST}{REST}\n" in output
    assert output.index(FIRST) < output.index("  answer")


def test_quiet_prints_no_streamed_text_and_does_not_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --quiet the request is not streamed and only the summary is printed."""
    code, output, held = run(tmp_path, monkeypatch, "--quiet")
    assert 0 == code
    assert REPLY_PREFIX not in output
    assert f"  answer    {FIRST}{REST}\n" in output
    assert [False] == held.streamed


def test_json_output_stays_one_document_while_streaming_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--json never interleaves streamed text: stdout parses as one JSON document."""
    code, output, held = run(tmp_path, monkeypatch, "--json")
    assert 0 == code
    assert FIRST + REST == json.loads(output)["output"]
    assert [False] == held.streamed


def model_responses(directory: Path) -> list[object]:
    """The model_responded bodies of the run's trace."""
    lines = (directory / "out" / "trace.jsonl").read_text().splitlines()
    bodies = [json.loads(line)["event"]["body"] for line in lines]
    return [body for body in bodies if body["kind"] == "model_responded"]


def test_streamed_and_quiet_runs_record_the_same_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace records the assembled reply: a streamed and a quiet run record equal responses."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert 0 == run(tmp_path / "a", monkeypatch)[0]
    assert 0 == run(tmp_path / "b", monkeypatch, "--quiet")[0]
    assert model_responses(tmp_path / "a") == model_responses(tmp_path / "b")


class Writes(io.StringIO):
    """A stdout that keeps each write apart, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


@pytest.mark.real_model
def test_run_on_the_embedded_model_prints_the_reply_in_several_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SmolLM2 the reply reaches stdout as several writes, each before the run's summary."""
    spec = "prompt: Name three colours.\nmodel:\n  url: embedded\n  mode: native\n  max_tokens: 24\nmax_steps: 1\n"
    (tmp_path / "spec.yaml").write_text(spec)
    terminal = Writes()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdout", terminal)
    assert 0 == main(["run", "spec.yaml", "--out", "out"])
    start = terminal.writes.index(REPLY_PREFIX)
    end = next(i for i, text in enumerate(terminal.writes) if text.startswith("  steps"))
    pieces = [text for text in terminal.writes[start + 1 : end] if text.strip()]
    assert len(pieces) > 1
