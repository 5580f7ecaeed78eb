"""A FIFO or a device named as input is refused at once, by every reader of a path.

A FIFO opened for reading waits for a writer and a device reads forever: each command below
would hang or run out of memory if it opened the path the ordinary way. Each runs as a real
process with a safety timeout far above what a refusal takes; it must exit 2 with one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from twinflow._base._errors import NotRegularFileError
from twinflow._base._open import open_regular
from twinflow.kernel._process import ProcessResult, run_process

COMMANDS = (
    ("verify", "{p}"),
    ("verify", "--json", "{p}"),
    ("checkpoint", "{p}"),
    ("prove", "{p}", "--seq", "0", "--origin", "example.org/lab"),
    ("prove", "--check", "{p}"),
    ("diff", "{p}", "{p}"),
    ("show", "{p}"),
    ("show", "{p}", "--html", "page.html"),
    ("replay", "{p}"),
    ("run", "{p}"),
    ("eval", "run", "{p}", "--spec", "{p}", "--out", "out"),
)


def twinflow(args: tuple[str, ...], cwd: Path, module: str = "twinflow.cli") -> ProcessResult:
    """The real command, killed (and so failing the test) if it hangs for a minute."""
    return run_process([sys.executable, "-m", module, *args], cwd=cwd, timeout=60)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A named pipe nobody writes to."""
    path = tmp_path / "trace.jsonl"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_fifo_named_as_input_is_refused_without_blocking(
    fifo: Path, args: tuple[str, ...]
) -> None:
    """Each command given a FIFO exits 2 at once with one line naming it."""
    result = twinflow(tuple(a.format(p=fifo) for a in args), fifo.parent)
    assert 2 == result.returncode, result.stderr
    assert 1 == len(result.stderr.strip().splitlines()), result.stderr
    assert "FIFO" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("verify", "{p}"),
        ("prove-check", "{p}", "--key", "{p}"),
        ("attest-check", "{p}", "--key", "{p}"),
    ],
)
def test_the_stdlib_leaf_refuses_a_fifo_too(fifo: Path, args: tuple[str, ...]) -> None:
    """python -m twinflow.trace: a FIFO is refused, not waited on, in one line naming the file."""
    argv = tuple(a.format(p=fifo) for a in args)
    result = twinflow(argv, fifo.parent, module="twinflow.trace")
    assert 2 == result.returncode, result.stderr
    assert [f"twinflow-trace: {fifo}: is a FIFO"] == [
        line[: len(f"twinflow-trace: {fifo}: is a FIFO")] for line in result.stderr.splitlines()
    ]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_device_named_as_a_trace_or_spec_is_refused(tmp_path: Path, device: str) -> None:
    """A character device as a trace or a spec: exit 2, one line, nothing read from it."""
    for args in (("verify", device), ("run", device)):
        result = twinflow(args, tmp_path)
        assert (2, True) == (result.returncode, "device" in result.stderr), result.stderr


def test_a_fifo_as_a_checkpoint_or_key_is_refused(fifo: Path, tmp_path: Path) -> None:
    """--checkpoint and --key files go through the same reader."""
    result = twinflow(("verify", "x.jsonl", "--checkpoint", str(fifo)), tmp_path)
    assert 2 == result.returncode, result.stderr


def test_open_regular_refuses_each_kind_without_blocking(fifo: Path) -> None:
    """The one reader: a FIFO and a device raise NotRegularFileError (an OSError and UserError)."""
    for path in (str(fifo), "/dev/zero"):
        with pytest.raises(NotRegularFileError) as caught:
            open_regular(path)
        assert path == caught.value.filename
    with pytest.raises(IsADirectoryError):
        open_regular(fifo.parent)
