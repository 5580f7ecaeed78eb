"""The background worker: a bounded queue that never blocks its caller, drops counted."""

from __future__ import annotations

import threading

import pytest

from twinflow.kernel._worker import BackgroundWorker, WorkerCounts
from twinflow.trace import UserError


def test_a_full_queue_drops_and_counts_without_blocking() -> None:
    """Capacity 1 with the handler busy: the third item is dropped, the others handled."""
    started, release = threading.Event(), threading.Event()
    handled: list[int] = []

    def handler(item: int) -> None:
        started.set()
        release.wait(30)
        handled.append(item)

    worker: BackgroundWorker[int] = BackgroundWorker(handler, capacity=1)
    first = worker.offer(1)
    started.wait(30)
    offers = (first, worker.offer(2), worker.offer(3))
    release.set()
    counts = worker.close(30)
    assert ((True, True, False), WorkerCounts(3, 2, 0, 1), [1, 2]) == (offers, counts, handled)


def test_a_handler_that_raises_is_counted_never_raised() -> None:
    """Each failure is counted and the first one's text kept; later items still run."""
    handled: list[int] = []

    def handler(item: int) -> None:
        if item % 2:
            raise ConnectionError(f"collector down for {item}")
        handled.append(item)

    worker: BackgroundWorker[int] = BackgroundWorker(handler, capacity=8)
    for item in range(4):
        worker.offer(item)
    counts = worker.close(30)
    expected = (WorkerCounts(4, 2, 2, 0), "ConnectionError: collector down for 1", [0, 2])
    assert expected == (counts, worker.first_error, handled)


def test_close_gives_a_stuck_handler_its_grace_only() -> None:
    """A handler that never returns: close returns after the grace, the items counted lost."""
    started, release = threading.Event(), threading.Event()

    def handler(item: int) -> None:
        started.set()
        release.wait(30)

    worker: BackgroundWorker[int] = BackgroundWorker(handler, capacity=4)
    worker.offer(1)
    started.wait(30)
    worker.offer(2)
    counts = worker.close(0.05)
    release.set()
    assert (WorkerCounts(2, 0, 0, 2), False) == (counts, worker.offer(3))


def test_a_capacity_below_one_is_a_usage_error() -> None:
    """capacity=0 cannot hold an item: refused with a typed error."""
    with pytest.raises(UserError):
        BackgroundWorker(lambda item: None, capacity=0)
