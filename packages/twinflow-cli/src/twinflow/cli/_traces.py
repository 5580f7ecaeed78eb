"""The trace and small input files the ``twinflow`` commands read, read one way for all of them.

A file that is not a trace at all is a usage error (exit 2); a trace that is damaged further on
is a failed check (exit 1) that names where. Checkpoint, key and proof files are small: each is
read whole up to a bound, so a huge file named by mistake is refused, not loaded.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinflow import trace as _trace
from twinflow._base._files import refuse_linked
from twinflow._base._open import open_regular, read_regular
from twinflow.cli._errors import CliError
from twinflow.cli._output import CheckFailed
from twinflow.trace import UserError
from twinflow.trace._format import LINE_PREFIX
from twinflow.trace._published import PublishedCheckpoint, read_published_checkpoint

if TYPE_CHECKING:
    # The agent (and pydantic under it) loads only where a command reads typed events, so the
    # trace commands that do not (`verify`, `checkpoint`, `prove`, their `--help`) start fast.
    from twinflow.agent import Trace

__all__ = [
    "MAX_SMALL_FILE",
    "add_checkpoint_keys",
    "check_trace_head",
    "corrupt_payload",
    "load_trace",
    "parse_trace",
    "read_published",
    "read_small_file",
    "read_trace_bytes",
    "squash",
    "vouched",
    "walk_typed",
]

MAX_SMALL_FILE = 1024 * 1024


def check_trace_head(path: Path) -> None:
    """Refuse what is not a trace at all (exit 2), reading only its first bytes.

    A trace that is a symbolic link, or in a directory that is one, is refused as every
    planted link is (`refuse_linked`), whatever the command.

    Raises:
        CliError: the file is empty or does not start with a trace line.
        FileWriteError (``link``): the trace or its directory is a symbolic link.
        OSError: the file cannot be read.
    """
    refuse_linked(path, "the trace")
    with open_regular(path) as f:
        head = f.read(len(LINE_PREFIX))
    if not head:
        raise CliError(f"{path}: the file is empty, not a twinflow trace")
    if head != LINE_PREFIX:
        raise CliError(
            f"{path}: not a twinflow trace (a trace is JSON lines starting with "
            f"{LINE_PREFIX.decode()!r}); check the path"
        )


def read_trace_bytes(path: Path) -> bytes:
    """Read a trace file, refusing what is not a trace at all (exit 2, not a failed check).

    A file that starts like a trace but is damaged further on is returned: verification, not
    this function, reports where and how it was damaged.

    Raises:
        CliError: the file is empty or does not start with a trace line.
        OSError: the file cannot be read.
    """
    check_trace_head(path)
    return read_regular(path)


def corrupt_payload(path: Path, exc: _trace.TraceCorruptError) -> dict[str, Any]:
    """The ``--json`` payload of a trace that does not verify: the file and its problem."""
    problem = exc.report.problem
    return {"trace": str(path), "problem": None if problem is None else problem.to_json()}


def parse_trace(path: Path, data: bytes | Path, keep: Collection[str] = ()) -> Trace:
    """Load a trace (its bytes, or its path); a damaged trace fails the check. ``keep``: the
    body kinds whose typed events load keeps (`Trace.load`).

    Raises:
        CheckFailed: the trace does not load (exit 1, naming ``path``).
    """
    from twinflow.agent import Trace

    try:
        return Trace.load(data, keep=keep)
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{path}: {exc}", corrupt_payload(path, exc)) from None


def walk_typed(path: Path, *, values: bool = False) -> Iterator[_trace.VerifiedEvent]:
    """A trace file's events as they verify and type, streaming: `load_trace`'s checks (the
    leaf's walk with the agent's typed check), event by event, so a reader that stops early
    reads no further and one that goes on holds no more than it keeps.

    Args:
        path: The trace file.
        values: Make each event's ``value`` the verified JSON object the typed check passed
            (the typed event is built, checked and let go) instead of the typed event.

    Raises:
        CliError: the file is empty or does not start with a trace line (exit 2).
        CheckFailed: the trace does not verify up to where it was read (exit 1, naming ``path``).
    """
    from twinflow.agent import typed_event

    def checked(value: dict[str, Any]) -> dict[str, Any]:
        typed_event(value)
        return value

    check_trace_head(path)
    try:
        yield from _trace.walk_trace(path, check=checked if values else typed_event)
    except _trace.TraceCorruptError as exc:
        raise CheckFailed(f"{path}: {exc}", corrupt_payload(path, exc)) from None


def load_trace(path: Path) -> Trace:
    """`parse_trace` of a file, after refusing what is not a trace at all."""
    check_trace_head(path)
    return parse_trace(path, path)


def squash(exc: BaseException) -> str:
    """An error's message as one line of at most 300 characters."""
    return " ".join(str(exc).split())[:300]


def read_small_file(path: Path, what: str) -> bytes:
    """A checkpoint, key or proof file's bytes; ``what`` names it in the error.

    Raises:
        UserError: the file is larger than `MAX_SMALL_FILE`.
        OSError: the file cannot be read.
    """
    data = read_regular(path, MAX_SMALL_FILE)
    if len(data) > MAX_SMALL_FILE:
        raise UserError(f"{path}: a {what} file is at most {MAX_SMALL_FILE} bytes")
    return data


def read_published(
    path: Path, keys: list[Path] | None, origin: str | None = None
) -> PublishedCheckpoint:
    """Read a checkpoint file and check its signatures (`read_published_checkpoint`).

    Raises:
        UserError: Not a checkpoint, or keys that do not fit the file (exit 2).
        CheckFailed: A signature does not verify or is for another origin (exit 1).
    """
    data = read_small_file(path, "checkpoint")
    try:
        return read_published_checkpoint(
            data, [read_small_file(k, "key") for k in keys or ()], where=str(path), origin=origin
        )
    except _trace.SignatureError as exc:
        raise CheckFailed(
            squash(exc),
            {"checkpoint": str(path), "problem": {"kind": "signature", "message": squash(exc)}},
        ) from None


def vouched(published: PublishedCheckpoint) -> str:
    """Who vouches for the checkpoint: ``signed by KEY...``, or that nobody signed it."""
    if published.signed_by:
        return f"signed by {', '.join(published.signed_by)}"
    return "checkpoint (unsigned)"


def add_checkpoint_keys(p: argparse.ArgumentParser) -> None:
    """--key and --origin: how a signed checkpoint note given to a command is checked."""
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        metavar="VKEY",
        help="a verifier key file (from `twinflow keygen`) that must have signed the C2SP "
        "checkpoint note; repeat for cosigners (every key given must have signed)",
    )
    p.add_argument(
        "--origin",
        help="the log the signed checkpoint must be for (default: the first --key's name, what "
        "`checkpoint --sign` writes); a note signed for another log is refused",
    )
