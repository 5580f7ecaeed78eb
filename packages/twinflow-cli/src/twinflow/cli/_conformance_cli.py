"""``twinflow conformance [--vectors DIR] [-- VERIFIER...]``: hold a verifier to the trace
format's conformance vectors.

The vectors and their contract are twinflow-trace's (`twinflow.trace._conformance`): the
verifier is called once a vector, in the vectors directory, as ``VERIFIER CHECK ARGS...``, and
must print the vector's expected JSON object. The default verifier is twinflow-trace's own
(``python -P -m twinflow.trace vector``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output
from twinflow.cli._show import _clean
from twinflow.kernel._process import run_process
from twinflow.trace._conformance import VECTORS, default_verifier, load_vectors

__all__ = ["COMMANDS", "run_vectors"]

_TIMEOUT = 120.0


def run_vectors(directory: Path, verifier: Sequence[str]) -> list[tuple[str, str | None]]:
    """Run ``verifier`` on every vector: (name, None) for a pass, (name, why) for a failure.

    Raises:
        UserError: The vector list is malformed, or a vector has no expected result.
    """
    results: list[tuple[str, str | None]] = []
    for vector in load_vectors(directory):
        try:
            done = run_process(
                [*verifier, vector["check"], *vector["args"]], cwd=directory, timeout=_TIMEOUT
            )
        except OSError as exc:
            results.append((vector["name"], f"the verifier did not run: {exc}"))
            continue
        text = done.stdout.strip()
        try:
            said = json.loads(text.splitlines()[-1]) if text else None
        except ValueError:
            said = None
        if said == vector["expect"]:
            results.append((vector["name"], None))
            continue
        shown = text[:200] or done.stderr.strip()[:200]
        why = f"expected {json.dumps(vector['expect'])}, the verifier said {shown!r}"
        results.append((vector["name"], why))
    return results


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--vectors",
        type=Path,
        help="the vectors directory (default: the ones twinflow-trace ships)",
    )
    p.add_argument(
        "verifier",
        nargs=argparse.REMAINDER,
        help="the verifier command after --, called as VERIFIER CHECK ARGS... (default: "
        "twinflow-trace's own)",
    )


def _conformance(args: argparse.Namespace, out: Output) -> int:
    """Run a verifier against every conformance vector; exit 1 if one fails."""
    verifier = [a for a in args.verifier if a != "--"] or default_verifier()
    directory = args.vectors or VECTORS
    results = run_vectors(directory, verifier)
    failed = [{"vector": name, "why": why} for name, why in results if why is not None]
    payload = {"ok": not failed, "vectors": len(results), "failed": failed}
    for item in failed:
        out.line(f"FAIL {item['vector']}: {_clean(str(item['why']))}")
    if failed:
        raise CheckFailed(
            f"{len(failed)} of {len(results)} vectors fail (first: {failed[0]['vector']})",
            payload,
        )
    out.document(payload)
    out.line(f"{len(results)} of {len(results)} vectors pass ({directory})")
    return EXIT_OK


COMMANDS: dict[str, Command] = {"conformance": (_configure, _conformance)}
"""The command this module defines, as `twinflow.cli._main.COMMAND_TABLE` looks it up."""
