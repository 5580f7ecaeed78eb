"""Loading datasets: YAML and JSONL, with errors that name the file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinflow.eval import DatasetError, ExactMatch, FieldMatch, NumericTolerance, load_dataset
from twinflow.trace import UserError

GOOD = """\
name: tiny
scorers:
  - kind: fields
cases:
  - id: a
    input: "10 USD"
    expected: {total_eur: 5.0}
    tags: [usd]
  - id: b
    input: "10 EUR"
    expected: {total_eur: 10.0}
    assertions:
      - kind: numeric
        field: total_eur
        tolerance: 0.5
    repeats: 2
"""


def test_yaml_dataset_loads_with_scorers_per_case(tmp_path: Path) -> None:
    """A YAML dataset yields its cases; each case gets the dataset's scorers then its own."""
    path = tmp_path / "d.yaml"
    path.write_text(GOOD)
    dataset = load_dataset(path)
    assert ["a", "b"] == [c.id for c in dataset.cases]
    assert 2 == dataset.cases[1].repeats
    assert (FieldMatch(),) == dataset.scorers_for(dataset.cases[0])
    assert [FieldMatch, NumericTolerance] == [
        type(s) for s in dataset.scorers_for(dataset.cases[1])
    ]


def test_unknown_key_is_named_with_its_line(tmp_path: Path) -> None:
    """A misspelt key in the second case is named with its line and the key it meant."""
    path = tmp_path / "d.yaml"
    path.write_text(GOOD.replace("    repeats: 2", "    repeat: 2"))
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    expected = f"{path}:16: cases.1.repeat: unknown key (did you mean 'repeats'?)"
    assert expected == str(info.value)
    assert isinstance(info.value, UserError)


def test_bad_scorer_kind_points_into_assertions(tmp_path: Path) -> None:
    """An unknown scorer kind names the line of the assertion."""
    path = tmp_path / "d.yaml"
    path.write_text(GOOD.replace("kind: numeric", "kind: numerik"))
    with pytest.raises(DatasetError, match=rf"^{path}:13: cases\.1\.assertions\.0"):
        load_dataset(path)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    """Two cases with one id are refused at the second one's line."""
    path = tmp_path / "d.yaml"
    path.write_text(GOOD.replace("id: b", "id: a"))
    with pytest.raises(DatasetError, match=rf"^{path}:9: cases\.1\.id: duplicate case id 'a'"):
        load_dataset(path)


def test_jsonl_dataset_defaults_to_exact_match(tmp_path: Path) -> None:
    """JSONL cases with an expected value and no assertions are scored by exact match."""
    path = tmp_path / "set.jsonl"
    path.write_text(
        '{"id": "x", "input": "hi", "expected": "hello"}\n\n{"id": "y", "input": "yo"}\n'
    )
    dataset = load_dataset(path)
    assert "set" == dataset.name
    assert (ExactMatch(),) == dataset.scorers_for(dataset.cases[0])
    assert () == dataset.scorers_for(dataset.cases[1])


def test_jsonl_errors_name_the_line_and_key(tmp_path: Path) -> None:
    """A JSONL case with a bad field names its line; invalid JSON names its line too."""
    path = tmp_path / "set.jsonl"
    path.write_text('{"id": "x", "input": "hi"}\n{"id": "y", "input": "", "tags": []}\n')
    with pytest.raises(DatasetError, match=rf"^{path}:2: input: String should have at least 1"):
        load_dataset(path)
    path.write_text('{"id": "x", "input": "hi"}\n{"id": \n')
    with pytest.raises(DatasetError, match=rf"^{path}:2: not valid JSON"):
        load_dataset(path)


def test_ids_must_be_file_names(tmp_path: Path) -> None:
    """A case id with a slash is refused (ids name trace files)."""
    path = tmp_path / "set.jsonl"
    path.write_text('{"id": "../x", "input": "hi"}\n')
    with pytest.raises(DatasetError, match=rf"^{path}:1: id: String should match pattern"):
        load_dataset(path)


def test_missing_and_unknown_format_files(tmp_path: Path) -> None:
    """A missing file and an unknown extension are usage errors saying so."""
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "nope.yaml")
    other = tmp_path / "d.csv"
    other.write_text("id,input\n")
    with pytest.raises(DatasetError, match=r"use \.yaml, \.yml or \.jsonl"):
        load_dataset(other)


def test_a_misspelt_scorer_key_suggests_the_scorer_s_own_key(tmp_path: Path) -> None:
    """Inside a tagged scorer the suggestion comes from that scorer's keys."""
    path = tmp_path / "d.yaml"
    path.write_text("cases:\n- id: a\n  input: x\n  assertions:\n  - {kind: numeric, feld: t}\n")
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert "cases.0.assertions.0.numeric.feld: unknown key (did you mean 'field'?)" in str(
        info.value
    )


def test_a_yaml_syntax_error_is_one_line_with_its_place(tmp_path: Path) -> None:
    """A YAML syntax error names file, line and column in one line, without PyYAML's caret."""
    path = tmp_path / "d.yaml"
    path.write_text("name: x\ncases:\n  - id: a\n    input: [unclosed\n")
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    expected = (
        f"{path}:5:1: not valid YAML: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence at line 4)"
    )
    assert expected == str(info.value)
