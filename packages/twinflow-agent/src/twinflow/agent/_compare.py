"""Comparing a re-run with a recorded trace, line by line: one mechanism for replay and resume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from twinflow.agent._trace import TraceWriter
from twinflow.agent._verify import Trace
from twinflow.kernel import ReplayDivergenceError
from twinflow.trace import Checkpoint, FsyncPolicy, Limits
from twinflow.trace._format import encode_line
from twinflow.vocab import diff

__all__ = ["ComparingSink", "ComparingWriter", "ReplayDivergenceError", "event_json"]


def event_json(line: bytes) -> Any:
    # A trace line is {"digest": ..., "event": {...}}; compare the events, not the envelopes.
    return json.loads(line)["event"]


# Where a line's event bytes start, and the bytes of its frame around them (the one framing
# function, `encode_line`, lays out every line alike).
_FRAME = len(encode_line(b"", "0" * 64)[0])
_EVENT_AT = _FRAME - len(b"}\n")
_LONGEST_EVENT = Limits().max_line_bytes - _FRAME


class ComparingSink:
    """A trace sink that checks each written line against the recorded event of its seq.

    The record is the events' bytes as the trace verified them (`Trace.encoded`), not framed
    again: the writer frames each line around its event bytes and their sha256, and load
    checked each recorded digest against its bytes, so equal event bytes are equal lines. The
    event is compared in place in the written line.
    """

    def __init__(self, events: Sequence[bytes], digests: Sequence[str] = ()) -> None:
        """Compare with ``events`` (their bytes, as verified), whose digests are ``digests``
        (needed only by `matched`)."""
        self._events = events
        self._digests = digests
        self._count = len(events)
        self.written = 0
        self.divergence: ReplayDivergenceError | None = None

    def matched(self, event: bytes) -> str | None:
        """The recorded digest of the next event if ``event`` is its bytes (it then counts as
        written), else None: the caller frames the line and `write` reports the difference.

        Equal bytes have the digest load verified, so a writer that asks first neither hashes
        nor frames what it re-runs as recorded (`ComparingWriter`).
        """
        seq = self.written
        if self.divergence is None and seq < self._count and event == self._events[seq]:
            self.written = seq + 1
            return self._digests[seq]
        return None

    def write(self, line: bytes) -> None:
        if self.divergence is not None:
            # After the first difference the re-run is off the record; what it writes next
            # (its run_failed, say) is noise, and the first divergence is the one to report.
            return
        seq = self.written
        self.written += 1
        if seq >= self._count:
            actual = event_json(line)
            self.divergence = ReplayDivergenceError(
                f"the re-run wrote event {seq} ({actual['body']['kind']}) but the recorded "
                f"trace ends at {self._count} events",
                seq=seq,
                expected=None,
                actual=actual,
            )
            raise self.divergence
        recorded = self._events[seq]
        if len(line) == _FRAME + len(recorded) and line.startswith(recorded, _EVENT_AT):
            return
        expected, actual = json.loads(recorded), event_json(line)
        difference = diff(expected, actual)
        self.divergence = ReplayDivergenceError(
            f"event {seq} differs: recorded {expected['body']['kind']}, re-run "
            f"{actual['body']['kind']}",
            seq=seq,
            expected=expected,
            actual=actual,
            difference=difference,
        )
        raise self.divergence

    def flush(self, *, durable: bool) -> None:
        del durable  # nothing is written anywhere: the comparison is the output

    def close(self) -> None:
        pass


class ComparingWriter(TraceWriter):
    """The writer of a replay: each event the re-run writes is compared with the recorded one
    by its bytes, before any line is framed.

    An event equal to the recorded one takes the recorded digest (load verified it against
    these bytes), so it is neither hashed nor framed, and the Merkle tree is not grown: the
    checkpoint is the trace's (load computed it). The first event that differs is framed and
    written to the sink like any other, which reports the difference. The lines a plain
    `TraceWriter` would write are the same; this one only skips the work whose result the
    record already holds.
    """

    def __init__(self, sink: ComparingSink, trace: Trace, *, fsync: FsyncPolicy = "step") -> None:
        """Compare with ``trace``, whose events' bytes and digests ``sink`` holds."""
        super().__init__(sink, fsync=fsync)
        self._compare = sink
        self._trace = trace

    def _put(self, event: bytes, kind: str) -> str:
        # An event too long for its line is refused by the framing writer, as in the original run.
        digest = self._compare.matched(event) if len(event) <= _LONGEST_EVENT else None
        return super()._put(event, kind) if digest is None else digest

    def checkpoint(self) -> Checkpoint:
        """The recorded trace's checkpoint of the events written so far.

        Raises:
            ReplayDivergenceError: The re-run diverged: it has no checkpoint of the record.
        """
        if self._compare.divergence is not None:
            raise self._compare.divergence
        return self._trace.checkpoint(self.size)
