"""`FaultTransport`: injects real transport failures into a run, by schedule.

A scheduled fault is not faked: the request is sent by a real `HttpTransport` to a
private `LoopbackServer` (or to a closed port) that misbehaves in that way, so the error the
caller sees is the one the real transport maps from a real socket. Its URL and message are then
rewritten to name the URL the caller asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from twinflow.kernel._errors import KernelError, TransportError
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse, LoopbackServer
from twinflow.kernel._netpolicy import free_port
from twinflow.kernel._nondeterminism import on_behalf_of_caller
from twinflow.kernel._ports import Closing, Transport
from twinflow.kernel._transport import HttpTransport
from twinflow.trace import UserError
from twinflow.vocab import JsonValue

Fault = Literal["refuse", "timeout", "reset", "server_error", "garbage", "invalid_json", "oversize"]
"""A failure `FaultTransport` can inject:

- `refuse`: connection refused (`TransportError`, reason ``"connect"``);
- `timeout`: the server sleeps past the timeout (reason ``"timeout"``);
- `reset`: the connection is reset mid-body (`TransportError`, reason ``"connect"``);
- `server_error`: HTTP 500 (reason ``"status"``);
- `garbage`: the answer is not HTTP (reason ``"decode"``);
- `invalid_json`: HTTP 200 whose body is not JSON (reason ``"decode"``);
- `oversize`: a body past the size limit (reason ``"too_large"``).
"""

FAULTS: tuple[Fault, ...] = (
    "refuse",
    "timeout",
    "reset",
    "server_error",
    "garbage",
    "invalid_json",
    "oversize",
)

FaultSchedule = Sequence[Fault | None] | Callable[[int, str, JsonValue], Fault | None]

_OVERSIZE_LIMIT = 4096


def _misbehave(request: LoopbackRequest) -> LoopbackResponse:
    parts = urlsplit(request.path)
    fault = parts.path.rsplit("/", 1)[-1]
    if fault == "timeout":
        sleep = float(parse_qs(parts.query)["sleep"][0])
        return LoopbackResponse.json_body({"late": True}).model_copy(update={"delay": sleep})
    if fault == "reset":
        return LoopbackResponse(
            body=b'{"partial": "' + b"x" * 4000 + b'"}', behaviour="reset_mid_body"
        )
    if fault == "server_error":
        return LoopbackResponse.json_body({"error": "injected server error"}, status=500)
    if fault == "garbage":
        return LoopbackResponse(body=b"\x00\x17 this is not HTTP \xff\r\n\r\n", behaviour="garbage")
    if fault == "invalid_json":
        return LoopbackResponse(
            body=b"<html>not json</html>", headers=(("Content-Type", "text/html"),)
        )
    if fault == "oversize":
        return LoopbackResponse(body=b"[" + b"0," * 1000, repeat=64, announce_length=False)
    return LoopbackResponse(status=404, body=f"unknown fault {fault!r}".encode())


class FaultTransport(Closing):
    """Wraps a transport and replaces chosen calls with real failures.

    `faults` says, per call (numbered from 0), which fault to inject or `None` to pass the call
    to `inner`: either a sequence (calls past its end pass through) or a function of
    `(call_number, url, body)`.
    """

    def __init__(self, inner: Transport, faults: FaultSchedule) -> None:
        """Create the transport.

        Args:
            inner: The transport that answers calls without a fault.
            faults: The schedule described above.

        Raises:
            UserError: A scheduled fault is not one of `Fault`.
        """
        if not callable(faults):
            for fault in faults:
                if fault is not None and fault not in FAULTS:
                    raise UserError(f"FaultTransport: unknown fault {fault!r}; use one of {FAULTS}")
        self._inner = inner
        self._faults = faults
        self._calls = 0
        self._server: LoopbackServer | None = None
        self._real = HttpTransport(max_response_bytes=_OVERSIZE_LIMIT)
        self.injected: list[tuple[int, Fault]] = []
        """Every fault injected so far, as (call number, fault)."""

    def _fault_for(self, number: int, url: str, body: JsonValue) -> Fault | None:
        if callable(self._faults):
            fault = on_behalf_of_caller(self._faults, number, url, body)
            if fault is not None and fault not in FAULTS:
                raise UserError(
                    f"FaultTransport: the schedule returned {fault!r}; use one of {FAULTS}"
                )
            return fault
        return self._faults[number] if number < len(self._faults) else None

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """Inject this call's fault, or forward the call to `inner`.

        Raises:
            TransportError: The injected failure, naming `url`.
        """
        number = self._calls
        self._calls += 1
        fault = self._fault_for(number, url, body)
        if fault is None:
            return self._inner.post_json(url, body, timeout=timeout)
        target = self._target(number, fault, timeout)
        try:
            answer = self._real.post_json(target, body, timeout=timeout)
        except TransportError as error:
            raise error.with_url(url, f" [fault {fault!r} injected by FaultTransport]") from error
        raise KernelError(
            f"FaultTransport: fault {fault!r} for {url} produced an answer ({answer!r}) instead of "
            "failing; this is a kernel bug, please report it"
        )

    def post_stream(
        self, url: str, body: JsonValue, *, timeout: float, idle_timeout: float | None = None
    ) -> Iterator[bytes]:
        """Inject this call's fault into a stream, or forward the call to `inner.post_stream`.

        The call counts as one call of the schedule, like `post_json`. A faulted stream yields
        what the misbehaving server sent before failing (the first half of a reset body, say).

        Raises:
            UserError: Forwarding, and `inner` cannot stream.
            TransportError: The injected failure, naming `url`.
        """
        number = self._calls
        self._calls += 1
        fault = self._fault_for(number, url, body)
        if fault is None:
            stream = getattr(self._inner, "post_stream", None)
            if stream is None:
                raise UserError(
                    f"post_stream({url!r}): FaultTransport's inner "
                    f"{type(self._inner).__name__} cannot stream"
                )
            chunks: Iterator[bytes] = stream(url, body, timeout=timeout, idle_timeout=idle_timeout)
            return chunks
        target = self._target(number, fault, timeout)
        return self._faulted_stream(url, target, body, fault, timeout, idle_timeout)

    def _faulted_stream(
        self,
        url: str,
        target: str,
        body: JsonValue,
        fault: Fault,
        timeout: float,
        idle_timeout: float | None,
    ) -> Iterator[bytes]:
        try:
            yield from self._real.post_stream(
                target, body, timeout=timeout, idle_timeout=idle_timeout
            )
        except TransportError as error:
            raise error.with_url(url, f" [fault {fault!r} injected by FaultTransport]") from error
        if fault != "invalid_json":
            raise KernelError(
                f"FaultTransport: fault {fault!r} for {url} produced a whole stream instead of "
                "failing; this is a kernel bug, please report it"
            )

    def _target(self, number: int, fault: Fault, timeout: float) -> str:
        """Where a faulted call is really sent: a closed port, or the misbehaving server."""
        self.injected.append((number, fault))
        if fault == "refuse":
            return f"http://127.0.0.1:{free_port()}/fault/refuse"
        if self._server is None:
            self._server = LoopbackServer(_misbehave).start()
        return self._server.url_for(f"/fault/{fault}?sleep={timeout + 5:g}")

    def close(self) -> None:
        """Stop the misbehaving server and close `inner`."""
        if self._server is not None:
            self._server.stop()
            self._server = None
        self._inner.close()
