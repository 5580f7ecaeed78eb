"""What the machine is: the interpreter, the imported distributions, and files' digests."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
from pathlib import Path

from twinflow.kernel._environment import file_sha256, imported_distributions, interpreter


def test_interpreter_is_what_platform_reports() -> None:
    """Version, implementation and platform string, as the platform module gives them."""
    expected = (platform.python_version(), platform.python_implementation(), platform.platform())
    assert expected == interpreter()


def test_imported_distributions_name_installed_and_editable_ones_with_versions() -> None:
    """pydantic (installed from a wheel) and twinflow-kernel (an editable workspace member)
    appear with their installed versions; the standard library does not."""
    found = imported_distributions()
    assert importlib.metadata.version("pydantic") == found["pydantic"]
    assert importlib.metadata.version("twinflow-kernel") == found["twinflow-kernel"]
    assert "json" not in found
    assert sorted(found) == list(found)


def test_file_sha256_is_the_sha256_of_the_bytes(tmp_path: Path) -> None:
    """The digest of a file is hashlib's of its content."""
    path = tmp_path / "f.bin"
    path.write_bytes(b"weights" * 1000)
    assert hashlib.sha256(b"weights" * 1000).hexdigest() == file_sha256(path)


def test_the_cached_digest_is_kept_per_size_and_mtime(tmp_path: Path) -> None:
    """A file rewritten with the same size and its old mtime restored keeps its cached digest
    (the cache is used), while file_sha256 sees the new bytes; a new size is hashed afresh."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"a" * 64)
    first = file_sha256(path, cached=True)
    info = path.stat()
    with path.open("r+b") as f:  # same inode, same size
        f.write(b"b" * 64)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert first == file_sha256(path, cached=True)
    assert hashlib.sha256(b"b" * 64).hexdigest() == file_sha256(path)
    path.write_bytes(b"c" * 65)
    assert hashlib.sha256(b"c" * 65).hexdigest() == file_sha256(path, cached=True)
