"""A run directory never loses an earlier run: its trace and spec are kept under new names."""

from __future__ import annotations

from pathlib import Path

from twinflow.cli._run import _fresh_trace_path


def test_an_earlier_trace_and_spec_are_renamed_not_overwritten(tmp_path: Path) -> None:
    """Each new run gets trace.jsonl; earlier ones become trace.1.jsonl, trace.2.jsonl, ..."""
    for generation in ("first", "second", "third"):
        path = _fresh_trace_path(tmp_path)
        path.write_text(generation)
        (tmp_path / "spec.yaml").write_text(generation)
    expected = {
        "trace.jsonl": "third",
        "trace.2.jsonl": "second",
        "trace.1.jsonl": "first",
        "spec.yaml": "third",
        "spec.2.yaml": "second",
        "spec.1.yaml": "first",
    }
    assert expected == {p.name: p.read_text() for p in tmp_path.iterdir()}
