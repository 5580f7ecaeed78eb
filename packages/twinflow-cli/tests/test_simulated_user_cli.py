"""A multi-turn eval whose further turns a simulated user writes: ``user:`` in a dataset.

Two scripted OpenAI-compatible servers on loopback: the agent's answers the last user message
("turn N: TEXT"); the simulated user's writes "message 1", "message 2", ... and then "[done]".
The case's trace links the simulated user's trace from each ``user_turn``; ``verify --tree``
checks the links, recorded replay needs neither server, and the scorer sees every turn.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import chat_answer, completion, leaf_prove_check, page_dom

from twinflow.agent import Trace
from twinflow.agent._events import UserTurn
from twinflow.cli._main import main
from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

MODEL = """\
  url: {url}
  dialect: llama.cpp
  mode: native
"""

SPEC = "prompt: '{{input}}'\nmodel:\n" + MODEL

USER = "prompt: unused\nsystem: You are a customer who wants a refund.\nmodel:\n" + MODEL

SCORER = '''
def whole_conversation(observation, expected):
    """The scorer sees each turn the simulated user wrote and each answer before the last."""
    return (
        list(observation.turns) == expected["turns"]
        and list(observation.answers) == expected["answers"]
    )
'''

DATASET = """\
name: support
user: {{spec: user.yaml, max_turns: {max_turns}}}
scorers: [{{kind: custom, path: "score_turns:whole_conversation"}}]
cases:
  - id: refund
    input: hello
    goal: get a refund for order 42
    expected: {expected}
"""


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _users(body: dict[str, Any]) -> list[str]:
    return [_text(m.get("content")) for m in body["messages"] if m.get("role") == "user"]


def agent_model(request: LoopbackRequest) -> LoopbackResponse:
    """The agent under test: answers the last user message with its turn number."""
    body = request.json_value()
    assert isinstance(body, dict)
    users = _users(body)
    answer = {"role": "assistant", "content": f"turn {len(users)}: {users[-1]}"}
    return chat_answer(body, completion(answer))


class UserModel:
    """The simulated user: "message K" for its K-th reply up to ``done_after``, then done."""

    def __init__(self, done_after: int) -> None:
        self.done_after = done_after
        self.asked: Counter[str] = Counter()
        self.prompts: list[str] = []

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        assert isinstance(body, dict)
        users = _users(body)
        self.prompts.append(users[-1])
        k = len(users)
        content = f"message {k}" if k <= self.done_after else "[done]"
        return chat_answer(body, completion({"role": "assistant", "content": content}))


class Project:
    """A dataset with a simulated user, the agent's spec, the user's spec and a scorer."""

    def __init__(self, root: Path, agent_url: str, user_url: str, user: UserModel) -> None:
        self.root = root
        self.user = user
        (root / "spec.yaml").write_text(SPEC.format(url=agent_url))
        (root / "user.yaml").write_text(USER.format(url=user_url))
        (root / "score_turns.py").write_text(SCORER)
        self.trace = root / "out" / "traces" / "refund@1.jsonl"

    def dataset(self, max_turns: int, expected: dict[str, Any]) -> None:
        text = DATASET.format(max_turns=max_turns, expected=json.dumps(expected))
        (self.root / "dataset.yaml").write_text(text)

    def eval_run(self, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        argv = ["eval", "run", str(self.root / "dataset.yaml"), "--spec"]
        code = main([*argv, str(self.root / "spec.yaml"), "--out", str(self.root / "out")])
        return code, capsys.readouterr().err


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    """A project whose agent and simulated user are two scripted servers."""
    user = UserModel(done_after=2)
    with LoopbackServer(agent_model) as agent, LoopbackServer(user) as simulated:
        yield Project(tmp_path, agent.url, simulated.url, user)


TWO_TURNS = {
    "turns": ["message 1", "message 2"],
    "answers": ["turn 1: hello", "turn 2: message 1"],
}


def test_the_simulated_user_writes_each_turn_until_it_is_done(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two messages, then ``[done]``: one case trace of three turns, each further turn linked
    to the simulated user's own trace at the size it had, and the scorer saw every turn."""
    project.dataset(5, TWO_TURNS)
    code, err = project.eval_run(capsys)
    assert 0 == code, err
    results = json.loads((project.root / "out" / "results.json").read_text())
    assert ["passed"] == [case["status"] for case in results["cases"]]
    trace = Trace.load(project.trace, require_complete=True)
    turns = [e.body for e in trace.events if isinstance(e.body, UserTurn)]
    user_trace = Trace.load(project.trace.with_name("refund@1.user.jsonl"), require_complete=True)
    assert ["message 1", "message 2"] == [t.text for t in turns]
    links = [t.simulator for t in turns]
    assert ["refund@1.user.jsonl"] * 2 == [link.trace for link in links if link is not None]
    # The third reply ([done]) is the simulated user's last turn; no turn of the case links it.
    assert (3, 3) == (user_trace.kinds.count("run_finished"), len(project.user.prompts))
    assert "get a refund for order 42" in project.user.prompts[0]
    assert "turn 1: hello" in project.user.prompts[0]


def test_the_case_page_shows_the_simulated_users_run_below_each_turn(
    project: Project, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The case's page verifies the simulated user's trace against each turn's link and shows
    the part of it that wrote the turn below the turn."""
    project.dataset(5, TWO_TURNS)
    assert 0 == project.eval_run(capsys)[0]
    dom = page_dom(project.trace.with_suffix(".html"), tmp_path / "profile")
    assert 'data-verdict="verified"' in dom and 'data-children="1"' in dom
    assert 2 == dom.count('<ol class="child" data-trace="simulated user refund@1.user.jsonl">')


def test_the_turn_limit_stops_the_conversation(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``max_turns: 1``: one further turn, and the simulated user is asked no more."""
    project.dataset(1, {"turns": ["message 1"], "answers": ["turn 1: hello"]})
    code, err = project.eval_run(capsys)
    assert 0 == code, err
    trace = Trace.load(project.trace, require_complete=True)
    assert (1, 1) == (trace.kinds.count("user_turn"), len(project.user.prompts))


def test_verify_tree_checks_the_simulated_users_links(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``verify --tree`` walks the simulated user's trace once; an edited one fails, naming
    the link of the first turn it no longer matches."""
    project.dataset(5, TWO_TURNS)
    assert 0 == project.eval_run(capsys)[0]
    assert 0 == main(["verify", str(project.trace), "--tree"])
    assert "refund@1.user.jsonl" in capsys.readouterr().out
    user_trace = project.trace.with_name("refund@1.user.jsonl")
    lines = user_trace.read_bytes().splitlines(keepends=True)
    user_trace.write_bytes(b"".join(lines[:3]))
    assert 1 == main(["verify", str(project.trace), "--tree"])
    captured = capsys.readouterr()
    assert "refund@1.jsonl#" in captured.out + captured.err
    assert "refund@1.user.jsonl" in captured.out + captured.err


def test_recorded_replay_serves_the_turns_without_the_simulated_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once both servers are gone, the case's trace replays from its record alone."""
    user = UserModel(done_after=2)
    with LoopbackServer(agent_model) as agent, LoopbackServer(user) as simulated:
        project = Project(tmp_path, agent.url, simulated.url, user)
        project.dataset(5, TWO_TURNS)
        assert 0 == project.eval_run(capsys)[0]
    spec = str(project.root / "spec.yaml")
    assert 0 == main(["replay", str(project.trace), "--spec", spec]), capsys.readouterr().err


@pytest.mark.parametrize(
    ("dataset", "user", "words"),
    [
        ("user: {spec: user.yaml, max_turns: 0}", None, "max_turns"),
        ("user: {spec: user.yaml, max_turns: 100000}", None, "max_turns"),
        ("user: {spec: nobody.yaml, max_turns: 2}", None, "nobody.yaml"),
        ("user: {spec: spec.yaml, max_turns: 2}", None, "a cycle"),
        ("user: {spec: user.yaml, max_turns: 2}", "tools: [score_turns:whole_conversation]\n", "tools"),
        ("user: {spec: user.yaml, max_turns: 2}", "agents: [{name: h, spec: user.yaml}]\n", "agents"),
    ],
)  # fmt: skip
def test_a_simulated_user_that_cannot_be_is_refused_in_one_line(
    project: Project, capsys: pytest.CaptureFixture[str], dataset: str, user: str | None, words: str
) -> None:
    """A turn limit of 0 or absurd, a missing spec, the agent's own spec, or a user that names
    tools or sub-agents: exit 2, one line naming it, nothing run."""
    project.dataset(2, TWO_TURNS)
    path = project.root / "dataset.yaml"
    text = path.read_text()
    path.write_text(text.replace(text.splitlines()[1], dataset))
    if user is not None:
        (project.root / "user.yaml").write_text((project.root / "user.yaml").read_text() + user)
    code, err = project.eval_run(capsys)
    assert (2, 1) == (code, len(err.strip().splitlines())), err
    assert words in err
    assert ([], False) == (project.user.prompts, (project.root / "out").exists())


def test_a_case_with_turns_and_a_simulated_user_is_refused(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case's turns come from one place: listing them and naming a user is refused."""
    project.dataset(2, TWO_TURNS)
    path = project.root / "dataset.yaml"
    path.write_text(
        path.read_text() + "    turns: [again]\n    user: {spec: user.yaml, max_turns: 2}\n"
    )
    code, err = project.eval_run(capsys)
    assert 2 == code
    assert "not both" in err


@pytest.mark.real_model
def test_a_simulated_user_on_the_embedded_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SmolLM2-135M plays both the agent and the user (one embedded server): the case's
    trace and the user's verify as a tree, and the case replays from its record alone."""
    embedded = "prompt: '{input}'\nmodel: embedded\nmax_steps: 2\n"
    (tmp_path / "spec.yaml").write_text(embedded)
    (tmp_path / "user.yaml").write_text(
        "prompt: unused\nsystem: You are a traveller asking short questions.\nmodel: embedded\n"
    )
    (tmp_path / "dataset.yaml").write_text(
        "name: travel\nuser: {spec: user.yaml, max_turns: 1}\ncases:\n"
        "  - {id: trip, input: 'Name one city in France.', goal: 'a city to visit'}\n"
    )
    argv = ["eval", "run", str(tmp_path / "dataset.yaml"), "--spec", str(tmp_path / "spec.yaml")]
    assert 0 == main([*argv, "--out", str(tmp_path / "out")]), capsys.readouterr().err
    trace = tmp_path / "out" / "traces" / "trip@1.jsonl"
    user = Trace.load(trace.with_name("trip@1.user.jsonl"), require_complete=True)
    turns = Trace.load(trace, require_complete=True).kinds.count("user_turn")
    assert (1, turns) == (user.kinds.count("run_finished"), user.kinds.count("user_turn") + turns)
    assert 0 == main(["verify", str(trace), "--tree"]), capsys.readouterr()
    assert 0 == main(["replay", str(trace), "--spec", str(tmp_path / "spec.yaml")])


def test_show_nests_the_part_of_the_simulated_users_run_that_wrote_each_turn(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` prints, below each turn, the simulated user's events from the previous turn's
    link to this one's; an edited user trace is not shown, and says how to check it."""
    project.dataset(5, TWO_TURNS)
    assert 0 == project.eval_run(capsys)[0]
    assert 0 == main(["show", str(project.trace)])
    out = capsys.readouterr().out
    first, second = out.split("turn 2, the user: message 1")[1].split("turn 3, the user: message 2")
    assert "simulated user: refund@1.user.jsonl, events 0-4" in first
    assert "        assistant: message 1" in first and "message 2" not in first
    assert "simulated user: refund@1.user.jsonl, events 5-9" in second
    assert "        assistant: message 2" in second
    user_trace = project.trace.with_name("refund@1.user.jsonl")
    user_trace.write_bytes(b"".join(user_trace.read_bytes().splitlines(keepends=True)[:3]))
    assert 0 == main(["show", str(project.trace)])  # the case's own trace still verifies
    out = capsys.readouterr().out
    hint = "simulated user refund@1.user.jsonl: not shown (check it: twinflow verify --tree)"
    assert (2, 0) == (out.count(hint), out.count("assistant: message 1"))


def test_a_simulated_users_event_is_proved_from_the_cases_signed_checkpoint(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``prove --child`` on the simulated user's trace: an event of each turn's part is proved
    through the first turn whose link holds it, and the chain checks in the stdlib leaf; its
    closing reply, which no turn links, is refused in one line."""
    project.dataset(5, TWO_TURNS)
    assert 0 == project.eval_run(capsys)[0]
    root = project.root
    assert 0 == main(["keygen", "example.org/lab", "--out", str(root / "lab")])
    note = root / "cp.note"
    assert 0 == main(
        ["checkpoint", str(project.trace), "--sign", str(root / "lab.key"), "--out", str(note)]
    )
    capsys.readouterr()
    bodies = [json.loads(line)["event"]["body"] for line in project.trace.read_text().splitlines()]
    sizes = [body["simulator"]["size"] for body in bodies if body["kind"] == "user_turn"]
    assert [5, 10] == sizes
    for seq in (2, 7):
        chain = root / f"e{seq}.chain"
        argv = ["prove", str(project.trace), "--child", "refund@1.user.jsonl", "--seq", str(seq)]
        assert 0 == main([*argv, "--checkpoint", str(note), "--out", str(chain)]), (
            capsys.readouterr().err
        )
        leaf = leaf_prove_check(str(chain), str(root / "lab.pub"), root)
        assert (0, f"ok: event {seq} ") == (
            leaf.returncode,
            leaf.stdout[: len(f"ok: event {seq} ")],
        )
        assert "user -> run run_" in leaf.stdout and "signed by example.org/lab" in leaf.stdout
    argv = ["prove", str(project.trace), "--child", "refund@1.user.jsonl", "--seq", "11"]
    assert 2 == main([*argv, "--checkpoint", str(note), "--out", str(root / "late.chain")])
    err = capsys.readouterr().err
    assert (
        "event 11 of refund@1.user.jsonl comes after the last event its links vouch for (9)" in err
    )
    assert not (root / "late.chain").exists()


def test_a_resume_with_another_simulated_user_spec_is_refused(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The simulated user's spec is part of the run: the same command resumes, and after the
    user spec changed it is refused before anything runs, naming the difference."""
    project.dataset(5, TWO_TURNS)
    assert 0 == project.eval_run(capsys)[0]
    run_json = (project.root / "out" / "run.json").read_bytes()
    assert b'"users_digest"' in run_json
    again = project.eval_run(capsys)
    assert 0 == again[0], again[1]
    user = project.root / "user.yaml"
    user.write_text(user.read_text().replace("wants a refund", "wants a replacement"))
    code, err = project.eval_run(capsys)
    assert 2 == code
    assert "holds a run of another simulated user spec (recorded: " in err
    assert "pick a new --out directory" in err
    assert run_json == (project.root / "out" / "run.json").read_bytes()
