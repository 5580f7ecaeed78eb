"""The auditor's install: the twinflow-trace wheel alone, in a fresh venv, verifies a real trace."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cli_testkit import trace_only_venv

from twinflow.agent import Agent, FunctionModel
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.kernel._process import run_process
from twinflow.trace import FileTraceSink, verify_trace
from twinflow.trace._keys import generate_key
from twinflow.trace._note import CheckpointBody, sign_checkpoint_note
from twinflow.vocab import Message


def test_the_wheel_installs_nothing_else_and_verifies_a_demo_trace(tmp_path: Path) -> None:
    """`pip install twinflow-trace` (from its wheel, no index) brings no other distribution."""
    python = trace_only_venv(tmp_path) / "python"
    trace = tmp_path / "demo.jsonl"
    sink = FileTraceSink(trace)
    Agent(
        FunctionModel(lambda request: Message.assistant("hello")),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        trace=sink,
    ).run("hi")
    sink.close()
    verify = run_process(
        [str(python), "-I", "-m", "twinflow.trace", "verify", str(trace)], cwd=tmp_path, timeout=300
    )
    assert (0, "") == (verify.returncode, verify.stderr)
    assert verify.stdout.startswith(f"ok: {trace}: 5 events verify")
    # A checkpoint signed here (signing needs the signatures extra) verifies there (stdlib only).
    signer = generate_key("example.org/lab", bytes(range(32)))
    (tmp_path / "lab.pub").write_text(signer.verifier.text + "\n")
    checkpoint = verify_trace(trace).checkpoint
    body = CheckpointBody("example.org/lab", checkpoint.size, bytes.fromhex(checkpoint.root))
    (tmp_path / "cp.note").write_bytes(sign_checkpoint_note(body, [signer]))
    signed = run_process(
        [
            str(python),
            "-I",
            "-m",
            "twinflow.trace",
            "verify",
            str(trace),
            "--checkpoint",
            "cp.note",
            "--key",
            "lab.pub",
        ],
        cwd=tmp_path,
        timeout=300,
    )
    assert (0, "") == (signed.returncode, signed.stderr)
    trace.write_bytes(trace.read_bytes().replace(b'"hello"', b'"HELLO"'))
    tampered = run_process(
        [str(python), "-I", "-m", "twinflow.trace", "verify", str(trace)], cwd=tmp_path, timeout=300
    )
    assert 1 == tampered.returncode
