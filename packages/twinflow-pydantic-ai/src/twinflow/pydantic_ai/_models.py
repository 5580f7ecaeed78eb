"""`RecordingModel` writes a pydantic-ai run as a twinflow trace; `ReplayModel` serves it back.

Both are pydantic-ai models, so a user changes one line: the model the agent is given. The
events are the agent's own kinds (`twinflow.pydantic_ai._chain`), so ``twinflow verify``,
``twinflow show``, ``twinflow-trace verify`` and ``twinflow-trace prove`` read a recording as
they read a twinflow run. Times are the ones pydantic-ai put on its messages (a request's or
tool return's ``timestamp``, a response's): the recorder reads no clock of its own.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from twinflow._base._untrusted import has_secrets, scrub_value
from twinflow.agent import typed_event
from twinflow.kernel import ReplayDivergenceError
from twinflow.pydantic_ai._chain import ADAPTER, Chain, response_from_body
from twinflow.trace import FileTraceSink, TraceFormatError, UserError, walk_trace
from twinflow.trace._format import GENESIS, encode_line
from twinflow.vocab import PartNotCarriedError, diff, value_bytes

__all__ = ["RecordingModel", "ReplayModel"]


def _at(when: datetime | None, last: str) -> str:
    """An event's time as the agent writes it (UTC, RFC 3339); ``last`` when pydantic-ai gave none."""
    if when is None or when.tzinfo is None:
        return last
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _request_time(messages: Sequence[ModelMessage], last: str) -> str:
    message = messages[-1] if messages else None
    return _at(message.timestamp if isinstance(message, ModelRequest) else None, last)


def _run_id(messages: Sequence[ModelMessage]) -> str:
    """pydantic-ai's id of the run (on its requests), or ``pydantic-ai`` where it gave none."""
    first = messages[-1] if messages else None
    run_id = first.run_id if isinstance(first, ModelRequest) else None
    return run_id or "pydantic-ai"


def _model_name(model: Model) -> str:
    return f"pydantic-ai:{model.system}:{model.model_name}"


class RecordingModel(WrapperModel):
    """A pydantic-ai model that records every request and response of a run as a twinflow trace.

    Wrap the agent's model and use it as a context manager around one run::

        with RecordingModel(OpenAIChatModel("gpt-5", provider=...), "run.jsonl") as model:
            Agent(model, tools=[add]).run_sync("What is 2 + 3?")

    The trace holds ``run_started``, each request (``model_requested``) and response
    (``model_responded``), each tool's call and result (``tool_called``, ``tool_returned``, from
    the tool returns pydantic-ai sends back), and ``run_finished``, or ``run_failed`` when the
    block raises. Lines are written as the run goes. What a trace cannot represent is refused
    by name before the request is sent (`twinflow.vocab.PartNotCarriedError`).
    """

    def __init__(self, wrapped: Model | str, path: str | os.PathLike[str]) -> None:
        """Wrap ``wrapped``; the trace is created at ``path`` when the block is entered.

        Args:
            wrapped: The model that answers (a pydantic-ai model or model name).
            path: Where the trace goes; nothing may exist there yet.
        """
        super().__init__(wrapped)
        self.path = Path(path)
        self._sink: FileTraceSink | None = None
        self._chain: Chain | None = None
        self._prev = GENESIS
        self._seq = 0
        self._last = "1970-01-01T00:00:00Z"

    def __enter__(self) -> RecordingModel:
        """Create the trace file.

        Raises:
            TargetExistsError: Something exists at the path (a trace is never overwritten).
        """
        if self._sink is not None or self._seq:
            raise UserError(
                f"{self.path}: a RecordingModel records one run; make another for the next"
            )
        self._sink = FileTraceSink(self.path)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """End the trace: ``run_finished``, or ``run_failed`` naming what the block raised."""
        sink, self._sink = self._sink, None
        if sink is None:
            return
        try:
            if self._chain is not None:
                body = self._chain.finished() if exc is None else self._chain.failed(exc)
                self._write(sink, body, self._last)
            sink.flush(durable=True)
        finally:
            sink.close()

    def _write(self, sink: FileTraceSink, body: dict[str, Any], at: str) -> None:
        if has_secrets():  # a key this process read reached an event: write the marker instead
            body = scrub_value(body)
        event = typed_event({"seq": self._seq, "prev": self._prev, "at": at, "body": body})
        line, digest = encode_line(value_bytes(event))
        sink.write(line)
        self._prev, self._seq, self._last = digest, self._seq + 1, at

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Record the request, send it to the wrapped model, record the response."""
        sink = self._sink
        if sink is None:
            raise UserError(
                f"use the RecordingModel for {self.path} in a `with` block around the run"
            )
        if self._chain is None:
            self._chain = Chain(_run_id(messages), _model_name(self.wrapped))
        at = _request_time(messages, self._last)
        for body in self._chain.request(messages, model_settings, model_request_parameters):
            self._write(sink, body, at)
        sink.flush(durable=True)
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        self._write(sink, self._chain.response(response), _at(response.timestamp, at))
        sink.flush(durable=True)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        """Refused: a streamed request is not recorded (run the agent without streaming)."""
        raise PartNotCarriedError(
            ADAPTER,
            "streamed request",
            "a twinflow trace records whole responses; run the agent with run or run_sync",
        )
        yield  # pragma: no cover - an async generator, for the context manager


class ReplayModel(Model):
    """A pydantic-ai model that answers with the responses a `RecordingModel` trace recorded.

    Give it to the same agent and run the same prompt: each request the agent makes is turned
    into events as the recorder turned it, and compared with the recorded ones; the first that
    differs raises `twinflow.kernel.ReplayDivergenceError` naming its seq and the first
    difference, and no response is served for it. No network, no model: the trace is verified
    first.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Read and verify the trace at ``path``.

        Raises:
            TraceCorruptError: The trace does not verify (or does not end its run).
            TraceFormatError: The trace is not a recorded run.
            OSError: The file cannot be read.
        """
        super().__init__()
        self.path = Path(path)
        self._events: list[tuple[int, str, dict[str, Any]]] = [
            (item.seq, item.value["at"], item.value["body"])
            for item in walk_trace(self.path, check=lambda value: value, require_complete=True)
        ]
        if self._events[0][2].get("kind") != "run_started":
            raise TraceFormatError(f"{self.path}: not a recorded run (no run_started first)")
        started = self._events[0][2]
        self._chain = Chain(str(started["run_id"]), str(started["config"]["model"]))
        self._next = 0

    @property
    def model_name(self) -> str:
        """The recorded model's name."""
        return str(self._chain.model)

    @property
    def system(self) -> str:
        """``twinflow-replay``: answers come from a trace."""
        return "twinflow-replay"

    @property
    def served(self) -> int:
        """Recorded events matched so far (a finished replay matched all but the last)."""
        return self._next

    def _expect(self, body: dict[str, Any]) -> None:
        seq = self._next
        recorded = self._events[seq][2] if seq < len(self._events) else None
        if recorded is None or recorded["kind"] in ("run_finished", "run_failed"):
            ended = "" if recorded is None else f", it ended with {recorded['kind']}"
            raise ReplayDivergenceError(
                f"{self.path}: this run goes on ({body['kind']}) where the recorded run did not "
                f"(seq {seq}{ended}); nothing was served for it",
                seq=seq,
                expected=recorded,
                actual=body,
            )
        if recorded != body:
            raise ReplayDivergenceError(
                f"{self.path}: seq {seq} differs from this run: recorded {recorded['kind']}, "
                f"this run {body['kind']}; nothing was served for it",
                difference=diff(recorded, body),
                seq=seq,
                expected=recorded,
                actual=body,
            )
        self._next += 1

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Compare the request with the recorded one and serve the recorded response."""
        for body in self._chain.request(messages, model_settings, model_request_parameters):
            self._expect(body)
        seq = self._next
        recorded: dict[str, Any] = (
            self._events[seq][2] if seq < len(self._events) else {"kind": "nothing"}
        )
        if recorded["kind"] != "model_responded":
            why = f": {recorded.get('message')}" if recorded["kind"] == "run_failed" else ""
            raise ReplayDivergenceError(
                f"{self.path}: the recorded run has no response to this request (seq {seq} is "
                f"{recorded['kind']}{why})",
                seq=seq,
                expected=recorded,
            )
        response = response_from_body(recorded["response"], self._events[seq][1])
        self._expect(self._chain.response(response))
        return response
