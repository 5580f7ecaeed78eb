"""A bounded queue drained by one background thread: work a run hands off and never waits for.

``offer`` never blocks: an item that finds the queue full is dropped and counted. The thread
calls the handler with each item in order; a handler that raises is counted as a failure, never
raised into the caller. ``close`` gives the thread at most its grace period to finish what is
queued, then counts what is left as dropped: what the caller waits for at the end is bounded,
and what it waits for during its work is nothing. (The live OpenTelemetry exporter of
``twinflow run`` sends spans through one: a collector that is down or slow never slows or
fails the run.)
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from twinflow.trace import UserError

__all__ = ["BackgroundWorker", "WorkerCounts"]

T = TypeVar("T")

_STOP = object()


@dataclass(frozen=True)
class WorkerCounts:
    """What became of the items offered."""

    offered: int
    """Items offered."""
    done: int
    """Items the handler finished."""
    failed: int
    """Items whose handler raised (the first error's text is `BackgroundWorker.first_error`)."""
    dropped: int
    """Items never handled: the queue was full, or still held them when the grace ran out."""


class BackgroundWorker(Generic[T]):
    """Hands each offered item to ``handler`` on one background thread, never blocking."""

    def __init__(self, handler: Callable[[T], None], *, capacity: int = 256) -> None:
        """Start the thread.

        Args:
            handler: Called with each item, in order, on the worker's thread.
            capacity: Items the queue holds; one more is dropped.

        Raises:
            UserError: ``capacity`` is below 1.
        """
        if capacity < 1:
            raise UserError(f"BackgroundWorker(capacity={capacity}): give 1 or more")
        self._handler = handler
        self._queue: queue.Queue[object] = queue.Queue(maxsize=capacity)
        self._lock = threading.Lock()
        self._offered = self._done = self._failed = self._dropped = 0
        self.first_error: str | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._drain, name="twinflow-worker", daemon=True)
        self._thread.start()

    def offer(self, item: T) -> bool:
        """Queue ``item`` unless the queue is full (then it is dropped); never blocks."""
        with self._lock:
            self._offered += 1
            if self._closed:
                self._dropped += 1
                return False
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self._dropped += 1
            return False
        return True

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                self._handler(item)  # type: ignore[arg-type]  # only offer() puts a T here
            except Exception as exc:  # counted, never raised into the run
                with self._lock:
                    self._failed += 1
                    if self.first_error is None:
                        self.first_error = f"{type(exc).__name__}: {exc}"
            else:
                with self._lock:
                    self._done += 1

    def close(self, grace: float) -> WorkerCounts:
        """Stop taking items, give the thread ``grace`` seconds to finish the queue, and count.

        Items still queued (or in the handler) when the grace runs out are dropped; the thread
        is a daemon, so a handler stuck on a slow peer does not keep the process alive.
        """
        with self._lock:
            self._closed = True
        deadline = time.monotonic() + max(grace, 0.0)
        while True:
            try:
                self._queue.put(_STOP, timeout=max(deadline - time.monotonic(), 0.001))
                break
            except queue.Full:
                if time.monotonic() >= deadline:
                    break
        self._thread.join(max(deadline - time.monotonic(), 0.0))
        with self._lock:
            handled = self._done + self._failed
            lost = self._offered - handled - self._dropped
            return WorkerCounts(self._offered, self._done, self._failed, self._dropped + lost)
