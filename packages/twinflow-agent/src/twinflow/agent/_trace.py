"""Writing the trace: typed events encoded by the trace leaf, hash-chained over a Merkle tree.

The line format, the encoder, the Merkle tree and the checkpoint values are `twinflow.trace`'s
(see `twinflow.trace._format.encode_line`); this module turns the agent's typed events into those lines.
An event's bytes are `twinflow.agent._encode.event_bytes` of the `TraceEvent` (its JSON-mode
dump through the one encoder; the writer takes `envelope_bytes`, equal to it). Appending an
event costs the encoding of that event, two hashes, one amortised node hash and a buffered
write, whatever the length of the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from twinflow._base._untrusted import has_secrets, scrub_value
from twinflow.agent._encode import envelope_bytes, event_bytes
from twinflow.agent._events import GENESIS, EventBody, TraceEvent
from twinflow.trace import Checkpoint, FsyncPolicy, Limits, MerkleTree, TraceFormatError, TraceSink
from twinflow.trace._format import encode_line as _frame
from twinflow.trace._merkle import leaf_hash

__all__ = ["TraceWriter", "encode_event"]

_MAX_LINE_BYTES = Limits().max_line_bytes


def encode_event(event: TraceEvent) -> tuple[bytes, str]:
    """Encode an event as a trace line.

    Args:
        event: The event.

    Returns:
        The line (with its newline) and the event's hex digest.
    """
    return _frame(event_bytes(event))


def _scrubbed(event: TraceEvent) -> TraceEvent | None:
    """The event with every secret in its body replaced by `twinflow._base._untrusted.REDACTED`
    (`scrub_value`), or None when its body holds none. Its ``seq``, ``prev`` and ``at`` are the
    writer's own (a number, a digest, a clock reading) and stay: a short secret that happens to
    be in a digest's hex is no leak, and scrubbing it there would break the chain."""
    dumped = event.model_dump(mode="json")
    body = scrub_value(dumped["body"])
    if body == dumped["body"]:
        return None
    dumped["body"] = body
    return TraceEvent.model_validate(dumped)


class TraceWriter:
    """Appends events to a sink: numbers them, chains them, grows the Merkle tree, syncs."""

    def __init__(self, sink: TraceSink, *, fsync: FsyncPolicy = "step") -> None:
        """Start an empty trace.

        Args:
            sink: Where lines go.
            fsync: When lines are made durable (see `FsyncPolicy`).
        """
        self.sink = sink
        self.fsync: FsyncPolicy = fsync
        self._tree = MerkleTree()
        self._head = GENESIS
        self._size = 0
        self._unsynced = 0  # lines written since the last durable flush

    @classmethod
    def continuing(
        cls, sink: TraceSink, digests: Sequence[str], *, fsync: FsyncPolicy = "step"
    ) -> TraceWriter:
        """A writer that appends to a trace already holding events with ``digests``.

        Args:
            sink: Where the new lines go (after the existing ones: `FileTraceSink.append_to`).
            digests: The existing events' hex digests, in order (`Trace.digests`).
            fsync: When lines are made durable.

        Returns:
            The writer; its next event has sequence number ``len(digests)``.
        """
        writer = cls(sink, fsync=fsync)
        for hexdigest in digests:
            writer._tree.append_hash(leaf_hash(bytes.fromhex(hexdigest)))
            writer._head = hexdigest
        writer._size = len(digests)
        return writer

    @property
    def size(self) -> int:
        """Events written."""
        return self._size

    @property
    def head(self) -> str:
        """Hex digest of the last event (`GENESIS` when empty)."""
        return self._head

    def append(self, at: datetime, body: EventBody) -> str:
        """Write one event.

        Args:
            at: The clock reading for the event (from the `Clock` port).
            body: What happened.

        Returns:
            The event's hex digest.

        Raises:
            AgentConfigError: ``at`` is not an aware datetime, or ``body`` is not an event.
            FileWriteError: The sink could not write the line (disk full, ...).
            TraceFormatError (``event_too_large``): The line would be longer than readers accept
                (`Limits.max_line_bytes`); nothing was written.
        """
        event = envelope_bytes(self._size, self._head, at, body)
        if has_secrets():
            # A key the process read reached an event (a server echoed it in an error, the
            # model in its reply, split across two text parts a reader joins): the event is
            # written with it replaced by the marker.
            scrubbed = _scrubbed(TraceEvent(seq=self._size, prev=self._head, at=at, body=body))
            if scrubbed is not None:
                event = event_bytes(scrubbed)
        hexdigest = self._put(event, body.kind)
        self._size += 1
        self._head = hexdigest
        self._unsynced += 1
        if self.fsync == "event":
            self._sync()
        return hexdigest

    def _put(self, event: bytes, kind: str) -> str:
        """Frame an event's bytes as its line, write it and add it to the tree; its digest."""
        line, hexdigest = _frame(event)
        if len(line) > _MAX_LINE_BYTES:
            raise TraceFormatError(
                f"a {kind} event of {len(line)} bytes is longer than the "
                f"{_MAX_LINE_BYTES} bytes a trace reader accepts; it was not written",
                reason="event_too_large",
            )
        self.sink.write(line)
        self._tree.append_hash(leaf_hash(bytes.fromhex(hexdigest)))
        return hexdigest

    def _sync(self) -> None:
        self.sink.flush(durable=True)
        self._unsynced = 0

    def before_effect(self) -> None:
        """Hand buffered lines to the operating system before a side effect (a tool runs).

        A process that dies inside the tool (SIGKILL, out of memory) then leaves its
        ``tool_called`` in the file, and resume refuses to run that call again unless the
        tool is declared safe to repeat. The ``"event"`` policy has synced every line
        already; under ``"step"`` the lines reach the disk itself at the step's end.
        """
        if self.fsync != "event":
            self.sink.flush(durable=False)

    def end_step(self) -> None:
        """Mark a step boundary: flush, and sync under the ``step`` policy."""
        if self.fsync == "step":
            self._sync()
        elif self.fsync == "none":
            self.sink.flush(durable=False)

    def checkpoint(self) -> Checkpoint:
        """The current head: size, Merkle root and the last event's digest."""
        return Checkpoint(size=self._size, root=self._tree.root().hex(), head=self._head)

    def close(self) -> None:
        """Sync lines written since the last step end (unless the policy is ``"none"``), close.

        A run ends with a step end, so closing after it costs no fsync; the sink itself never
        syncs when it closes, so ``"none"`` means no fsync at all.
        """
        try:
            if self._unsynced and self.fsync != "none":
                self._sync()
        finally:
            self.sink.close()
