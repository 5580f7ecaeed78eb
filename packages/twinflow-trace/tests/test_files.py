"""Safe writes: exclusive creation, whole replacement, planted links refused, races have one winner;
safe reads of a path a received file names: inside its directory, no link, a regular file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tracekit import file_size_limit

from twinflow._base._errors import FileWriteError, TargetExistsError, UnsafePathError
from twinflow._base._files import (
    create_exclusive,
    make_directory,
    read_inside,
    write_new,
    write_replace,
)


def test_write_new_creates_the_file_whole(tmp_path: Path) -> None:
    """The file appears with its content and no temporary file is left beside it."""
    write_new(tmp_path / "spec.yaml", b"prompt: hi\n")
    assert ["spec.yaml"] == sorted(os.listdir(tmp_path))
    assert b"prompt: hi\n" == (tmp_path / "spec.yaml").read_bytes()


def test_write_new_refuses_an_existing_file_and_keeps_it(tmp_path: Path) -> None:
    """A taken name is a TargetExistsError (a FileExistsError) and the old content stays."""
    target = tmp_path / "trace.jsonl"
    target.write_bytes(b"old")
    with pytest.raises(TargetExistsError) as caught:
        write_new(target, b"new")
    assert isinstance(caught.value, FileExistsError)
    assert b"old" == target.read_bytes()
    assert ["trace.jsonl"] == sorted(os.listdir(tmp_path))


@pytest.mark.parametrize("write", [write_new, write_replace])
@pytest.mark.parametrize("dangling", [False, True])
def test_a_planted_link_is_refused_and_its_target_untouched(
    tmp_path: Path, write: object, dangling: bool
) -> None:
    """A symlink at the name is refused (dangling or not); what it points at is not created or changed."""
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_bytes(b"precious")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "spec.yaml").symlink_to(victim)
    assert callable(write)
    with pytest.raises(FileWriteError, match="symbolic link") as caught:
        write(tmp_path / "run" / "spec.yaml", b"attacker-controlled")
    assert str(tmp_path / "run" / "spec.yaml") == caught.value.filename
    assert (None if dangling else b"precious") == (victim.read_bytes() if victim.exists() else None)
    assert ["spec.yaml"] == os.listdir(tmp_path / "run")


@pytest.mark.parametrize("write", [write_new, write_replace])
def test_a_directory_that_is_a_link_is_refused(tmp_path: Path, write: object) -> None:
    """A run directory's subdirectory swapped for a link is not written through."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "cases").symlink_to(elsewhere, target_is_directory=True)
    assert callable(write)
    with pytest.raises(FileWriteError, match="symbolic link"):
        write(tmp_path / "cases" / "a@1.json", b"{}")
    assert [] == os.listdir(elsewhere)


def test_create_exclusive_refuses_a_directory_that_is_a_link(tmp_path: Path) -> None:
    """A new file (a trace sink's) is not created through a folder swapped for a link."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "judgements").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(FileWriteError, match="symbolic link"):
        create_exclusive(tmp_path / "judgements" / "a@1.0.jsonl", "trace file")
    assert [] == os.listdir(elsewhere)


def test_make_directory_makes_a_folder_or_keeps_one(tmp_path: Path) -> None:
    """A missing folder is created; an existing one is kept as it is."""
    make_directory(tmp_path / "traces")
    (tmp_path / "traces" / "a.jsonl").write_bytes(b"x")
    make_directory(tmp_path / "traces")
    assert ["a.jsonl"] == os.listdir(tmp_path / "traces")


@pytest.mark.parametrize("dangling", [False, True])
def test_make_directory_refuses_a_link_to_a_directory(tmp_path: Path, dangling: bool) -> None:
    """A folder name that is a link (to a directory, or dangling) is refused, nothing created."""
    elsewhere = tmp_path / "elsewhere"
    if not dangling:
        elsewhere.mkdir()
    (tmp_path / "rejudged").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(FileWriteError, match="symbolic link") as caught:
        make_directory(tmp_path / "rejudged")
    assert (1, not dangling) == (len(str(caught.value).splitlines()), elsewhere.exists())


def test_make_directory_refuses_a_file_at_the_name(tmp_path: Path) -> None:
    """A regular file where the folder should be is TargetExistsError, the file kept."""
    (tmp_path / "cases").write_bytes(b"x")
    with pytest.raises(TargetExistsError):
        make_directory(tmp_path / "cases")
    assert b"x" == (tmp_path / "cases").read_bytes()


def test_write_replace_replaces_a_regular_file_whole(tmp_path: Path) -> None:
    """The new content takes the name; no temporary file is left."""
    target = tmp_path / "results.json"
    target.write_bytes(b"old")
    write_replace(target, b"new", durable=False)
    assert b"new" == target.read_bytes()
    assert ["results.json"] == os.listdir(tmp_path)


def test_a_planted_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """The old fixed temporary name (.NAME.tmp) planted as a link does not redirect the write."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    (tmp_path / ".run.json.tmp").symlink_to(victim)
    write_replace(tmp_path / "run.json", b"{}")
    assert b"precious" == victim.read_bytes()
    assert b"{}" == (tmp_path / "run.json").read_bytes()


def test_a_failed_write_names_the_file(tmp_path: Path) -> None:
    """A write into a directory that cannot be written is a FileWriteError naming the file."""
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(FileWriteError) as caught:
            write_new(locked / "spec.yaml", b"x")
    finally:
        locked.chmod(0o700)
    assert str(locked / "spec.yaml") in str(caught.value)


def test_a_write_past_the_file_size_limit_names_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    """A write the system refuses part way (here RLIMIT_FSIZE, as a full disk would) names the file."""
    with file_size_limit(4096), pytest.raises(FileWriteError) as caught:
        write_new(tmp_path / "big.json", b"x" * 100_000)
    assert str(tmp_path / "big.json") == caught.value.filename
    assert str(caught.value).startswith(f"{tmp_path / 'big.json'}: cannot write it")
    assert [] == os.listdir(tmp_path)


def _received(tmp_path: Path) -> tuple[Path, Path]:
    """A received directory holding ``traces/a.jsonl``, and a secret file outside it."""
    received = tmp_path / "received"
    (received / "traces").mkdir(parents=True)
    (received / "traces" / "a.jsonl").write_bytes(b"trace\n")
    secret = tmp_path / "secret"
    secret.write_bytes(b"SECRET\n")
    return received, secret


def test_read_inside_reads_a_plain_relative_path(tmp_path: Path) -> None:
    """A relative path of plain components inside the directory is read as it is."""
    received, _ = _received(tmp_path)
    assert b"trace\n" == read_inside(received, "traces/a.jsonl")


@pytest.mark.parametrize(
    "named",
    [
        "SECRET_ABS",
        "../secret",
        "traces/../../secret",
        "traces/../traces/a.jsonl",
        "./traces/a.jsonl",
        "traces//a.jsonl",
        "traces/a.jsonl/",
        "",
        "traces/a\0.jsonl",
        "x" * 5000,
        7,
        None,
    ],
)
def test_read_inside_refuses_a_path_that_could_leave(tmp_path: Path, named: object) -> None:
    """Absolute, '..', '.', empty components, NUL, overlong and non-string paths are refused."""
    received, secret = _received(tmp_path)
    named = str(secret) if named == "SECRET_ABS" else named
    with pytest.raises(UnsafePathError) as info:
        read_inside(received, named, what="results.json")
    assert "results.json" in str(info.value) and "\n" not in str(info.value)
    assert str(received) == info.value.directory


@pytest.mark.parametrize("where", ["file", "directory", "dangling", "fifo", "deep-directory"])
def test_read_inside_refuses_a_link_or_a_non_file_at_any_component(
    tmp_path: Path, where: str
) -> None:
    """A symbolic link at the file or any directory component, or a FIFO, is refused unread."""
    received, secret = _received(tmp_path)
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "a.jsonl").symlink_to(secret)
    (outside / "deeper" / "a.jsonl").write_bytes(b"SECRET\n")
    named = "traces/a.jsonl"
    if where == "file":
        (received / "traces" / "b.jsonl").symlink_to(secret)
        named = "traces/b.jsonl"
    elif where == "directory":
        (received / "linked").symlink_to(outside)
        named = "linked/a.jsonl"
    elif where == "dangling":
        (received / "traces" / "c.jsonl").symlink_to(tmp_path / "nowhere")
        named = "traces/c.jsonl"
    elif where == "fifo":
        os.mkfifo(received / "traces" / "f.jsonl")
        named = "traces/f.jsonl"
    else:
        (received / "traces" / "sub").symlink_to(outside)
        named = "traces/sub/deeper/a.jsonl"
    with pytest.raises(UnsafePathError) as info:
        read_inside(received, named)
    assert named == info.value.path


def test_read_inside_reports_a_missing_file_as_not_found(tmp_path: Path) -> None:
    """A missing file is FileNotFoundError (the caller decides what missing means), not a refusal."""
    received, _ = _received(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_inside(received, "traces/none.jsonl")
