"""Build small traces by hand (plain JSON events, no agent) for the leaf's tests."""

from __future__ import annotations

import contextlib
import hashlib
import resource
import signal
from collections.abc import Iterator
from typing import Any

from twinflow.trace import GENESIS, canonical_bytes, encode_line

KINDS = ("run_started", "tool_called", "tool_returned", "model_responded", "run_finished")


def events(n: int = 5) -> list[dict[str, Any]]:
    """``n`` chained event objects, the last a ``run_finished``."""
    out: list[dict[str, Any]] = []
    prev = GENESIS
    for seq in range(n):
        kind = "run_finished" if seq == n - 1 else KINDS[seq % (len(KINDS) - 1)]
        event = {
            "at": f"2026-01-01T00:00:{seq % 60:02d}Z",
            "body": {"kind": kind, "n": seq, "text": f"event {seq}", "args": {"a": [1, 2.5]}},
            "prev": prev,
            "seq": seq,
        }
        out.append(event)
        prev = hashlib.sha256(canonical_bytes(event)).hexdigest()
    return out


def lines_of(items: list[dict[str, Any]]) -> list[bytes]:
    """The trace lines of already chained events."""
    return [encode_line(canonical_bytes(e))[0] for e in items]


def trace(n: int = 5) -> bytes:
    """A valid, complete trace of ``n`` events."""
    return b"".join(lines_of(events(n)))


def forged_line(event_bytes: bytes) -> bytes:
    """A line whose digest is recomputed over arbitrary event bytes (a forger's line)."""
    digest = hashlib.sha256(event_bytes).hexdigest().encode()
    return b'{"digest":"' + digest + b'","event":' + event_bytes + b"}\n"


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
