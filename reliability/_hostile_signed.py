"""Hostile input, signed evidence: decisions that must mean what they say, quorums, witness state.

Four classes, each counted, each with the invariant it must not break:

- **Signed decisions.** A paused run's call approved with a signed decision, then the trace
  edited the ways a forger would (the chain recomputed): the decision copied into another run
  (same call id, tool and arguments), the arguments, their type, the tool or the verdict changed
  (the stored digest kept, or recomputed), the decision moved onto a later call, re-signed by
  another key with the verdict swapped, or signed over the statement of the old format.
  `verify --key` (its checker) refuses every one; the genuine one passes.
- **Received decisions.** The same decisions checked as `resume` checks them on a machine that
  did not record them: without `--require-signed` or `--accept-received-decisions`, each is
  refused before anything runs; the machine that recorded it passes.
- **Shared call ids.** Two waiting calls given one id (in one reply, or in two steps): deciding
  either is refused, as is resuming.
- **Quorum and witness state.** One witness key under two names, the same key file twice, and a
  signed-note key under two names: a configuration error, never counted twice (and the stdlib
  auditor agrees); a witness state edited by hand (size rolled back, log forgotten, root
  swapped, signature dropped, re-signed by another key, downgraded to the unsigned format, or
  another witness's) is refused, the file untouched and nothing cosigned.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import Figures, Tools, call, text

from twinflow.agent import Agent, FunctionModel, Policy, RunPaused, Trace
from twinflow.agent._approval import approvals
from twinflow.agent._resume import Decision, record_decisions
from twinflow.cli._decisions import (
    check_recorded_decisions,
    remember_decisions,
    verify_signed_decisions,
)
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import (
    FileTraceSink,
    SignatureError,
    TwinflowError,
    canonical_bytes,
    read_checkpoint,
)
from twinflow.trace._format import GENESIS, encode_line
from twinflow.trace._keys import generate_key
from twinflow.trace._note import CheckpointBody, sign_checkpoint_note, sign_note
from twinflow.trace._testing import events_of, framed, rechain, small_trace
from twinflow.trace._witness import CosignerKey, add_checkpoint, cosign, verify_cosignatures
from twinflow.vocab import CallId, digest

START = datetime(2026, 1, 1, tzinfo=UTC)
Event = dict[str, Any]


def _key(name: str, n: int) -> Any:
    """A fixed signer key (the campaign is deterministic: the seed is data)."""
    return generate_key(name, bytes([n]) * 32)


def _paused(path: Path, prompt: str, steps: int = 2) -> Path:
    """A run of ``steps`` calls to ``add`` in ``ask``, paused on its first; its trace."""
    replies = iter([*(call("add", {"a": n, "b": 2}, f"m{n}") for n in range(steps)), text("ok")])
    agent: Agent[str] = Agent(
        FunctionModel(lambda _request: next(replies)),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[Tools().add],
        policy=Policy(ask=frozenset({"add"})),
        trace=FileTraceSink(path),
    )
    try:
        with agent:
            agent.run(prompt)
    except RunPaused:
        return path
    raise AssertionError("the run did not pause")


def _decide(path: Path, signer: Any, verdict: str = "approve") -> None:
    """Record a decision on every waiting call, signed by ``signer`` over its statement."""
    trace = Trace.load(path)
    decisions = []
    for approval in approvals(trace, str(path)):
        if approval.decision is None:
            note = sign_note(approval.statement(verdict), [signer]).decode()
            decisions.append(
                Decision(
                    call_id=approval.request.call_id,
                    approve=verdict == "approve",
                    by="ann",
                    signed_note=note,
                )
            )
    record_decisions(path, decisions, SteppingClock(START))


def _edit(path: Path, out: Path, edit: Callable[[list[Event]], list[Event]]) -> Path:
    out.write_bytes(rechain(edit(events_of(path.read_bytes()))))
    return out


def _body(kind: str, change: Callable[[Event], Event]) -> Callable[[list[Event]], list[Event]]:
    def edit(events: list[Event]) -> list[Event]:
        return [
            {**e, "body": change(e["body"])} if e["body"]["kind"] == kind else e for e in events
        ]

    return edit


def _respaced(path: Path, out: Path) -> Path:
    """The request's line written with its arguments reordered and JSON spaces added (its own
    digest and the chain after it recomputed): the same call, other bytes."""
    events, lines, prev = events_of(path.read_bytes()), [], GENESIS
    for seq, event in enumerate(events):
        event = {**event, "seq": seq, "prev": prev}
        if event["body"]["kind"] == "approval_requested":
            arguments = dict(reversed(list(event["body"]["arguments"].items())))
            raw = json.dumps({**event, "body": {**event["body"], "arguments": arguments}})
            lines.append(framed(raw.encode()))
            prev = hashlib.sha256(raw.encode()).hexdigest()
        else:
            line, prev = encode_line(canonical_bytes(event))
            lines.append(line)
    out.write_bytes(b"".join(lines))
    return out


def _redigest(body: Event) -> Event:
    call_ = {"call_id": body["call_id"], "tool": body["tool"], "arguments": body["arguments"]}
    return {**body, "digest": digest(call_)}


def signed_decisions(figures: Figures, work: Path) -> None:
    """Forged and moved signed decisions: every one refused by `verify --key`'s checker."""
    ann, bob = _key("lab.example/ann", 1), _key("lab.example/bob", 2)
    (work / "ann.pub").write_text(ann.verifier.text + "\n")
    a = _paused(work / "a.jsonl", "add them")
    b = _paused(work / "b.jsonl", "add them, please")  # same ids, tool and arguments as A
    _decide(a, ann)
    [decision] = [e for e in events_of(a.read_bytes()) if e["body"]["kind"] == "approval_decided"]
    v1 = sign_note(f"twinflow approval v1\ncall {digest({'x': 1})}\ndecision approve\n", [ann])

    def later_step() -> Path:
        c = _paused(work / "c.jsonl", "add them")
        _decide(c, ann)
        agent: Agent[str] = Agent(
            FunctionModel(lambda _r: call("add", {"a": 1, "b": 2}, "m1")),
            clock=SteppingClock(START),
            ids=CountingIds(),
            tools=[Tools().add],
            policy=Policy(ask=frozenset({"add"})),
        )
        try:
            with agent:
                agent.resume(c)
        except RunPaused:
            pass
        waiting = [
            e for e in events_of(c.read_bytes()) if e["body"]["kind"] == "approval_requested"
        ]
        moved = {
            **decision,
            "body": {**decision["body"], "call_id": waiting[-1]["body"]["call_id"]},
        }
        return _edit(c, work / "moved.jsonl", lambda events: [*events, moved])

    forged: dict[str, Callable[[], Path]] = {
        "copied into another run": lambda: _edit(
            b, work / "copied.jsonl", lambda ev: [*ev, decision]
        ),
        "arguments edited, digest kept": lambda: _edit(
            a,
            work / "args.jsonl",
            _body("approval_requested", lambda x: {**x, "arguments": {"a": 9, "b": 2}}),
        ),
        "arguments edited, digest recomputed": lambda: _edit(
            a,
            work / "args2.jsonl",
            _body("approval_requested", lambda x: _redigest({**x, "arguments": {"a": 9, "b": 2}})),
        ),
        "argument as JSON text": lambda: _edit(
            a,
            work / "args3.jsonl",
            _body("approval_requested", lambda x: {**x, "arguments": {"a": "0", "b": 2}}),
        ),
        "a look-alike argument added": lambda: _edit(
            a,
            work / "args4.jsonl",
            _body("approval_requested", lambda x: {**x, "arguments": {"b": 2, "a": 0, " a": 0}}),
        ),
        "arguments reordered and respaced": lambda: _respaced(a, work / "args5.jsonl"),
        "tool renamed": lambda: _edit(
            a,
            work / "tool.jsonl",
            _body("approval_requested", lambda x: _redigest({**x, "tool": "shell"})),
        ),
        "verdict swapped": lambda: _edit(
            a,
            work / "verdict.jsonl",
            _body("approval_decided", lambda x: {**x, "decision": "deny"}),
        ),
        "re-signed by another key, verdict swapped": lambda: _edit(
            a,
            work / "resigned.jsonl",
            _body(
                "approval_decided",
                lambda x: {
                    **x,
                    "decision": "deny",
                    "signed_note": sign_note(
                        approvals(Trace.load(a), "a")[0].statement("deny"), [bob]
                    ).decode(),
                },
            ),
        ),
        "old-format statement": lambda: _edit(
            a,
            work / "v1.jsonl",
            _body("approval_decided", lambda x: {**x, "signed_note": v1.decode()}),
        ),
        "moved to a later step": later_step,
    }
    refused, problems = 0, []
    for name, make in forged.items():
        path = make()
        try:
            verify_signed_decisions(Trace.load(path), path, [work / "ann.pub"])
        except TwinflowError:
            refused += 1
        else:
            problems.append(name)
    genuine = verify_signed_decisions(Trace.load(a), a, [work / "ann.pub"])
    for name in problems:
        figures.fail(f"signed decision {name}: accepted by verify --key")
    if genuine != 1:
        figures.fail(f"the genuine signed decision: {genuine} checked, not 1")
    result = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "twinflow.cli",
            "verify",
            str(work / "copied.jsonl"),
            "--key",
            str(work / "ann.pub"),
            "--allow-incomplete",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 1:
        figures.fail(f"twinflow verify --key of a copied decision: exit {result.returncode}")
    figures.values["signed decisions forged / accepted"] = f"{len(forged)} / {len(problems)}"


def received_decisions(figures: Figures, work: Path) -> None:
    """Decisions this machine did not record: refused before anything runs without a flag."""
    here, elsewhere = work / "machine-here", work / "machine-elsewhere"
    saved = os.environ.get("TWINFLOW_STATE_DIR")
    traces = [_paused(work / f"r{n}.jsonl", f"add {n}") for n in range(3)]
    signer = _key("lab.example/ann", 1)
    for n, path in enumerate(traces):
        if n:
            _decide(path, signer, "approve" if n == 1 else "deny")
        else:  # unsigned
            record_decisions(
                path, [Decision(call_id=CallId("m0"), approve=True)], SteppingClock(START)
            )
    args = argparse.Namespace(require_signed=None, accept_received_decisions=False)
    refused = passed_here = 0
    try:
        os.environ["TWINFLOW_STATE_DIR"] = str(here)
        for path in traces:
            remember_decisions(a.statement() for a in approvals(Trace.load(path), "") if a.decision)
        for state, expect_refused in ((elsewhere, True), (here, False)):
            os.environ["TWINFLOW_STATE_DIR"] = str(state)
            for path in traces:
                args.trace = path
                try:
                    check_recorded_decisions(args, Trace.load(path))
                except TwinflowError:
                    refused += expect_refused
                    if not expect_refused:
                        figures.fail(f"{path.name}: a decision recorded here was refused")
                else:
                    passed_here += not expect_refused
                    if expect_refused:
                        figures.fail(f"{path.name}: a received decision was acted on unflagged")
    finally:
        if saved is None:
            os.environ.pop("TWINFLOW_STATE_DIR", None)
        else:
            os.environ["TWINFLOW_STATE_DIR"] = saved
    figures.values["received decisions refused / recorded here passed"] = (
        f"{refused} of {len(traces)} / {passed_here} of {len(traces)}"
    )


def shared_ids(figures: Figures, work: Path) -> None:
    """Two waiting calls with one id: never decided together, never resumed."""
    a = _paused(work / "s.jsonl", "add both", steps=1)
    events = events_of(a.read_bytes())
    [request] = [e for e in events if e["body"]["kind"] == "approval_requested"]
    twin = {**request, "body": _redigest({**request["body"], "arguments": {"a": 5, "b": 5}})}
    variants = {
        "two in one reply": _edit(a, work / "s1.jsonl", lambda ev: [*ev, twin]),
        "one decided, one asked again later": _edit(
            a,
            work / "s2.jsonl",
            lambda ev: [
                *ev,
                {
                    **request,
                    "body": {
                        "kind": "approval_decided",
                        "call_id": "m0",
                        "decision": "deny",
                        "by": "x",
                        "reason": "no",
                    },
                },
                twin,
            ],
        ),
    }
    refused = 0
    for name, path in variants.items():
        outcomes = [_refused_shared(path, attempt) for attempt in ("decide", "pair")]
        refused += all(outcomes)
        if not all(outcomes):
            figures.fail(f"shared call id, {name}: decided or not named")
    figures.values["shared call ids refused"] = f"{refused} of {len(variants)}"


def _refused_shared(path: Path, attempt: str) -> bool:
    """Whether deciding on (or pairing the decisions of) ``path`` is refused, naming the shared
    id, with the file untouched."""
    before = path.read_bytes()
    try:
        if attempt == "decide":
            decision = Decision(call_id=CallId("m0"), approve=True)
            record_decisions(path, [decision], SteppingClock(START))
        else:
            approvals(Trace.load(path), str(path))
    except TwinflowError as exc:
        return "share the id" in str(exc) and before == path.read_bytes()
    return False


def quorum_and_state(figures: Figures, work: Path) -> None:
    """One key under two names never makes a quorum; an edited witness state is refused."""
    lab, w1, w2 = _key("example.org/lab", 3), _key("example.org/w1", 4), _key("example.org/w2", 5)
    twin = generate_key("example.org/w1b", w1.seed)
    trace = small_trace(5)
    (work / "q.jsonl").write_bytes(trace)
    head = read_checkpoint(work / "q.jsonl")
    body = CheckpointBody("example.org/lab", head.size, bytes.fromhex(head.root))
    note = sign_checkpoint_note(body, [lab])
    lines = [cosign(body.text, k, 2_000_000_000).line for k in (w1, twin, w2)]
    cosigned = note + "".join(f"{line}\n" for line in lines).encode()
    (work / "q.note").write_bytes(cosigned)
    (work / "lab.pub").write_text(lab.verifier.text + "\n")
    keys = {k.name: CosignerKey.of_signer(k) for k in (w1, twin, w2)}
    for name, key in keys.items():
        (work / f"{name.split('/')[1]}.pub").write_text(key.text + "\n")
    policies = {
        "one key, two names": [keys["example.org/w1"], keys["example.org/w1b"]],
        "one key file twice": [keys["example.org/w1"], keys["example.org/w1"]],
    }
    refused = 0
    for name, witnesses in policies.items():
        try:
            verify_cosignatures(cosigned, witnesses, quorum=2, now=None)
        except SignatureError as exc:
            refused += exc.reason == "ambiguous_key"
        else:
            figures.fail(f"quorum of 2 met by {name}")
    try:
        verify_cosignatures(
            cosigned, [keys["example.org/w1"], keys["example.org/w2"]], quorum=2, now=None
        )
    except SignatureError as exc:
        figures.fail(f"two distinct witnesses refused: {exc}")
    stdlib = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "twinflow.trace",
            "verify",
            "q.jsonl",
            "--checkpoint",
            "q.note",
            "--key",
            "lab.pub",
            "--witness",
            "w1.pub",
            "--witness",
            "w1b.pub",
            "--quorum",
            "2",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    refused += stdlib.returncode == 2
    if stdlib.returncode != 2:
        figures.fail(f"stdlib auditor, one key under two names: exit {stdlib.returncode}")
    figures.values["quorums of one key refused"] = f"{refused} of {len(policies) + 1}"
    _witness_states(figures, work, lab, w1, note)


def _witness_states(figures: Figures, work: Path, lab: Any, w1: Any, note: bytes) -> None:
    state = work / "w.state"
    request = b"old 0\n\n" + note
    add_checkpoint(request, state=state, signer=w1, logs=[lab.verifier], now=2_000_000_000)
    good = state.read_bytes()
    value = json.loads(good)
    log = value["logs"]["example.org/lab"]
    other = _key("example.org/w1", 9)
    unsigned = {k: v for k, v in value.items() if k != "signature"}
    rolled = {**unsigned, "logs": {"example.org/lab": {**log, "size": 0}}}
    message = b"twinflow witness state v2\n" + canonical_bytes(rolled)

    edits = {
        "size rolled back": {**value, "logs": {"example.org/lab": {**log, "size": 0}}},
        "log forgotten": {**value, "logs": {}},
        "root swapped": {**value, "logs": {"example.org/lab": {**log, "root_hex": "00" * 32}}},
        "signature dropped": unsigned,
        "re-signed by another key": {
            **rolled,
            "signature": base64.b64encode(other.sign(message)).decode(),
        },
        "downgraded to unsigned": {"format": "twinflow-witness-state/v1", "logs": {}},
        "another witness's": {**value, "witness": "example.org/w2+00000000"},
    }
    refused = 0
    for name, edited in edits.items():
        data = canonical_bytes(edited) + b"\n"
        state.write_bytes(data)
        try:
            add_checkpoint(request, state=state, signer=w1, logs=[lab.verifier], now=2_000_000_001)
        except TwinflowError as exc:
            refused += getattr(exc, "reason", "") == "witness_state" and state.read_bytes() == data
        else:
            figures.fail(f"witness state {name}: accepted, cosigned")
    figures.values["edited witness states refused"] = f"{refused} of {len(edits)}"


def signed_evidence(figures: Figures, work: Path) -> None:
    """The campaign's classes of signed evidence, each in its own directory."""
    for name, campaign in (
        ("signed", signed_decisions),
        ("received", received_decisions),
        ("shared", shared_ids),
        ("quorum", quorum_and_state),
    ):
        where = work / f"signed-{name}"
        where.mkdir()
        campaign(figures, where)
