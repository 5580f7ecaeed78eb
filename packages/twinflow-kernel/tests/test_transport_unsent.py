"""A connection lost while the request was being written is `unsent`; once written, it is not.

A raw socket server on loopback either resets the connection after reading the head of a
request too big for the socket buffers (the request cannot have been read whole), or reads a
small request whole and closes without answering (the server may have acted on it).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from twinflow.kernel import HttpTransport, TransportError


@contextmanager
def raw_server(read_whole: bool) -> Iterator[str]:
    """A one-connection server; its URL. It resets after the head, or closes after the body."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            if read_whole:
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(body) < length:
                    body += connection.recv(65536)
            else:
                # A reset, not a polite close: the client's next write fails at once.
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        thread.join(timeout=30)
        listener.close()


def test_a_reset_while_writing_the_request_is_unsent() -> None:
    """Reset after the head of a 64 MiB request: a "connect" error with unsent set."""
    with (
        raw_server(read_whole=False) as url,
        pytest.raises(TransportError) as caught,
    ):
        HttpTransport().post_json(url, {"pad": "x" * (64 * 1024 * 1024)}, timeout=30)
    assert ("connect", True) == (caught.value.reason, caught.value.unsent)


def test_a_close_after_the_whole_request_is_not_unsent() -> None:
    """The request read whole, then no answer: the server may have acted, unsent stays False."""
    with (
        raw_server(read_whole=True) as url,
        pytest.raises(TransportError) as caught,
    ):
        HttpTransport().post_json(url, {"messages": []}, timeout=30)
    assert ("connect", False) == (caught.value.reason, caught.value.unsent)
