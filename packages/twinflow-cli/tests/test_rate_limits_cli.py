"""`twinflow run` against a server that rate-limits: each wait is an event, a replay waits for none.

A scripted OpenAI-compatible server refuses the first requests (429 with `Retry-After: 0`, a
503, Anthropic's 529) before answering; the command's run records one `model_waited` per
refusal and `twinflow replay` re-runs it without a server and without waiting.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import CALC, OUTPUT, SPEC, chat_completion, one_line, twinflow

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

FAST = "retries:\n  base_seconds: 0.01\n"


class Limited:
    """Refuses the next requests with ``refusals`` (status, Retry-After), then answers."""

    def __init__(self, refusals: list[tuple[int, str | None]]) -> None:
        self.refusals = refusals
        self.seen = 0

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        self.seen += 1
        if not self.refusals:
            return chat_completion(request)
        status, header = self.refusals.pop(0)
        headers = () if header is None else (("Retry-After", header),)
        return LoopbackResponse(status=status, headers=headers, body=b'{"error": "later"}')


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, Limited]]:
    """The calculator project, its spec naming a server that refuses three times first."""
    limited = Limited([(429, "0"), (503, None), (529, "0")])
    with LoopbackServer(limited) as server:
        (tmp_path / "calc.py").write_text(CALC)
        (tmp_path / "answer.py").write_text(OUTPUT)
        (tmp_path / "spec.yaml").write_text(SPEC.format(url=server.url) + FAST)
        yield tmp_path, limited


def test_a_limited_run_waits_records_each_wait_and_replays_byte_for_byte(
    project: tuple[Path, Limited],
) -> None:
    """Three refusals, three model_waited events, the answer; replay matches every event."""
    tmp_path, limited = project
    result = twinflow("run", "spec.yaml", "--out", "out", "--json", cwd=tmp_path)
    assert 0 == result.returncode, result.stderr
    assert {"total": 5} == json.loads(result.stdout)["output"]
    assert 5 == limited.seen
    lines = (tmp_path / "out" / "trace.jsonl").read_text().splitlines()
    bodies = [json.loads(line)["event"]["body"] for line in lines]
    waited = [
        (b["step"], b["attempt"], b["status"], b["retry_after"])
        for b in bodies
        if b["kind"] == "model_waited"
    ]
    assert [(1, 1, 429, "0"), (1, 2, 503, None), (1, 3, 529, "0")] == waited
    shown = twinflow("show", "out/trace.jsonl", cwd=tmp_path).stdout
    assert "(HTTP 429, Retry-After '0'), then sent again" in shown
    assert "(HTTP 503), then sent again" in shown
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml", "--json", cwd=tmp_path)
    assert 0 == replayed.returncode, replayed.stderr
    assert len(lines) == json.loads(replayed.stdout)["events"]
    assert 5 == limited.seen


def test_a_server_limiting_forever_ends_the_run_with_one_line(tmp_path: Path) -> None:
    """429 on every send: the run stops at retries.attempts, exit 2, saying it was not retried."""
    limited = Limited([(429, "0")] * 20)
    with LoopbackServer(limited) as server:
        (tmp_path / "calc.py").write_text(CALC)
        (tmp_path / "answer.py").write_text(OUTPUT)
        spec = SPEC.format(url=server.url) + "retries:\n  attempts: 3\n"
        (tmp_path / "spec.yaml").write_text(spec)
        result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 2 == result.returncode, result.stderr
    line = one_line(result.stderr)
    assert "HTTP 429 Too Many Requests: the server asks to be called later" in line
    assert (
        "not retried: 3 sends refused, the last with Retry-After '0' (retries.attempts=3)" in line
    )
    assert 3 == limited.seen


def test_a_bad_retries_key_is_refused_before_any_request(tmp_path: Path) -> None:
    """retries.attempts: 0 is a spec error naming the key; nothing is sent."""
    limited = Limited([])
    with LoopbackServer(limited) as server:
        (tmp_path / "calc.py").write_text(CALC)
        (tmp_path / "answer.py").write_text(OUTPUT)
        (tmp_path / "spec.yaml").write_text(
            SPEC.format(url=server.url) + "retries:\n  attempts: 0\n"
        )
        result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 2 == result.returncode, result.stderr
    assert "retries.attempts" in one_line(result.stderr)
    assert 0 == limited.seen
