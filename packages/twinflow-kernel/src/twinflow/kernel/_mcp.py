"""`McpClient`: a small client for the tools of an MCP server, on the kernel's own doors.

An MCP server is reached over a channel of `twinflow.kernel._mcp_wire`: a process's stdin and
stdout, or a Streamable HTTP endpoint, both the kernel's (docs/adr/0100).

The client speaks both eras of the protocol (docs/adr/0182). It asks ``server/discover``
first: a server that answers it with a current revision (2026-07-28) is spoken to statelessly,
every request carrying the version and the client's capabilities in its ``_meta`` (and, over
HTTP, the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers), every result
checked for its ``resultType``. Any other answer (an error, a refusal, a list of older
revisions only) falls back to ``initialize`` and the 2024-11-05 to 2025-11-25 handshake. Then
``tools/list`` (every page, with its ``ttlMs`` cache hint), ``tools/call`` (its
``input_required`` rounds retried by the caller), the resources and prompts methods, and
shutdown. It offers the server no capability but form elicitation, and that only on a current
request whose caller can answer: a server's request to sample, elicit or list roots is
answered with an error and remembered (`McpClient.take_refused`); ``ping`` is answered.
Every answer is bounded (`McpLimits`) and every failure is one `McpError` naming the server.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from twinflow.kernel._clock import SystemClock
from twinflow.kernel._credentials import read_api_key
from twinflow.kernel._errors import McpError
from twinflow.kernel._launcher import SubprocessLauncher
from twinflow.kernel._mcp_wire import (
    _CLIENT_INFO,
    _HANDSHAKE,
    _MAY_ASK,
    _RESERVED_CODES,
    _SERVER_INFO_KEY,
    _STATELESS,
    _UNSUPPORTED_VERSION,
    MCP_PROTOCOL_VERSIONS,
    McpChannel,
    McpLimits,
    McpSession,
    _Http,
    _stamped,
    _Stdio,
)
from twinflow.kernel._ports import Clock, Closing
from twinflow.kernel._transport import HttpTransport
from twinflow.vocab import JsonValue
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = [
    "MCP_PROTOCOL_VERSIONS",
    "McpChannel",
    "McpClient",
    "McpLimits",
    "McpSession",
]

MAX_TTL_MS = 24 * 3600 * 1000
"""The longest a list's ``ttlMs`` is believed (a day): a hint of years is capped here."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""The MCP specification's tool names: ASCII letters, digits, ``_``, ``-`` and ``.``, so a name
cannot imitate another with look-alike characters (``calc.\u0430dd``, with a Cyrillic ``a``)."""

_INHERITED_ENV = ("HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER")
"""What a stdio server inherits of our environment (``env`` and ``pass_env`` add to it): never
our API keys unless named."""

_REFUSED = -32601


class McpClient(Closing):
    """One MCP server's tools: connect (discover or initialize), list, call, close. Not
    thread-safe."""

    def __init__(
        self,
        channel: McpChannel,
        *,
        server: str,
        limits: McpLimits | None = None,
        clock: Clock | None = None,
    ):
        """Wrap an open channel (use `McpClient.stdio` or `McpClient.http`).

        Args:
            channel: The connection to the server.
            server: The server's name, for messages.
            limits: Bounds on the server's answers (default `McpLimits()`).
            clock: What a request's deadline is measured on (`monotonic`; the system's).
        """
        self.server = server
        self._clock: Clock = clock or SystemClock()
        self._channel = channel
        self._limits = limits or McpLimits()
        self._next_id = 0
        self._inbox: deque[JsonValue] = deque()
        self._refused: list[str] = []
        self.tools_changed = False
        """The server said its tool list changed (``notifications/tools/list_changed``)."""
        self.session: McpSession | None = None
        """What ``server/discover`` or ``initialize`` agreed on (None before it)."""
        self.tools_ttl_ms: int | None = None
        """The last tool list's ``ttlMs`` (capped at `MAX_TTL_MS`); None if it gave none."""
        self._listed_at = 0.0
        self._served: list[str] = []

    def connect(self) -> McpSession:
        """Decide the server's era: ``server/discover`` first, then ``initialize``.

        A server that answers ``server/discover`` naming 2026-07-28 among its versions is
        spoken to statelessly from then on; any other answer to it (an error, an HTTP refusal,
        older versions only) falls back to the handshake. A server that times out or exits
        is not asked again.

        Raises:
            McpError: The server failed both, serves only revisions twinflow does not speak,
                or claimed 2026-07-28 and answered without ``resultType``.
        """
        try:
            session = self.discover()
        except McpError as exc:
            if exc.reason in ("timeout", "closed"):
                raise
            served = self._served
            if exc.code == _UNSUPPORTED_VERSION and served and not set(served) & set(_HANDSHAKE):
                raise  # a current server of revisions twinflow does not speak: no handshake
            session = None
        return session if session is not None else self.initialize()

    def discover(self) -> McpSession | None:
        """Ask ``server/discover`` at 2026-07-28; the session if the server speaks it, None if
        it answers with older revisions only.

        Raises:
            McpError: The server refused or failed the request, or answered it badly.
        """
        result = self._request("server/discover", {}, version=_STATELESS[0])
        versions = result.get("supportedVersions")
        if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
            raise self._error("answered server/discover without a supportedVersions list")
        mutual = [v for v in _STATELESS if v in versions]
        if not mutual:
            return None
        capabilities = result.get("capabilities", {})
        meta = result.get("_meta")
        info = meta.get(_SERVER_INFO_KEY, {}) if isinstance(meta, dict) else {}
        if not isinstance(capabilities, dict) or not isinstance(info, dict):
            raise self._error(
                "answered server/discover with capabilities or serverInfo not objects"
            )
        self.session = McpSession(mutual[0], info, capabilities)
        return self.session

    def _error(self, what: str) -> McpError:
        return McpError(
            f"MCP server {self.server!r} ({self._channel.where}) {what}",
            reason="protocol",
            server=self.server,
        )

    def initialize(self) -> McpSession:
        """Negotiate the protocol version and say the client is ready.

        Raises:
            McpError: The server failed, or speaks no version the client knows.
        """
        result = self._request(
            "initialize",
            {
                "protocolVersion": _HANDSHAKE[0],
                "capabilities": {},
                "clientInfo": _CLIENT_INFO,
            },
        )
        version = result.get("protocolVersion")
        if version not in _HANDSHAKE:
            raise self._error(
                f"speaks protocol version {version!r}; twinflow speaks "
                f"{', '.join(MCP_PROTOCOL_VERSIONS)}"
            )
        info = result.get("serverInfo", {})
        capabilities = result.get("capabilities", {})
        if not isinstance(info, dict) or not isinstance(capabilities, dict):
            raise self._error("answered initialize without serverInfo and capabilities objects")
        assert isinstance(version, str)
        if isinstance(self._channel, _Http):
            self._channel.protocol_version = version
        self._notify("notifications/initialized")
        self.session = McpSession(version, info, capabilities)
        return self.session

    def list_tools(self) -> list[dict[str, JsonValue]]:
        """Every tool the server offers, all pages read, each checked.

        Raises:
            McpError: The server failed, offered too many tools, pages or bytes of tools, or a
                tool that is not one (no name, a name outside the specification's characters, no schema).
        """
        tools: list[dict[str, JsonValue]] = []
        weight = 0
        cursor: JsonValue = None
        ttl: int | None = None
        listed_at = self._clock.monotonic()
        for _page in range(self._limits.max_pages):
            result = self._request("tools/list", {} if cursor is None else {"cursor": cursor})
            ttl = self._ttl(result, ttl)
            page = result.get("tools")
            if not isinstance(page, list):
                raise self._error("answered tools/list without a tools array")
            for tool in page:
                tools.append(self._checked_tool(tool))
                if len(tools) > self._limits.max_tools:
                    raise self._error(
                        f"offers more than {self._limits.max_tools} tools (the limit)"
                    )
                weight += len(canonical_bytes(tool))
                if weight > self._limits.max_listing_bytes:
                    raise self._error(
                        f"lists tools of more than {self._limits.max_listing_bytes} bytes in all "
                        "(the limit: a listing is one trace line)"
                    )
            cursor = result.get("nextCursor")
            if cursor is None:
                self.tools_changed = False
                self.tools_ttl_ms = ttl
                self._listed_at = listed_at
                return tools
            if not isinstance(cursor, str):
                raise self._error("answered tools/list with a nextCursor that is not a string")
        raise self._error(f"kept paging tools/list past {self._limits.max_pages} pages (the limit)")

    def _ttl(self, result: dict[str, JsonValue], before: int | None) -> int | None:
        """The list's ``ttlMs`` (the least of its pages'), capped at `MAX_TTL_MS`."""
        ttl = result.get("ttlMs")
        if ttl is None:
            return before
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
            raise self._error(f"answered a list with ttlMs {str(ttl)[:40]!r}: not a count of ms")
        ttl = min(ttl, MAX_TTL_MS)
        return ttl if before is None else min(ttl, before)

    @property
    def tools_stale(self) -> bool:
        """Whether the tool list should be listed again: the server said it changed, or its
        ``ttlMs`` has passed on the client's clock (a ``ttlMs`` of 0: always)."""
        if self.tools_changed:
            return True
        ttl = self.tools_ttl_ms
        return ttl is not None and self._clock.monotonic() >= self._listed_at + ttl / 1000

    def _checked_tool(self, tool: JsonValue) -> dict[str, JsonValue]:
        if not isinstance(tool, dict):
            raise self._error("listed a tool that is not an object")
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise self._error(
                f"listed a tool named {name!r}: tool names are 1 to 128 ASCII letters, digits, "
                "'_', '-' or '.' (so no name imitates another)"
            )
        for key in ("inputSchema", "outputSchema"):
            schema = tool.get(key)
            if (key == "inputSchema" or schema is not None) and not (
                isinstance(schema, dict) and schema.get("type") == "object"
            ):
                raise self._error(
                    f"listed tool {name!r} with an {key} that is not an object schema"
                )
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            raise self._error(f"listed tool {name!r} with a description that is not a string")
        return tool

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, JsonValue],
        *,
        input_responses: Mapping[str, JsonValue] | None = None,
        request_state: str | None = None,
        capabilities: Mapping[str, JsonValue] | None = None,
    ) -> dict[str, JsonValue]:
        """Call a tool; the server's ``CallToolResult`` (``isError`` true for a tool's failure),
        or, from a 2026-07-28 server, its ``input_required`` result (``resultType``).

        Args:
            name: The tool's name as the server lists it.
            arguments: Its arguments.
            input_responses: The answers to an ``input_required`` result's ``inputRequests``
                (a retry of the call), by their keys.
            request_state: That result's ``requestState``, sent back as it came.
            capabilities: The client capabilities this request declares (2026-07-28; none by
                default): ``{"elicitation": {"form": {}}}`` when a form can be answered.

        Raises:
            McpError: The server failed to answer (timeout, exit, garbage, a JSON-RPC error).
        """
        params: dict[str, JsonValue] = {"name": name, "arguments": dict(arguments)}
        if input_responses is not None:
            params["inputResponses"] = dict(input_responses)
        if request_state is not None:
            params["requestState"] = request_state
        result = self._request("tools/call", params, capabilities=capabilities)
        content = result.get("content", [])
        if not isinstance(content, list):
            raise self._error(f"answered tools/call {name!r} with content that is not an array")
        return result

    def list_resources(self) -> list[dict[str, JsonValue]]:
        """Every resource the server lists (``resources/list``, all pages)."""
        return self._list_all("resources/list", "resources")

    def list_resource_templates(self) -> list[dict[str, JsonValue]]:
        """Every resource template the server lists (``resources/templates/list``)."""
        return self._list_all("resources/templates/list", "resourceTemplates")

    def list_prompts(self) -> list[dict[str, JsonValue]]:
        """Every prompt the server lists (``prompts/list``, all pages)."""
        return self._list_all("prompts/list", "prompts")

    def read_resource(self, uri: str) -> list[dict[str, JsonValue]]:
        """The contents of the resource at ``uri`` (``resources/read``): each with ``uri`` and
        ``text`` or ``blob``. Its size is bounded by `McpLimits.max_message_bytes`.

        Raises:
            McpError: The server failed or refused, or answered without a contents array of
                objects, or asked for input (``input_required``: resources take none here).
        """
        result = self._request("resources/read", {"uri": uri})
        return self._items(result, "resources/read", "contents")

    def get_prompt(self, name: str, arguments: Mapping[str, str]) -> list[dict[str, JsonValue]]:
        """The messages of the prompt ``name`` filled with ``arguments`` (``prompts/get``).

        Raises:
            McpError: As `read_resource`, for a ``messages`` array.
        """
        result = self._request("prompts/get", {"name": name, "arguments": dict(arguments)})
        return self._items(result, "prompts/get", "messages")

    def _items(
        self, result: dict[str, JsonValue], method: str, key: str
    ) -> list[dict[str, JsonValue]]:
        if result.get("resultType") == "input_required":
            raise self._error(f"asked for input during {method}, which twinflow does not answer")
        items = result.get(key)
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise self._error(f"answered {method} without a {key} array of objects")
        return [i for i in items if isinstance(i, dict)]

    def _list_all(self, method: str, key: str) -> list[dict[str, JsonValue]]:
        found: list[dict[str, JsonValue]] = []
        cursor: JsonValue = None
        for _page in range(self._limits.max_pages):
            result = self._request(method, {} if cursor is None else {"cursor": cursor})
            self._ttl(result, None)
            found.extend(self._items(result, method, key))
            if len(found) > self._limits.max_tools:
                raise self._error(f"lists more than {self._limits.max_tools} {key} (the limit)")
            cursor = result.get("nextCursor")
            if cursor is None:
                return found
            if not isinstance(cursor, str):
                raise self._error(f"answered {method} with a nextCursor that is not a string")
        raise self._error(f"kept paging {method} past {self._limits.max_pages} pages (the limit)")

    def take_refused(self) -> list[str]:
        """The methods of the server's requests refused since the last call (oldest first)."""
        refused, self._refused = self._refused, []
        return refused

    def _notify(self, method: str) -> None:
        message: dict[str, JsonValue] = {"jsonrpc": "2.0", "method": method}
        self._inbox.extend(self._channel.send(message, timeout=self._limits.timeout))

    def _request(
        self,
        method: str,
        params: dict[str, JsonValue],
        *,
        version: str | None = None,
        capabilities: Mapping[str, JsonValue] | None = None,
    ) -> dict[str, JsonValue]:
        if version is None and self.session is not None and self.session.stateless:
            version = self.session.protocol_version
        if version is not None:
            params = _stamped(params, version, capabilities or {})
        request_id = self._next_id
        self._next_id += 1
        limits = self._limits
        clock = self._clock
        end = clock.monotonic() + limits.timeout
        message: dict[str, JsonValue] = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": params,
        }
        self._inbox.extend(self._channel.send(message, timeout=limits.timeout))
        while True:
            # Every turn, not only when waiting: a server that keeps sending (a ping for each
            # reply) must not keep the request alive past its deadline.
            remaining = end - clock.monotonic()
            if remaining <= 0:
                raise McpError(
                    f"MCP server {self.server!r} ({self._channel.where}) did not answer "
                    f"{method} within {limits.timeout:g} s",
                    reason="timeout",
                    server=self.server,
                )
            answer = (
                self._inbox.popleft() if self._inbox else self._channel.receive(timeout=remaining)
            )
            if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
                raise self._error(f"sent a message that is not JSON-RPC 2.0 during {method}")
            if "method" in answer:
                self._from_server(answer, remaining)
                continue
            if answer.get("id") != request_id:
                if isinstance(answer.get("id"), int) and answer["id"] < request_id:  # type: ignore[operator]  # an int, checked on the left
                    continue  # the late answer to a request that timed out
                raise self._error(
                    f"answered {method} with id {answer.get('id')!r}, not {request_id}"
                )
            error = answer.get("error")
            if error is not None:
                raise self._refusal(method, error)
            result = answer.get("result")
            if not isinstance(result, dict):
                raise self._error(f"answered {method} with a result that is not an object")
            if version is not None:
                self._check_result_type(method, version, result)
            return result

    def _refusal(self, method: str, error: JsonValue) -> McpError:
        code = error.get("code") if isinstance(error, dict) else None
        text = error.get("message") if isinstance(error, dict) else None
        said = _RESERVED_CODES.get(code) if isinstance(code, int) else None
        if said is not None:
            data = error.get("data") if isinstance(error, dict) else None
            supported = data.get("supported") if isinstance(data, dict) else None
            if isinstance(supported, list):
                self._served = [str(v) for v in supported]
                said += f"; it serves {', '.join(map(str, supported))[:200]}"
            text = f"{said}: {str(text)[:300]}"
        return McpError(
            f"MCP server {self.server!r} refused {method}: {str(text)[:500]} "
            f"(JSON-RPC error {code})",
            reason="remote",
            server=self.server,
            code=code if isinstance(code, int) else 0,
        )

    def _check_result_type(self, method: str, version: str, result: dict[str, JsonValue]) -> None:
        """A 2026-07-28 result says what it is: ``complete``, or ``input_required`` for a
        request that may ask for more."""
        kind = result.get("resultType")
        if kind == "complete" or (kind == "input_required" and method in _MAY_ASK):
            return
        if kind is None:
            raise self._error(
                f"speaks {version} and answered {method} without a resultType (which that "
                "revision requires on every result)"
            )
        raise self._error(f"answered {method} with resultType {str(kind)[:60]!r}")

    def _from_server(self, message: dict[str, JsonValue], remaining: float) -> None:
        """A notification or a request from the server, met while waiting for an answer."""
        method = message.get("method")
        if "id" not in message:
            if method == "notifications/tools/list_changed":
                self.tools_changed = True
            return
        if method == "ping":
            reply: dict[str, JsonValue] = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        else:
            self._refused.append(str(method)[:200])
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {
                    "code": _REFUSED,
                    "message": f"twinflow offers no {str(method)[:200]}: a tool's server may not "
                    "call back into the run",
                },
            }
        self._inbox.extend(self._channel.send(reply, timeout=remaining))

    def close(self) -> None:
        """End the session: stdin closed and the process stopped, or the connection closed."""
        self._channel.close()

    @classmethod
    def stdio(
        cls,
        server: str,
        command: Sequence[str],
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        pass_env: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        limits: McpLimits | None = None,
        clock: Clock | None = None,
    ) -> Self:
        """Start `command` as an MCP server under the watchdog and connect to it (`connect`).

        Args:
            server: The server's name, for messages.
            command: The program and its arguments.
            log_path: Where its stderr goes (appended).
            env: Variables set for it, on top of a few of ours (PATH, HOME, LANG...: never keys).
            pass_env: Variables of ours forwarded to it (its keys): each must be set, and each
                value is registered with the scrubber (`twinflow._base._untrusted.scrub`), as an
                API key is.
            cwd: Its working directory.
            limits: Bounds on its answers.
            clock: What request deadlines are measured on (the system's).

        Raises:
            UserError: A `pass_env` variable is unset or empty.
            LaunchError: It cannot be started.
            McpError: It failed to connect (it has been stopped).
        """
        inherited = {k: v for k, v in os.environ.items() if k in _INHERITED_ENV}
        passed = {name: read_api_key(name, field="pass_env") for name in pass_env}
        launcher = SubprocessLauncher(
            env={**inherited, **(env or {}), **passed}, cwd=cwd, grace=2.0
        )
        process = launcher.spawn(command, log_path=log_path)
        client = cls(
            _Stdio(process, server, limits or McpLimits()),
            server=server,
            limits=limits,
            clock=clock,
        )
        try:
            client.connect()
        except BaseException:
            client.close()
            raise
        return client

    @classmethod
    def http(
        cls,
        server: str,
        url: str,
        *,
        api_key_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        limits: McpLimits | None = None,
        allow_network: bool | None = None,
        clock: Clock | None = None,
    ) -> Self:
        """Open Streamable HTTP to the MCP server at `url` and connect to it (`connect`).

        Args:
            server: The server's name, for messages.
            url: The endpoint (``http://127.0.0.1:8000/mcp``).
            api_key_env: The variable holding its key (sent as a bearer header, scrubbed from errors).
            headers: Extra request headers (never a key).
            limits: Bounds on its answers.
            allow_network: As `HttpTransport`'s kill switch.
            clock: What request deadlines are measured on (the system's).

        Raises:
            UserError: `api_key_env` names an unset variable, or the URL is not http(s).
            McpError: It failed to connect.
        """
        limits = limits or McpLimits()
        transport = HttpTransport(
            api_key_env=api_key_env,
            headers=headers,
            max_response_bytes=limits.max_message_bytes,
            allow_network=allow_network,
        )
        client = cls(
            _Http(transport, url, server, limits), server=server, limits=limits, clock=clock
        )
        try:
            client.connect()
        except BaseException:
            client.close()
            raise
        return client
