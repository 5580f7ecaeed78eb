"""`_McpTool`: one tool of an MCP server, its arguments checked by JSON Schema, called on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import JsonValue, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from twinflow.agent._errors import AgentError
from twinflow.agent._events import ListedTool
from twinflow.agent._mcp_checks import first_error, schema_validator
from twinflow.agent._tools import Tool
from twinflow.vocab import Part, ToolSpec

if TYPE_CHECKING:
    from twinflow.agent._mcp import Ask, McpTools

__all__ = ["_McpTool"]


class _McpTool(Tool):
    """One tool of an MCP server: validated by its JSON Schema, called on the server."""

    __slots__ = ("_input", "_listed", "_output", "_server")

    def __init__(self, listed: ListedTool, server: McpTools) -> None:
        # Not Tool.__init__: there is no Python signature to derive a model from.
        self.spec = ToolSpec(
            name=listed.name, description=listed.description, parameters=listed.parameters
        )
        self.function = self._unbound
        self._listed = listed
        self._server = server
        self._input = schema_validator(
            listed.parameters, f"the inputSchema of {listed.name}", server.name
        )
        self._output = (
            None
            if listed.output_schema is None
            else schema_validator(
                listed.output_schema, f"the outputSchema of {listed.name}", server.name
            )
        )

    def _unbound(self, **kwargs: object) -> object:
        raise AgentError(f"{self.name} is an MCP tool: call it through Tool.call")

    def validate(self, arguments: dict[str, JsonValue]) -> dict[str, object]:
        """Check the arguments against the tool's ``inputSchema``; return them unchanged.

        Raises:
            ValidationError: They do not match it (the model sees where and why).
        """
        found = first_error(self._input, arguments)
        if found is not None:
            path, message = found
            raise ValidationError.from_exception_data(
                self.name,
                [
                    InitErrorDetails(
                        type=PydanticCustomError("json_schema", "{message}", {"message": message}),
                        loc=path,
                        input=arguments,
                    )
                ],
            )
        return dict(arguments)

    def call(self, kwargs: dict[str, object]) -> str | tuple[Part, ...]:
        """Call the tool on its server; the result as text, or its parts (see `McpTools`)."""
        return self._server.call(self._listed, kwargs, self._output)

    def call_asking(self, kwargs: dict[str, object], ask: Ask) -> str | tuple[Part, ...]:
        """`call`, a run's ``ask`` answering the server's forms (it records each request and
        answer, and pauses the run for one nobody has answered yet)."""
        return self._server.call(self._listed, kwargs, self._output, ask)
