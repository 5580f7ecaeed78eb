"""``twinflow preflight MODULE:Model``: what a server's decoder will enforce of an output schema.

The report is the one the structured-output adapters act on: the schema as it will be sent
(every rewrite named), each part the decoder will not enforce (pydantic still validates it),
and, for llama-cpp-python (the embedded server's decoder), what its own converter made of the
sent schema, run in this process. Exit 0 when everything is enforced, 1 when something is not
(so a script can refuse such a model), 2 for a usage error.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from twinflow._base._code import resolve_dotted
from twinflow.cli._output import EXIT_FAILED, EXIT_OK, Command, Output
from twinflow.models._grammar import llama_cpp_grammar_check
from twinflow.models._preflight import PreflightReport, preflight
from twinflow.trace import UserError

__all__ = ["COMMANDS"]

_DECODERS: tuple[str, ...] = ("llama-cpp-python", "llama.cpp", "ollama")


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target",
        metavar="MODULE:Model",
        help=(
            "the pydantic model (or a TypeAdapter, or a JSON Schema dict) to check, imported "
            "from the current directory or the installed packages"
        ),
    )
    p.add_argument(
        "--decoder",
        choices=_DECODERS,
        default="llama-cpp-python",
        help="the server's grammar converter (default: llama-cpp-python, the embedded server's)",
    )


def _source(target: str) -> Any:
    # The user typed the module on this command line (no received spec names it), so it is
    # looked up where they stand, as `python -m` would.
    value = resolve_dotted(target, (Path.cwd(),))
    if isinstance(value, type) and issubclass(value, BaseModel):
        return value
    if isinstance(value, TypeAdapter | dict):
        return value
    raise UserError(
        f"{target!r} is a {type(value).__name__}, not a pydantic model class, a TypeAdapter or "
        "a JSON Schema dict: point at one of those"
    )


def report_lines(target: str, report: PreflightReport) -> list[str]:
    """The human report, one line per fact."""
    lines = [f"{target}: pre-flight for the {report.decoder} decoder"]
    if report.grammar is not None:
        grammar = report.grammar
        detail = f" ({grammar.reason})" if grammar.reason else ""
        size = f", {grammar.grammar_bytes}-byte grammar" if grammar.grammar_bytes else ""
        lines.append(f"  converter: {grammar.status}{detail}{size}")
    else:
        lines.append("  converter: not run (llama-cpp-python is not installed here)")
    for rewrite in report.rewrites:
        after = "removed" if rewrite.after is None else repr(rewrite.after)
        lines.append(
            f"  rewrite {rewrite.pointer}: {rewrite.before!r} -> {after} ({rewrite.reason})"
        )
    for finding in report.findings:
        lines.append(f"  NOT ENFORCED {finding.pointer or '/'}: {finding.reason}")
    verdict = (
        "enforced: the decoder's grammar holds every part of the schema"
        if report.enforced
        else f"{len(report.findings)} part(s) not enforced by the decoder; pydantic validates "
        "them after each reply, and a refused reply is re-asked"
    )
    lines.append(f"  {verdict}")
    return lines


def _handle(args: argparse.Namespace, out: Output) -> int:
    source = _source(args.target)
    check = llama_cpp_grammar_check() if args.decoder == "llama-cpp-python" else None
    report = preflight(source, args.decoder, grammar_check=check)
    for line in report_lines(args.target, report):
        out.line(line)
    out.document({"ok": report.enforced, "target": args.target, **report.model_dump(mode="json")})
    return EXIT_OK if report.enforced else EXIT_FAILED


COMMANDS: dict[str, Command] = {"preflight": (_configure, _handle)}
"""The command this module defines, as `twinflow.cli._main.COMMAND_TABLE` looks it up."""
