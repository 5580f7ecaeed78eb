"""A pool shared by many runs keeps as many idle connections per origin as it is told to."""

from __future__ import annotations

from typing import Any

from twinflow.kernel._pool import ConnectionPool

ORIGIN = ("http", "127.0.0.1", 8080)


class FakeConnection:
    """Stands for a connection: records whether it was closed."""

    def __init__(self) -> None:
        """Start open."""
        self.closed = False

    def close(self) -> None:
        """Close it."""
        self.closed = True


class Trusting(ConnectionPool):
    """A pool that takes every kept connection to be usable (no socket to look at)."""

    def usable(self, connection: Any) -> bool:
        """Every kept connection is usable."""
        return True


def test_keep_bounds_the_idle_connections_per_origin() -> None:
    """Of three connections given back to a pool keeping two, the third is closed."""
    pool = Trusting(keep=2)
    given = [FakeConnection() for _ in range(3)]
    for connection in given:
        pool.give(ORIGIN, connection)  # type: ignore[arg-type]  # a stand-in connection
    taken = [pool.take(ORIGIN), pool.take(ORIGIN), pool.take(ORIGIN)]
    assert ([False, False, True], [given[1], given[0], None]) == (
        [c.closed for c in given],
        taken,
    )


def test_the_default_pool_keeps_one() -> None:
    """By default one idle connection per origin is kept, as before."""
    pool = Trusting()
    first, second = FakeConnection(), FakeConnection()
    pool.give(ORIGIN, first)  # type: ignore[arg-type]  # a stand-in connection
    pool.give(ORIGIN, second)  # type: ignore[arg-type]  # a stand-in connection
    assert (True, first) == (second.closed, pool.take(ORIGIN))
