"""``twinflow run --otel-endpoint URL``: the run's spans sent to a collector as the run goes.

The trace sink is wrapped: each line is written to the trace first, exactly as without the
exporter, and then read back as the event it is (`twinflow.views._otel.LiveSpans`), on the
run's thread, without waiting on anything. The spans an event closes are handed, as one
OTLP/HTTP protobuf request, to a bounded queue that one background thread drains
(`twinflow.kernel._worker.BackgroundWorker`): a collector that is down or slow costs the run
nothing, a request that finds the queue full is dropped, and at the end the command says how
many spans reached the collector and how many did not, and why. An exporter that fails on its
own (a bug) stops exporting and says so; the run goes on.
"""

from __future__ import annotations

import json
from typing import Any

from twinflow.cli._export import TRACES_PATH
from twinflow.kernel import HttpTransport
from twinflow.kernel._worker import BackgroundWorker
from twinflow.trace import TraceSink

__all__ = ["LiveExport"]

_HEADERS = {"Content-Type": "application/x-protobuf", "Accept": "application/x-protobuf"}


class _Tee:
    """A trace sink that writes each line to ``inner``, then shows it to the exporter."""

    def __init__(self, inner: TraceSink, live: LiveExport) -> None:
        self.inner = inner
        self.live = live

    def write(self, line: bytes) -> None:
        self.inner.write(line)
        self.live.feed(line)

    def flush(self, *, durable: bool) -> None:
        self.inner.flush(durable=durable)

    def close(self) -> None:
        self.inner.close()


class LiveExport:
    """Sends a run's spans to an OTLP/HTTP collector while the run writes its trace."""

    def __init__(self, endpoint: str, *, timeout: float, capacity: int = 64) -> None:
        """Prepare the exporter; nothing is sent before the first span closes.

        Args:
            endpoint: The collector (a base URL gets ``/v1/traces``).
            timeout: Seconds one request may take, and the grace the last ones get at the end.
            capacity: Requests the queue holds; one more is dropped.
        """
        from twinflow.views._otel import LiveSpans

        base = endpoint.rstrip("/")
        self.url = base if base.endswith(TRACES_PATH) else base + TRACES_PATH
        self.endpoint = endpoint
        self.timeout = timeout
        self._spans = LiveSpans()
        self._transport = HttpTransport()
        self._worker: BackgroundWorker[tuple[int, bytes]] = BackgroundWorker(
            self._post, capacity=capacity
        )
        self._made = 0
        self._sent = 0
        self._broken: str | None = None

    def sink(self, inner: TraceSink) -> TraceSink:
        """``inner`` with every line also fed to the exporter (after it is written)."""
        return _Tee(inner, self)

    def feed(self, line: bytes) -> None:
        """Read one written trace line; queue the spans it closed. Never raises."""
        if self._broken is not None:
            return
        try:
            self._queue(self._closed_by(line))
        except Exception as exc:  # the exporter's own failure must not fail the run
            self._broken = f"{type(exc).__name__}: {exc}"

    def _closed_by(self, line: bytes) -> list[dict[str, Any]]:
        from twinflow.agent import typed_event

        framed = json.loads(line)
        event = typed_event(framed["event"])
        return self._spans.feed(event.seq, framed["digest"], event)

    def _queue(self, spans: list[dict[str, Any]]) -> None:
        from twinflow.views._otel import document
        from twinflow.views._otlp_proto import otlp_protobuf

        if spans:
            self._made += len(spans)
            self._worker.offer((len(spans), otlp_protobuf(document(spans))))

    def _post(self, item: tuple[int, bytes]) -> None:
        count, payload = item
        self._transport.post_message(self.url, payload, timeout=self.timeout, headers=_HEADERS)
        self._sent += count

    def close(self) -> str:
        """Send the spans still open, wait at most the timeout, and say what reached the
        collector."""
        if self._broken is None:
            try:
                self._queue(self._spans.rest())
            except Exception as exc:  # as in feed: said, never raised
                self._broken = f"{type(exc).__name__}: {exc}"
        counts = self._worker.close(self.timeout)
        self._transport.close()
        lost = self._made - self._sent
        said = f"otel: {self._sent} of {self._made} span(s) sent to {self.endpoint} as the run went"
        if lost:
            why = []
            if counts.dropped:
                why.append(f"{counts.dropped} request(s) dropped (queue full or still waiting)")
            if counts.failed:
                why.append(f"{counts.failed} refused or unanswered ({self._worker.first_error})")
            said += f"; {lost} not sent: " + "; ".join(why)
        if self._broken is not None:
            said += f"; the exporter stopped: {self._broken}"
        return said + "; the trace is complete either way (`twinflow export otel` sends it again)"
