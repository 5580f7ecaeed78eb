"""The Go verifier (`tests/go/traceverify`, written from the format's documentation with the
standard library and golang.org/x/mod) against every conformance vector twinflow-trace ships;
a deliberately broken vector makes both it and twinflow's own verifier fail."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from cli_testkit import build_go_tool

from twinflow.cli._main import main
from twinflow.trace._conformance import VECTORS


@pytest.fixture(scope="session")
def traceverify(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go verifier, built once for the session."""
    return build_go_tool("traceverify", tmp_path_factory.mktemp("go"))


def test_the_go_verifier_passes_every_vector(
    traceverify: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`twinflow-trace conformance -- traceverify`: every vector passes."""
    count = len(json.loads((VECTORS / "vectors.json").read_text()))
    assert 0 == main(["conformance", "--", str(traceverify)])
    assert f"{count} of {count} vectors pass ({VECTORS})\n" == capsys.readouterr().out


@pytest.mark.parametrize("verifier", ["go", "python"])
def test_a_broken_vector_fails_both_verifiers(
    traceverify: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], verifier: str
) -> None:
    """One byte of the good trace changed while its vector still expects ok: the runner names
    it as failing (and the attestation vectors over that trace), exit 1."""
    suite = tmp_path / "vectors"
    shutil.copytree(VECTORS, suite)
    good = suite / "trace" / "good.jsonl"
    good.write_bytes(good.read_bytes().replace(b'"hello"', b'"hellO"', 1))
    command = (
        [str(traceverify)]
        if verifier == "go"
        else [sys.executable, "-P", "-m", "twinflow.trace", "vector"]
    )
    assert 1 == main(["conformance", "--vectors", str(suite), "--", *command])
    failed = [
        line.split(":")[0]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("FAIL ")
    ]
    assert "FAIL trace/good" in failed
    assert "FAIL attestation/good-case0" in failed


def test_a_suite_with_a_vector_missing_its_expected_result_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`twinflow conformance` on a suite with one expect removed: one line, exit 2, nothing run."""
    suite = tmp_path / "vectors"
    shutil.copytree(VECTORS, suite)
    vectors = json.loads((suite / "vectors.json").read_text())
    del vectors[0]["expect"]
    (suite / "vectors.json").write_text(json.dumps(vectors))
    assert 2 == main(["conformance", "--vectors", str(suite)])
    captured = capsys.readouterr()
    assert ("", 1) == (captured.out, len(captured.err.splitlines()))
    assert "vector 'trace/good' has no expected result" in captured.err


def test_the_default_verifier_is_twinflow_traces_own(capsys: pytest.CaptureFixture[str]) -> None:
    """`twinflow conformance` with no verifier runs `python -P -m twinflow.trace vector`."""
    count = len(json.loads((VECTORS / "vectors.json").read_text()))
    assert 0 == main(["conformance"])
    assert f"{count} of {count} vectors pass ({VECTORS})\n" == capsys.readouterr().out
