"""The environment on record from the command line: `twinflow run` fingerprints its run, a
trace recorded on another machine replays in recorded mode and the difference is said."""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

import pytest
from cli_testkit import CALC, calc_project

from twinflow.agent import RunStarted, Trace, load_spec
from twinflow.agent._events import Environment
from twinflow.cli._main import main
from twinflow.cli._wiring import run_identity
from twinflow.kernel import LoopbackServer, SystemClock, SystemIds
from twinflow.trace import FileTraceSink


@pytest.fixture
def project(tmp_path: Path, server: LoopbackServer) -> Path:
    """A spec on the scripted server and its tool module, side by side."""
    return calc_project(tmp_path, server.url)


def _started(path: Path) -> RunStarted:
    body = next(iter(Trace.load(path).events)).body
    assert isinstance(body, RunStarted)
    return body


def test_run_records_python_platform_distributions_model_spec_and_modules(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run_started names this Python and platform, the twinflow distributions with versions,
    the server's endpoint, the spec's digest and the tool module's sha256."""
    assert 0 == main(["run", str(project / "spec.yaml"), "--out", str(project / "out"), "--json"])
    capsys.readouterr()
    env = _started(project / "out" / "trace.jsonl").environment
    assert env is not None
    identity = run_identity(load_spec(project / "spec.yaml"))
    assert (platform.python_version(), platform.python_implementation(), platform.platform()) == (
        env.python,
        env.implementation,
        env.platform,
    )
    assert (identity.model, identity.spec_digest) == (env.model, env.spec_digest)
    assert {"calc": hashlib.sha256(CALC.encode()).hexdigest()} == env.modules
    assert {"twinflow-agent", "twinflow-cli", "pydantic"} <= env.distributions.keys()


def test_a_trace_recorded_elsewhere_replays_and_the_difference_is_said(
    project: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A received trace whose fingerprint names another Python replays in recorded mode (exit 0);
    the output says how the machines differ, and --json lists it."""
    spec = load_spec(project / "spec.yaml")
    here = spec.environment()
    elsewhere = Environment.model_validate(
        {**here.model_dump(), "python": "3.99.0", "platform": "Plan9-4-mips"}
    )
    trace = project / "received.jsonl"
    transport = spec.model.transport()
    ids = SystemIds()
    agent = spec.resolve().agent(
        model=spec.model.chat_model(transport, ids),
        clock=SystemClock(),
        ids=ids,
        trace=FileTraceSink(trace),
        environment=elsewhere,
    )
    with agent:
        agent.run(spec.prompt)
    transport.close()
    argv = ["replay", str(trace), "--spec", str(project / "spec.yaml"), "--mode", "recorded"]
    assert 0 == main(argv)
    out = capsys.readouterr().out
    assert "note: recorded in another environment than this one (2 difference(s)): " in out
    assert f"python: 3.99.0 -> {platform.python_version()}" in out
    assert 0 == main([*argv, "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert [
        f"python: 3.99.0 -> {here.python}",
        f"platform: Plan9-4-mips -> {here.platform}",
    ] == payload["environment_differences"]
