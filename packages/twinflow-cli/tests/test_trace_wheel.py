"""The auditor's install: the twinflow-trace wheel alone, in a fresh venv, verifies a real trace."""

from __future__ import annotations

import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

from twinflow.agent import Agent, FunctionModel
from twinflow.kernel import CountingIds, SteppingClock, run_process
from twinflow.trace import FileTraceSink, verify_trace
from twinflow.trace import note as _note
from twinflow.vocab import Message

ROOT = Path(__file__).resolve().parents[3]


def uv() -> str:
    """The uv binary (.ci/run exports $UV when it installed uv itself)."""
    found = os.environ.get("UV") or shutil.which("uv")
    assert found, "uv is needed to build the wheel (it is on PATH wherever scripts/check runs)"
    return found


def test_the_wheel_installs_nothing_else_and_verifies_a_demo_trace(tmp_path: Path) -> None:
    """`pip install twinflow-trace` (from its wheel, no index) brings no other distribution."""
    dist = tmp_path / "dist"
    build = run_process(
        [uv(), "build", "--wheel", "--package", "twinflow-trace", "--out-dir", str(dist)],
        cwd=ROOT,
        timeout=300,
    )
    assert 0 == build.returncode, build.stderr
    wheel = next(dist.glob("twinflow_trace-*.whl"))
    venv = tmp_path / "venv"
    made = run_process(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, timeout=300
    )
    assert 0 == made.returncode, made.stderr
    python = venv / "bin" / "python"
    install = run_process(
        [uv(), "pip", "install", "--offline", "--no-index", "--python", str(python), str(wheel)],
        cwd=tmp_path,
        timeout=300,
    )
    assert 0 == install.returncode, install.stderr
    freeze = run_process(
        [uv(), "pip", "freeze", "--python", str(python)], cwd=tmp_path, timeout=300
    )
    installed = [line.split("==")[0].split(" @ ")[0] for line in freeze.stdout.splitlines()]
    assert ["twinflow-trace"] == installed

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
    signer = _note.generate_key("example.org/lab", bytes(range(32)))
    (tmp_path / "lab.pub").write_text(signer.verifier.text + "\n")
    checkpoint = verify_trace(trace).checkpoint
    body = _note.CheckpointBody("example.org/lab", checkpoint.size, bytes.fromhex(checkpoint.root))
    (tmp_path / "cp.note").write_bytes(_note.sign_checkpoint_note(body, [signer]))
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
