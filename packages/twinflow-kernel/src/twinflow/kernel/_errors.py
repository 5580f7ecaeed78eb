"""The kernel's error tree, under the one twinflow root; drawn in the package docstring.

Every message names where (the URL, the command or the server), what went wrong, and what to
do. A family of failures is one class with a `reason` field, not a class per failure: catch
the class, and look at `reason` when the kind of failure matters.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Literal, Self

from twinflow.trace import TwinflowError

if TYPE_CHECKING:
    from twinflow.vocab import Difference

TransportReason = Literal["connect", "timeout", "status", "decode", "too_large", "blocked"]
"""Why a request failed: the connection (refused, DNS, TLS, reset; never retried), no complete
answer within the timeout, a status >= 400 or a redirect not followed, an answer that is not
HTTP or a body that is not JSON, a body past `max_response_bytes`, or the network kill switch
refusing a non-loopback host (allow it with `HttpTransport(allow_network=True)` or
``TWINFLOW_ALLOW_NETWORK=1``)."""

McpReason = Literal["protocol", "timeout", "closed", "remote"]
"""Why an MCP server gave no usable answer: it broke the protocol (not JSON-RPC, past the size
or depth limit, a wrong answer), it did not answer before the deadline, it exited or closed the
connection first, or it answered with a JSON-RPC error (`McpError.code`)."""

ClusterReason = Literal["unreachable", "task_lost", "worker_start"]
"""Why a Ray run failed: the cluster could not be reached or started, a call's worker (or node)
died on each allowed attempt, or no worker could be started for a call (its node and Ray's
reason are in the message)."""


def _rebuild(cls: type[KernelError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class KernelError(TwinflowError):
    """Root of the errors raised by `twinflow.kernel`."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields would break the default exception pickling and copying.
        return (_rebuild, (type(self), self.args, self.__dict__))


class TransportError(KernelError):
    """A request did not produce a JSON answer.

    Attributes:
        url: The URL the request was sent to.
        reason: Why (`TransportReason`).
        status: The HTTP status code, for ``reason == "status"`` (else None).
        body_excerpt: The start of the response body, decoded leniently (at most 2000
            characters), for ``reason == "status"`` (else None).
        retry_after: The answer's ``Retry-After`` header as received, for ``reason ==
            "status"`` (else None): how long the server asked to be left alone.
        unsent: True when the connection failed before the request was written whole (a
            reset or a broken pipe while sending): the server cannot have acted on it.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str,
        reason: TransportReason,
        status: int | None = None,
        body_excerpt: str | None = None,
        retry_after: str | None = None,
        unsent: bool = False,
    ) -> None:
        """Create the error.

        Args:
            message: What went wrong and what to do; it must name `url`.
            url: The URL the request was sent to.
            reason: Why the request failed.
            status: The HTTP status code (``reason == "status"``).
            body_excerpt: The start of the response body (``reason == "status"``).
            retry_after: The answer's ``Retry-After`` header (``reason == "status"``).
            unsent: The request was not written whole before the connection failed.
        """
        super().__init__(message)
        self.url = url
        self.reason: TransportReason = reason
        self.status = status
        self.body_excerpt = body_excerpt
        self.retry_after = retry_after
        self.unsent = unsent

    def with_url(self, url: str, note: str = "") -> Self:
        """Return a copy of this error that names another URL.

        Args:
            url: The URL to name instead of `self.url`.
            note: Text appended to the message.

        Returns:
            The same error, with the same fields, naming `url`.
        """
        clone = copy.copy(self)
        clone.args = (str(self).replace(self.url, url) + note,)
        clone.url = url
        return clone


class ReplayDivergenceError(KernelError):
    """A replayed run asked for, or wrote, something other than what was recorded.

    The one replay-divergence error of the workspace: the kernel's replaying transport raises
    it for a request, and `twinflow.agent`'s replay and resume for a trace event (with `seq`,
    `expected` and `actual`).

    Attributes:
        difference: The first structural difference between the recorded value and the
            actual one; for a missing or extra item, one side is `None`. None where there is
            no pair to compare (the agent's replay: an extra or missing event).
        seq: The sequence number of the first differing trace event (None for a request).
        expected: The recorded event as JSON (None for a request, or an extra event).
        actual: The re-run's event as JSON (None for a request, or an event never produced).
    """

    def __init__(
        self,
        message: str,
        *,
        difference: Difference | None = None,
        seq: int | None = None,
        expected: Any = None,
        actual: Any = None,
    ) -> None:
        """Create the error.

        Args:
            message: What diverged and what to do.
            difference: The first structural difference, appended to the message after ``; ``.
            seq: The sequence number of the first differing trace event.
            expected: The recorded event as JSON.
            actual: The re-run's event as JSON.
        """
        # One line, so a command prints it as one line (the difference names its pointer).
        super().__init__(message if difference is None else f"{message}; {difference}")
        self.difference = difference
        self.seq = seq
        self.expected = expected
        self.actual = actual


LaunchReason = Literal["start", "unavailable", "protocol", "limit"]
"""Why a process was not run: it did not start, exited early or was not healthy in time; what
it needs is missing here (a sandbox without ``bwrap``), named with what to install; or the
sandbox around it broke its protocol (no result, too much output); or a call in a sandbox hit
one of its limits (the message names which)."""


class LaunchError(KernelError):
    """A server process did not start, exited early, or did not become healthy in time.

    Attributes:
        reason: Why (`LaunchReason`).
    """

    def __init__(self, message: str, *, reason: LaunchReason = "start") -> None:
        """Create the error; `message` names the command and what to do."""
        super().__init__(message)
        self.reason: LaunchReason = reason


class ClusterError(KernelError):
    """A Ray run (`RayExecutor`) failed.

    Attributes:
        reason: Why (`ClusterReason`).
        index: The position of the call's item in the input, for a call that failed
            (``"task_lost"``, ``"worker_start"``; else None).
    """

    def __init__(self, message: str, *, reason: ClusterReason, index: int | None = None) -> None:
        """Create the error.

        Args:
            message: What failed (which call, how many attempts, what Ray reported).
            reason: Why the run failed.
            index: The position of the failed call's item in the input.
        """
        super().__init__(message)
        self.reason: ClusterReason = reason
        self.index = index


class McpError(KernelError):
    """An MCP server did not give a usable answer.

    Attributes:
        server: The server's name (as the spec names it).
        reason: Why (`McpReason`).
        code: The JSON-RPC error code, for ``reason == "remote"`` (else None).
    """

    def __init__(
        self, message: str, *, server: str, reason: McpReason, code: int | None = None
    ) -> None:
        """Create the error; `message` names the server."""
        super().__init__(message)
        self.server = server
        self.reason: McpReason = reason
        self.code = code


class NondeterminismError(KernelError, RuntimeError):
    """A nondeterministic entry point was reached from outside the kernel during replay.

    Attributes:
        entry_point: the dotted name that was called, e.g. ``"time.time"``.
        caller: the module that made the call.
    """

    def __init__(self, entry_point: str, caller: str) -> None:
        self.entry_point = entry_point
        self.caller = caller
        super().__init__(
            f"{caller} called {entry_point} during replay: replayed code must receive time, "
            "randomness, ids, network and processes through twinflow.kernel ports (Clock, Ids, "
            "Transport, Launcher) so a replay sees the recorded values; inject the port instead "
            "of calling it directly"
        )
