"""HttpTransport keeps connections alive: reuse, stale connections, and what is never retried."""

import http.client
import json
import select
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from twinflow.kernel import HttpTransport, LoopbackServer
from twinflow.kernel._errors import TransportError
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._pool import ConnectionPool

# No test waits a fixed time: where a test needs the server's close to have reached the kept
# connection, a pool subclass waits for that socket to turn readable (a condition, not a clock).
GIVE_UP = 60.0


class Connections:
    """A loopback handler that notes which server connection carried each request.

    The server runs one thread per connection, serving its keep-alive requests in turn, so the
    thread object identifies the connection (the objects are kept, so none is mistaken for another).
    """

    def __init__(self, answers: dict[str, LoopbackResponse] | None = None) -> None:
        """Answer `answers[path]` when given, else echo the JSON body."""
        self.answers = answers or {}
        self.threads: list[threading.Thread] = []

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        """Note the connection and answer."""
        self.threads.append(threading.current_thread())
        if request.path in self.answers:
            return self.answers[request.path]
        return LoopbackResponse.json_body({"echo": request.json_value()})

    def count(self) -> int:
        """How many distinct connections carried the requests so far."""
        return len({id(thread) for thread in self.threads})


def stale_answer(value: object) -> LoopbackResponse:
    """A complete keep-alive HTTP/1.1 answer after which the server closes the connection.

    Nothing in it says the connection will close, so the transport keeps it: it is stale at once,
    like a kept connection the server dropped after its idle timeout.
    """
    body = json.dumps(value).encode()
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return LoopbackResponse(body=head.encode() + body, behaviour="garbage")


def wait_readable(connection: http.client.HTTPConnection) -> None:
    """Wait until the server's close of ``connection`` has reached our end (its socket is readable)."""
    assert connection.sock is not None
    readable, _, _ = select.select([connection.sock], [], [], GIVE_UP)
    assert readable, f"the server's close never reached the kept connection in {GIVE_UP} s"


class PatientPool(ConnectionPool):
    """The real idle check, run once the server's close has arrived: the race decided one way."""

    def usable(self, connection: http.client.HTTPConnection) -> bool:
        """Wait for the close to arrive, then ask the real check."""
        wait_readable(connection)
        return super().usable(connection)


class TrustingPool(ConnectionPool):
    """No idle check: a kept connection is used even if the server closed it (the other side of the race)."""

    def usable(self, connection: http.client.HTTPConnection) -> bool:
        """Every kept connection is taken as usable."""
        return True


class ClosedFirstPool(TrustingPool):
    """Like `TrustingPool`, but the kept connection is handed out only once the server's close arrived."""

    def usable(self, connection: http.client.HTTPConnection) -> bool:
        """Wait for the close to arrive, then use the connection anyway."""
        wait_readable(connection)
        return True


class ShutForWritingPool(ConnectionPool):
    """Hands out each kept connection (after the real check) shut for writing on our side."""

    def take(self, origin: tuple[str, str, int]) -> Any:
        """Take the kept connection, then shut it so its first send fails before any byte."""
        connection = super().take(origin)
        if connection is not None:
            assert connection.sock is not None
            connection.sock.shutdown(socket.SHUT_WR)
        return connection


def test_one_connection_carries_every_request() -> None:
    """Ten calls to one server travel on one connection, and each gets its own answer."""
    connections = Connections()
    transport = HttpTransport()
    with LoopbackServer(connections) as server:
        answers = [transport.post_json(server.url_for("/x"), n, timeout=5) for n in range(10)]
        transport.close()
    expected = [{"echo": n} for n in range(10)]
    assert expected == answers
    assert 1 == connections.count()


def test_connections_are_kept_per_server() -> None:
    """Calls alternating between two servers keep one connection to each."""
    first, second = Connections(), Connections()
    transport = HttpTransport()
    with LoopbackServer(first) as one, LoopbackServer(second) as two:
        for n in range(4):
            transport.post_json(one.url, n, timeout=5)
            transport.post_json(two.url, n, timeout=5)
        transport.close()
    expected = (1, 1, 4, 4)
    assert expected == (first.count(), second.count(), len(first.threads), len(second.threads))


def test_close_closes_the_kept_connection() -> None:
    """After close(), the server sees its end of the kept connection close."""
    connections = Connections()
    transport = HttpTransport()
    with LoopbackServer(connections) as server:
        transport.post_json(server.url, 1, timeout=5)
        thread = connections.threads[0]
        assert thread.is_alive()
        transport.close()
        thread.join(timeout=5)
        assert not thread.is_alive()


def test_a_server_that_asks_to_close_gets_a_new_connection_each_time() -> None:
    """An answer with `Connection: close` is not kept: the next call connects afresh."""
    closing = LoopbackResponse.json_body({"ok": True}).model_copy(
        update={"headers": (("Content-Type", "application/json"), ("Connection", "close"))}
    )
    connections = Connections({"/close": closing})
    transport = HttpTransport()
    with LoopbackServer(connections) as server:
        for _ in range(3):
            transport.post_json(server.url_for("/close"), {}, timeout=5)
        transport.close()
    assert 3 == connections.count()


def test_an_error_answer_read_to_its_end_keeps_the_connection() -> None:
    """A 404 with a short body is read whole, so its connection carries the next call."""
    missing = LoopbackResponse.json_body({"error": "no"}, status=404)
    connections = Connections({"/missing": missing})
    transport = HttpTransport()
    with LoopbackServer(connections) as server:
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason):
            transport.post_json(server.url_for("/missing"), {}, timeout=5)
        expected = {"echo": 2}
        assert expected == transport.post_json(server.url_for("/x"), 2, timeout=5)
        transport.close()
    assert 1 == connections.count()


def test_a_connection_closed_by_the_server_while_idle_is_dropped_before_use() -> None:
    """A kept connection the server closed is seen readable before use and replaced; the call succeeds."""
    connections = Connections({"/stale": stale_answer({"first": True})})
    transport = HttpTransport(pool=PatientPool())
    with LoopbackServer(connections) as server:
        expected_first = {"first": True}
        assert expected_first == transport.post_json(server.url_for("/stale"), 1, timeout=5)
        answer = transport.post_json(server.url_for("/x"), 2, timeout=5)
        transport.close()
    expected = ({"echo": 2}, ["/stale", "/x"], 2)
    assert expected == (answer, [r.path for r in server.requests], connections.count())


def test_a_request_written_to_a_dead_kept_connection_is_not_sent_again() -> None:
    """Once the request went out on a kept connection, its loss is a TransportError "connect", never a re-send."""
    # The server's close arrives after the idle check passed (the race the check cannot close):
    # the socket takes the bytes and only the answer's read fails. Nothing proves the server did
    # not read them, so the transport must not send them again.
    connections = Connections({"/stale": stale_answer({"first": True})})
    transport = HttpTransport(pool=ClosedFirstPool())
    with LoopbackServer(connections) as server:
        transport.post_json(server.url_for("/stale"), 1, timeout=5)
        with pytest.raises(
            TransportError, check=lambda e: "connect" == e.reason, match="twinflow does not retry"
        ):
            transport.post_json(server.url_for("/x"), 2, timeout=5)
        transport.close()
    expected = ["/stale"]
    assert expected == [r.path for r in server.requests]


def test_a_server_that_reads_the_request_then_drops_the_connection_gets_it_once() -> None:
    """A server that read the whole request and dropped the kept connection receives it exactly once."""
    drop = LoopbackResponse(body=b"", behaviour="garbage")
    connections = Connections({"/drop": drop})
    transport = HttpTransport()
    with LoopbackServer(connections) as server:
        transport.post_json(server.url_for("/x"), 1, timeout=5)
        with pytest.raises(TransportError, check=lambda e: "connect" == e.reason) as caught:
            transport.post_json(server.url_for("/drop"), 2, timeout=5)
        transport.close()
    expected = (["/x", "/drop"], 1)
    assert expected == ([r.path for r in server.requests], connections.count())
    assert "twinflow does not retry" in str(caught.value)


def test_a_kept_connection_that_takes_no_byte_is_replaced_once() -> None:
    """A write that fails before any byte left a kept connection is sent once on a fresh one."""
    connections = Connections()
    # Shut for writing on our side after the idle check: the very first send raises
    # BrokenPipeError with nothing out.
    transport = HttpTransport(pool=ShutForWritingPool())
    with LoopbackServer(connections) as server:
        transport.post_json(server.url_for("/x"), 1, timeout=5)
        answer = transport.post_json(server.url_for("/y"), 2, timeout=5)
        transport.close()
    expected = ({"echo": 2}, ["/x", "/y"], 2)
    assert expected == (answer, [r.path for r in server.requests], connections.count())


def test_a_stale_connection_to_a_stopped_server_fails_at_once() -> None:
    """A stale kept connection to a stopped server: the head went out, so a TransportError "connect", not a wait."""
    connections = Connections({"/stale": stale_answer(1)})
    transport = HttpTransport(pool=TrustingPool())
    with LoopbackServer(connections) as server:
        transport.post_json(server.url_for("/stale"), 1, timeout=5)
    # A transport that waited for an answer would end in TransportError "timeout" after 60 s (and fail
    # pytest.raises); no clock is read, so a loaded machine cannot fail this test.
    with pytest.raises(TransportError, check=lambda e: "connect" == e.reason) as caught:
        transport.post_json(server.url_for("/x"), 2, timeout=60)
    transport.close()
    assert "was lost before the answer" in str(caught.value)


def test_a_reset_mid_body_on_a_kept_connection_is_not_retried() -> None:
    """Once answer bytes arrived, a reset is a TransportError "connect": the server is asked once, not twice."""
    body = b'{"a": "' + b"x" * 100_000 + b'"}'
    reset = LoopbackResponse(body=body, behaviour="reset_mid_body")
    connections = Connections({"/reset": reset})
    transport = HttpTransport()
    with LoopbackServer(connections) as server:
        transport.post_json(server.url_for("/x"), 1, timeout=5)
        with pytest.raises(
            TransportError, check=lambda e: "connect" == e.reason, match="twinflow does not retry"
        ):
            transport.post_json(server.url_for("/reset"), 2, timeout=5)
        transport.close()
    expected = (["/x", "/reset"], 1)
    assert expected == ([r.path for r in server.requests], connections.count())


def test_a_timeout_on_a_kept_connection_is_not_retried() -> None:
    """A server that sleeps on a kept connection gives TransportError "timeout" in time, asked once."""
    slow = LoopbackResponse.json_body({}).model_copy(update={"delay": 300.0})
    connections = Connections({"/slow": slow})
    transport = HttpTransport()
    with LoopbackServer(connections) as server:
        transport.post_json(server.url_for("/x"), 1, timeout=5)
        start = time.monotonic()
        with pytest.raises(TransportError, check=lambda e: "timeout" == e.reason):
            transport.post_json(server.url_for("/slow"), 2, timeout=0.5)
        elapsed = time.monotonic() - start
        transport.close()
        expected = ["/x", "/slow"]
        assert expected == [r.path for r in server.requests]
    # Load only lengthens waits: the lower bound is exact (not cut short), the upper one far from
    # the server's 10 s (a transport that waited for the answer would get it, and no timeout).
    assert 0.5 <= elapsed < 60


def test_one_transport_shared_by_threads() -> None:
    """Threads sharing a transport each get their own answers, whichever connection carried them."""
    # One idle connection is kept per origin, so busy threads open more: no bound is asserted.
    connections = Connections()
    transport = HttpTransport()
    results: dict[int, list[object]] = {}

    def worker(number: int, url: str) -> None:
        results[number] = [transport.post_json(url, [number, n], timeout=10) for n in range(20)]

    with LoopbackServer(connections) as server:
        threads = [threading.Thread(target=worker, args=(t, server.url)) for t in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        transport.close()
    expected = {t: [{"echo": [t, n]} for n in range(20)] for t in range(6)}
    assert expected == results


def test_https_keeps_its_connection(tmp_path: Path) -> None:
    """Over https with a CA file, three calls travel on one TLS connection."""
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", str(key), "-out", str(cert)],
            check=True,
            capture_output=True,
        )  # fmt: skip
    except FileNotFoundError:
        pytest.fail(
            "the openssl command is needed to make a self-signed certificate: apt-get install openssl"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    connections = Connections()
    transport = HttpTransport(cafile=cert)
    with LoopbackServer(connections, ssl_context=context) as server:
        answers = [transport.post_json(server.url, n, timeout=5) for n in range(3)]
        transport.close()
    expected = ([{"echo": 0}, {"echo": 1}, {"echo": 2}], 1)
    assert expected == (answers, connections.count())


def test_a_request_goes_out_in_one_write_head_and_body() -> None:
    """The head and a bytes body are one send (http.client alone makes two: the server would wake
    for the head, then wait again for the body); the server reads both."""
    from twinflow.kernel._pool import Connection, Deadline

    class CountingConnection(Connection):
        """Notes the size of each write."""

        writes: list[int]

        def send(self, data: Any) -> None:
            """Note the write, then send it as the connection does."""
            self.writes.append(len(data))
            super().send(data)

    handler = Connections()
    with LoopbackServer(handler) as server:
        connection = CountingConnection("127.0.0.1", server.port)
        connection.writes = []
        connection.deadline = Deadline(30)
        connection.connect()
        connection.request(
            "POST", "/x", body=b'{"a":1}', headers={"Content-Type": "application/json"}
        )
        answer = json.loads(connection.getresponse().read())
        connection.close()
    assert ({"echo": {"a": 1}}, 1) == (answer, len(connection.writes))
