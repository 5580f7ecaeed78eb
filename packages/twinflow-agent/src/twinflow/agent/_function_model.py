"""`FunctionModel`: a scripted `ChatModel` for tests and benchmarks (like pydantic-ai's)."""

from __future__ import annotations

from collections.abc import Callable

from twinflow.vocab import Chunk, Message, ModelRequest, ModelResponse, assemble
from twinflow.vocab._stream import response_chunks

__all__ = ["FunctionModel"]

Handler = Callable[[ModelRequest], ModelResponse | Message]


class FunctionModel:
    """A `ChatModel` whose replies come from a handler function.

    The handler sees each `ModelRequest` and returns a `ModelResponse`, or just the
    assistant `Message` (wrapped with zero usage and a finish reason read off the message).
    """

    __slots__ = ("chunk_size", "handler", "name", "requests")

    def __init__(self, handler: Handler, *, name: str = "function", chunk_size: int = 4) -> None:
        """Wrap a handler.

        Args:
            handler: Called with each request.
            name: The ``model_name`` reported in responses built from a bare message.
            chunk_size: Characters per chunk when `stream` cuts a reply.
        """
        self.handler = handler
        self.name = name
        self.chunk_size = chunk_size
        self.requests = 0
        """Requests served so far."""

    def request(self, request: ModelRequest) -> ModelResponse:
        """Serve one request through the handler.

        Args:
            request: The request.

        Returns:
            The handler's response.
        """
        self.requests += 1
        reply = self.handler(request)
        if isinstance(reply, ModelResponse):
            return reply
        finish = "tool_calls" if reply.tool_calls else "stop"
        return ModelResponse(message=reply, finish_reason=finish, model_name=self.name)

    def stream(self, request: ModelRequest, on_chunk: Callable[[Chunk], None]) -> ModelResponse:
        """Serve one request as a stream: the handler's reply cut into chunks, then assembled.

        The chunks come from `twinflow.vocab.response_chunks` and the reply from vocab's
        assembler, so the value equals what `request` returns.

        Raises:
            UserError: The reply holds a part that has no streaming chunk (a structured value,
                media).
        """
        chunks = response_chunks(self.request(request), size=self.chunk_size)
        for chunk in chunks:
            on_chunk(chunk)
        return assemble(chunks)
