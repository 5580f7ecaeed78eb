"""The leaf's own test helpers; small traces come from the workspace's kit, twinflow.trace._testing."""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from twinflow.trace import SignatureError, TraceError, canonical_bytes
from twinflow.trace._format import encode_line


def lines_of(items: list[dict[str, Any]]) -> list[bytes]:
    """The trace lines of already chained events."""
    return [encode_line(canonical_bytes(e))[0] for e in items]


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Make files stop growing at ``limit`` bytes (EFBIG), as a full disk stops them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


@contextlib.contextmanager
def refused(
    reason: str, error: type[TraceError] = SignatureError, match: str | None = None
) -> Iterator[pytest.ExceptionInfo[TraceError]]:
    """Expect ``error`` with ``.reason`` equal to ``reason`` (a failure is a tag, not a class)."""
    with pytest.raises(error, match=match) as caught:
        yield caught
    assert reason == getattr(caught.value, "reason", None)
