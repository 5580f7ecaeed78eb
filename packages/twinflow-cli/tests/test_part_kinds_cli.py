"""A part kind defined by a package outside twinflow, through every command that reads a trace.

The plugin (``plugin_package/acme_parts``) is never installed: each test copies it beside a
run spec whose ``part_kinds`` names its classes, the way a user's tools sit beside theirs.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import scripted_chat

from twinflow.agent import FunctionModel, load_spec
from twinflow.cli._main import main
from twinflow.kernel import CountingIds, LoopbackServer, SteppingClock
from twinflow.kernel._process import run_process
from twinflow.trace import FileTraceSink, verify_trace
from twinflow.trace._testing import events_of, rechain
from twinflow.vocab import Message, ModelRequest, TextPart

PLUGIN = Path(__file__).parent / "plugin_package" / "acme_parts"
SPEC = """\
prompt: what does the report say?
model:
  url: {url}
part_kinds: ["acme_parts:CitationPart", "acme_parts:StampPart"]
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory holding the plugin and a spec naming its kinds (no server: never asked)."""
    root = tmp_path_factory.mktemp("plugin-project")
    shutil.copytree(PLUGIN, root / "acme_parts")
    (root / "spec.yaml").write_text(SPEC.format(url="http://127.0.0.1:9"))
    (root / "plain.yaml").write_text(
        SPEC.format(url="http://127.0.0.1:9").rsplit("part_kinds", 1)[0]
    )
    yield root
    sys.modules.pop("acme_parts", None)


def record(project: Path, name: str, quote: str = "revenue rose 4%") -> Path:
    """Run the spec's agent (the builder `twinflow run` uses) on a model citing the report."""
    spec = load_spec(project / "spec.yaml")
    citation, _ = spec.load_part_kinds()

    def reply(request: ModelRequest) -> Message:
        cite = citation(source="report.pdf", quote=quote, page=3)  # type: ignore[call-arg]  # the plugin's own fields
        return Message(role="assistant", parts=(TextPart(text="It rose."), cite))

    path = project / name
    path.unlink(missing_ok=True)
    agent = spec.resolve().agent(
        model=FunctionModel(reply),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        trace=FileTraceSink(path),
    )
    agent.run(spec.prompt)
    agent.close()
    return path


def test_show_prints_the_declared_kinds_and_the_plugin_part(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kinds from run_started, the part by kind and fields, and the verdict."""
    trace = record(project, "show.jsonl")
    assert 0 == main(["show", str(trace)])
    lines = capsys.readouterr().out.splitlines()
    expected = [
        "  part kinds: acme.citation (acme_parts:CitationPart), acme.stamp (acme_parts:StampPart)",
        '    assistant (acme.citation): {"page": 3, "quote": "revenue rose 4%", "source": "report.pdf"}',
    ]
    assert expected == [line for line in lines if line in expected]
    assert lines[-1].startswith("verified: 5 events")


def test_the_trace_page_holds_the_plugin_part(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show --html writes the page holding the trace's exact bytes, citation and all."""
    trace = record(project, "page.jsonl")
    page = project / "page.html"
    page.unlink(missing_ok=True)
    assert 0 == main(["show", str(trace), "--html", str(page)])
    capsys.readouterr()
    assert base64.b64encode(trace.read_bytes()).decode() in page.read_text()


def test_diff_points_at_the_plugin_field_that_differs(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs citing different words: the divergence is the quote, at step 1."""
    a = record(project, "a.jsonl")
    b = record(project, "b.jsonl", quote="revenue fell 4%")
    assert 1 == main(["diff", str(a), str(b), "--json"])
    divergences = json.loads(capsys.readouterr().out)["divergences"]
    assert (1, "model_responded", "/response/message/parts/1/quote") == (
        divergences[0]["step"],
        divergences[0]["kind"],
        divergences[0]["pointer"],
    )


def test_replay_matches_with_the_spec_and_diverges_without_the_kinds(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spec naming the kinds replays every event; one that does not differs at run_started."""
    trace = record(project, "replay.jsonl")
    assert 0 == main(["replay", str(trace), "--spec", str(project / "spec.yaml")])
    assert "matched all 5 events" in capsys.readouterr().out
    assert 1 == main(["replay", str(trace), "--spec", str(project / "plain.yaml")])
    error = capsys.readouterr().err.strip()
    assert 1 == len(error.splitlines())
    assert "event 0 differs" in error and "/body/config" in error


def test_both_verifiers_accept_the_trace_without_the_plugin(project: Path) -> None:
    """twinflow verify, and the stdlib auditor's command run where the plugin cannot be imported."""
    trace = record(project, "verify.jsonl")
    assert 0 == main(["verify", str(trace)])
    elsewhere = project.parent
    auditor = run_process(
        [sys.executable, "-P", "-m", "twinflow.trace", "verify", str(trace)], cwd=elsewhere
    )
    assert (0, "") == (auditor.returncode, auditor.stderr)


def test_trace_load_without_the_plugin_keeps_the_part_byte_exact(project: Path) -> None:
    """In a process that cannot import acme_parts: a GenericPart whose event re-encodes exactly."""
    trace = record(project, "load.jsonl")
    script = (
        "import sys\n"
        "from twinflow.agent import Trace\n"
        "from twinflow.agent._trace import encode_event\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "trace = Trace.load(data)\n"
        "part = trace.events[2].body.response.message.parts[1]\n"
        "lines = b''.join(encode_event(e)[0] for e in trace.events)\n"
        "print(type(part).__name__, 'acme_parts' in sys.modules, lines == data)\n"
    )
    result = run_process([sys.executable, "-P", "-c", script, str(trace)], cwd=project.parent)
    assert ("GenericPart False True\n", "") == (result.stdout, result.stderr)


def test_twinflow_run_records_the_spec_kinds_and_replays(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run command resolves part_kinds beside the spec, records them in run_started and the
    plugin module in code.json; replay --spec and --trust-spec both match."""
    with LoopbackServer(scripted_chat) as server:
        spec = project / "served.yaml"
        spec.write_text(SPEC.format(url=server.url))
        out = project / "served"
        assert 0 == main(["run", str(spec), "--out", str(out), "--json"])
    capsys.readouterr()
    trace = out / "trace.jsonl"
    started = events_of(trace.read_bytes())[0]["body"]
    assert isinstance(started, dict)
    expected = [
        {"kind": "acme.citation", "type": "acme_parts:CitationPart"},
        {"kind": "acme.stamp", "type": "acme_parts:StampPart"},
    ]
    assert expected == started["config"]["part_kinds"]
    assert 0 == main(["replay", str(trace), "--spec", str(spec)])
    code = json.loads((out / "code.json").read_text())
    assert ["acme_parts"] == [m["module"] for m in code["modules"]]
    assert 0 == main(["replay", str(trace), "--trust-spec"])


def test_a_spec_naming_something_else_is_refused_in_one_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A function where a part class belongs: exit 2, one line naming the entry."""
    spec = project / "wrong.yaml"
    spec.write_text(SPEC.format(url="http://127.0.0.1:9").replace("StampPart", "__name__"))
    assert 2 == main(["run", str(spec), "--out", str(project / "wrong")])
    error = capsys.readouterr().err.strip()
    assert 1 == len(error.splitlines())
    assert "part_kinds[1]: 'acme_parts:__name__' is not an extension part class" in error


def malformed(project: Path, part: Any) -> Path:
    """A re-chained trace (digests right) whose model reply holds ``part``."""
    events = events_of(record(project, "good.jsonl").read_bytes())
    body = events[2]["body"]
    assert isinstance(body, dict)
    body["response"]["message"]["parts"][1] = part
    path = project / "malformed.jsonl"
    path.write_bytes(rechain(events))
    return path


HOSTILE = {
    "kind-a-number": {"kind": 5},
    "kind-empty": {"kind": ""},
    "kind-huge": {"kind": "a" * 1_000_000},
    "kind-core-without-fields": {"kind": "tool_call"},
    "part-a-string": "acme.citation",
    "deep": {"kind": "acme.x", "v": json.loads("[" * 50 + "]" * 50)},
    "too-deep": {"kind": "acme.x", "v": json.loads("[" * 70 + "]" * 70)},
    "vocab-kind-wrong-field": {"kind": "cache_hint", "ttl": 3},
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_malformed_part_is_one_line_from_every_command(
    name: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --typed, show, diff and replay: exit 1 or 2, one stderr line, never a traceback.

    Plain ``verify`` is the leaf's verifier, which checks the chain and knows no part kinds
    (the rechained file's chain is intact); ``--typed`` reads each body as the agent types it.
    """
    path = malformed(project, HOSTILE[name])
    # Too deep is the leaf's own limit (exit 1); any other malformed part is not its business.
    assert (1 if name == "too-deep" else 0) == main(["verify", str(path)])
    capsys.readouterr()
    commands = [
        ["verify", "--typed", str(path)],
        ["show", str(path)],
        ["diff", str(path), str(project / "good.jsonl")],
        ["replay", str(path), "--spec", str(project / "spec.yaml")],
    ]
    for argv in commands:
        code = main(argv)
        err = capsys.readouterr().err
        if name == "deep":
            # 52 levels: within the depth limit, a well-formed generic part.
            assert code in (0, 1), (argv, err)
            continue
        assert (True, 1) == (code in (1, 2), len(err.strip().splitlines())), (argv, err)
        assert "Traceback" not in err


def test_the_stdlib_verifier_knows_no_part_kinds() -> None:
    """A malformed part is the typed reader's business: the leaf verifies any JSON it chains."""
    events = [
        {"at": "2026-01-01T00:00:00Z", "body": {"kind": "model_responded", "parts": [{"kind": 5}]}}
    ]
    assert True is verify_trace(rechain(events), require_complete=False).ok
