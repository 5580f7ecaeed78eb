"""The files a run writes: each run claims its own ``trace``/``spec``/``code`` set.

A run writes three files into its directory: ``trace.jsonl`` (the run, as a verifiable value),
``spec.yaml`` (what it was run with, so ``replay`` can rebuild the same agent) and ``code.json``
(the directory the spec's modules were imported from and each module's sha256). A later run
into the same directory, or one running at the same time, takes the next free set
``trace.N.jsonl``/``spec.N.yaml``/``code.N.json``: each set is claimed by creating its spec
exclusively, so no file is ever renamed or shared.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from twinflow._base._errors import FileWriteError, TargetExistsError
from twinflow._base._files import write_new
from twinflow.agent._trace_file import numbered
from twinflow.trace import UserError

__all__ = ["SPEC_NAME", "claim_run_files", "code_beside", "spec_beside"]

SPEC_NAME = "spec.yaml"

_MAX_RUNS_PER_DIRECTORY = 100_000


def _pair(directory: Path, n: int) -> tuple[Path, Path]:
    return numbered(directory / "trace.jsonl", n), numbered(directory / SPEC_NAME, n)


def claim_run_files(
    directory: Path, spec_text: str, code_record: bytes | None = None
) -> tuple[Path, Path]:
    """Claim the first free ``(trace, spec)`` pair in ``directory`` and write the spec there.

    The claim is the spec's exclusive creation (`write_new`): of runs racing for one pair,
    one gets it and the others move on to the next, so each run's trace and spec are its own.
    The trace path is returned unwritten; the trace sink creates it exclusively. A
    ``code_record`` is written beside the spec as its ``code.N.json`` (`code_beside`).

    Raises:
        FileWriteError (``link``): the directory, or a name in it, is a symbolic link.
        UserError: the directory holds an absurd number of runs.
    """
    if directory.is_symlink():
        raise FileWriteError(
            f"{directory} is a symbolic link; a run is not written through it: remove the link, "
            "or name the real directory with --out",
            path=directory,
            reason="link",
        )
    directory.mkdir(parents=True, exist_ok=True)
    for n in itertools.count():
        if n >= _MAX_RUNS_PER_DIRECTORY:
            raise UserError(f"{directory} holds {n} runs already: pick a new --out directory")
        trace, spec = _pair(directory, n)
        if os.path.lexists(trace) or os.path.lexists(code_beside(trace)):
            continue
        try:
            write_new(spec, spec_text.encode("utf-8"))
        except TargetExistsError:
            continue
        if code_record is not None:
            write_new(code_beside(trace), code_record)
        return trace, spec
    raise AssertionError("unreachable")


def spec_beside(trace_path: Path) -> Path:
    """The spec a run wrote with ``trace_path``: ``trace.N.jsonl`` pairs with ``spec.N.yaml``."""
    name = trace_path.name
    if name.startswith("trace") and name.endswith(".jsonl"):
        return trace_path.with_name(f"spec{name[len('trace') : -len('.jsonl')]}.yaml")
    return trace_path.with_name(SPEC_NAME)


def code_beside(trace_path: Path) -> Path:
    """The code record a run wrote with ``trace_path``: ``trace.N.jsonl`` pairs with ``code.N.json``."""
    spec = spec_beside(trace_path).name
    return trace_path.with_name(f"code{spec[len('spec') : -len('.yaml')]}.json")
