"""The MCP wire: the protocol's revisions and keys, the bounds on a server's answers, and the
channels that carry JSON-RPC messages to a server and back.

An MCP server is a process spoken to over its stdin and stdout (newline-delimited JSON-RPC), or
an HTTP endpoint (Streamable HTTP: each message a POST, the answer JSON or server-sent events,
the session in the ``Mcp-Session-Id`` header). The process starts under the launcher's watchdog
(`SubprocessLauncher.spawn`: it never outlives us), the HTTP exchange goes through
`HttpTransport` (its deadline, size limit, kill switch, key handling and scrubbing), so both are
the kernel's and the determinism gate covers them (docs/adr/0100).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from twinflow.kernel._errors import McpError, TransportError
from twinflow.kernel._launcher import PipedProcess, _tail
from twinflow.kernel._transport import HttpTransport
from twinflow.trace import CanonicalError
from twinflow.trace._canonical import parse_json
from twinflow.vocab import JsonValue
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["MCP_PROTOCOL_VERSIONS", "McpChannel", "McpLimits", "McpSession"]

MCP_PROTOCOL_VERSIONS = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The protocol revisions the client speaks, newest first."""

_STATELESS = ("2026-07-28",)
"""The revisions without a handshake: the version travels in every request's ``_meta``."""
_HANDSHAKE = MCP_PROTOCOL_VERSIONS[len(_STATELESS) :]
"""The revisions agreed on by ``initialize`` (the first is the one offered)."""

_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
_CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
_SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
_CLIENT_INFO: dict[str, JsonValue] = {"name": "twinflow", "version": "0.1.0"}

_NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""The methods whose target is repeated in the ``Mcp-Name`` header, and the param naming it."""
_MAY_ASK = frozenset(_NAMED_BY)
"""The methods a current server may answer with ``resultType: "input_required"``."""

_HEADER_MISMATCH = -32020
_MISSING_CAPABILITY = -32021
_UNSUPPORTED_VERSION = -32022
_RESERVED_CODES = {
    _HEADER_MISMATCH: "found the request's headers and its body disagree (-32020, header mismatch)",
    _MISSING_CAPABILITY: "requires a client capability twinflow does not offer (-32021)",
    _UNSUPPORTED_VERSION: "does not serve the requested protocol version (-32022)",
}
"""The error codes the 2026-07-28 revision reserves, and what each says."""


@dataclass(frozen=True, slots=True)
class McpLimits:
    """Bounds on what a server may send and how long it may take."""

    max_message_bytes: int = 4 * 1024 * 1024
    """Largest message (a stdio line, an HTTP body)."""
    max_depth: int = 64
    """Deepest nesting of a message's objects and arrays."""
    max_tools: int = 1000
    """Most tools a server may offer."""
    max_pages: int = 100
    """Most pages of ``tools/list`` read."""
    max_listing_bytes: int = 8 * 1024 * 1024
    """Most bytes the tools of one listing may weigh in all pages together (each tool's
    canonical JSON): the listing is one trace line, which readers take up to 16 MiB."""
    timeout: float = 30.0
    """Seconds one request may take, from sending it to its answer (notifications included)."""


@dataclass(frozen=True, slots=True)
class McpSession:
    """What ``initialize`` agreed on."""

    protocol_version: str
    """The negotiated revision."""
    server_info: dict[str, JsonValue]
    """The server's ``serverInfo`` (name, version...)."""
    capabilities: dict[str, JsonValue]
    """The server's capabilities."""

    @property
    def stateless(self) -> bool:
        """Whether the revision has no handshake (2026-07-28): found by ``server/discover``."""
        return self.protocol_version in _STATELESS


class McpChannel(Protocol):
    """Carries JSON-RPC messages to a server and back."""

    where: str
    """The command or URL, for messages."""

    def send(self, message: dict[str, JsonValue], *, timeout: float) -> list[JsonValue]:
        """Send one message; return the messages the exchange itself brought back (HTTP)."""
        ...

    def receive(self, *, timeout: float) -> JsonValue:
        """The next message from the server."""
        ...

    def close(self) -> None:
        """End the connection (a process is stopped)."""
        ...


def _stamped(
    params: dict[str, JsonValue], version: str, capabilities: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    """``params`` with a current request's ``_meta``: the version, client and capabilities."""
    meta = params.get("_meta")
    return {
        **params,
        "_meta": {
            **(meta if isinstance(meta, dict) else {}),
            _VERSION_KEY: version,
            _CLIENT_INFO_KEY: _CLIENT_INFO,
            _CAPABILITIES_KEY: dict(capabilities),
        },
    }


def _parse(data: bytes, server: str, where: str, limits: McpLimits) -> JsonValue:
    try:
        value: JsonValue = parse_json(data, max_depth=limits.max_depth)
    except CanonicalError as exc:
        start = data[:80].decode("utf-8", errors="replace")
        raise McpError(
            f"MCP server {server!r} ({where}) sent a message that is not JSON ({exc}); it starts "
            f"{start!r}: a server must write only JSON-RPC messages",
            reason="protocol",
            server=server,
        ) from None
    return value


class _Stdio:
    """A server process's stdin and stdout, one JSON-RPC message per line."""

    def __init__(self, process: PipedProcess, server: str, limits: McpLimits) -> None:
        self._process = process
        self._server = server
        self._limits = limits
        # The program alone: its arguments may carry a token, and these messages are recorded
        # as tool errors.
        self.where = Path(process.command[0]).name if process.command else "?"

    def send(self, message: dict[str, JsonValue], *, timeout: float) -> list[JsonValue]:
        try:
            self._process.write(canonical_bytes(message) + b"\n", timeout=timeout)
        except TimeoutError:
            raise McpError(
                f"MCP server {self._server!r} ({self.where}) took no input for {timeout:g} s",
                reason="timeout",
                server=self._server,
            ) from None
        except OSError:
            raise self._closed("before it read the request") from None
        return []

    def receive(self, *, timeout: float) -> JsonValue:
        try:
            line = self._process.read_line(timeout=timeout, limit=self._limits.max_message_bytes)
        except TimeoutError:
            raise McpError(
                f"MCP server {self._server!r} ({self.where}) did not answer within {timeout:g} s "
                "(the request's deadline); check its log",
                reason="timeout",
                server=self._server,
            ) from None
        except ValueError:
            raise McpError(
                f"MCP server {self._server!r} ({self.where}) sent a message of more than "
                f"{self._limits.max_message_bytes} bytes (the limit); reading stopped there",
                reason="protocol",
                server=self._server,
            ) from None
        if line is None:
            raise self._closed("before it answered")
        return _parse(line, self._server, self.where, self._limits)

    def _closed(self, when: str) -> McpError:
        self._process.stop()
        tail = _tail(self._process.log_path).strip().splitlines()[-1:] or [""]
        return McpError(
            f"MCP server {self._server!r} ({self.where}) exited (status "
            f"{self._process.returncode}) {when}; last line of its log "
            f"({self._process.log_path}): {tail[0][:200]!r}",
            reason="closed",
            server=self._server,
        )

    def close(self) -> None:
        self._process.stop()


class _Http:
    """A Streamable HTTP endpoint: each message a POST; the answer JSON or server-sent events."""

    def __init__(self, transport: HttpTransport, url: str, server: str, limits: McpLimits):
        self._transport = transport
        self._url = url
        self._server = server
        self._limits = limits
        self._session: str | None = None
        self.protocol_version: str | None = None
        self.where = url

    def _headers(self, message: dict[str, JsonValue]) -> dict[str, str]:
        """The headers of the POST carrying ``message``: a current request's or a session's."""
        headers = {"Accept": "application/json, text/event-stream"}
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        stateless = meta.get(_VERSION_KEY) if isinstance(meta, dict) else None
        if isinstance(stateless, str) and isinstance(params, dict):
            # A current request stands alone: its version, method and target in headers too,
            # and no session.
            method = str(message.get("method"))
            headers["MCP-Protocol-Version"] = stateless
            headers["Mcp-Method"] = method
            target = params.get(_NAMED_BY.get(method, ""))
            if isinstance(target, str):
                headers["Mcp-Name"] = _header_value(target)
        else:
            if self._session is not None:
                headers["Mcp-Session-Id"] = self._session
            if self.protocol_version is not None:
                headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _refusal(self, exc: TransportError, timeout: float) -> JsonValue:
        """The JSON-RPC error a failed POST's 4xx answer holds; else raises its `McpError`."""
        refused = exc.reason == "status" and exc.status is not None and 400 <= exc.status < 500
        refusal = _json_rpc_error(exc.body_excerpt) if refused else None
        if refusal is not None:
            # A current server answers a refused request with a 4xx and its JSON-RPC error.
            return refusal
        if refused:
            raise McpError(
                f"MCP server {self._server!r}: {exc}",
                reason="remote",
                server=self._server,
            ) from None
        if exc.reason != "timeout":
            raise McpError(
                f"MCP server {self._server!r}: {exc}", reason="closed", server=self._server
            ) from None
        raise McpError(
            f"MCP server {self._server!r} ({self.where}) did not answer within {timeout:g} s",
            reason="timeout",
            server=self._server,
        ) from None

    def send(self, message: dict[str, JsonValue], *, timeout: float) -> list[JsonValue]:
        try:
            answer = self._transport.post_message(
                self._url, message, timeout=timeout, headers=self._headers(message)
            )
        except TransportError as exc:
            return [self._refusal(exc, timeout)]
        session = answer.headers.get("mcp-session-id")
        if session is not None:
            self._session = session
        if answer.status == 202 or not answer.body:
            return []
        kind = answer.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            return [
                _parse(data, self._server, self.where, self._limits)
                for data in _sse_data(answer.body)
            ]
        if kind == "application/json":
            value = _parse(answer.body, self._server, self.where, self._limits)
            return value if isinstance(value, list) else [value]
        raise McpError(
            f"MCP server {self._server!r} ({self.where}) answered with content type {kind!r}, "
            "neither application/json nor text/event-stream",
            reason="protocol",
            server=self._server,
        )

    def receive(self, *, timeout: float) -> JsonValue:
        raise McpError(
            f"MCP server {self._server!r} ({self.where}) ended its answer to the POST without "
            "the response to the request",
            reason="protocol",
            server=self._server,
        )

    def close(self) -> None:
        self._transport.close()


def _header_value(value: str) -> str:
    """``value`` as an HTTP header carries it: verbatim if printable ASCII without edge
    spaces, else in the ``=?base64?...?=`` form the 2026-07-28 revision defines."""
    if (
        re.fullmatch(r"[\x20-\x7E]*", value)
        and value == value.strip()
        and not value.startswith("=?")
    ):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def _json_rpc_error(excerpt: str | None) -> JsonValue:
    """The JSON-RPC error an HTTP error answer's body holds, or None."""
    if not excerpt:
        return None
    try:
        value: JsonValue = parse_json(excerpt.encode(), max_depth=16)
    except CanonicalError:
        return None
    if (
        isinstance(value, dict)
        and value.get("jsonrpc") == "2.0"
        and isinstance(value.get("error"), dict)
    ):
        return value
    return None


def _sse_data(body: bytes) -> list[bytes]:
    """The ``data`` of each server-sent event in ``body`` (multi-line data joined by ``\\n``)."""
    events: list[bytes] = []
    data: list[bytes] = []
    for raw in body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        if not raw:
            if data:
                events.append(b"\n".join(data))
                data = []
            continue
        field, _, value = raw.partition(b":")
        if field == b"data":
            data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        events.append(b"\n".join(data))
    return [event for event in events if event.strip()]
