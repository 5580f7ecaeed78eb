"""The kernel's error tree, under the one twinflow root; drawn in the package docstring.

Every message names where (the URL or the command), what went wrong, and what to do.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Self

from twinflow.trace import TwinflowError

if TYPE_CHECKING:
    from twinflow.vocab import Difference


class KernelError(TwinflowError):
    """Root of the errors raised by `twinflow.kernel`."""


def _rebuild(cls: type[KernelError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class TransportError(KernelError):
    """A request did not produce a JSON answer.

    Attributes:
        url: The URL the request was sent to.
    """

    def __init__(self, message: str, *, url: str) -> None:
        """Create the error.

        Args:
            message: What went wrong and what to do; it must name `url`.
            url: The URL the request was sent to.
        """
        super().__init__(message)
        self.url = url

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields would break the default exception pickling and copying.
        return (_rebuild, (type(self), self.args, self.__dict__))

    def with_url(self, url: str, note: str = "") -> Self:
        """Return a copy of this error that names another URL.

        Args:
            url: The URL to name instead of `self.url`.
            note: Text appended to the message.

        Returns:
            The same kind of error, with the same fields, naming `url`.
        """
        clone = copy.copy(self)
        clone.args = (str(self).replace(self.url, url) + note,)
        clone.url = url
        return clone


class ConnectError(TransportError):
    """The connection could not be made (refused, DNS, TLS) or was lost mid-answer.

    The transport never retries it: the caller sees it at once.
    """


class TransportTimeout(TransportError, TimeoutError):
    """No complete answer arrived within the request's timeout."""


class HTTPStatusError(TransportError):
    """The server answered with a status >= 400 (or a redirect that was not followed).

    Attributes:
        status: The HTTP status code.
        body_excerpt: The start of the response body, decoded leniently (at most 2000 characters).
    """

    def __init__(self, message: str, *, url: str, status: int, body_excerpt: str) -> None:
        """Create the error.

        Args:
            message: What went wrong and what to do; it must name `url`.
            url: The URL the request was sent to.
            status: The HTTP status code.
            body_excerpt: The start of the response body.
        """
        super().__init__(message, url=url)
        self.status = status
        self.body_excerpt = body_excerpt


class ResponseDecodeError(TransportError):
    """The answer is not valid HTTP, or its body is not JSON."""


class ResponseTooLarge(TransportError):
    """The response body is larger than the transport's `max_response_bytes`; reading stopped."""


class NetworkBlockedError(TransportError):
    """The network kill switch refused a request to a non-loopback host.

    Allow it with `HttpTransport(allow_network=True)` or `TWINFLOW_ALLOW_NETWORK=1`.
    """


class ReplayDivergenceError(KernelError):
    """A replayed run asked for, or wrote, something other than what was recorded.

    The one replay-divergence error of the workspace: the kernel's replaying transport raises
    it for a request, and `twinflow.agent.ReplayDivergenceError` (a subclass) for a trace event,
    so ``except twinflow.kernel.ReplayDivergenceError`` catches both.

    Attributes:
        difference: The first structural difference between the recorded value and the
            actual one; for a missing or extra item, one side is `None`. None where there is
            no pair to compare (the agent's replay: an extra or missing event).
    """

    def __init__(self, message: str, *, difference: Difference | None = None) -> None:
        """Create the error.

        Args:
            message: What diverged and what to do.
            difference: The first structural difference, appended to the message after ``; ``.
        """
        # One line, so a command prints it as one line (the difference names its pointer).
        super().__init__(message if difference is None else f"{message}; {difference}")
        self.difference = difference

    def __reduce__(self) -> tuple[Any, ...]:
        # As TransportError: keyword-only fields break the default exception pickling.
        return (_rebuild, (type(self), self.args, self.__dict__))


class LaunchError(KernelError):
    """A server process did not start, exited early, or did not become healthy in time."""


class ClusterError(KernelError):
    """The Ray cluster could not be reached or started (`RayExecutor`)."""


class TaskLost(ClusterError):
    """A call ran out of attempts because its worker process (or node) died each time.

    Attributes:
        index: The position of the call's item in the input.
    """

    def __init__(self, message: str, *, index: int) -> None:
        """Create the error.

        Args:
            message: Which call, how many attempts, what Ray reported.
            index: The position of the call's item in the input.
        """
        super().__init__(message)
        self.index = index

    def __reduce__(self) -> tuple[Any, ...]:
        # As TransportError: keyword-only fields break the default exception pickling.
        return (_rebuild, (type(self), self.args, self.__dict__))


class WorkerStartFailed(TaskLost):
    """No Ray worker could be started for a call: its node and Ray's reason are in the message.

    A worker whose interpreter or environment is broken, or that does not register in time,
    fails every call sent to it; the run stops rather than waiting for Ray to give up on each.
    """


class McpError(KernelError):
    """An MCP server did not give a usable answer.

    Attributes:
        server: The server's name (as the spec names it).
    """

    def __init__(self, message: str, *, server: str) -> None:
        """Create the error; `message` names the server."""
        super().__init__(message)
        self.server = server

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


class McpProtocolError(McpError):
    """The server broke the protocol: not JSON-RPC, past the size or depth limit, a wrong answer."""


class McpTimeout(McpError, TimeoutError):
    """The server did not answer before the deadline."""


class McpClosed(McpError):
    """The server exited, or closed the connection, before it answered."""


class McpRemoteError(McpError):
    """The server answered a request with a JSON-RPC error (`.code`)."""

    def __init__(self, message: str, *, server: str, code: int) -> None:
        """Create the error with the JSON-RPC error code."""
        super().__init__(message, server=server)
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
