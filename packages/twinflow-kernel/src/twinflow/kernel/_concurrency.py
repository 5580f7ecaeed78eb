"""Bounded concurrency as a port: run a function over items, at most ``limit`` at a time.

Scheduling order is nondeterminism, so it enters through the kernel like time and ids do.
`Executor.map_bounded` yields ``(index, result)`` pairs as items finish, so the caller can
record each result (and show progress) from its own thread, without locks of its own.
`ThreadExecutor` is the real adapter; `SerialExecutor` runs items one by one, in order, and
is the deterministic one. `RayExecutor` (``_ray.py``, the ``ray`` extra) runs each call as a
task on a Ray cluster.

An executor whose calls run in other processes or machines says so with a class attribute
``shares_filesystem = False``: such calls must return their output rather than write the
caller's files. The in-process adapters here share the caller's filesystem (no attribute needed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

from twinflow.kernel._nondeterminism import on_behalf_of_caller
from twinflow.trace import UserError

__all__ = ["MAX_WORKERS", "Executor", "SerialExecutor", "ThreadExecutor"]

T = TypeVar("T")
R = TypeVar("R")


def _check_limit(limit: int) -> None:
    if limit < 1:
        raise UserError(f"concurrency limit must be at least 1, not {limit}")


class Executor(Protocol):
    """Runs a function over items with at most ``limit`` calls in flight."""

    def map_bounded(
        self, fn: Callable[[T], R], items: Iterable[T], limit: int
    ) -> Iterator[tuple[int, R]]:
        """Yield ``(index, fn(item))`` as each call finishes (order is the adapter's).

        The first exception a call raises is raised from the iterator; calls not yet
        started are then not started. An adapter may first yield the results of calls that
        were already in flight (`RayExecutor` does: their work is not thrown away). Closing
        the iterator early waits for the calls in flight and starts no new one.
        """
        ...


class SerialExecutor:
    """Calls ``fn`` on each item in turn, in input order (deterministic; ``limit`` is checked only)."""

    def map_bounded(
        self, fn: Callable[[T], R], items: Iterable[T], limit: int
    ) -> Iterator[tuple[int, R]]:
        """Yield ``(index, fn(item))`` in input order.

        Raises:
            UserError: ``limit`` is below 1.
        """
        _check_limit(limit)
        return ((index, on_behalf_of_caller(fn, item)) for index, item in enumerate(items))


class ThreadExecutor:
    """Runs calls on a pool of ``limit`` threads; yields results in completion order."""

    async def call(self, fn: Callable[[T], R], item: T) -> R:
        """``fn(item)`` on one of the process's worker threads, awaited by the event loop.

        The caller's context variables go with the call. At most `MAX_WORKERS` such calls
        run at once in one process; more wait their turn.
        """
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()

        def run() -> R:
            return context.run(on_behalf_of_caller, fn, item)

        return await loop.run_in_executor(_worker_pool(), run)

    def map_bounded(
        self, fn: Callable[[T], R], items: Iterable[T], limit: int
    ) -> Iterator[tuple[int, R]]:
        """Yield ``(index, fn(item))`` as calls finish, at most ``limit`` in flight.

        Items are taken from ``items`` only as slots free up, so a long or endless
        iterable is never read ahead by more than ``limit``.

        Raises:
            UserError: ``limit`` is below 1.
        """
        _check_limit(limit)
        return self._run(fn, iter(items), limit)

    @staticmethod
    def _run(fn: Callable[[T], R], items: Iterator[T], limit: int) -> Iterator[tuple[int, R]]:
        pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=limit, thread_name_prefix="twinflow"
        )
        pending: dict[concurrent.futures.Future[R], int] = {}
        counter = 0
        try:
            for item in items:
                pending[pool.submit(on_behalf_of_caller, fn, item)] = counter
                counter += 1
                if len(pending) >= limit:
                    break
            while pending:
                done, _ = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    index = pending.pop(future)
                    result = future.result()
                    nxt = next(items, _END)
                    if nxt is not _END:
                        pending[pool.submit(on_behalf_of_caller, fn, nxt)] = counter  # type: ignore[arg-type]  # not _END, so a T
                        counter += 1
                    yield index, result
        finally:
            # Calls in flight cannot be interrupted; wait for them so nothing outlives the
            # iterator, and start nothing new.
            pool.shutdown(wait=True, cancel_futures=True)


_END = object()


MAX_WORKERS = 512
"""`ThreadExecutor.call`s running at once in one process; more wait for a worker thread."""

_workers_lock = threading.Lock()
_workers: concurrent.futures.ThreadPoolExecutor | None = None


def _worker_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's worker threads, started on demand (one per call in flight)."""
    global _workers
    with _workers_lock:
        if _workers is None:
            _workers = concurrent.futures.ThreadPoolExecutor(
                max_workers=MAX_WORKERS, thread_name_prefix="twinflow-worker"
            )
        return _workers
