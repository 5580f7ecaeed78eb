"""`twinflow show`, behavioural `twinflow diff`, and the command table's fast paths."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from twinflow.agent import Agent, FunctionModel, Policy
from twinflow.cli._main import COMMAND_TABLE, command_module_commands, main
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.kernel._process import run_process
from twinflow.trace import FileTraceSink
from twinflow.trace._testing import events_of, rechain
from twinflow.views._behaviour import compare_behaviour
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart


def make_add(offset: int = 0) -> Callable[..., int]:
    """The `add` tool; a non-zero ``offset`` is the same tool with changed code."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b + offset

    return add


def reply(request: ModelRequest) -> Message:
    """Call `add` once (a denied `rm` alongside), then answer with the result."""
    results = [p for m in request.transcript.messages if m.role == "tool" for p in m.parts]
    if not results:
        return Message(
            role="assistant",
            parts=(
                ToolCallPart(id=CallId("k1"), name="add", arguments={"a": 2, "b": 3}),
                ToolCallPart(id=CallId("k2"), name="rm", arguments={"path": "/"}),
            ),
        )
    content = next(getattr(p, "content", "") for p in results if getattr(p, "name", "") == "add")
    return Message.assistant(f"the sum is {content}")


def record(
    path: Path, *, day: int = 1, prefix: str = "", offset: int = 0, prompt: str = "add 2 and 3"
) -> Path:
    """Run the scripted agent once, writing its trace to ``path``."""
    agent: Agent[Any] = Agent(
        FunctionModel(reply),
        clock=SteppingClock(datetime(2026, 1, day, tzinfo=UTC)),
        ids=CountingIds(prefix),
        tools=[make_add(offset)],
        policy=Policy(allow=frozenset({"add"})),
        trace=FileTraceSink(path),
    )
    agent.run(prompt)
    agent.writer.close()
    return path


def test_show_prints_the_run_as_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Prompt, tool call with arguments, decisions with reasons, result, answer, verdict."""
    trace = record(tmp_path / "t.jsonl")
    assert 0 == main(["show", str(trace)])
    text = capsys.readouterr().out
    expected = [
        "  prompt: add 2 and 3",
        "step 1",
        '    assistant calls add {"a": 2, "b": 3}',
        '  tool add {"a": 2, "b": 3}',
        "  tool result: 5",
        "answer: the sum is 5",
    ]
    assert expected == [line for line in expected if line in text.splitlines()]
    decisions = [line for line in text.splitlines() if line.startswith("  policy ")]
    assert ["allow add", "deny rm"] == [" ".join(line.split()[1:3]) for line in decisions]
    assert text.splitlines()[-1].startswith("verified: 12 events; Merkle root ")


def test_show_names_where_a_tampered_trace_breaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited tool result: exit 1, events after the break marked, the break named."""
    trace = record(tmp_path / "t.jsonl")
    lines = trace.read_bytes().splitlines(keepends=True)
    seq = next(
        i for i, line in enumerate(lines) if b'"content":"5"' in line and b"tool_returned" in line
    )
    lines[seq] = lines[seq].replace(b'"content":"5"', b'"content":"6"')
    trace.write_bytes(b"".join(lines))
    assert 1 == main(["show", str(trace)])
    captured = capsys.readouterr()
    assert f"at seq {seq}" in captured.out.splitlines()[-1]
    assert "  tool result: 6  [not verified]" in captured.out.splitlines()
    assert captured.out.splitlines()[-1].startswith("NOT VERIFIED: ")


def test_show_escapes_terminal_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A prompt carrying an ANSI escape and a bidi override is printed escaped, never raw."""
    trace = record(tmp_path / "t.jsonl", prompt="hi \x1b[2J\u202egnp.exe")
    assert 0 == main(["show", str(trace)])
    text = capsys.readouterr().out
    assert ("\x1b" in text, "\u202e" in text) == (False, False)
    assert "  prompt: hi \\x1b[2J\\u202egnp.exe" in text.splitlines()


def test_show_html_writes_a_page_holding_the_exact_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--html writes one page embedding the trace's bytes, with no external reference."""
    trace = record(tmp_path / "t.jsonl")
    page = tmp_path / "t.html"
    assert 0 == main(["show", str(trace), "--html", str(page)])
    text = page.read_text()
    assert base64.b64encode(trace.read_bytes()).decode() in text
    assert ("http://" in text, "https://" in text, "src=" in text) == (False, False, False)


def test_show_html_prints_the_verdict_not_the_text_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --html the terminal gets the verdict and the page's path, not the run again."""
    trace = record(tmp_path / "t.jsonl")
    page = tmp_path / "t.html"
    assert 0 == main(["show", str(trace), "--html", str(page)])
    lines = capsys.readouterr().out.splitlines()
    expected = ["verified", f"page: {page} (open it in a browser: it verifies the trace again)"]
    assert expected == [lines[0].split(":")[0], *lines[1:]]


def test_diff_compares_behaviour_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs of one agent: same behaviour by default; --exact still stops at seq 0's /at."""
    a = record(tmp_path / "a.jsonl", day=1, prefix="a-")
    b = record(tmp_path / "b.jsonl", day=2, prefix="b-")
    assert 0 == main(["diff", str(a), str(b)])
    assert capsys.readouterr().out.startswith("same behaviour: 12 events")
    assert 1 == main(["diff", str(a), str(b), "--exact", "--json"])
    exact = json.loads(capsys.readouterr().out)
    assert (0, "/at") == (exact["seq"], exact["pointer"])


def test_diff_lists_every_divergence_with_its_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool whose code changed: the result differs at step 1, and so does the answer."""
    a = record(tmp_path / "a.jsonl")
    b = record(tmp_path / "b.jsonl", day=3, offset=1)
    assert 1 == main(["diff", str(a), str(b), "--json"])
    payload = json.loads(capsys.readouterr().out)
    seen = [(d["step"], d["kind"], d["pointer"]) for d in payload["divergences"]]
    assert (1, "tool_returned", "/result/content") == seen[0]
    assert (2, "output_accepted", "/value") in seen


def with_first_argument(trace: Path, out: Path, value: object) -> Path:
    """``trace`` re-chained into ``out`` with its first tool call's ``a`` argument ``value``."""
    events: list[Any] = events_of(trace.read_bytes())
    called = next(e for e in events if e["body"]["kind"] == "tool_called")
    called["body"]["arguments"]["a"] = value
    out.write_bytes(rechain(events))
    return out


def test_diff_prints_a_long_number_as_json_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2.0**53 in a tool call's arguments prints as its bytes say, not as 9007199254740992.0."""
    trace = record(tmp_path / "t.jsonl")
    a = with_first_argument(trace, tmp_path / "a.jsonl", 2.0**53)
    b = with_first_argument(trace, tmp_path / "b.jsonl", 2**53 - 1)
    assert 1 == main(["diff", str(a), str(b)])
    expected = (
        "tool_called: at /arguments/a: value differs: expected 9007199254740992, "
        "actual 9007199254740991"
    )
    assert [expected] == [
        line.split("changed  ")[1] for line in capsys.readouterr().out.splitlines()
    ]


def test_diff_reports_what_the_parsed_bytes_compare_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each pair's divergences are `compare_behaviour` of `json.loads` of every event's bytes."""
    one = record(tmp_path / "one.jsonl")
    pairs = [
        (one, record(tmp_path / "other.jsonl", day=3, offset=1, prefix="b-")),
        (
            with_first_argument(one, tmp_path / "long.jsonl", 2.0**53),
            with_first_argument(one, tmp_path / "short.jsonl", -(2**53) + 1),
        ),
        (
            one,
            with_first_argument(
                one, tmp_path / "astral.jsonl", {"\U0001f600": 1, "\u00e9": [1.5e300]}
            ),
        ),
    ]
    for a, b in pairs:
        assert 1 == main(["diff", str(a), str(b), "--json"])
        actual = json.loads(capsys.readouterr().out)["divergences"]
        events: list[list[Any]] = [events_of(a.read_bytes()), events_of(b.read_bytes())]
        divergences = compare_behaviour(*events)
        expected = json.loads(json.dumps([d.model_dump() for d in divergences]))
        assert expected == actual
        assert 1 == main(["diff", str(a), str(b)])
        lines = capsys.readouterr().out.splitlines()
        details = [line.split("  ", 2)[2].split(None, 1)[1] for line in lines]
        assert [d.detail for d in divergences] == details


def test_the_command_table_matches_each_module() -> None:
    """Each module named in the table defines exactly the commands the table gives it."""
    modules = {module for module, _ in COMMAND_TABLE.values()}
    expected = {m: sorted(n for n, (o, _) in COMMAND_TABLE.items() if o == m) for m in modules}
    actual = {m: sorted(command_module_commands(m)) for m in modules}
    assert expected == actual


def test_help_and_version_import_no_command_module() -> None:
    """`twinflow --help` and `--version` load neither pydantic nor any command's module."""
    script = (
        "import sys\n"
        "from twinflow.cli._main import main\n"
        "for argv in (['--help'], ['--version']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('pydantic', 'twinflow.agent', 'twinflow.cli._run', 'twinflow.cli._commands')\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = run_process([sys.executable, "-c", script], timeout=120)
    assert "LOADED []" == result.stdout.strip().splitlines()[-1]
    assert "show a trace as a person reads it" in result.stdout
    assert result.stdout.splitlines()[-2].startswith("twinflow 0.1.0 (Python 3.")


def test_a_mistyped_command_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    """`twinflow verfy` exits 2 suggesting `verify`."""
    with pytest.raises(SystemExit) as info:
        main(["verfy", "t.jsonl"])
    assert 2 == info.value.code
    assert "unknown command 'verfy' (did you mean 'verify'?)" in capsys.readouterr().err


def test_show_html_embeds_a_published_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--checkpoint puts the checkpoint into the page; without --html it is a usage error."""
    trace = record(tmp_path / "t.jsonl")
    cp = str(tmp_path / "cp.note")
    assert 0 == main(["checkpoint", str(trace), "--origin", "example.org/lab", "--out", cp])
    page = tmp_path / "t.html"
    assert 2 == main(["show", str(trace), "--checkpoint", cp])
    assert "give --html FILE too" in capsys.readouterr().err
    args = ["show", str(trace), "--html", str(page), "--checkpoint", cp]
    assert 0 == main(args)
    assert 'id="checkpoint-data"' in page.read_text()


@pytest.mark.parametrize("form", ["signed note", "unsigned note"])
def test_show_html_refuses_a_checkpoint_the_trace_does_not_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    """A published checkpoint of another run (a signed or unsigned note): exit 1 naming the
    mismatch, and no page is written; the genuine one writes the page."""
    genuine = record(tmp_path / "t.jsonl")
    other = record(tmp_path / "other.jsonl", prompt="add 5 and 7")
    assert 0 == main(["keygen", "example.org/lab", "--out", str(tmp_path / "lab")])
    keys: list[str] = []
    for name, trace in (("genuine", genuine), ("other", other)):
        argv = ["checkpoint", str(trace), "--out", str(tmp_path / f"{name}.cp")]
        if form == "signed note":
            argv += ["--sign", str(tmp_path / "lab.key")]
            keys = ["--key", str(tmp_path / "lab.pub")]
        else:
            argv += ["--origin", "example.org/lab"]
        capsys.readouterr()
        assert 0 == main([*argv, "--json"])
        document = json.loads(capsys.readouterr().out)
        assert document["note"] == (tmp_path / f"{name}.cp").read_text()
    page = tmp_path / "t.html"
    args = ["show", str(genuine), "--html", str(page), *keys, "--checkpoint"]
    assert 1 == main([*args, str(tmp_path / "other.cp")])
    err = capsys.readouterr().err.strip().splitlines()
    assert 1 == len(err) and "no page was written" in err[0], err
    assert not page.exists()
    assert 0 == main([*args, str(tmp_path / "genuine.cp")])
    assert page.exists()
