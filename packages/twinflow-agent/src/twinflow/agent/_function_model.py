"""`FunctionModel`: a scripted `ChatModel` for tests and benchmarks (like pydantic-ai's)."""

from __future__ import annotations

from collections.abc import Callable

from twinflow.vocab import Message, ModelRequest, ModelResponse

__all__ = ["FunctionModel"]

Handler = Callable[[ModelRequest], ModelResponse | Message]


class FunctionModel:
    """A `ChatModel` whose replies come from a handler function.

    The handler sees each `ModelRequest` and returns a `ModelResponse`, or just the
    assistant `Message` (wrapped with zero usage and a finish reason read off the message).
    """

    __slots__ = ("handler", "name", "requests")

    def __init__(self, handler: Handler, *, name: str = "function") -> None:
        """Wrap a handler.

        Args:
            handler: Called with each request.
            name: The ``model_name`` reported in responses built from a bare message.
        """
        self.handler = handler
        self.name = name
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
