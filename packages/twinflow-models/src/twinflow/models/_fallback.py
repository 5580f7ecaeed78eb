"""Fallback models: ask each model in turn until one answers, on listed failure classes only.

`FallbackChatModel` holds labelled chat models in order. A request goes to the first; if it
fails for a class in `fallback_on` (`failure_class` names it) the next is asked, and so on; a
failure of another class, or of the last model, propagates unchanged. Every switch is kept as
a `FellBack` record, and the label of the model that answered, for the caller to record
(`take_fallbacks`): the agent writes each switch as a `model_fell_back` event and the label in
`model_responded`, so a trace names the model behind every step and replay serves both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Self

from twinflow._base._failures import DEFAULT_FALLBACK_ON, FAILURE_CLASSES, FailureClass
from twinflow.kernel import TransportError
from twinflow.models._errors import MalformedResponseError, ModelSetupError
from twinflow.models._servers import OnChunk
from twinflow.vocab import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from twinflow.vocab import ChatModel


def failure_class(exc: BaseException) -> FailureClass | None:
    """The failure class of a model request's error (None: not one fallback acts on)."""
    if isinstance(exc, TransportError):
        if exc.reason == "connect":
            return "connect"
        if exc.reason == "timeout":
            return "timeout"
        if exc.reason == "status" and exc.status is not None:
            if exc.status == 429:
                return "rate_limited"
            if exc.status in (503, 529):
                return "overloaded"
            if exc.status >= 500:
                return "server_error"
        return None
    if isinstance(exc, MalformedResponseError):
        return exc.reason
    return None


@dataclass(frozen=True)
class FellBack:
    """One switch: `model` failed with `failure` (`error` its one line), `next` was asked."""

    model: str
    failure: FailureClass
    error: str
    next: str


class FallbackChatModel:
    """Chat models asked in order until one answers (see the module docstring).

    Args:
        models: (label, model) pairs, the first asked first; at least two.
        fallback_on: The failure classes that move on to the next model.
    """

    def __init__(
        self,
        models: Sequence[tuple[str, ChatModel]],
        fallback_on: Sequence[FailureClass] = DEFAULT_FALLBACK_ON,
    ) -> None:
        """Hold the models; nothing is sent until `request`."""
        if len(models) < 2:
            raise ModelSetupError("a fallback list names at least two models", reason="name")
        unknown = sorted(set(fallback_on) - set(FAILURE_CLASSES))
        if unknown:
            raise ModelSetupError(
                f"unknown failure class {unknown[0]!r}; choose from {', '.join(FAILURE_CLASSES)}",
                reason="name",
            )
        self._models = tuple(models)
        self._on = frozenset(fallback_on)
        self._owned = contextlib.ExitStack()
        self._switches: list[FellBack] = []
        self._answered: str | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        """The models' labels, in the order they are asked."""
        return tuple(label for label, _ in self._models)

    def request(self, request: ModelRequest) -> ModelResponse:
        """Ask each model in turn; the first answer is the reply.

        Raises:
            Whatever the last model asked raised, or the first failure of a class not in
            `fallback_on`, unchanged.
        """
        return self._ask(request, None)

    def stream(self, request: ModelRequest, on_chunk: OnChunk) -> ModelResponse:
        """As `request`, streaming from each model that can (a switch starts a new reply)."""
        return self._ask(request, on_chunk)

    def take_fallbacks(self) -> tuple[tuple[FellBack, ...], str | None]:
        """The switches of the last request and the label of the model that answered it (None
        if none did), once: a second call returns nothing until the next request."""
        taken = (tuple(self._switches), self._answered)
        self._switches, self._answered = [], None
        return taken

    def _ask(self, request: ModelRequest, on_chunk: OnChunk | None) -> ModelResponse:
        self._switches, self._answered = [], None
        last = len(self._models) - 1
        for index, (label, model) in enumerate(self._models):
            stream = getattr(model, "stream", None) if on_chunk is not None else None
            try:
                response: ModelResponse = (
                    model.request(request) if stream is None else stream(request, on_chunk)
                )
            except Exception as exc:
                failure = failure_class(exc)
                if index == last or failure is None or failure not in self._on:
                    raise
                error = " ".join(str(exc).split())[:500]
                self._switches.append(FellBack(label, failure, error, self._models[index + 1][0]))
                continue
            self._answered = label
            return response
        raise AssertionError("unreachable: the last model's failure is raised")

    def own(self, resource: AbstractContextManager[object]) -> None:
        """Close `resource` when this model closes (the transports opened for its models)."""
        self._owned.enter_context(resource)

    def close(self) -> None:
        """Close each model that can be closed, and what was handed to `own`."""
        try:
            for _, model in self._models:
                close = getattr(model, "close", None)
                if close is not None:
                    close()
        finally:
            self._owned.close()

    def __enter__(self) -> Self:
        """Use the models in a `with` block."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the models."""
        self.close()
