"""Tools from an MCP server: `McpTools`, named ``<server>.<tool>``, listed in the trace.

The server's identity and tool list are a `ToolsListed` event after ``run_started`` (and again
before the step after the server says its list changed, or after its ``ttlMs`` passed and a new
listing differs), so a replay serves them from the trace and needs no server: `McpTools.recorded` is built from those events alone. Every call goes
through the agent's policy like any tool's; the arguments are checked against the tool's
``inputSchema`` before the server sees them, a result the server marks ``isError`` is an error
result, and ``structuredContent`` is checked against the ``outputSchema`` when there is one.
A 2026-07-28 server's ``input_required`` rounds are answered inside the call, or pause the run
for a person's answer (docs/adr/0183, 0199);
its resources and prompts are two built-in tools, ``read_resource`` and ``get_prompt``
(docs/adr/0184).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from pydantic import JsonValue

from twinflow.agent._errors import (
    AgentConfigError,
    AgentError,
    McpToolFailed,
)
from twinflow.agent._events import ListedTool, ToolsListed
from twinflow.agent._mcp_checks import (
    first_error,
    prompt_arguments,
    prompt_problem,
    schema_validator,
)
from twinflow.agent._mcp_tool import _McpTool
from twinflow.agent._tools import Tool
from twinflow.kernel import McpClient, McpError
from twinflow.vocab import Part, TextPart, WireFormatError
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._wire import from_mcp_content

__all__ = ["McpTools"]

_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A server's name: no dot, so ``<server>.<tool>`` names one tool of one server."""


class McpTools:
    """An MCP server's tools for an `Agent` (pass it in ``tools=``), named ``<server>.<tool>``.

    Live (`McpTools.live`): the server is connected when first needed, listed, and called.
    Recorded (`McpTools.recorded`): the tool lists come from a trace's ``tools_listed`` events
    and no server is started; a call must be served from the record (replay), or it connects
    if a ``connect`` was given (a resume going on past its recorded prefix).
    """

    max_input_rounds: int = 8
    """The most times one call may come back ``input_required`` and be retried with answers:
    a server that asks forever ends the call with an error result (``input_rounds``)."""

    max_content_bytes: int = 1024 * 1024
    """The most a call's non-text content may weigh (its parts' canonical JSON, base64 as sent):
    more is the call's error result, not a megabyte-scale event in the trace."""

    def __init__(
        self,
        name: str,
        *,
        connect: Callable[[], McpClient] | None,
        recorded: Sequence[ToolsListed] = (),
        answer: Answer | None = None,
        resources: Sequence[str] = (),
        prompts: Sequence[str] = (),
    ) -> None:
        """Use `live` or `recorded`."""
        if not _SERVER_NAME.fullmatch(name):
            raise AgentConfigError(
                f"MCP server name {name!r}: use 1 to 64 ASCII letters, digits, '_' or '-' "
                "(no '.', which separates the server from the tool in a tool's name)"
            )
        self.name = name
        self._connect = connect
        self._client: McpClient | None = None
        self._recorded = {listed.step: listed for listed in recorded if listed.server == name}
        self._listing: ToolsListed | None = None
        self._tools: dict[str, _McpTool] = {}
        self._answer = answer
        self._resources = tuple(resources)
        self._prompts = tuple(prompts)
        self._prompt_arguments: dict[str, list[tuple[str, bool]]] | None = None

    @classmethod
    def live(
        cls,
        name: str,
        connect: Callable[[], McpClient],
        *,
        answer: Answer | None = None,
        resources: Sequence[str] = (),
        prompts: Sequence[str] = (),
    ) -> McpTools:
        """A server reached through ``connect`` (which starts or opens it and connects to it).

        ``resources`` (URI patterns, ``*`` and ``?`` as in `fnmatch`) adds the tool
        ``<server>.read_resource``, which reads a resource whose URI matches one; ``prompts``
        (name patterns) adds ``<server>.get_prompt``, which fills a prompt whose name matches
        one. Both are listed with the server's tools (recorded, replayed) and called under
        the policy like them; a URI or name that matches no pattern never reaches the server.

        ``answer(tool, message, schema)`` answers a call's ``input_required`` round (a
        2026-07-28 server's form elicitation): the form's values (checked against ``schema``
        before the server sees them), or None to decline. Without it, a run pauses on the form
        for a person's answer (``twinflow approve --answer``; docs/adr/0199); a call made
        outside a run gets the error result ``input_required`` naming what the server asked.
        """
        return cls(name, connect=connect, answer=answer, resources=resources, prompts=prompts)

    @classmethod
    def recorded(
        cls,
        name: str,
        listed: Sequence[ToolsListed],
        connect: Callable[[], McpClient] | None = None,
        *,
        resources: Sequence[str] = (),
        prompts: Sequence[str] = (),
    ) -> McpTools:
        """A server as a trace recorded it: its ``tools_listed`` events; ``connect`` only if
        the run may go on live past the record (a resume); ``resources`` and ``prompts`` as
        `live`."""
        if not any(event.server == name for event in listed):
            raise AgentConfigError(
                f"the trace lists no tools of MCP server {name!r}: it was not in the recorded run"
            )
        return cls(name, connect=connect, recorded=listed, resources=resources, prompts=prompts)

    def start(self) -> None:
        """Make the first listing now (connecting a live server): start-up errors surface here.

        Raises:
            LaunchError: The server could not be started.
            McpError: It failed to initialize or list its tools, or listed one badly.
        """
        if self._listing is None:
            self._listing = self._recorded.get(1) or self._list(1)
            self._install(self._listing)

    @property
    def tools(self) -> list[Tool]:
        """The tools of the current listing (`start` is called first if needed)."""
        self.start()
        return list(self._tools.values())

    def announce(self) -> ToolsListed:
        """The listing the run starts with (its ``tools_listed`` event)."""
        self.start()
        assert self._listing is not None
        return self._listing

    def relist(self, step: int) -> ToolsListed | None:
        """A new listing to offer from ``step`` on, if the list changed (or the record has one).

        A list the server said changed, or whose ``ttlMs`` has passed, is listed again; the
        new listing is returned (and traced) only if it differs from the one in use.
        """
        listed = self._recorded.get(step)
        client = self._client
        if listed is None and client is not None and client.tools_stale:
            fresh = self._list(step)
            current = self._listing
            if current is None or (fresh.tools, fresh.server_info, fresh.protocol_version) != (
                current.tools,
                current.server_info,
                current.protocol_version,
            ):
                listed = fresh
        if listed is not None:
            self._listing = listed
            self._install(listed)
        return listed

    def _client_now(self) -> McpClient:
        if self._client is None:
            if self._connect is None:
                raise AgentError(
                    f"MCP server {self.name!r} is replayed from its trace and has no connection: "
                    "a call that is not in the record cannot be made"
                )
            self._client = self._connect()
        return self._client

    def _list(self, step: int) -> ToolsListed:
        client = self._client_now()
        offered = client.list_tools()
        session = client.session
        assert session is not None  # connect() initialized it
        listed = ToolsListed(
            server=self.name,
            step=step,
            protocol_version=session.protocol_version,
            server_info=session.server_info,
            tools=tuple(
                ListedTool(
                    name=f"{self.name}.{tool['name']}",
                    description=str(tool.get("description") or ""),
                    parameters=_dict(tool["inputSchema"]),
                    output_schema=None
                    if tool.get("outputSchema") is None
                    else _dict(tool["outputSchema"]),
                )
                for tool in offered
            )
            + self._builtins(client),
            ttl_ms=client.tools_ttl_ms,
        )
        return listed

    def _builtins(self, client: McpClient) -> tuple[ListedTool, ...]:
        """``read_resource`` and ``get_prompt``, if asked for, described with what the
        server lists that the patterns allow (at most 50 of each)."""
        capabilities = client.session.capabilities if client.session is not None else {}
        built: list[ListedTool] = []
        if self._resources:
            lines = []
            if "resources" in capabilities:
                for item in client.list_resources() + client.list_resource_templates():
                    uri = str(item.get("uri") or item.get("uriTemplate") or "")
                    if any(fnmatchcase(uri, p) for p in self._resources):
                        lines.append(f"- {uri}: {str(item.get('description') or '')[:200]}")
            built.append(
                ListedTool(
                    name=f"{self.name}.read_resource",
                    description=f"Read a resource of the MCP server {self.name} by its URI. "
                    f"URIs allowed: {', '.join(self._resources)}.\n" + "\n".join(lines[:50]),
                    parameters={
                        "type": "object",
                        "properties": {"uri": {"type": "string"}},
                        "required": ["uri"],
                        "additionalProperties": False,
                    },
                )
            )
        if self._prompts:
            lines = []
            if "prompts" in capabilities:
                for prompt in client.list_prompts():
                    name = str(prompt.get("name"))
                    if any(fnmatchcase(name, p) for p in self._prompts):
                        args = ", ".join(
                            str(a.get("name")) + ("" if a.get("required") else "?")
                            for a in prompt_arguments(prompt)
                        )
                        lines.append(f"- {name}({args}): {str(prompt.get('description'))[:200]}")
            built.append(
                ListedTool(
                    name=f"{self.name}.get_prompt",
                    description=f"Get a prompt of the MCP server {self.name}, filled with "
                    "string arguments.\n" + "\n".join(lines[:50]),
                    parameters={
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "arguments": {
                                "type": "object",
                                "additionalProperties": {"type": "string"},
                            },
                        },
                        "required": ["name"],
                        "additionalProperties": False,
                    },
                )
            )
        return tuple(built)

    def _install(self, listed: ToolsListed) -> None:
        tools: dict[str, _McpTool] = {}
        for item in listed.tools:
            if item.name in tools:
                raise McpError(
                    f"MCP server {self.name!r} lists two tools named {item.name!r}",
                    reason="protocol",
                    server=self.name,
                )
            tools[item.name] = _McpTool(item, self)
        self._tools = tools

    def call(
        self,
        listed: ListedTool,
        arguments: Mapping[str, object],
        output: Any,
        ask: Ask | None = None,
    ) -> str | tuple[Part, ...]:
        """Call ``listed`` on the server; its result as text, or as parts if it has more.

        ``output`` is the validator of its ``outputSchema``, built when it was listed; ``ask``
        answers the forms of ``input_required`` rounds for a run (docs/adr/0199), the
        ``answer`` callback given to `live` without it.

        Raises:
            McpToolFailed (``error``): The server marked the result ``isError``.
            McpToolFailed (``output_invalid``): ``structuredContent`` does not match the ``outputSchema``.
            McpToolFailed (``content_invalid``): A content block does not map onto a part, or the content is
                past `max_content_bytes`.
            McpToolFailed (``request_refused``): The server asked to sample or elicit during the call.
            McpError: The server failed (timeout, exit, garbage, an answer past the size
                limit); the connection is closed, and opened again by the next call.
        """
        try:
            return self._call(listed, arguments, output, ask)
        except McpError as exc:
            if exc.reason != "remote":
                # The connection is past use (a message cut at its limit, an exit, a request
                # still running): dropped, and opened again if the run calls the server again.
                self.close()
            raise

    def _call(
        self, listed: ListedTool, arguments: Mapping[str, object], output: Any, ask: Ask | None
    ) -> str | tuple[Part, ...]:
        client = self._client_now()
        bare = listed.name[len(self.name) + 1 :]
        if bare == "read_resource" and self._resources:
            return self._read(client, listed.name, str(arguments["uri"]))
        if bare == "get_prompt" and self._prompts:
            given = arguments.get("arguments")
            return self._prompt(
                client,
                listed.name,
                str(arguments["name"]),
                dict(given) if isinstance(given, dict) else {},
            )
        sent = {k: _json(v) for k, v in arguments.items()}
        # A form can be answered only with an answer to give: only then is it declared.
        offered: dict[str, JsonValue] | None = (
            None if self._answer is None and ask is None else {"elicitation": {"form": {}}}
        )
        result = client.call_tool(bare, sent, capabilities=offered)
        for round_ in range(1, self.max_input_rounds + 1):
            if result.get("resultType") != "input_required":
                break
            state = result.get("requestState")
            responses = self._responses(listed.name, round_, result.get("inputRequests"), ask)
            result = client.call_tool(
                bare,
                sent,
                input_responses=responses,
                request_state=state if isinstance(state, str) else None,
                capabilities=offered,
            )
        else:
            if result.get("resultType") == "input_required":
                raise McpToolFailed(
                    f"{listed.name} still asked for input after {self.max_input_rounds} rounds "
                    "answered (the limit of rounds); the call is abandoned",
                    reason="input_rounds",
                )
        refused = client.take_refused()
        if refused:
            raise McpToolFailed(
                f"{listed.name} asked for {', '.join(refused)} during the call; an MCP server "
                "may not call back into the run, so the call's result is not used",
                reason="request_refused",
            )
        parts = self._parts(listed.name, result.get("content", []))
        text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
        if result.get("isError") is True:
            raise McpToolFailed(text or "the server marked the result as an error", reason="error")
        structured = result.get("structuredContent")
        if output is not None:
            if structured is None:
                raise McpToolFailed(
                    f"{listed.name} has an outputSchema but returned no structuredContent",
                    reason="output_invalid",
                )
            found = first_error(output, structured)
            if found is not None:
                where = "/".join(map(str, found[0])) or "the value"
                raise McpToolFailed(
                    f"{listed.name}'s structuredContent does not match its outputSchema at "
                    f"{where}: {found[1]}",
                    reason="output_invalid",
                )
        # The model sees the content, as the server meant it to be read; structuredContent
        # is what was checked, and stands in only when there is no content.
        if not parts and structured is not None:
            return canonical_bytes(structured).decode()
        if all(isinstance(p, TextPart) for p in parts):
            return text
        size = len(canonical_bytes([p.model_dump(mode="json") for p in parts]))
        if size > self.max_content_bytes:
            raise McpToolFailed(
                f"{listed.name} returned {size} bytes of content, over the limit of "
                f"{self.max_content_bytes}",
                reason="content_invalid",
            )
        return tuple(parts)

    def _read(self, client: McpClient, tool: str, uri: str) -> str:
        """A resource's text (``read_resource``).

        Raises:
            McpToolFailed (``resource_denied``): No pattern allows the URI (the server is not asked).
            McpToolFailed (``content_invalid``): The resource is bytes: the model is sent text.
        """
        if not any(fnmatchcase(uri, p) for p in self._resources):
            raise McpToolFailed(
                f"{tool}: the URI {uri[:300]!r} matches none of the patterns allowed "
                f"({', '.join(self._resources)}); the server was not asked",
                reason="resource_denied",
            )
        texts = []
        for item in client.read_resource(uri):
            text = item.get("text")
            if not isinstance(text, str):
                kind = item.get("mimeType") or "no media type"
                raise McpToolFailed(
                    f"{tool}: {str(item.get('uri', uri))[:300]!r} is bytes ({str(kind)[:100]}), "
                    "not text: read_resource gives the model text only",
                    reason="content_invalid",
                )
            texts.append(text)
        return "\n".join(texts)

    def _prompt(self, client: McpClient, tool: str, name: str, given: dict[str, object]) -> str:
        """A prompt's messages as text (``get_prompt``), its arguments checked first.

        Raises:
            McpToolFailed (``prompt_denied``): No pattern allows the name (the server is not asked).
            McpToolFailed (``arguments_invalid``): The server lists no such prompt, or the
                arguments are not its (unknown, missing, not strings).
        """
        if not any(fnmatchcase(name, p) for p in self._prompts):
            raise McpToolFailed(
                f"{tool}: the prompt {name[:200]!r} matches none of the names allowed "
                f"({', '.join(self._prompts)}); the server was not asked",
                reason="prompt_denied",
            )
        if self._prompt_arguments is None:
            self._prompt_arguments = {
                str(p.get("name")): [
                    (str(a.get("name")), a.get("required") is True) for a in prompt_arguments(p)
                ]
                for p in client.list_prompts()
            }
        problem = prompt_problem(self._prompt_arguments.get(name), given)
        if problem is not None:
            raise McpToolFailed(
                f"{tool}: arguments for prompt {name[:200]!r} do not validate ({problem[:500]})",
                reason="arguments_invalid",
            )
        messages = client.get_prompt(name, {k: str(v) for k, v in given.items()})
        lines = []
        for message in messages:
            content = message.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            shown = text if isinstance(text, str) else "[content that is not text]"
            lines.append(f"{message.get('role')}: {shown}")
        return "\n".join(lines)

    def _responses(
        self, tool: str, round_: int, requests: JsonValue, ask: Ask | None
    ) -> dict[str, JsonValue]:
        """The answers to an ``input_required`` round's requests, each checked.

        Raises:
            McpToolFailed (``request_refused``): It asks to sample, to list roots, or for a URL.
            McpToolFailed (``input_required``): There is no ``answer`` nor ``ask`` to ask.
            McpToolFailed (``answer_invalid``): An answer does not match the requested schema.
            RunPaused: ``ask`` stopped the run for a person to answer.
        """
        if not isinstance(requests, dict) or not requests:
            raise McpToolFailed(
                f"{tool} answered input_required without inputRequests", reason="content_invalid"
            )
        forms: list[tuple[str, str, dict[str, JsonValue]]] = []
        for key, request in requests.items():
            method = request.get("method") if isinstance(request, dict) else None
            params = request.get("params") if isinstance(request, dict) else None
            if not isinstance(params, dict):
                params = {}
            mode = params.get("mode", "form")
            if method != "elicitation/create" or mode != "form":
                asked = f"{method} ({mode})" if method == "elicitation/create" else str(method)
                raise McpToolFailed(
                    f"{tool} asked for {asked[:200]} during the call; twinflow answers only a "
                    "form's input (a server may not sample the run's model or read its roots), "
                    "so the call's result is not used",
                    reason="request_refused",
                )
            message = str(params.get("message", ""))[:2000]
            schema = params.get("requestedSchema")
            if not isinstance(schema, dict):
                schema = {"type": "object"}
            forms.append((str(key)[:256], message, schema))
        if ask is not None:
            given = ask(round_, forms, self._answer)
            return {
                key: {"action": "decline"}
                if given[key] is None
                else {"action": "accept", "content": given[key]}
                for key, _, _ in forms
            }
        responses: dict[str, JsonValue] = {}
        for key, message, schema in forms:
            if self._answer is None:
                raise McpToolFailed(
                    f"{tool} asks for input before it answers: {message!r}, a form of "
                    f"{canonical_bytes(schema).decode()[:500]}; this run has no answer for it",
                    reason="input_required",
                )
            content = self._answer(tool, message, schema)
            if content is None:
                responses[key] = {"action": "decline"}
                continue
            found = first_error(
                schema_validator(schema, f"the form {tool} asks for", self.name), content
            )
            if found is not None:
                where = "/".join(map(str, found[0])) or "the value"
                raise McpToolFailed(
                    f"the answer to {tool}'s form does not match its schema at {where}: {found[1]}",
                    reason="answer_invalid",
                )
            responses[key] = {"action": "accept", "content": content}
        return responses

    def _parts(self, tool: str, content: JsonValue) -> list[Part]:
        """The result's content blocks as parts (`from_mcp_content`), or its error."""
        assert isinstance(content, list)  # the client checked the result's shape
        try:
            return [from_mcp_content(block, ("content", i)) for i, block in enumerate(content)]
        except WireFormatError as exc:
            raise McpToolFailed(
                f"{tool} returned a content block that is not MCP's: {exc}",
                reason="content_invalid",
            ) from None

    def close(self) -> None:
        """Close the connection (a stdio server is stopped), if one was made."""
        if self._client is not None:
            self._client.close()
            self._client = None


Answer = Callable[[str, str, dict[str, JsonValue]], dict[str, JsonValue] | None]
"""``answer(tool, message, schema)``: the values of the form an MCP server asks for during
a call, or None to decline (`McpTools.live`)."""

Ask = Callable[
    [int, list[tuple[str, str, dict[str, JsonValue]]], Answer | None],
    dict[str, JsonValue],
]
"""``ask(round, forms, answer)``: a run's answers to one round's forms (each a key, message
and schema), by key, None to decline; ``answer`` is the server's callback, if it has one."""


def _dict(value: JsonValue) -> dict[str, JsonValue]:
    assert isinstance(value, dict)  # the client checked the schemas are objects
    return value


def _json(value: object) -> JsonValue:
    # Arguments come from the model's JSON, validated: they are JSON values already.
    return value  # type: ignore[return-value]  # validate() returned the model's JSON unchanged
