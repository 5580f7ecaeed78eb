"""MkDocs hook: the reference pages written from their sources when the site is built.

A page holds a marker comment where a generated part goes; the hook replaces it with Markdown
made from the thing itself, so the page cannot say something else:

- ``<!-- generated: cli -->``: every command's ``--help``, from the command's own argparse
  parser (`twinflow.cli._main`), subcommands of subcommands included.
- ``<!-- generated: schemas -->``: every key of the run spec, the YAML dataset and a JSON Lines
  case, from the JSON Schemas the packages ship (`twinflow.cli._schemas`).
- ``<!-- generated: api -->``: a mkdocstrings block per package naming every public name, the
  names its ``__init__`` imports (and the public modules beside it), rendered from docstrings.
- ``<!-- generated: benchmarks -->``: ``BENCHMARKS.md`` (itself written by
  ``benchmarks/_report.py`` from a ``run_all.py`` log).

The decision records' index, ``docs/adr/index.md``, is read on GitHub too, so it is a file:
``python docs/_hooks/generated.py`` writes it from each record's ``Status:`` line, and a test
fails while it differs.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- generated: (\w+) -->")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill each generated part of a page (the MkDocs ``on_page_markdown`` event)."""
    makers = {
        "cli": cli_reference,
        "schemas": schema_reference,
        "api": api_reference,
        "benchmarks": benchmarks_table,
    }
    return MARKER.sub(lambda match: makers[match[1]](), markdown)


def cli_reference() -> str:
    """Every command's help, in the command table's order, as ``twinflow CMD --help`` prints it."""
    from twinflow.cli._main import COMMAND_TABLE, _parser

    parts = [_help_block("twinflow", _parser([]), 2)]
    for name in COMMAND_TABLE:
        command = _subcommands(_parser([name]))[name]
        parts.append(_help_block(f"twinflow {name}", command, 2))
        for sub, parser in _subcommands(command).items():
            parts.append(_help_block(f"twinflow {name} {sub}", parser, 3))
    return "\n".join(parts)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_block(title: str, parser: argparse.ArgumentParser, level: int) -> str:
    # argparse wraps to $COLUMNS; the page is the same whatever terminal built it.
    parser.formatter_class = _fixed_width(parser.formatter_class)
    return f"{'#' * level} `{title}`\n\n```text\n{parser.format_help().rstrip()}\n```\n"


def _fixed_width(formatter: Any) -> Any:
    def make(prog: str) -> argparse.HelpFormatter:
        return formatter(prog, width=100)  # type: ignore[no-any-return]  # argparse's factory is untyped

    return make


API_ORDER = (
    "agent",
    "models",
    "eval",
    "views",
    "pydantic_ai",
    "kernel",
    "vocab",
    "trace",
    "cli",
)


def api_reference() -> str:
    """One mkdocstrings block per package, its members the names its ``__init__`` imports."""
    parts = []
    for package in API_ORDER:
        (init,) = ROOT.glob(f"packages/*/src/twinflow/{package}/__init__.py")
        names = public_names(init)
        members = "".join(f"\n        - {name}" for name in names)
        parts.append(f"::: twinflow.{package}\n    options:\n      members:{members}\n")
        for module in sorted(init.parent.glob("[!_]*.py")):
            parts.append(f"::: twinflow.{package}.{module.stem}\n")
    return "\n".join(parts)


def public_names(init: Path) -> list[str]:
    """The names a package's ``__init__`` imports that start with no underscore."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    return sorted(
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if not (alias.asname or alias.name).startswith("_")
    )


def schema_reference() -> str:
    """Every key of each published schema: a table per object, in the schema's own words."""
    from twinflow.cli._schemas import schema_texts

    parts = []
    for name, text in schema_texts().items():
        schema = json.loads(text)
        parts.append(f"### {schema['title']} (`{name.split('/')[1]}`)\n")
        parts.append(_object_table(schema))
        for def_name, definition in sorted(schema.get("$defs", {}).items()):
            if "properties" in definition:
                parts.append(f"#### `{def_name}`\n")
                parts.append(_object_table(definition))
    return "\n".join(parts)


def _object_table(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", ()))
    rows = ["| key | type | required | default |", "| --- | --- | --- | --- |"]
    for key, prop in sorted(schema["properties"].items()):
        default = json.dumps(prop["default"]) if "default" in prop else ""
        rows.append(
            f"| `{key}` | {_type(prop)} | {'yes' if key in required else ''} | {_cell(default)} |"
        )
    description = schema.get("description", "").strip()
    return (f"{_cell(description)}\n\n" if description else "") + "\n".join(rows) + "\n"


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return f"`{prop['$ref'].rsplit('/', 1)[1]}`"
    if "anyOf" in prop:
        return " or ".join(_type(option) for option in prop["anyOf"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " or ".join(f"`{json.dumps(value)}`" for value in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "array" and "items" in prop:
        return f"list of {_type(prop['items'])}"
    return str(kind)


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


ADR_INTRO = """\
# Decisions

Each record says what was decided, why, and what else was weighed (Context, Decision,
Alternatives, Consequences). A record is not edited once accepted: a later one supersedes it,
and the earlier record's status line says by which. The status below is each record's own
`Status:` line (this page is written from them: `python docs/_hooks/generated.py`).

"""


def adr_index() -> str:
    """The index page: one row per decision record, its number, title and status line."""
    rows = [ADR_INTRO + "| record | decision | status |", "| --- | --- | --- |"]
    for path in sorted((ROOT / "docs" / "adr").glob("[0-9]*.md")):
        number, title, status = adr_status(path)
        rows.append(f"| {number} | [{_cell(title)}]({path.name}) | {_cell(status)} |")
    return "\n".join(rows) + "\n"


def adr_status(path: Path) -> tuple[str, str, str]:
    """A record's number, title and status (its ``Status:`` line, to the first full stop)."""
    text = path.read_text(encoding="utf-8")
    title = text.split("\n", 1)[0].lstrip("# ")
    title = re.sub(r"^(ADR )?\d{4}: ", "", title)
    found = re.search(r"^-? ?Status: (.*(?:\n(?!\n|- |#).*)*)", text, re.MULTILINE)
    if found is None:
        raise ValueError(f"{path.name}: no `Status:` line")
    return path.name[:4], title, " ".join(found[1].split())


def benchmarks_table() -> str:
    """The floors as ``BENCHMARKS.md`` has them: generated from a run's own output."""
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    return text.split("\n", 1)[1]  # its title is the page's


if __name__ == "__main__":
    (ROOT / "docs" / "adr" / "index.md").write_text(adr_index(), encoding="utf-8")
