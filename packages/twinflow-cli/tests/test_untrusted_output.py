"""Untrusted text through `twinflow run`: a hostile server's text reaches no terminal raw and its
echo of the API key reaches no output, trace or file, whatever path carried it.

A loopback OpenAI-compatible server streams replies and errors that carry terminal escapes, a
lone surrogate and the key (exact, url-encoded, base64 of ``user:key``). The command runs as a
real process with the key in its environment; its stdout, stderr and every file of the run
directory are searched for each form of the key and for raw control characters.
"""

from __future__ import annotations

import base64
import io
import json
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest

from twinflow._base._untrusted import REDACTED, register_secret
from twinflow.agent import RunFailed
from twinflow.cli._watch import REPLY_PREFIX, TextPrinter
from twinflow.kernel import LoopbackResponse, LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.vocab import JsonValue, RunId, TextDelta

KEY = "sk-hostile-echo-5e8a1f0c77d2"
KEY_ENV = "TWINFLOW_TEST_ECHO_KEY"
FORMS = (
    KEY,
    urllib.parse.quote(KEY, safe=""),
    base64.b64encode(f"user:{KEY}".encode()).decode()[8:-4],
)
SPEC = f"""\
prompt: say something
model:
  url: {{url}}
  dialect: llama.cpp
  mode: native
  api_key_env: {KEY_ENV}
max_steps: 1
"""
END = RunFailed(run_id=RunId("r"), steps=1, error_type="E", message="m")
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07ok\rFAIL\u202e\x9b"


def sse(*events: object) -> LoopbackResponse:
    """A streamed answer: each event as `data:` (a str as it is, anything else as JSON)."""
    body = b"".join(
        f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events
    )
    return LoopbackResponse(
        headers=(("Content-Type", "text/event-stream"),), stream=lambda: iter([body])
    )


def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    """One chat.completion.chunk."""
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def echo(text: str, stream: bool) -> LoopbackResponse:
    """A reply whose content is `text` (streamed: in two deltas split inside it)."""
    if not stream:
        message: JsonValue = {"role": "assistant", "content": text}
        choice: JsonValue = {"index": 0, "message": message, "finish_reason": "stop"}
        return LoopbackResponse.json_body({"model": "m", "choices": [choice]})
    half = len(text) // 2
    return sse(
        chunk({"role": "assistant", "content": text[:half]}),
        chunk({"content": text[half:]}),
        chunk({}, "stop"),
        "[DONE]",
    )


def the_key_in(text: str) -> str:
    """`text` with the key in each of its forms."""
    return f"{text} {FORMS[0]} {FORMS[1]} Basic {base64.b64encode(f'user:{KEY}'.encode()).decode()}"


SERVERS: dict[str, Callable[[bool], LoopbackResponse]] = {
    "content-echo": lambda stream: echo(the_key_in("your key is") + HOSTILE, stream),
    "lone-surrogate": lambda stream: echo("a \ud800 b", stream),
    "streamed-error-event": lambda _: sse({"error": {"message": the_key_in("bad key") + HOSTILE}}),
    "non-json-event": lambda _: sse(the_key_in("not json") + HOSTILE.replace("\r", "")),
    "bad-field": lambda _: sse(
        {
            "model": "m",
            "choices": [{"index": 0, "delta": {"role": the_key_in("x")}, "finish_reason": 7}],
        }
    ),
    "error-status": lambda _: LoopbackResponse(
        status=403, body=the_key_in("denied").encode() + HOSTILE.encode()
    ),
}


def run(tmp_path: Path, answer: Callable[[bool], LoopbackResponse], *args: str) -> ProcessResult:
    """`twinflow run` against a server giving `answer(streamed)` to every request, the key set."""

    def respond(request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        return answer(isinstance(body, dict) and body.get("stream") is True)

    with LoopbackServer(respond) as server:
        (tmp_path / "spec.yaml").write_text(SPEC.format(url=server.url))
        return run_process(
            [sys.executable, "-m", "twinflow.cli", "run", "spec.yaml", "--out", "out", *args],
            cwd=tmp_path,
            env={"PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8", KEY_ENV: KEY},
            timeout=300,
        )


def leaks(tmp_path: Path, result: ProcessResult) -> list[str]:
    """Every output or file holding a form of the key, or a raw control character."""
    found = [
        f"{name}: {form!r}"
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr))
        for form in (*FORMS, "\x1b", "\r", "\u202e", "\x9b")
        if form in text
    ]
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "spec.yaml":
            data = path.read_bytes()
            found += [f"{path.name}: {form!r}" for form in FORMS if form.encode() in data]
    return found


@pytest.mark.parametrize("name", sorted(SERVERS))
@pytest.mark.parametrize("mode", ["streamed", "json"])
def test_a_hostile_server_reaches_no_terminal_output_or_file(
    tmp_path: Path, name: str, mode: str
) -> None:
    """Each hostile answer: one line on error, no traceback, no key form, no raw control."""
    result = run(tmp_path, SERVERS[name], *(["--json"] if mode == "json" else []))
    assert [] == leaks(tmp_path, result)
    assert "Traceback" not in result.stderr
    assert result.returncode in (0, 1, 2)
    if result.returncode != 0:
        assert 1 == len(result.stderr.strip().splitlines()), result.stderr


def test_a_reply_echoing_the_key_is_traced_with_the_marker_and_verifies(tmp_path: Path) -> None:
    """The reply's content reaches the trace with the key replaced, and the trace verifies."""
    result = run(tmp_path, SERVERS["content-echo"])
    assert 0 == result.returncode, result.stderr
    trace = (tmp_path / "out" / "trace.jsonl").read_text()
    assert (True, False) == (REDACTED in trace, KEY in trace)
    verified = run_process(
        [sys.executable, "-m", "twinflow.cli", "verify", "out/trace.jsonl"], cwd=tmp_path
    )
    assert 0 == verified.returncode, verified.stderr
    page = run_process(
        [sys.executable, "-m", "twinflow.cli", "show", "out/trace.jsonl", "--html", "page.html"],
        cwd=tmp_path,
    )
    assert 0 == page.returncode, page.stderr
    assert [] == leaks(tmp_path, page)


class Utf8Terminal(io.TextIOWrapper):
    """A terminal's stdout: strict UTF-8, so a lone surrogate would raise UnicodeEncodeError."""

    def __init__(self) -> None:
        self.written = io.BytesIO()
        super().__init__(self.written, encoding="utf-8", errors="strict", write_through=True)

    def shown(self) -> str:
        self.flush()
        return self.written.getvalue().decode()


def test_the_stream_printer_escapes_controls_and_surrogates() -> None:
    """model> lines: escapes and a lone surrogate are shown as escapes, never raised or obeyed."""
    terminal = Utf8Terminal()
    printer = TextPrinter(terminal)
    for text in ("\x1b]0;t\x07", "ok\rno", " \ud800", "\u202eend"):
        printer(TextDelta(text=text))
    printer(END)
    assert f"{REPLY_PREFIX}\\x1b]0;t\\x07ok\\rno \\ud800\\u202eend" in terminal.shown()


def test_the_stream_printer_scrubs_a_key_split_across_deltas() -> None:
    """A key cut between two deltas, at any point, is still replaced whole."""
    key = "sk-split-across-deltas-91c3"
    register_secret(key)
    for cut in range(1, len(key)):
        terminal = Utf8Terminal()
        printer = TextPrinter(terminal)
        printer(TextDelta(text=f"a {key[:cut]}"))
        printer(TextDelta(text=f"{key[cut:]} b"))
        printer(END)
        assert f"{REPLY_PREFIX}a {REDACTED} b\n" == terminal.shown()


@pytest.mark.parametrize("joint", ["", "\n"])
def test_the_stream_printer_scrubs_a_cased_key_cut_by_a_line_between_deltas(joint: str) -> None:
    """The key upper-cased, cut between two deltas, the first ending in a line break: no
    character of it reaches the terminal."""
    key = "sk-cased-Across-deltas-40be"
    register_secret(key)
    shown = key.upper()
    for cut in range(1, len(key)):
        terminal = Utf8Terminal()
        printer = TextPrinter(terminal)
        printer(TextDelta(text=f"a {shown[:cut]}{joint}"))
        printer(TextDelta(text=f"{shown[cut:]} b"))
        printer(END)
        assert f"{REPLY_PREFIX}a {REDACTED} b\n" == terminal.shown()
