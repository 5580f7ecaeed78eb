"""Comparing a re-run with a recorded trace, line by line: one mechanism for replay and resume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from twinflow.agent._errors import AgentError
from twinflow.kernel import ReplayDivergenceError as KernelReplayDivergenceError
from twinflow.trace import encode_line
from twinflow.vocab import Difference, diff

__all__ = ["ComparingSink", "ReplayDivergenceError", "event_json"]


class ReplayDivergenceError(AgentError, KernelReplayDivergenceError):
    """The re-run produced an event that differs from the recorded one (or one too many or few).

    Also the kernel's `ReplayDivergenceError` (the one replay-divergence error), with the same
    argument order: the message first, the fields by keyword.

    Attributes:
        seq: The sequence number of the first differing event.
        expected: The recorded event as JSON (None if the re-run wrote an extra event).
        actual: The re-run's event as JSON (None if a recorded event was never produced).
        difference: The structural difference between the two, when both exist.
    """

    def __init__(
        self,
        message: str,
        *,
        seq: int,
        expected: Any,
        actual: Any,
        difference: Difference | None = None,
    ) -> None:
        """Create the error.

        Args:
            message: Which event diverged and how.
            seq: The sequence number of the first differing event.
            expected: The recorded event as JSON, or None.
            actual: The re-run's event as JSON, or None.
            difference: The structural difference, when both events exist.
        """
        super().__init__(message, difference=difference)
        self.seq = seq
        self.expected = expected
        self.actual = actual


def event_json(line: bytes) -> Any:
    # A trace line is {"digest": ..., "event": {...}}; compare the events, not the envelopes.
    return json.loads(line)["event"]


# Where a line's event bytes start, and the bytes of its frame around them (the one framing
# function, `encode_line`, lays out every line alike).
_FRAME = len(encode_line(b"", "0" * 64)[0])
_EVENT_AT = _FRAME - len(b"}\n")


class ComparingSink:
    """A trace sink that checks each written line against the recorded event of its seq.

    The record is the events' bytes as the trace verified them (`Trace.encoded`), not framed
    again: the writer frames each line around its event bytes and their sha256, and load
    checked each recorded digest against its bytes, so equal event bytes are equal lines. The
    event is compared in place in the written line.
    """

    def __init__(self, events: Sequence[bytes]) -> None:
        self._events = events
        self._count = len(events)
        self.written = 0
        self.divergence: ReplayDivergenceError | None = None

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
