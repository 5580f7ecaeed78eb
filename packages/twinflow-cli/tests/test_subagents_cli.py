"""A team run end to end: a parent with two sub-agents on a scripted loopback server, verified as
a tree, replayed with no server, and a child's event proved from the parent's signed checkpoint."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import CALC, chat_answer, cli_json, completion, leaf_prove_check, page_dom

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import run_process

MODEL = "model:\n  url: {url}\n  dialect: llama.cpp\n"
SPECS = {
    "team.yaml": "prompt: add 2 and 3, then check it\nsystem: You lead the team.\n{model}"
    "agents:\n  - {{name: researcher, spec: researcher.yaml}}\n"
    "  - {{name: checker, spec: checker.yaml, description: Checks a sum.}}\n"
    "policy: {{allow: [researcher, checker]}}\nmax_steps: 4\n",
    "researcher.yaml": "prompt: unused\nsystem: You research sums.\n{model}tools: [calc:add]\n"
    "policy: {{allow: [add]}}\nmax_steps: 3\n",
    # The checker may not add: its own policy denies the call, in its own trace.
    "checker.yaml": "prompt: unused\nsystem: You check sums.\n{model}tools: [calc:add]\n"
    "max_steps: 3\n",
}


def _action(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What the scripted team says next, by who asks (the system prompt) and how far it got."""
    system = str(messages[0].get("content", "")) if messages else ""
    turns = sum(1 for m in messages if m.get("role") == "assistant")
    if "lead" in system:
        plan: list[dict[str, Any]] = [
            {"action": "call_tool", "tool": "researcher", "arguments": {"prompt": "2 + 3?"}},
            {"action": "call_tool", "tool": "checker", "arguments": {"prompt": "is it 5?"}},
            {"action": "final", "answer": "5, checked"},
        ]
        return plan[min(turns, 2)]
    if turns == 0:
        return {"action": "call_tool", "tool": "add", "arguments": {"a": 2, "b": 3}}
    return {"action": "final", "answer": "5"}


def team_chat(request: LoopbackRequest) -> LoopbackResponse:
    """Answer one chat-completions request of the team, in structured-action mode."""
    body = request.json_value()
    assert isinstance(body, dict)
    action = _action(body["messages"])
    return chat_answer(body, completion({"role": "assistant", "content": json.dumps(action)}))


def cli(*args: str, cwd: Path) -> tuple[int, str, str]:
    """`python -P -m twinflow.cli ARGS` in a fresh interpreter: exit code, stdout, stderr."""
    done = run_process(
        [sys.executable, "-P", "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A team run on a scripted server (stopped afterwards), and a signed checkpoint of it."""
    root = tmp_path_factory.mktemp("team")
    (root / "calc.py").write_text(CALC)
    with LoopbackServer(team_chat) as server:
        for name, text in SPECS.items():
            (root / name).write_text(text.format(model=MODEL.format(url=server.url)))
        # A second run of the same team, and one whose checker may add.
        allowed = SPECS["checker.yaml"].replace("max_steps", "policy: {{allow: [add]}}\nmax_steps")
        (root / "lenient.yaml").write_text(allowed.format(model=MODEL.format(url=server.url)))
        lenient = (root / "team.yaml").read_text().replace("checker.yaml", "lenient.yaml")
        (root / "team2.yaml").write_text(lenient)
        for spec, out in (("team.yaml", "r"), ("team.yaml", "r"), ("team2.yaml", "r2")):
            code, _, err = cli("run", spec, "--out", out, "--json", cwd=root)
            assert 0 == code, err
    for step in (
        ("keygen", "example.org/lab", "--out", "lab"),
        ("checkpoint", "r/trace.jsonl", "--sign", "lab.key", "--out", "cp.note"),
    ):
        code, _, err = cli(*step, cwd=root)
        assert 0 == code, err
    yield root


def events(path: Path) -> list[dict[str, Any]]:
    """The events of a trace file, as JSON."""
    return [json.loads(line)["event"] for line in path.read_bytes().splitlines()]


def test_each_child_runs_into_its_own_trace_under_its_own_policy(team: Path) -> None:
    """Two child traces beside the parent's; the checker's own policy denied its call."""
    checker = [e["body"] for e in events(team / "r" / "trace.checker.jsonl")]
    decisions = [b["decision"] for b in checker if b["kind"] == "policy_decided"]
    assert ["deny"] == decisions
    assert (team / "r" / "trace.researcher.jsonl").is_file()


def test_verify_tree_checks_every_descendant(
    team: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``verify --tree`` verifies the parent, both children and their links."""
    code, report, _ = cli_json(capsys, "verify", str(team / "r" / "trace.jsonl"), "--tree")
    names = [(n["depth"], Path(n["trace"]).name) for n in report["tree"]]
    expected = [(0, "trace.jsonl"), (1, "trace.researcher.jsonl"), (1, "trace.checker.jsonl")]
    assert (0, expected) == (code, names)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "trace.jsonl#5 -> trace.researcher.jsonl: the child trace is missing"),
        ("swapped", "trace.jsonl#5 -> trace.researcher.jsonl: the file is another child's trace"),
        ("edited", "trace.jsonl#5 -> trace.researcher.jsonl: "),
    ],
)
def test_verify_tree_fails_naming_the_link(
    team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, message: str
) -> None:
    """A missing, swapped or edited child fails ``verify --tree``, naming the parent's link."""
    run = shutil.copytree(team / "r", tmp_path / "r")
    child = run / "trace.researcher.jsonl"
    if damage == "missing":
        child.unlink()
    elif damage == "swapped":
        shutil.copyfile(run / "trace.checker.jsonl", child)
    else:
        child.write_bytes(child.read_bytes().replace(b"research", b"RESEARCH"))
    code, report, _ = cli_json(capsys, "verify", str(run / "trace.jsonl"), "--tree")
    assert (1, True) == (code, report["problem"]["message"].startswith(message))


def test_recorded_replay_needs_no_server(team: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The team replays recorded with its server gone: the children are served from the trace."""
    code, report, err = cli_json(
        capsys, "replay", str(team / "r" / "trace.jsonl"), "--spec", str(team / "team.yaml")
    )
    assert (0, True) == (code, report["ok"]), err


def test_child_event_proved_from_the_signed_parent_checkpoint(team: Path) -> None:
    """A proof chain from the parent's signed checkpoint to a child's event checks in the leaf."""
    researcher = events(team / "r" / "trace.researcher.jsonl")
    seq = next(e["seq"] for e in researcher if e["body"]["kind"] == "tool_returned")
    code, _, err = cli(
        "prove",
        "r/trace.jsonl",
        "--child",
        "trace.researcher.jsonl",
        "--seq",
        str(seq),
        "--checkpoint",
        "cp.note",
        "--out",
        "add.chain",
        cwd=team,
    )
    assert 0 == code, err
    leaf = leaf_prove_check("add.chain", "lab.pub", team)
    assert (0, f"ok: event {seq} ") == (leaf.returncode, leaf.stdout[: len(f"ok: event {seq} ")])
    assert "signed by example.org/lab" in leaf.stdout


def test_a_chain_with_a_child_root_changed_fails_in_the_leaf(team: Path, tmp_path: Path) -> None:
    """A chain whose child proof leads to another root than the link records is refused."""
    shutil.copyfile(team / "lab.pub", tmp_path / "lab.pub")
    code, _, err = cli(
        "prove",
        "r/trace.jsonl",
        "--child",
        "trace.checker.jsonl",
        "--seq",
        "0",
        "--checkpoint",
        "cp.note",
        "--out",
        str(tmp_path / "c.chain"),
        cwd=team,
    )
    assert 0 == code, err
    chain = (tmp_path / "c.chain").read_bytes()
    # Swap in the researcher's proof of event 0: a valid proof, of another child's root.
    code, _, err = cli(
        "prove",
        "r/trace.jsonl",
        "--child",
        "trace.researcher.jsonl",
        "--seq",
        "0",
        "--checkpoint",
        "cp.note",
        "--out",
        str(tmp_path / "r.chain"),
        cwd=team,
    )
    assert 0 == code, err
    other = (tmp_path / "r.chain").read_bytes()
    tail = other[other.index(b"event-proof ") :]
    (tmp_path / "mixed.chain").write_bytes(chain[: chain.index(b"event-proof ")] + tail)
    leaf = leaf_prove_check("mixed.chain", "lab.pub", tmp_path)
    assert (1, True) == (leaf.returncode, "not the one its link records" in leaf.stderr)


def test_live_replay_replays_each_child(team: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Live replay re-runs the children's tools against their own traces, with no server."""
    code, report, err = cli_json(
        capsys,
        "replay",
        str(team / "r" / "trace.jsonl"),
        "--spec",
        str(team / "team.yaml"),
        "--mode",
        "live",
    )
    assert (0, True) == (code, report["ok"]), err


def test_show_nests_each_child_run_below_its_call(team: Path) -> None:
    """``show`` prints each child's run below the parent's, indented, with its own decisions."""
    code, out, err = cli("show", "r/trace.jsonl", cwd=team)
    nested = [line for line in out.splitlines() if line.startswith("    sub-agent ")]
    assert (
        0,
        [
            "    sub-agent researcher: trace.researcher.jsonl",
            "    sub-agent checker: trace.checker.jsonl",
        ],
    ) == (code, nested), err
    assert "      policy deny add (by policy)" in out


def test_diff_descends_into_the_children(team: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs of one team behave the same; a team whose checker may add differs in the child."""
    same, _, err = cli_json(
        capsys, "diff", str(team / "r" / "trace.jsonl"), str(team / "r" / "trace.1.jsonl")
    )
    code, report, _ = cli_json(
        capsys, "diff", str(team / "r" / "trace.jsonl"), str(team / "r2" / "trace.jsonl")
    )
    details = [d["detail"] for d in report["divergences"]]
    assert (0, 1) == (same, code), err
    assert all(
        d.startswith("in sub-agent checker (trace.checker.jsonl / trace.checker.jsonl)")
        for d in details
    ), details


def test_code_json_records_each_childs_modules(team: Path) -> None:
    """The team's own spec imports nothing; ``code.json`` holds each child's ``calc`` module,
    by the child's name, with the digest of the file that ran."""
    record = json.loads((team / "r" / "code.json").read_text())
    calc = hashlib.sha256((team / "calc.py").read_bytes()).hexdigest()
    assert [] == record["modules"]
    assert {"checker", "researcher"} == set(record["agents"])
    assert [{"module": "calc", "origin": "code_dir", "sha256": calc}] == record["agents"][
        "researcher"
    ]["modules"]


def test_replay_trusting_the_spec_refuses_a_childs_changed_module(tmp_path: Path) -> None:
    """``replay --trust-spec`` checks the children's modules too: a child's tool module edited
    after the run is refused, naming it, before anything is imported."""
    (tmp_path / "calc.py").write_text(CALC)
    with LoopbackServer(team_chat) as server:
        for name, text in SPECS.items():
            (tmp_path / name).write_text(text.format(model=MODEL.format(url=server.url)))
        code, _, err = cli("run", "team.yaml", "--out", "r", "--json", cwd=tmp_path)
        assert 0 == code, err
    code, _, err = cli("replay", "r/trace.jsonl", "--trust-spec", cwd=tmp_path)
    assert 0 == code, err
    (tmp_path / "calc.py").write_text(CALC + "\n# edited\n")
    code, _, err = cli("replay", "r/trace.jsonl", "--trust-spec", cwd=tmp_path)
    assert 1 == code
    assert "module 'calc' changed since the run" in err


def test_the_page_nests_each_child_run_verified_below_its_call(team: Path, tmp_path: Path) -> None:
    """``show --html``: each child's run is verified in the browser against its link and shown
    below the call, with its own policy's denial; an edited child is the page's verdict."""
    code, _, err = cli("show", "r/trace.jsonl", "--html", str(tmp_path / "page.html"), cwd=team)
    assert 0 == code, err
    dom = page_dom(tmp_path / "page.html", tmp_path / "profile")
    assert 'data-verdict="verified"' in dom and 'data-children="2"' in dom
    nested = dom.split('<ol class="child" data-trace="sub-agent checker trace.checker.jsonl">')
    assert 2 == len(nested)
    assert "deny add (by policy)" in nested[1].split("</ol>")[0]
    copy = tmp_path / "r"
    shutil.copytree(team / "r", copy)
    child = copy / "trace.checker.jsonl"
    child.write_bytes(child.read_bytes().replace(b"You check sums.", b"You check sumz."))
    code, _, err = cli("show", "r/trace.jsonl", "--html", "edited.html", cwd=tmp_path)
    assert 0 == code, err
    dom = page_dom(tmp_path / "edited.html", tmp_path / "profile")
    assert 'data-verdict="child-broken"' in dom
    assert "sub-agent checker trace.checker.jsonl (seq " in dom
