"""Decisions that say what they mean, for the run they were made in: real `twinflow` processes.

A run on a scripted loopback model pauses on a call in ``ask``; `twinflow approve --sign` (a
`twinflow keygen` key) decides it. The trace is then edited as a forger would (events changed
and the chain recomputed) or carried to another machine (another ``TWINFLOW_STATE_DIR``), and
`verify --key`, `resume` and `approve` must refuse what they cannot check before anything runs.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import chat_answer, completion
from test_continue import Project, Script, one_line

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.trace._keys import generate_key, parse_signer_key
from twinflow.trace._testing import events_of, rechain
from twinflow.vocab import digest

Event = dict[str, Any]


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    """A project whose model is a scripted, counting server, with ann's and bob's keys."""
    script = Script()
    with LoopbackServer(script) as server:
        made = Project(tmp_path, script, server.url)
        made.spec(ask="step")
        for who in ("ann", "bob"):
            assert 0 == made.twinflow("keygen", f"lab.example/{who}", "--out", who).returncode
        yield made


def paused_run(project: Project, out: str) -> Path:
    """Run the spec into ``out`` until it pauses on its first call; the trace."""
    run = project.twinflow("run", "spec.yaml", "--out", out, "--quiet")
    assert 3 == run.returncode, run.stderr
    return project.root / out / "trace.jsonl"


def on_machine(project: Project, machine: str, *args: str) -> ProcessResult:
    """`twinflow ARGS` as run on another machine: its own state directory."""
    state = project.root / f"machine-{machine}"
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=project.root,
        env={"PYTHONDONTWRITEBYTECODE": "1", "TWINFLOW_STATE_DIR": str(state)},
        timeout=300,
    )


def edited(trace: Path, out: Path, edit: Callable[[list[Event]], list[Event]]) -> Path:
    """``trace``'s events edited by ``edit`` and re-chained into ``out``: a forger's copy."""
    out.write_bytes(rechain(edit(events_of(trace.read_bytes()))))
    return out


def kind(events: list[Event], name: str) -> list[Event]:
    """The events of one body kind."""
    return [e for e in events if e["body"]["kind"] == name]


def verify_key(project: Project, trace: Path, key: str = "ann.pub") -> ProcessResult:
    """`twinflow verify TRACE --key KEY --allow-incomplete`."""
    return project.twinflow("verify", str(trace), "--key", key, "--allow-incomplete")


def test_a_signed_decision_copied_into_another_run_is_refused(project: Project) -> None:
    """Runs A and B wait on the same tool and arguments; B's call is given A's id (its stored
    digest recomputed) and ann's signed approval of A's call appended, re-chained: verify --key
    refuses it, naming the run line, and resume --require-signed runs nothing."""
    a = paused_run(project, "a")
    b = paused_run(project, "b")
    signed = project.twinflow("approve", str(a), "--all", "--sign", "ann.key", "--no-resume")
    assert 0 == signed.returncode, signed.stderr
    assert 0 == verify_key(project, a).returncode
    [decision] = kind(events_of(a.read_bytes()), "approval_decided")
    [request] = kind(events_of(b.read_bytes()), "approval_requested")
    theirs, ours = decision["body"]["call_id"], request["body"]["call_id"]

    def copy_in(events: list[Event]) -> list[Event]:
        renamed: list[Event] = json.loads(json.dumps(events).replace(ours, theirs))
        for event in kind(renamed, "approval_requested"):
            body = event["body"]
            call = {"call_id": theirs, "tool": body["tool"], "arguments": body["arguments"]}
            body["digest"] = digest(call)
        return [*renamed, decision]

    copied = edited(b, project.root / "b-copied.jsonl", copy_in)
    refused = verify_key(project, copied)
    assert (1, True) == (refused.returncode, "'run' line differs" in one_line(refused.stderr))
    resumed = on_machine(project, "B", "resume", str(copied), "--spec", "spec.yaml",
                         "--require-signed", "ann.pub")  # fmt: skip
    assert (1, Counter()) == (resumed.returncode, project.executions())


def test_an_edited_call_or_verdict_is_refused(project: Project) -> None:
    """A signed approval, then the trace edited: arguments (the stored digest left as it was),
    their type, the tool, the verdict, the call's id (it then decides no call): each exit 1."""
    a = paused_run(project, "a")
    assert (
        0
        == project.twinflow(
            "approve", str(a), "--all", "--sign", "ann.key", "--no-resume"
        ).returncode
    )

    def requested(change: Callable[[Event], Event]) -> Callable[[list[Event]], list[Event]]:
        def edit(events: list[Event]) -> list[Event]:
            return [
                {**e, "body": change(e["body"])} if e["body"]["kind"] == "approval_requested" else e
                for e in events
            ]

        return edit

    def decided(change: Callable[[Event], Event]) -> Callable[[list[Event]], list[Event]]:
        def edit(events: list[Event]) -> list[Event]:
            return [
                {**e, "body": change(e["body"])} if e["body"]["kind"] == "approval_decided" else e
                for e in events
            ]

        return edit

    edits = {
        "arguments, stored digest kept": requested(lambda b: {**b, "arguments": {"n": 7}}),
        "arguments as JSON text": requested(lambda b: {**b, "arguments": {"n": "0"}}),
        "tool renamed": requested(lambda b: {**b, "tool": "stepX"}),
        "verdict swapped": decided(lambda b: {**b, "decision": "deny"}),
        "its call renamed": requested(lambda b: {**b, "call_id": "call_9"}),
    }
    outcomes = {}
    for name, edit in edits.items():
        copy = edited(a, project.root / f"{name.replace(' ', '-')}.jsonl", edit)
        result = verify_key(project, copy)
        outcomes[name] = (result.returncode, "Traceback" in result.stderr)
    assert {
        "arguments, stored digest kept": (1, False),
        "arguments as JSON text": (1, False),
        "tool renamed": (1, False),
        "verdict swapped": (1, False),
        "its call renamed": (1, False),
    } == outcomes


def test_a_statement_re_signed_by_another_key_is_refused(project: Project) -> None:
    """bob re-signs the decision with the verdict swapped: verify --key ann.pub refuses it,
    and resume --require-signed ann.pub runs nothing."""
    a = paused_run(project, "a")
    assert (
        0
        == project.twinflow(
            "approve", str(a), "--all", "--deny", "--sign", "bob.key", "--no-resume"
        ).returncode
    )
    refused = verify_key(project, a)
    resumed = project.twinflow(
        "resume", str(a), "--spec", "spec.yaml", "--require-signed", "ann.pub"
    )
    assert (1, 1, Counter()) == (refused.returncode, resumed.returncode, project.executions())
    assert "does not verify" in one_line(resumed.stderr)


def test_a_received_unsigned_decision_is_named_and_needs_a_flag(project: Project) -> None:
    """Machine A approves unsigned (--no-resume); resume on machine B: exit 2 naming the call,
    no model request, no tool run; with --accept-received-decisions it goes on and names it
    again; on machine A the resume needs no flag."""
    a = paused_run(project, "a")
    here = on_machine(project, "A", "approve", str(a), "--all", "--by", "ann", "--no-resume")
    assert 0 == here.returncode, here.stderr
    asked = Counter(project.script.requests)
    refused = on_machine(project, "B", "resume", str(a), "--spec", "spec.yaml")
    assert (2, Counter(), asked) == (
        refused.returncode,
        project.executions(),
        project.script.requests,
    )
    line = one_line(refused.stderr)
    assert "approve call " in line and "('step') by 'ann'" in line
    assert "--accept-received-decisions" in line
    b = project.root / "b.jsonl"
    b.write_bytes(a.read_bytes())
    taken = on_machine(
        project, "B", "resume", str(b), "--spec", "spec.yaml", "--accept-received-decisions"
    )
    assert 3 == taken.returncode, taken.stderr
    assert "acting on decisions received, not checked: seq" in taken.stderr
    local = on_machine(project, "A", "resume", str(a), "--spec", "spec.yaml")
    assert 3 == local.returncode, local.stderr
    assert Counter({0: 2}) == project.executions()


def test_require_signed_checks_every_decision(project: Project) -> None:
    """resume --require-signed ann.pub: an unsigned decision (recorded here) is refused, exit 1,
    nothing run; ann's signed one on a received copy runs on a machine that never saw it."""
    a = paused_run(project, "a")
    assert 0 == project.twinflow("approve", str(a), "--all", "--no-resume").returncode
    unsigned = project.twinflow(
        "resume", str(a), "--spec", "spec.yaml", "--require-signed", "ann.pub"
    )
    assert (1, Counter()) == (unsigned.returncode, project.executions())
    assert "is not signed" in one_line(unsigned.stderr)
    b = paused_run(project, "b")
    assert (
        0
        == project.twinflow(
            "approve", str(b), "--all", "--sign", "ann.key", "--no-resume"
        ).returncode
    )
    checked = on_machine(
        project, "C", "resume", str(b), "--spec", "spec.yaml", "--require-signed", "ann.pub"
    )
    assert (3, Counter({0: 1})) == (checked.returncode, project.executions()), checked.stderr


class TwinCalls(Script):
    """A model whose reply makes two calls with one id (n=0 and n=1), then answers."""

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        assert isinstance(body, dict)
        if any(m.get("role") == "tool" for m in body["messages"] if isinstance(m, dict)):
            return chat_answer(body, completion({"role": "assistant", "content": "done"}, "stop"))
        calls = [
            {
                "id": "same",
                "type": "function",
                "function": {"name": "step", "arguments": json.dumps({"n": n})},
            }
            for n in (0, 1)
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        return chat_answer(body, completion(message, "tool_calls"))


def test_two_waiting_calls_sharing_an_id_are_refused(tmp_path: Path) -> None:
    """A reply of two calls pauses on both; a copy where both requests carry one id (as a
    forger or a bad merge would write) is refused by approve --all, approve --call and resume,
    exit 2 naming the id and both seqs, and neither call runs."""
    with LoopbackServer(TwinCalls()) as server:
        project = Project(tmp_path, TwinCalls(), server.url)
        project.spec(ask="step")
        paused = paused_run(project, "out")
        first = kind(events_of(paused.read_bytes()), "approval_requested")[0]["body"]["call_id"]

        def share(events: list[Event]) -> list[Event]:
            return [
                {**e, "body": {**e["body"], "call_id": first}}
                if e["body"]["kind"] == "approval_requested"
                else e
                for e in events
            ]

        trace = str(edited(paused, tmp_path / "shared.jsonl", share))
        results = [
            project.twinflow("approve", trace, "--all", "--spec", "spec.yaml"),
            project.twinflow("approve", trace, "--call", first, "--no-resume"),
            project.twinflow("resume", trace, "--spec", "spec.yaml"),
        ]
    assert [2, 2, 2] == [r.returncode for r in results]
    assert all(f"share the id {first!r}" in one_line(r.stderr) for r in results)
    assert Counter() == project.executions()


def test_a_decision_moved_to_a_later_step_is_refused(project: Project) -> None:
    """ann approves step 1's call (signed); the run goes on and pauses at step 2; her decision
    copied onto step 2's call (same tool, new id) fails verify --key: the log line differs."""
    a = paused_run(project, "a")
    first = project.twinflow("approve", str(a), "--all", "--sign", "ann.key", "--spec", "spec.yaml")
    assert 3 == first.returncode, first.stderr
    [decision] = kind(events_of(a.read_bytes()), "approval_decided")
    later = kind(events_of(a.read_bytes()), "approval_requested")[1]["body"]["call_id"]

    def move(events: list[Event]) -> list[Event]:
        return [*events, {**decision, "body": {**decision["body"], "call_id": later}}]

    moved = edited(a, project.root / "moved.jsonl", move)
    refused = verify_key(project, moved)
    assert (1, True) == (refused.returncode, "'log' line differs" in one_line(refused.stderr))


def test_one_key_under_two_names_is_a_configuration_error(project: Project) -> None:
    """verify --key with ann's key and the same key renamed: exit 2 naming one public key."""
    a = paused_run(project, "a")
    signed = project.twinflow("approve", str(a), "--all", "--sign", "ann.key", "--no-resume")
    assert 0 == signed.returncode, signed.stderr
    ann = parse_signer_key((project.root / "ann.key").read_bytes())
    twin = generate_key("lab.example/ann2", ann.seed)
    (project.root / "ann2.pub").write_text(twin.verifier.text + "\n")
    both = project.twinflow(
        "verify", str(a), "--key", "ann.pub", "--key", "ann2.pub", "--allow-incomplete"
    )
    assert (2, True) == (both.returncode, "one public key" in one_line(both.stderr))


def test_a_decision_already_carried_out_is_only_served(project: Project) -> None:
    """Machine A approves step 1's call and runs it; on machine B, resume serves that decision
    (its call's result is recorded) and asks nothing for it: the run pauses on step 2 (exit 3)."""
    a = paused_run(project, "a")
    here = on_machine(project, "A", "approve", str(a), "--all", "--spec", "spec.yaml")
    assert 3 == here.returncode, here.stderr
    there = on_machine(project, "B", "resume", str(a), "--spec", "spec.yaml")
    assert (3, Counter({0: 1})) == (there.returncode, project.executions()), there.stderr


def test_an_unwritable_state_directory_does_not_lose_the_decision(project: Project) -> None:
    """TWINFLOW_STATE_DIR under a regular file: approve --no-resume still records the decision
    (exit 0) and says this machine's record was not written."""
    a = paused_run(project, "a")
    (project.root / "machine-F").write_text("a file, not a directory\n")
    approved = run_process(
        [sys.executable, "-m", "twinflow.cli", "approve", str(a), "--all", "--no-resume"],
        cwd=project.root,
        env={"TWINFLOW_STATE_DIR": str(project.root / "machine-F" / "state")},
        timeout=300,
    )
    decided = kind(events_of(a.read_bytes()), "approval_decided")
    assert (0, 1) == (approved.returncode, len(decided)), approved.stderr
    assert "record of the decision was not written" in approved.stderr
