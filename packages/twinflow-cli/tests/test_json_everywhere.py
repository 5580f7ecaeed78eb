"""``--json`` is accepted by every command and subcommand in the CLI's command table."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import pytest

from twinflow.cli._main import COMMAND_TABLE, _parser, main


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``parser`` and every subcommand parser below it, each with its words on the line."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def _commands() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command of the table, configured, and its subcommands."""
    for name in COMMAND_TABLE:
        for path, parser in _walk(_parser([name]), ()):
            # The top parser lists every command, configured only for the one chosen.
            if path and path[0] == name:
                yield path, parser


def test_every_command_and_subcommand_takes_json() -> None:
    """Walking the command table: each command's parser, and each subcommand's, has --json."""
    walked = {
        " ".join(path): "--json" in parser._option_string_actions for path, parser in _commands()
    }
    assert {"eval run", "eval rescore", "eval compare", "eval merge"} <= set(walked)
    assert set(COMMAND_TABLE) <= set(walked)
    assert {name: True for name in walked} == walked


def test_eval_without_a_subcommand_answers_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`twinflow eval --json` is a usage error as one JSON document (exit 2), not argparse usage."""
    assert 2 == main(["eval", "--json"])
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert (False, "name a subcommand: run, rescore, compare, merge, plan, attest, reproduce") == (
        payload["ok"],
        payload["error"].split(" (")[0],
    )
    assert 1 == len(captured.err.splitlines())
