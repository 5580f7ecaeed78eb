"""Pages opened in a real headless Chromium: Lab Notes charts render; a trace page verifies.

The trace page (`twinflow.views.render_trace_page`, written by `twinflow show --html` and
linked from Lab Notes) checks the trace with WebCrypto. These tests hold that it says verified
for a good trace, names the break `verify_trace` names for a tampered one, shows hostile
strings as text, and logs nothing to the console.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from eval_testkit import START, dataset, factory

from twinflow.agent import (
    Agent,
    FunctionModel,
    Policy,
    Trace,
    verify_agent_trace,
)
from twinflow.eval import run_eval
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.trace import MemoryTraceSink
from twinflow.trace._format import encode_redacted
from twinflow.views import render_trace_page
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart

HOSTILE = "</script><img src=x onerror=console.error('pwned')><b>bold</b>"

# The flags a headless run on a machine with no network needs: without the background
# networking ones Chromium keeps trying to reach Google's hosts.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
    # Lets the page's asynchronous work (WebCrypto digests) finish before the DOM is dumped.
    "--virtual-time-budget=20000",
)


def chromium() -> str:
    """Debian's chromium, which `.ci/run` installs (or Chrome / Ubuntu's chromium-browser).

    Its absence fails the test, loudly: the report's rendering is checked, never skipped.
    """
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.fail("chromium is not installed: `apt-get install -y chromium` (.ci/run does this)")


def open_in_chromium(page: Path, profile: Path) -> ProcessResult:
    """Load ``page`` headless and return the DOM after its scripts ran (stdout) and the log."""
    return run_process(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        timeout=120,
    )


def console_lines(log: str) -> list[str]:
    """The page's console messages, as Chromium logs them on stderr."""
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def test_the_report_renders_its_charts_without_console_messages(tmp_path: Path) -> None:
    """lab-notes.html draws all three charts in a real browser and logs nothing to the console."""
    run_dir = tmp_path / "run"
    run_eval(dataset(6, wrong=(1,)), factory(), run_dir, clock=SteppingClock(START))
    result = open_in_chromium(run_dir / "lab-notes.html", tmp_path / "profile")
    assert 0 == result.returncode, result.stderr[-2000:]
    assert [] == console_lines(result.stderr)
    assert 'data-charts="rendered:3"' in result.stdout


def test_the_console_check_sees_an_error_when_there_is_one(tmp_path: Path) -> None:
    """The same check on a page that logs an error does find it (so the test above can fail)."""
    page = tmp_path / "noisy.html"
    page.write_text("<html><body><script>console.error('boom')</script></body></html>")
    result = open_in_chromium(page, tmp_path / "profile")
    assert ['"boom"'] == [
        line.split("] ", 1)[1].split(",")[0] for line in console_lines(result.stderr)
    ]


def hostile_tool(text: str) -> str:
    """Echo text back with markup around it."""
    return f"{text} {HOSTILE}"


def hostile_model(request: ModelRequest) -> Message:
    """Call the tool once with a hostile argument, then answer with markup."""
    if not any(m.role == "tool" for m in request.transcript.messages):
        call = ToolCallPart(id=CallId("c1"), name="hostile_tool", arguments={"text": HOSTILE})
        return Message(role="assistant", parts=(call,))
    return Message.assistant(f"done {HOSTILE}")


def hostile_trace(prompt: str = f"echo {HOSTILE}") -> bytes:
    """A finished run whose prompt, tool arguments, result and answer all carry markup."""
    sink = MemoryTraceSink()
    agent: Agent[str] = Agent(
        FunctionModel(hostile_model),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[hostile_tool],
        policy=Policy(allow=frozenset({"hostile_tool"})),
        trace=sink,
    )
    agent.run(prompt)
    return sink.data


def render_in_chromium(data: bytes, tmp_path: Path, name: str) -> ProcessResult:
    """Write the trace page for ``data`` and open it headless."""
    page = tmp_path / f"{name}.html"
    page.write_text(render_trace_page(data, name), encoding="utf-8")
    return open_in_chromium(page, tmp_path / "profile")


def root_attribute(dom: str, name: str) -> str | None:
    """An attribute of the dumped page's root element."""
    head = dom.split(">", 2)[1]
    marker = f' {name}="'
    if marker not in head:
        return None
    return head.split(marker, 1)[1].split('"', 1)[0]


def test_the_trace_page_verifies_a_good_trace_in_the_browser(tmp_path: Path) -> None:
    """A good trace: verified, Python's Merkle root, no console message, no markup run."""
    data = hostile_trace()
    result = render_in_chromium(data, tmp_path, "good")
    assert 0 == result.returncode, result.stderr[-2000:]
    dom = result.stdout
    trace = Trace.load(data)
    expected = ("verified", "true", trace.checkpoint().root, str(trace.size))
    names = ("data-verdict", "data-secure", "data-root", "data-events")
    assert expected == tuple(root_attribute(dom, n) for n in names)
    assert [] == console_lines(result.stderr)
    # The hostile strings are on the page as text: no element was made from them.
    assert (False, False, True) == ("<img" in dom, "<b>" in dom, "&lt;img src=x onerror" in dom)
    assert (True, True) == ("tool_called" in dom, "hostile_tool" in dom)


def tamperings(data: bytes) -> dict[str, bytes]:
    """Ways to damage a trace: edit, remove, reorder, insert, truncate."""
    lines = data.splitlines(keepends=True)
    edited = list(lines)
    edited[4] = edited[4].replace(b"hostile_tool", b"friendly_tool", 1)
    return {
        "edited": b"".join(edited),
        "removed": b"".join(lines[:3] + lines[4:]),
        "reordered": b"".join([*lines[:3], lines[4], lines[3], *lines[5:]]),
        "inserted": b"".join([*lines[:5], lines[2], *lines[5:]]),
        "truncated": data[:-10],
    }


def test_the_trace_page_names_where_a_tampered_trace_breaks(tmp_path: Path) -> None:
    """Each tampering: broken at the seq `verify_trace` names, with no console message."""
    for name, damaged in tamperings(hostile_trace()).items():
        report = verify_agent_trace(damaged)
        assert report.problem is not None, name
        result = render_in_chromium(damaged, tmp_path, name)
        assert 0 == result.returncode, result.stderr[-2000:]
        expected = (name, "broken", str(report.problem.seq))
        verdict = root_attribute(result.stdout, "data-verdict")
        actual = (name, verdict, root_attribute(result.stdout, "data-break-seq"))
        assert expected == actual
        assert "NOT VERIFIED" in result.stdout
        assert [] == console_lines(result.stderr)


def test_the_trace_page_refuses_a_checkpoint_of_other_events(tmp_path: Path) -> None:
    """A checkpoint of another run's trace does not match these events: that is the verdict."""
    other = Trace.load(hostile_trace("another prompt")).checkpoint().to_json()
    page = tmp_path / "other.html"
    page.write_text(render_trace_page(hostile_trace(), "t", other), encoding="utf-8")
    result = open_in_chromium(page, tmp_path / "profile")
    assert ("checkpoint-mismatch", "mismatch") == (
        root_attribute(result.stdout, "data-verdict"),
        root_attribute(result.stdout, "data-checkpoint"),
    )


def test_the_trace_pages_lab_notes_link_verify(tmp_path: Path) -> None:
    """The page Lab Notes links for a case says verified, with the root results.json records."""
    run_dir = tmp_path / "run"
    results = run_eval(dataset(2), factory(), run_dir, clock=SteppingClock(START))
    case = results.cases[0]
    page = run_dir / case.trace.replace(".jsonl", ".html")
    result = open_in_chromium(page, tmp_path / "profile")
    expected = ("verified", case.checkpoint.root)
    assert expected == (
        root_attribute(result.stdout, "data-verdict"),
        root_attribute(result.stdout, "data-root"),
    )
    assert [] == console_lines(result.stderr)


def rechain(data: bytes, mutate: Callable[[int, bytes], bytes]) -> bytes:
    """``data`` with each event's bytes as ``mutate(seq, bytes)`` makes them, the digests and
    every ``prev`` recomputed as a forger would."""
    head, infix = b'{"digest":"', b'","event":'
    out, prev = [], "0" * 64
    for seq, line in enumerate(data.splitlines()):
        event = line[len(head) + 64 + len(infix) : -1]
        event = re.sub(rb'"prev":"[0-9a-f]{64}"', f'"prev":"{prev}"'.encode(), event, count=1)
        event = mutate(seq, event)
        prev = hashlib.sha256(event).hexdigest()
        out.append(head + prev.encode() + infix + event + b"}\n")
    return b"".join(out)


def page_verdict(
    data: bytes, checkpoint: dict[str, object] | None, tmp_path: Path, name: str
) -> tuple[str | None, str | None]:
    """The (verdict, checkpoint) attributes of ``data``'s page with ``checkpoint`` embedded."""
    page = tmp_path / f"{name}.html"
    page.write_text(render_trace_page(data, name, checkpoint), encoding="utf-8")
    result = open_in_chromium(page, tmp_path / "profile")
    assert [] == console_lines(result.stderr)
    return root_attribute(result.stdout, "data-verdict"), root_attribute(
        result.stdout, "data-checkpoint"
    )


def test_a_rewritten_trace_with_the_genuine_checkpoint_is_not_verified(tmp_path: Path) -> None:
    """Events rewritten and re-chained, the genuine published checkpoint embedded (as JSON, or
    as a note's size and root): the verdict is the checkpoint mismatch, not a green Verified."""
    data = hostile_trace()
    genuine = Trace.load(data).checkpoint()
    forged = rechain(data, lambda seq, e: e.replace(b"hostile_tool", b"friendly_tool"))
    assert verify_agent_trace(forged).ok
    for form in ({"size": genuine.size, "root": genuine.root}, genuine.to_json()):
        verdict = page_verdict(forged, dict(form), tmp_path, "forged")
        assert ("checkpoint-mismatch", "mismatch") == verdict
    assert ("verified", "match") == page_verdict(
        data, {"size": genuine.size, "root": genuine.root}, tmp_path, "genuine"
    )


def test_a_prefix_checkpoint_leaves_the_tail_unvouched_for_on_the_page(tmp_path: Path) -> None:
    """A checkpoint of the first 3 events: they match, but the verdict says the rest is not vouched for."""
    data = hostile_trace()
    prefix = Trace.load(data).checkpoint()
    lines = data.splitlines(keepends=True)
    first3 = Trace.load(b"".join(lines[:3]), require_complete=False).checkpoint()
    assert prefix.size > 3
    verdict = page_verdict(data, {"size": 3, "root": first3.root}, tmp_path, "prefix")
    assert ("checkpoint-tail", "match") == verdict


@pytest.mark.parametrize(
    "mutation",
    [
        lambda e: e[:-1] + b',"seq":' + e.rsplit(b'"seq":', 1)[1],  # duplicate key
        lambda e: e.replace(b'"seq":', b'"seq": ', 1),  # whitespace
        lambda e: e.replace(b'{"at":', b'{"zz":0,"at":', 1),  # key order
        lambda e: e.replace(b'"seq":4}', b'"seq":4.0}', 1),  # number form
        lambda e: e.replace(b'"kind":"', b'"kind":"\\u0074', 1) if b'"kind":"t' in e else e,
    ],
    ids=["duplicate_key", "whitespace", "key_order", "number_form", "escape_form"],
)
def test_the_page_refuses_a_non_canonical_event_as_verify_does(
    tmp_path: Path, mutation: Callable[[bytes], bytes]
) -> None:
    """A re-chained trace whose event is not canonical JSON: verify refuses it, so does the page."""
    data = hostile_trace()
    target = 4
    forged = rechain(data, lambda seq, e: mutation(e) if seq == target else e)
    assert forged != rechain(data, lambda seq, e: e)
    report = verify_agent_trace(forged)
    assert report.problem is not None
    page = tmp_path / "noncanonical.html"
    page.write_text(render_trace_page(forged, "t"), encoding="utf-8")
    result = open_in_chromium(page, tmp_path / "profile")
    expected = ("broken", str(report.problem.seq))
    assert expected == (
        root_attribute(result.stdout, "data-verdict"),
        root_attribute(result.stdout, "data-break-seq"),
    )


def test_the_trace_page_verifies_a_redacted_trace_and_names_the_seqs(tmp_path: Path) -> None:
    """Events replaced by their digest line: verified, the same root, and the page says which."""
    data = hostile_trace()
    lines = data.splitlines(keepends=True)
    redacted = b"".join(
        encode_redacted(line[11:75].decode()) if n in (1, 2) else line
        for n, line in enumerate(lines)
    )
    result = render_in_chromium(redacted, tmp_path, "redacted")
    assert 0 == result.returncode, result.stderr[-2000:]
    expected = ("verified", "1,2", Trace.load(data).checkpoint().root)
    actual = tuple(
        root_attribute(result.stdout, name)
        for name in ("data-verdict", "data-redacted", "data-root")
    )
    assert expected == actual
    assert "REDACTED (digest only)" in result.stdout
    assert [] == console_lines(result.stderr)
