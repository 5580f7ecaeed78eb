"""A verified run as OpenTelemetry spans in the GenAI semantic conventions (OTLP/JSON).

One `invoke_agent` span covers the run; a `chat` span covers each model request and its reply;
an `execute_tool` span covers each call from `tool_called` to its `tool_returned`. A policy
decision is an event on the run's span (``gen_ai.guardrail.decision``, with the decision and
who made it), as is a rejected output, and each eval score of the run
(``gen_ai.evaluation.result``).

The spans are a view of the trace, never a second record: the trace id is the first half of
the digest of the trace's first event (known when the run starts, the same for a paused run and
its continuation), a span's id the first 16 hex digits of the digest of the event that opened
it, and every span and event carries ``twinflow.trace.root`` and ``twinflow.trace.size`` (the
checkpoint it was made from), ``twinflow.event.seq`` and ``twinflow.event.digest``, so a reader
checks a span against the trace (`twinflow prove --seq N`). `LiveSpans` makes the same spans
while the trace is written (``twinflow run --otel-endpoint``). Arguments, results and prompts leave the trace only when the
caller asks (``content``), as the conventions advise; a redacted event yields no span, only
an event on the run's span that names its seq and digest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from twinflow.agent import (
    ModelRequested,
    ModelResponded,
    OutputRejected,
    PolicyDecided,
    RunFailed,
    RunFinished,
    RunPaused,
    RunStarted,
    ToolCalled,
    ToolReturned,
    TraceEvent,
)
from twinflow.trace import MerkleTree

__all__ = ["SCOPE", "EvalScore", "LiveSpans", "document", "otlp_json"]

SCOPE = "twinflow.views.otel"
"""The instrumentation scope the spans are reported under."""

_INTERNAL, _CLIENT = 1, 3
"""OTLP span kinds: the run and its tools run in process; a chat is a call to a server."""
_ERROR = 2
"""OTLP status code for a span that ended in an error."""


def _value(value: object) -> dict[str, Any]:
    """An OTLP/JSON ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # 64-bit integers are strings in OTLP/JSON
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(values: dict[str, object]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _nanos(at: datetime) -> str:
    return str((at - _EPOCH) // timedelta(microseconds=1) * 1000)


@dataclass
class _Span:
    name: str
    kind: int
    opened: tuple[int, str, datetime]
    attributes: dict[str, object]
    closed: datetime | None = None
    error: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Run:
    root: str
    content: bool
    size: int = 0
    run: _Span | None = None
    spans: list[_Span] = field(default_factory=list)
    chats: dict[int, _Span] = field(default_factory=dict)
    tools: dict[str, _Span] = field(default_factory=dict)
    model: str = ""

    def mark(self, seq: int, digest: str) -> dict[str, object]:
        return {
            "twinflow.trace.root": self.root,
            "twinflow.trace.size": self.size,
            "twinflow.event.seq": seq,
            "twinflow.event.digest": digest,
        }

    def open(
        self, seq: int, digest: str, at: datetime, name: str, kind: int, **attrs: object
    ) -> _Span:
        span = _Span(name, kind, (seq, digest, at), {**attrs, **self.mark(seq, digest)})
        self.spans.append(span)
        return span

    def note(self, seq: int, digest: str, at: datetime | None, name: str, **attrs: object) -> None:
        if self.run is None:
            return
        stamp = at or self.run.opened[2]
        self.run.events.append(
            {
                "timeUnixNano": _nanos(stamp),
                "name": name,
                "attributes": _attributes({**attrs, **self.mark(seq, digest)}),
            }
        )

    def read(self, seq: int, digest: str, event: TraceEvent) -> None:
        body, at = event.body, event.at
        if isinstance(body, RunStarted):
            self._start(seq, digest, at, body)
        elif isinstance(body, ModelRequested):
            self._chat(seq, digest, at, body)
        elif isinstance(body, ModelResponded):
            self._reply(at, body)
        elif isinstance(body, ToolCalled):
            self._call(seq, digest, at, body)
        elif isinstance(body, ToolReturned):
            self._return(at, body)
        elif isinstance(body, PolicyDecided):
            self._decision(seq, digest, at, body)
        elif isinstance(body, OutputRejected):
            self.note(
                seq, digest, at, "twinflow.output_rejected", **{"twinflow.attempt": body.attempt}
            )
        elif body.kind == "user_turn":
            # A conversation's next turn: one run span holds them all, each turn marked.
            turn = getattr(body, "turn", None)
            self.note(seq, digest, at, "twinflow.user_turn", **{"twinflow.turn": turn})
        elif isinstance(body, RunFinished | RunFailed | RunPaused) and self.run is not None:
            self._end(self.run, at, body)

    def _start(self, seq: int, digest: str, at: datetime, body: RunStarted) -> None:
        """Open the run's `invoke_agent` span."""
        # The model as the run recorded it: the endpoint and name, or the embedded file.
        recorded = body.environment.model if body.environment is not None else None
        self.model = recorded or body.config.model
        self.run = self.open(
            seq,
            digest,
            at,
            "invoke_agent twinflow",
            _INTERNAL,
            **{
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "twinflow",
                "gen_ai.agent.id": str(body.run_id),
                "gen_ai.conversation.id": str(body.run_id),
                "gen_ai.request.model": body.config.model,
            },
        )

    def _chat(self, seq: int, digest: str, at: datetime, body: ModelRequested) -> None:
        """Open a `chat` span for a model request."""
        settings = body.settings
        self.chats[body.step] = self.open(
            seq,
            digest,
            at,
            f"chat {self.model}",
            _CLIENT,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": self.model,
                "gen_ai.request.temperature": settings.temperature,
                "gen_ai.request.max_tokens": settings.max_tokens,
                "gen_ai.request.seed": settings.seed,
                "twinflow.step": body.step,
                "twinflow.purpose": body.purpose,
            },
        )

    def _reply(self, at: datetime, body: ModelResponded) -> None:
        """Close the step's `chat` span with the reply's model, finish reason and usage."""
        chat = self.chats.pop(body.step, None)
        if chat is not None:
            response = body.response
            chat.closed = at
            chat.attributes.update(
                {
                    "gen_ai.response.model": response.model_name or None,
                    "gen_ai.response.finish_reasons": [response.finish_reason],
                    "gen_ai.usage.input_tokens": response.usage.input_tokens,
                    "gen_ai.usage.output_tokens": response.usage.output_tokens,
                }
            )

    def _call(self, seq: int, digest: str, at: datetime, body: ToolCalled) -> None:
        """Open an `execute_tool` span for a tool call."""
        attrs: dict[str, object] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": body.tool,
            "gen_ai.tool.call.id": str(body.call_id),
            "gen_ai.tool.type": "function",
        }
        if self.content:
            attrs["gen_ai.tool.call.arguments"] = json.dumps(body.arguments, sort_keys=True)
        self.tools[str(body.call_id)] = self.open(
            seq, digest, at, f"execute_tool {body.tool}", _INTERNAL, **attrs
        )

    def _return(self, at: datetime, body: ToolReturned) -> None:
        """Close the call's `execute_tool` span with its result and any error."""
        tool = self.tools.pop(str(body.result.call_id), None)
        if tool is not None:
            tool.closed = at
            if self.content:
                tool.attributes["gen_ai.tool.call.result"] = body.result.content
            if body.result.is_error:
                tool.error = body.error_type or "error"
                tool.attributes["error.type"] = tool.error

    def _decision(self, seq: int, digest: str, at: datetime, body: PolicyDecided) -> None:
        """Note a policy decision on the run's span."""
        self.note(
            seq,
            digest,
            at,
            "gen_ai.guardrail.decision",
            **{
                "gen_ai.tool.name": body.tool,
                "gen_ai.tool.call.id": str(body.call_id),
                "twinflow.decision": body.decision,
                "twinflow.decided_by": body.by,
                "twinflow.reason": body.reason if self.content else None,
            },
        )

    @staticmethod
    def _end(run: _Span, at: datetime, body: RunFinished | RunFailed | RunPaused) -> None:
        """Close the run's span with its usage, its error or its pause."""
        run.closed = at
        if isinstance(body, RunFinished):
            run.attributes["gen_ai.usage.input_tokens"] = body.usage.input_tokens
            run.attributes["gen_ai.usage.output_tokens"] = body.usage.output_tokens
        elif isinstance(body, RunFailed):
            run.error = body.error_type
            run.attributes["error.type"] = body.error_type
        else:
            run.attributes["twinflow.paused"] = True


def _span_json(span: _Span, trace_id: str, parent: str | None, end: datetime) -> dict[str, Any]:
    _seq, digest, start = span.opened
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": digest[:16],
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": _nanos(start),
        "endTimeUnixNano": _nanos(span.closed or end),
        "attributes": _attributes(span.attributes),
    }
    if parent is not None:
        out["parentSpanId"] = parent
    if span.events:
        out["events"] = span.events
    if span.error is not None:
        out["status"] = {"code": _ERROR, "message": span.error}
    return out


@dataclass(frozen=True)
class EvalScore:
    """One scorer's verdict on a run, exported as a ``gen_ai.evaluation.result`` event."""

    name: str
    """The scorer (``gen_ai.evaluation.name``)."""
    value: float
    """The score (``gen_ai.evaluation.score.value``)."""
    label: str
    """passed, failed or errored (``gen_ai.evaluation.score.label``)."""
    explanation: str = ""
    """Why (``gen_ai.evaluation.explanation``; exported only with content)."""
    case: str = ""
    """The eval case and repeat the run was (``twinflow.eval.case``)."""


def otlp_json(
    events: Iterable[tuple[int, str, TraceEvent | None]],
    root: str,
    *,
    content: bool = False,
    version: str = "",
    scores: Sequence[EvalScore] = (),
) -> dict[str, Any]:
    """The run's spans as an OTLP/JSON ``ExportTraceServiceRequest``.

    Args:
        events: The verified trace's events in order: seq, hex digest, and the typed event
            (None for a redacted one).
        root: The trace's Merkle root (hex), from the checkpoint the verification computed.
        content: Also export arguments, results, the policy's reasons and the scorers'
            explanations.
        version: The exporter's version, for the instrumentation scope.
        scores: An eval's scores of this run: each an event on the run's span, marked with
            the trace's last event (the scores were computed from the whole trace).
    """
    events = list(events)
    run = _Run(root=root, content=content, size=len(events))
    last: datetime | None = None
    end: tuple[int, str] | None = None
    for seq, digest, event in events:
        end = (seq, digest)
        if event is None:
            run.note(seq, digest, last, "twinflow.redacted")
            continue
        last = event.at
        run.read(seq, digest, event)
    for score in scores if end is not None else ():
        seq, digest = end or (0, "")
        run.note(
            seq,
            digest,
            last,
            "gen_ai.evaluation.result",
            **{
                "gen_ai.evaluation.name": score.name,
                "gen_ai.evaluation.score.value": float(score.value),
                "gen_ai.evaluation.score.label": score.label,
                "gen_ai.evaluation.explanation": score.explanation if content else None,
                "twinflow.eval.case": score.case or None,
            },
        )
    trace_id = events[0][1][:32] if events else root[:32]
    body = [
        _span_json(span, trace_id, _parent(run, span), last or span.opened[2]) for span in run.spans
    ]
    return document(body, version)


def _parent(run: _Run, span: _Span) -> str | None:
    return None if span is run.run or run.run is None else run.run.opened[1][:16]


def document(spans: list[dict[str, Any]], version: str = "") -> dict[str, Any]:
    """Spans (OTLP/JSON) as the ``ExportTraceServiceRequest`` that carries them."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": "twinflow"})},
                "scopeSpans": [{"scope": {"name": SCOPE, "version": version}, "spans": spans}],
            }
        ]
    }


class LiveSpans:
    """The spans of a trace as it is written: each one handed out once, when it closes.

    The same spans `otlp_json` makes of the finished trace (names, ids, attributes), but for
    ``twinflow.trace.root`` and ``twinflow.trace.size``: a live span names the root of the trace
    as far as the event that opened it (a prefix, which a consistency proof ties to the final
    trace), where an export after the run names the whole trace's.
    """

    def __init__(self, *, content: bool = False) -> None:
        """Start with no event.

        Args:
            content: Also export arguments, results and the policy's reasons.
        """
        self._run = _Run(root="", content=content)
        self._tree = MerkleTree()
        self._handed: set[int] = set()
        self._trace_id = ""
        self._last: datetime | None = None

    def feed(self, seq: int, digest: str, event: TraceEvent | None) -> list[dict[str, Any]]:
        """Read the next event (None: redacted); the spans it closed, as OTLP/JSON."""
        self._tree.append(bytes.fromhex(digest))
        self._run.root, self._run.size = self._tree.root().hex(), seq + 1
        self._trace_id = self._trace_id or digest[:32]
        if event is None:
            self._run.note(seq, digest, self._last, "twinflow.redacted")
        else:
            self._last = event.at
            self._run.read(seq, digest, event)
        return self._hand([s for s in self._run.spans if s.closed is not None])

    def rest(self) -> list[dict[str, Any]]:
        """The spans never closed (a paused or cut run), ended at the last event's time."""
        return self._hand(self._run.spans)

    def _hand(self, spans: list[_Span]) -> list[dict[str, Any]]:
        out = []
        for span in spans:
            if id(span) in self._handed:
                continue
            self._handed.add(id(span))
            end = self._last or span.opened[2]
            out.append(_span_json(span, self._trace_id, _parent(self._run, span), end))
        return out
