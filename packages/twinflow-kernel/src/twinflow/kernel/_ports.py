"""The ports through which all nondeterminism enters twinflow.

Each is a small Protocol; the real adapters and the deterministic ones live beside each other in
this package, and callers receive them injected, never constructing them implicitly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

from twinflow.vocab import CallId, JsonValue, RunId

if TYPE_CHECKING:
    from twinflow.kernel._launcher import ServerProcess


class Closing(ABC):
    """Base of what a ``with`` block uses and ``close()`` releases when the block exits.

    The one place the context-manager methods are written: a subclass says only what
    ``close()`` does (one that must not close with an exception in flight overrides
    ``__exit__``).
    """

    __slots__ = ()

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds; it must not be used afterwards."""

    def __enter__(self) -> Self:
        """Use the object in a ``with`` block; it is closed when the block exits."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close, however the block exits."""
        self.close()


class Clock(Protocol):
    """Where time comes from."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Return seconds on a clock that never goes backwards (for durations only)."""
        ...


class Ids(Protocol):
    """Where identifiers come from."""

    def run_id(self) -> RunId:
        """Return a new run id."""
        ...

    def call_id(self) -> CallId:
        """Return a new tool-call id."""
        ...


class Transport(Protocol):
    """Sends one JSON request and returns the JSON answer."""

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """POST `body` as JSON to `url` and return the decoded JSON answer.

        Args:
            url: The absolute http(s) URL.
            body: The JSON request body.
            timeout: Seconds allowed for the whole exchange.

        Returns:
            The decoded JSON response body.

        Raises:
            TransportError: One of its subclasses, naming the URL; never retried.
        """
        ...

    def close(self) -> None:
        """Release what the transport holds; it must not be used afterwards."""
        ...


class StreamingTransport(Transport, Protocol):
    """A transport that can also deliver an answer as it arrives (SSE, NDJSON)."""

    def post_stream(
        self, url: str, body: JsonValue, *, timeout: float, idle_timeout: float | None = None
    ) -> Iterator[bytes]:
        """POST `body` as JSON to `url` and yield the answer's body bytes as they arrive.

        Args:
            url: The absolute http(s) URL.
            body: The JSON request body.
            timeout: Seconds allowed for the whole exchange.
            idle_timeout: Seconds allowed between two chunks; the whole `timeout` when None.

        Yields:
            Non-empty chunks of the body, in order; their boundaries carry no meaning.

        Raises:
            TransportError: One of its subclasses, naming the URL; never retried.
        """
        ...


class Launcher(Protocol):
    """Starts a local server process and waits until it answers."""

    def launch(
        self, command: Sequence[str], *, health_url: str, deadline: float, log_path: Path
    ) -> ServerProcess:
        """Start `command`, wait for `health_url` to answer 200, and return the running process.

        Args:
            command: The program and its arguments.
            health_url: A loopback URL that answers 200 to GET once the server is ready.
            deadline: Seconds to wait for the server to become healthy.
            log_path: File that receives the server's stdout and stderr.

        Returns:
            The running server, a context manager that stops it (and its children) on exit.

        Raises:
            LaunchError: The server exited or did not become healthy before the deadline;
                it has been stopped.
        """
        ...
