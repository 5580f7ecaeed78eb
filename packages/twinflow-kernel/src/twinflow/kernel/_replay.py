"""Record and replay of transport exchanges.

A recording is JSON Lines: one RFC 8785 canonical JSON object per exchange, in call order::

    {"request":{"body":...,"url":"..."},"response":...,"seq":0}
    {"error":{"message":"...","reason":"connect","type":"TransportError",...},"request":{...},"seq":1}
    {"chunks":["data: {...}\n\n",{"base64":"..."}],"request":{...,"stream":true},"seq":2}

A streamed exchange (`post_stream`) records every chunk as it arrived, as text when it is UTF-8
and as `{"base64": ...}` when it is not (a read can end mid-character), so a replay yields the
same bytes in the same chunks; a stream that failed midway records its chunks and its `error`.

Because each line is canonical, replaying a recording through a `RecordingTransport` writes the
same bytes again. A recorded response comes back as its canonical JSON value (so a float such as
`1.0` replays as `1`); a recorded transport failure is raised again as the same error, with the same
reason and message.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from twinflow._base._open import read_regular
from twinflow._base._untrusted import scrub_bytes
from twinflow.kernel._errors import ReplayDivergenceError, TransportError, TransportReason
from twinflow.kernel._ports import Closing, Transport
from twinflow.trace import UserError
from twinflow.vocab import Difference, JsonValue, diff
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._canonical import parse_canonical

_REASONS: dict[str, TransportReason] = {
    "connect": "connect",
    "timeout": "timeout",
    "status": "status",
    "decode": "decode",
    "too_large": "too_large",
    "blocked": "blocked",
}
"""The reasons a recorded error may carry."""

_OLD_TYPES: dict[str, TransportReason] = {
    "ConnectError": "connect",
    "TransportTimeout": "timeout",
    "HTTPStatusError": "status",
    "ResponseDecodeError": "decode",
    "ResponseTooLarge": "too_large",
    "NetworkBlockedError": "blocked",
}
"""A recording made when each reason was a class of its own names the class instead."""


def _error_record(error: TransportError) -> dict[str, JsonValue]:
    record: dict[str, JsonValue] = {
        "type": "TransportError",
        "reason": error.reason,
        "message": str(error),
        "url": error.url,
    }
    if error.status is not None:
        record["status"] = error.status
        record["body_excerpt"] = error.body_excerpt
    return record


def _error_from_record(record: dict[str, Any]) -> TransportError:
    reason = _OLD_TYPES.get(record["type"]) or _REASONS[record["reason"]]
    return TransportError(
        record["message"],
        url=record["url"],
        reason=reason,
        status=record.get("status"),
        body_excerpt=record.get("body_excerpt"),
    )


def _chunk_record(chunk: bytes) -> JsonValue:
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(chunk).decode("ascii")}


def _chunk_from_record(record: JsonValue) -> bytes:
    if isinstance(record, str):
        return record.encode("utf-8")
    encoded = record.get("base64") if isinstance(record, dict) else None
    if isinstance(encoded, str):
        return base64.b64decode(encoded, validate=True)
    raise ValueError(f"a recorded chunk is a string or {{'base64': ...}}, not {record!r}")


def _chunks_valid(chunks: object) -> bool:
    if not isinstance(chunks, list):
        return False
    try:
        for chunk in chunks:
            _chunk_from_record(chunk)
    except ValueError:
        return False
    return True


class RecordingTransport(Closing):
    """Wraps a transport and writes every exchange to a JSON Lines file as it happens.

    Each line is written and flushed before `post_json` returns (or raises), so a crash loses
    nothing already answered. Transport failures are recorded too, then raised unchanged.
    """

    def __init__(self, inner: Transport, path: str | os.PathLike[str]) -> None:
        """Create the recorder; `path` is created or truncated.

        Args:
            inner: The transport that really answers (a `StreamingTransport`, for
                `post_stream`).
            path: The recording file.
        """
        self._inner = inner
        self.path = Path(path)
        self._file: IO[bytes] = self.path.open("wb")
        self._seq = 0

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """Forward to the inner transport and record the exchange.

        Raises:
            TransportError: As the inner transport raised it (after recording it).
        """
        request: dict[str, JsonValue] = {"url": url, "body": body}
        record: dict[str, JsonValue] = {"seq": self._seq, "request": request}
        try:
            response = self._inner.post_json(url, body, timeout=timeout)
        except TransportError as error:
            record["error"] = _error_record(error)
            self._write(record)
            raise
        record["response"] = response
        self._write(record)
        return response

    def post_stream(
        self, url: str, body: JsonValue, *, timeout: float, idle_timeout: float | None = None
    ) -> Iterator[bytes]:
        """Forward to the inner transport's `post_stream`, yielding and recording every chunk.

        The exchange is written when the stream ends, fails, or is closed early (then with the
        chunks consumed so far).

        Raises:
            UserError: The inner transport cannot stream.
            TransportError: As the inner transport raised it (after recording it).
        """
        stream = getattr(self._inner, "post_stream", None)
        if stream is None:
            raise UserError(
                f"post_stream({url!r}): the recorded transport {type(self._inner).__name__} "
                "cannot stream"
            )
        chunks: Iterator[bytes] = stream(url, body, timeout=timeout, idle_timeout=idle_timeout)
        return self._record_stream(url, body, chunks)

    def _record_stream(self, url: str, body: JsonValue, chunks: Iterator[bytes]) -> Iterator[bytes]:
        request: dict[str, JsonValue] = {"url": url, "body": body, "stream": True}
        seen: list[JsonValue] = []
        record: dict[str, JsonValue] = {"seq": self._seq, "request": request, "chunks": seen}
        try:
            for chunk in chunks:
                seen.append(_chunk_record(chunk))
                yield chunk
        except TransportError as error:
            record["error"] = _error_record(error)
            raise
        finally:
            self._write(record)

    def _write(self, record: dict[str, JsonValue]) -> None:
        # A server's answer may echo a key this process read: the file never holds one.
        self._file.write(scrub_bytes(canonical_bytes(record)) + b"\n")
        self._file.flush()
        self._seq += 1

    def close(self) -> None:
        """Close the file and the inner transport."""
        self._file.close()
        self._inner.close()


class ReplayTransport(Closing):
    """Serves a recording back in order, checking every request against the recorded one.

    A request that differs raises `ReplayDivergenceError` with the first structural difference; after
    that the replay is broken and every call raises it again. A request past the end of the
    recording raises `ReplayDivergenceError` (an "unexpected" difference). `close()` is the verdict:
    it raises `ReplayDivergenceError` if any recorded exchange was not consumed, or if any divergence
    or extra request happened (even one the caller caught).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Load a recording.

        Args:
            path: A file written by `RecordingTransport`.

        Raises:
            UserError: The file cannot be read or a line is not an exchange record.
        """
        self.path = Path(path)
        try:
            lines = read_regular(self.path).splitlines()
        except OSError as error:
            raise UserError(
                f"cannot read the recording {self.path} ({error}): check the path"
            ) from error
        self._records: list[dict[str, Any]] = []
        for number, line in enumerate(lines, start=1):
            try:
                record = parse_canonical(line)
            except Exception as error:
                raise UserError(
                    f"{self.path}:{number} is not canonical JSON ({error}): the recording was "
                    "edited or truncated; record it again"
                ) from error
            failure = record.get("error") if isinstance(record, dict) else None
            known_error = isinstance(failure, dict) and (
                failure.get("type") in _OLD_TYPES
                or (failure.get("type") == "TransportError" and failure.get("reason") in _REASONS)
            )
            streamed = isinstance(record, dict) and "chunks" in record
            if (
                not isinstance(record, dict)
                or "request" not in record
                or not ("response" in record or known_error or streamed)
                or (streamed and not _chunks_valid(record["chunks"]))
            ):
                raise UserError(
                    f"{self.path}:{number} is not an exchange record (request and response, "
                    "chunks or error): record it again"
                )
            self._records.append(record)
        self._next = 0
        self._problem: ReplayDivergenceError | None = None

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """Return the next recorded answer if this request equals the recorded one.

        Raises:
            ReplayDivergenceError: The request differs, or the recording has no more exchanges.
            TransportError: The recorded exchange was a failure; it is raised again.
        """
        record = self._take(url, {"url": url, "body": body})
        if "error" in record:
            raise _error_from_record(record["error"])
        response: JsonValue = record["response"]
        return response

    def post_stream(
        self, url: str, body: JsonValue, *, timeout: float, idle_timeout: float | None = None
    ) -> Iterator[bytes]:
        """Yield the next recorded stream's chunks, byte for byte, if this request is the recorded one.

        The request is checked when iteration starts, as a real stream sends it then.

        Raises:
            ReplayDivergenceError: The request differs (a streamed request is not a plain one), or
                the recording has no more exchanges.
            TransportError: The recorded stream failed; it is raised after its chunks.
        """
        record = self._take(url, {"url": url, "body": body, "stream": True})
        for chunk in record.get("chunks", []):
            yield _chunk_from_record(chunk)
        if "error" in record:
            raise _error_from_record(record["error"])

    def _take(self, url: str, actual: JsonValue) -> dict[str, Any]:
        """The next record, if `actual` equals its request; a divergence otherwise."""
        if self._problem is not None:
            raise self._problem
        seq = self._next
        if seq >= len(self._records):
            self._problem = ReplayDivergenceError(
                f"replay of {self.path}: request {seq} ({url}) is extra, the recording has only "
                f"{len(self._records)}; if the new request is intended, record again",
                difference=Difference(
                    pointer=f"/{seq}", expected=None, actual=actual, reason="unexpected"
                ),
            )
            raise self._problem
        record = self._records[seq]
        difference = diff(record["request"], actual)
        if difference is not None:
            self._problem = ReplayDivergenceError(
                f"replay of {self.path}: request {seq} ({url}) differs from the recorded one; "
                "if the change is intended, record again",
                difference=difference.model_copy(
                    update={"pointer": f"/{seq}/request{difference.pointer}"}
                ),
            )
            raise self._problem
        self._next += 1
        return record

    @property
    def remaining(self) -> int:
        """How many recorded exchanges have not been served."""
        return len(self._records) - self._next

    def close(self) -> None:
        """Check that the replay was complete and exact.

        Raises:
            ReplayDivergenceError: A divergence or extra request happened, or recorded exchanges
                were not consumed (the first unconsumed one is shown).
        """
        if self._problem is not None:
            raise self._problem
        if self._next < len(self._records):
            seq = self._next
            self._problem = ReplayDivergenceError(
                f"replay of {self.path}: {len(self._records) - seq} recorded exchange(s) were "
                f"not requested, starting with request {seq}; the code now stops earlier than "
                "when it was recorded: if that is intended, record again",
                difference=Difference(
                    pointer=f"/{seq}",
                    expected=self._records[seq]["request"],
                    actual=None,
                    reason="missing",
                ),
            )
            raise self._problem

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # With an exception already in flight, let it speak rather than the verdict.
        if exc is None:
            self.close()
