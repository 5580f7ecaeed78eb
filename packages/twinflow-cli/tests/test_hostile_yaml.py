"""Hostile run specs and datasets through the command: one line naming the file, exit 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from twinflow.cli._main import main

SPEC = "prompt: x\nmodel: {url: 'http://127.0.0.1:9'}\n"
DATASET = "name: d\ncases:\n- id: a\n  input: b\n"


def _laughs(key: str) -> str:
    """A billion-laughs document: nine levels of nine aliases each, under ``key``."""
    text = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        text += f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]\n"
    return text + f"{key}: *i\n"


# Each hazard as (a spec holding it, a dataset holding it, what the one line says).
HAZARDS: dict[str, tuple[str, str, str]] = {
    "deep lists": (
        SPEC + "tools: " + "[" * 3000 + "]" * 3000 + "\n",
        DATASET + "  expected: " + "[" * 3000 + "]" * 3000 + "\n",
        "nested deeper than",
    ),
    "deep maps": (
        SPEC + "tools: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
        DATASET + "  expected: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
        "nested deeper than",
    ),
    "deep block lists": (
        SPEC + "tools:\n" + "".join("  " * i + "- \n" for i in range(1, 400)),
        DATASET + "  expected:\n" + "".join("  " * i + "- \n" for i in range(2, 400)),
        "nested deeper than",
    ),
    "alias bomb": (_laughs("tools"), _laughs("cases"), "YAML nodes (aliases included)"),
    "huge int": (
        SPEC + "max_steps: " + "9" * 5000 + "\n",
        DATASET + "  repeats: " + "9" * 5000 + "\n",
        "an integer of more than 4300 digits",
    ),
    "huge hex int": (
        SPEC + "max_steps: 0x" + "f" * 4000 + "\n",
        DATASET + "  repeats: 0x" + "f" * 4000 + "\n",
        "an integer of more than 4300 digits",
    ),
    "huge file": (
        SPEC + "#" * (2 * 1024 * 1024) + "\n",
        DATASET + ("#" * 1023 + "\n") * (65 * 1024),
        "over the limit of",
    ),
}


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("hazard", sorted(HAZARDS))
def test_a_hostile_spec_is_one_line_naming_it_exit_2(
    hazard: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval run` and `run` refuse a hostile spec in one line naming the file, exit 2."""
    spec_text, _, reason = HAZARDS[hazard]
    spec, dataset = tmp_path / "spec.yaml", tmp_path / "dataset.yaml"
    spec.write_text(spec_text)
    dataset.write_text(DATASET)
    commands: list[Callable[[], list[str]]] = [
        lambda: ["eval", "run", str(dataset), "--spec", str(spec), "--out", str(tmp_path / "o")],
        lambda: ["run", str(spec), "--out", str(tmp_path / "r")],
    ]
    for command in commands:
        code, lines = _one_line_error(command(), capsys)
        assert (2, 1) == (code, len(lines)), lines
        assert str(spec) in lines[0] and reason in lines[0], lines[0]
    assert ["dataset.yaml", "spec.yaml"] == sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize("hazard", sorted(HAZARDS))
def test_a_hostile_dataset_is_one_line_naming_it_exit_2(
    hazard: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval run` refuses a hostile YAML dataset in one line naming the file, exit 2."""
    _, dataset_text, reason = HAZARDS[hazard]
    spec, dataset = tmp_path / "spec.yaml", tmp_path / "dataset.yaml"
    spec.write_text(SPEC)
    dataset.write_text(dataset_text)
    argv = ["eval", "run", str(dataset), "--spec", str(spec), "--out", str(tmp_path / "o")]
    code, lines = _one_line_error(argv, capsys)
    assert (2, 1) == (code, len(lines)), lines
    assert str(dataset) in lines[0] and reason in lines[0], lines[0]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"id": "a", "input": "b", "expected": ' + "[" * 3000 + "]" * 3000 + "}", "nests deeper"),
        ('{"id": "a", "input": "b", "repeats": ' + "9" * 5000 + "}", "digits"),
    ],
    ids=["deep", "huge int"],
)
def test_a_hostile_jsonl_dataset_is_one_line_naming_it_exit_2(
    line: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON Lines dataset nested 3000 deep or with a 5000-digit integer: one line, exit 2."""
    spec, dataset = tmp_path / "spec.yaml", tmp_path / "dataset.jsonl"
    spec.write_text(SPEC)
    dataset.write_text(line + "\n")
    argv = ["eval", "run", str(dataset), "--spec", str(spec), "--out", str(tmp_path / "o")]
    code, lines = _one_line_error(argv, capsys)
    assert (2, 1) == (code, len(lines)), lines
    assert f"{dataset}:1: not valid JSON" in lines[0] and reason in lines[0], lines[0]


def test_an_endless_or_oversized_dataset_is_refused_at_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/zero is refused unread, a file past 64 MiB at the limit: one line, exit 2, no hang."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    argv = ["eval", "run", "/dev/zero", "--spec", str(spec), "--out", str(tmp_path / "o")]
    assert (
        2,
        ["twinflow eval: /dev/zero: is a character device, not a file: name a regular file"],
    ) == (_one_line_error(argv, capsys))
    big = tmp_path / "big.yaml"
    with big.open("wb") as file:  # sparse: 64 MiB and one byte, no disk used
        file.truncate(64 * 1024 * 1024 + 1)
    argv[2] = str(big)
    assert (2, [f"twinflow eval: {big}: over the limit of 67108864 bytes for a dataset"]) == (
        _one_line_error(argv, capsys)
    )
