"""One deadline over the whole exchange: heads sent a byte at a time, endless 1xx, redirects, sends."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest

from twinflow.kernel import HttpTransport
from twinflow.kernel._errors import TransportError

# The servers below give up after this long: a transport that ignores its deadline ends with
# another error (the connection closes), never with TransportError "timeout".
SAFETY = 60.0
Script = Callable[[socket.socket, threading.Event], None]


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            return
        data += more


@contextmanager
def raw_server(script: Script) -> Iterator[str]:
    """A loopback socket server that answers each connection with `script`; yields its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(SAFETY)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                _read_request(conn)
                with suppress(OSError):
                    script(conn, stop)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        # Wakes an accept() waiting for a next connection (closing alone does not, on Linux).
        with suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(SAFETY)


def dribble(data: bytes, gap: float = 0.05) -> Script:
    """Send `data` one byte per `gap` seconds, over and over, until stopped or SAFETY passed."""

    def script(conn: socket.socket, stop: threading.Event) -> None:
        sent = 0
        while not stop.is_set() and sent * gap < SAFETY:
            conn.sendall(data[sent % len(data) : sent % len(data) + 1])
            sent += 1
            stop.wait(gap)

    return script


def flood(chunk: bytes, head: bytes = b"") -> Script:
    """Send `head`, then `chunk` again and again as fast as the client reads, until stopped."""

    def script(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head)
        for _ in range(int(SAFETY * 1000)):
            if stop.is_set():
                return
            conn.sendall(chunk)
            stop.wait(0.001)

    return script


STATUS_DRIBBLE = dribble(b"HTTP/1.1 200 OK\r\n")


def HEADERS_FOREVER(conn: socket.socket, stop: threading.Event) -> None:
    """A status line at once, then one header line, byte by byte, over and over."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    dribble(b"X-Pad: a\r\n", gap=0.02)(conn, stop)


CONTINUE_FOREVER = flood(b"HTTP/1.1 100 Continue\r\n\r\n")
PROCESSING_FOREVER = flood(b"HTTP/1.1 102 Processing\r\nX-A: b\r\n\r\n")


@pytest.mark.parametrize(
    "script",
    [STATUS_DRIBBLE, HEADERS_FOREVER, CONTINUE_FOREVER, PROCESSING_FOREVER],
    ids=["status-line-a-byte-at-a-time", "headers-forever", "100-continue-forever", "102-forever"],
)
def test_a_head_that_never_ends_times_out_at_the_deadline(script: Script) -> None:
    """A status line or headers dribbled byte by byte, or endless 1xx answers, end at the timeout."""
    with (
        raw_server(script) as url,
        HttpTransport() as transport,
        pytest.raises(TransportError, check=lambda e: "timeout" == e.reason) as caught,
    ):
        transport.post_json(url, {}, timeout=1.0)
    assert "within 1 s" in str(caught.value)


@pytest.mark.parametrize(
    "script", [STATUS_DRIBBLE, CONTINUE_FOREVER], ids=["status-dribble", "100-continue-forever"]
)
def test_a_stream_whose_head_never_ends_times_out_at_the_deadline(script: Script) -> None:
    """post_stream: the deadline covers the head too, whatever the idle timeout."""
    with (
        raw_server(script) as url,
        HttpTransport() as transport,
        pytest.raises(TransportError, check=lambda e: "timeout" == e.reason) as caught,
    ):
        list(transport.post_stream(url, {}, timeout=1.0, idle_timeout=30.0))
    assert "within 1 s" in str(caught.value)


def test_a_stream_body_dribbled_forever_times_out_at_the_deadline() -> None:
    """A stream that sends a byte more often than idle_timeout still ends at the deadline."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    with (
        raw_server(flood(b":\n", head=head)) as url,
        HttpTransport() as transport,
        pytest.raises(TransportError, check=lambda e: "timeout" == e.reason) as caught,
    ):
        for _ in transport.post_stream(url, {}, timeout=1.0, idle_timeout=30.0):
            pass
    assert "within 1 s" in str(caught.value)


def test_redirects_share_the_one_deadline() -> None:
    """Each redirect answers at once, but the chain of them cannot outlast the deadline."""

    def redirect_then_dribble(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n"
        )
        dribble(b"HTTP/1.1 200 OK\r\n")(conn, stop)

    with (
        raw_server(redirect_then_dribble) as url,
        HttpTransport(follow_redirects=True, max_redirects=50) as transport,
        pytest.raises(TransportError, check=lambda e: "timeout" == e.reason) as caught,
    ):
        transport.post_json(url, {}, timeout=1.0)
    assert "within 1 s" in str(caught.value)


def test_interim_answers_are_skipped_before_the_final_one() -> None:
    """102 and 103 answers before the final one are skipped, as 100 Continue is."""
    answer = b'{"ok": true}'

    def interim_then_answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
            b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(answer)}\r\n\r\n".encode()
            + answer
        )

    with raw_server(interim_then_answer) as url, HttpTransport() as transport:
        assert {"ok": True} == transport.post_json(url, {}, timeout=30.0)


@pytest.mark.parametrize("digit", [b"\xb2", b"\xb9", b"1\xb3", b"9" * 5000])
def test_a_superscript_length_is_read_as_no_length(digit: bytes) -> None:
    """A ``Content-Length`` of superscript digits (Latin-1 in the head: ``str.isdigit`` takes
    them, ``int`` does not), or of more digits than ``int`` reads, is no announced length: the body is read to the connection's end,
    not a ``ValueError`` out of the transport."""
    answer = b'{"ok": true}'

    def odd_length(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + b"Content-Length: "
            + digit
            + b"\r\n\r\n"
            + answer
        )

    with raw_server(odd_length) as url, HttpTransport() as transport:
        assert {"ok": True} == transport.post_json(url, {}, timeout=30.0)
        assert answer == transport.post_message(url, {}, timeout=30.0, headers={}).body


def test_a_huge_announced_length_is_refused_before_the_body() -> None:
    """A ``Content-Length`` of thirty digits is over any limit: refused, nothing read."""

    def huge(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 30 + b"\r\n\r\n{}")

    with (
        raw_server(huge) as url,
        HttpTransport() as transport,
        pytest.raises(TransportError, check=lambda e: "too_large" == e.reason),
    ):
        transport.post_json(url, {}, timeout=30.0)
