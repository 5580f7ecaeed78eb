"""Trace files: exclusive creation without following links, disk-full errors, repair."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tracekit import file_size_limit

from twinflow._base._errors import FileWriteError, TargetExistsError
from twinflow.trace import FileTraceSink, verify_trace
from twinflow.trace._repair import repair_trace
from twinflow.trace._testing import small_trace as trace


def test_a_planted_symlink_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    """A link at the trace path (to a file, or dangling) is refused; nothing is written through it."""
    target = tmp_path / "precious.txt"
    target.write_bytes(b"keep me")
    link = tmp_path / "trace.jsonl"
    link.symlink_to(target)
    with pytest.raises(FileWriteError, match="symbolic link") as caught:
        FileTraceSink(link)
    dangling = tmp_path / "other.jsonl"
    dangling.symlink_to(tmp_path / "not-yet")
    with pytest.raises(FileWriteError, match="symbolic link"):
        FileTraceSink(dangling)
    assert "symbolic link" in str(caught.value)
    assert (b"keep me", False) == (target.read_bytes(), (tmp_path / "not-yet").exists())


def test_an_existing_file_is_refused(tmp_path: Path) -> None:
    """Traces are never overwritten."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"old")
    with pytest.raises(TargetExistsError):
        FileTraceSink(path)
    assert b"old" == path.read_bytes()


def test_a_full_disk_names_the_file_and_repair_succeeds_once_space_is_free(tmp_path: Path) -> None:
    """A failed write names the trace; repair refuses cleanly while full, then succeeds."""
    path = tmp_path / "t.jsonl"
    data = trace(12)
    lines = data.splitlines(keepends=True)
    limit = len(b"".join(lines[:5])) + 40  # room for 5 lines and a torn piece of the 6th
    sink = FileTraceSink(path)
    with file_size_limit(limit):
        with pytest.raises(FileWriteError) as caught:
            for line in lines:
                sink.write(line)
                sink.flush(durable=True)
        with pytest.raises(FileWriteError):
            sink.close()
        torn = path.read_bytes()
        with file_size_limit(10), pytest.raises(FileWriteError) as repair_error:
            repair_trace(path)
        assert [] == sorted(p.name for p in tmp_path.iterdir() if ".partial" in p.name)
    assert str(path) in str(caught.value)
    assert ".partial" in str(repair_error.value)
    assert (data[:limit], torn) == (torn, path.read_bytes())
    result = repair_trace(path)
    assert (40, b"".join(lines[:5])) == (result.moved_bytes, path.read_bytes())
    assert verify_trace(path, require_complete=False).ok


def test_repair_moves_a_torn_line_aside_and_keeps_its_bytes(tmp_path: Path) -> None:
    """The torn bytes go to <trace>.partial, the trace ends at its last newline."""
    path = tmp_path / "t.jsonl"
    data = trace(4)[:-7]
    path.write_bytes(data)
    result = repair_trace(path)
    assert result.moved_to is not None
    assert data == path.read_bytes() + Path(result.moved_to).read_bytes()
    assert (None, 0) == (repair_trace(path).moved_to, repair_trace(path).moved_bytes)


def test_repair_does_not_write_through_a_planted_side_file_link(tmp_path: Path) -> None:
    """A link planted at <trace>.partial is skipped, not followed."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace(4)[:-7])
    target = tmp_path / "precious"
    target.write_bytes(b"keep")
    (tmp_path / "t.jsonl.partial").symlink_to(target)
    result = repair_trace(path)
    assert (str(tmp_path / "t.jsonl.partial.1"), b"keep") == (result.moved_to, target.read_bytes())


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count ``os.fsync`` calls from here on (each call still syncs); returns the tally list."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def test_closing_the_file_sink_writes_its_lines_and_never_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Close hands buffered lines to the OS without an fsync; durability is asked for explicitly."""
    path = tmp_path / "t.jsonl"
    data = trace(3)
    fsyncs = count_fsyncs(monkeypatch)
    sink = FileTraceSink(path)
    for line in data.splitlines(keepends=True):
        sink.write(line)
    sink.close()
    sink.close()
    assert (data, 0) == (path.read_bytes(), len(fsyncs))


def test_a_durable_flush_syncs_the_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flush(durable=True)`` is the one way the file sink syncs."""
    fsyncs = count_fsyncs(monkeypatch)
    sink = FileTraceSink(tmp_path / "t.jsonl")
    sink.write(trace(1))
    sink.flush(durable=True)
    sink.close()
    assert 1 == len(fsyncs)


def test_a_trace_being_written_cannot_be_reopened_until_closed(tmp_path: Path) -> None:
    """A file sink holds the trace's writer lock: append_to refuses while it is open, not after."""
    path = tmp_path / "trace.jsonl"
    writing = FileTraceSink(path)
    writing.write(b"x\n")
    with pytest.raises(FileWriteError, match="being written by another process"):
        FileTraceSink.append_to(path)
    writing.close()
    again = FileTraceSink.append_to(path)
    again.write(b"y\n")
    again.close()
    assert b"x\ny\n" == path.read_bytes()


def test_append_to_refuses_a_link(tmp_path: Path) -> None:
    """Reopening a trace to continue it never follows a planted link."""
    target = tmp_path / "precious.txt"
    target.write_bytes(b"keep me")
    (tmp_path / "trace.jsonl").symlink_to(target)
    with pytest.raises(OSError):
        FileTraceSink.append_to(tmp_path / "trace.jsonl")
    assert b"keep me" == target.read_bytes()
