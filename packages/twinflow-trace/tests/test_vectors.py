"""The conformance vectors: shipped as built, every one passed by this package's verifier, and a
suite with a vector missing its expected result refused before anything runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from vectors_build import build

from twinflow.trace import UserError
from twinflow.trace import __main__ as leaf
from twinflow.trace._conformance import VECTORS, check_vector, load_vectors


def test_the_shipped_vectors_are_the_ones_the_builder_writes(tmp_path: Path) -> None:
    """Every shipped file is byte for byte what vectors_build.py writes, and no other."""
    build(tmp_path / "built")
    shipped = {p.relative_to(VECTORS): p.read_bytes() for p in VECTORS.rglob("*") if p.is_file()}
    built = {
        p.relative_to(tmp_path / "built"): p.read_bytes()
        for p in (tmp_path / "built").rglob("*")
        if p.is_file()
    }
    assert built == shipped


def test_this_verifier_says_what_every_vector_expects(monkeypatch: pytest.MonkeyPatch) -> None:
    """check_vector (what `twinflow-trace vector` prints) equals each vector's expect."""
    monkeypatch.chdir(VECTORS)
    vectors = load_vectors(VECTORS)
    expected = {v["name"]: v["expect"] for v in vectors}
    actual = {v["name"]: check_vector(v["check"], v["args"]) for v in vectors}
    assert expected == actual


def test_a_vector_without_its_expected_result_is_refused(tmp_path: Path) -> None:
    """One vector's expect removed: the suite is refused, naming the vector."""
    suite = tmp_path / "vectors"
    shutil.copytree(VECTORS, suite)
    vectors = json.loads((suite / "vectors.json").read_text())
    del vectors[3]["expect"]
    (suite / "vectors.json").write_text(json.dumps(vectors))
    with pytest.raises(UserError, match=f"vector {vectors[3]['name']!r} has no expected result"):
        load_vectors(suite)


def test_the_vector_command_prints_its_verdict_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`twinflow-trace vector trace FILE` prints the verdict on one line, exit 0."""
    monkeypatch.chdir(VECTORS)
    assert 0 == leaf.main(["vector", "trace", "trace/edited.jsonl"])
    assert {"ok": False, "problem": "edited", "seq": 2} == json.loads(capsys.readouterr().out)


def test_a_vector_naming_a_file_outside_its_directory_is_refused(tmp_path: Path) -> None:
    """An argument that climbs out of the vectors directory is refused."""
    suite = tmp_path / "vectors"
    shutil.copytree(VECTORS, suite)
    vectors = json.loads((suite / "vectors.json").read_text())
    vectors[0]["args"] = ["../../etc/passwd"]
    (suite / "vectors.json").write_text(json.dumps(vectors))
    with pytest.raises(UserError, match="leaves the vectors directory"):
        load_vectors(suite)
