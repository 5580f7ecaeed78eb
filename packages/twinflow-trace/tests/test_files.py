"""Safe writes: exclusive creation, whole replacement, planted links refused, races have one winner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tracekit import file_size_limit

from twinflow.trace import (
    FileWriteError,
    PlantedLinkError,
    TargetExistsError,
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
    with pytest.raises(PlantedLinkError) as caught:
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
    with pytest.raises(PlantedLinkError):
        write(tmp_path / "cases" / "a@1.json", b"{}")
    assert [] == os.listdir(elsewhere)


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
