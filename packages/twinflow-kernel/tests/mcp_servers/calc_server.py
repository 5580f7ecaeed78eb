"""A real MCP server built with the official SDK's `MCPServer`, for tests and benchmarks.

    python calc_server.py stdio [--log FILE] [--era dual|legacy|current]
    python calc_server.py http [--log FILE] [--era ...]  (prints ``PORT <n>`` once it listens)

``--era``: ``dual`` (the SDK's default: the client's first request decides), ``legacy`` (the
handshake only, as a server of 2025 answers ``server/discover``), ``current`` (2026-07-28
only: ``initialize`` is refused, a stateless-only server).

Every tool call it receives is appended to ``--log`` (one JSON line), so a test can show the
server never saw a call the policy denied. Tools: ``add``, ``divide`` (structured output; an
error for a zero divisor), ``echo``, ``picture`` (an image result), ``grow`` (adds a tool and
says its list changed); at 2026-07-28, ``pay`` (asks to confirm, ``input_required``),
``nag`` (asks forever), ``muse`` (asks to sample) and ``transfer`` (the SDK's ``Elicit``
resolver, which needs the client to declare form elicitation).
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import sys
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp_types import ElicitRequest, ElicitRequestFormParams, ImageContent, InputRequiredResult
from pydantic import BaseModel

server = MCPServer("calc", version="1.0.0")
_log_path: str | None = None


def _seen(tool: str, **arguments: object) -> None:
    if _log_path is not None:
        with open(_log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    _seen("add", a=a, b=b)
    return str(a + b)


class Quotient(BaseModel):
    """A division's result."""

    value: float


@server.tool()
def divide(a: float, b: float) -> Quotient:
    """Divide a by b."""
    _seen("divide", a=a, b=b)
    if b == 0:
        raise ValueError("division by zero")
    return Quotient(value=a / b)


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    _seen("echo", text=text)
    return text


@server.tool()
def picture() -> ImageContent:
    """A one-pixel image."""
    _seen("picture")
    return ImageContent(type="image", mimeType="image/png", data=base64.b64encode(b"png").decode())


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `shout` and tell the client the list changed."""
    _seen("grow")

    @server.tool()
    def shout(text: str) -> str:
        """Say the text back in capitals."""
        _seen("shout", text=text)
        return text.upper()

    await ctx.session.send_tool_list_changed()
    return "grown"


async def _stdio_in_one_era(era: str) -> None:
    """Serve stdio in one era only, with the SDK's own loops."""
    from mcp.server import runner
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        if era == "legacy":
            low._request_handlers.pop("server/discover", None)  # a 2025 server knows no discover
            await runner.serve_loop(
                low,
                read,
                write,
                lifespan_state=state,
                init_options=low.create_initialization_options(),
            )
        else:
            await runner._serve_modern_stream(
                low, read, write, lifespan_state=state, raise_exceptions=False
            )


class _OneEra:
    """Streamable HTTP in one era: ``legacy`` hides the 2026 header (so a discover POST meets
    the 2025 transport, which wants a session), ``current`` refuses any request without it."""

    def __init__(self, app: Any, era: str) -> None:
        self.app = app
        self.era = era

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"]]
            version = dict(headers).get(b"mcp-protocol-version", b"").decode()
            if self.era == "legacy" and version == "2026-07-28":
                scope = {
                    **scope,
                    "headers": [(k, v) for k, v in headers if k != b"mcp-protocol-version"],
                }
            if self.era == "current" and version != "2026-07-28":
                body = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {
                            "code": -32022,
                            "message": "this server speaks 2026-07-28 only",
                            "data": {"supported": ["2026-07-28"], "requested": version},
                        },
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


_CONFIRM = {
    "type": "object",
    "properties": {"yes": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["yes"],
}


def _ask(key: str, message: str, state: str) -> InputRequiredResult:
    form = ElicitRequestFormParams(message=message, requested_schema=_CONFIRM)
    return InputRequiredResult(
        input_requests={key: ElicitRequest(params=form)}, request_state=state
    )


@server.tool()
def pay(amount: int, ctx: Context) -> str | InputRequiredResult:
    """Pay an amount, once the user confirms it."""
    answers = ctx.input_responses or {}
    answer = answers.get("confirm")
    if answer is None:
        return _ask("confirm", f"Pay {amount}?", f"pay:{amount}")
    _seen("pay", amount=amount, state=ctx.request_state, answer=answer.model_dump(mode="json"))
    content = getattr(answer, "content", None) or {}
    if getattr(answer, "action", None) == "accept" and content.get("yes") is True:
        return f"paid {amount}"
    return f"not paid ({getattr(answer, 'action', '?')})"


@server.tool()
def nag(ctx: Context) -> str | InputRequiredResult:
    """Ask for confirmation, whatever the answer."""
    return _ask(f"again{len(ctx.input_responses or {})}", "Sure?", "nag")


@server.tool()
def muse(ctx: Context) -> str | InputRequiredResult:
    """Ask the client's model to sample."""
    from mcp_types import CreateMessageRequest, CreateMessageRequestParams, SamplingMessage
    from mcp_types import TextContent as Text

    message = SamplingMessage(role="user", content=Text(type="text", text="a poem"))
    request = CreateMessageRequest(
        params=CreateMessageRequestParams(messages=[message], max_tokens=10)
    )
    return InputRequiredResult(input_requests={"poem": request}, request_state="muse")


@server.resource("notes://{name}")
def note(name: str) -> str:
    """A note, by name."""
    _seen("note", name=name)
    if name == "huge":
        return "x" * (5 * 1024 * 1024)
    return f"note {name}"


@server.resource("notes://readme", mime_type="text/plain")
def readme() -> str:
    """The readme."""
    return "read me"


@server.resource("blobs://logo", mime_type="image/png")
def logo() -> bytes:
    """A logo (bytes)."""
    return b"\x89PNG"


@server.prompt()
def review(language: str, strict: str = "no") -> str:
    """Ask for a review of code in a language."""
    _seen("review", language=language, strict=strict)
    return f"Review this {language} code (strict: {strict})."


class Confirmation(BaseModel):
    """What ``transfer`` asks the user."""

    yes: bool


def _confirm(amount: int) -> Elicit[Confirmation]:
    return Elicit(f"Transfer {amount}?", Confirmation)


@server.tool()
def transfer(amount: int, confirmed: Annotated[Confirmation, Resolve(_confirm)]) -> str:
    """Transfer an amount once confirmed (the SDK's own elicitation, resolved)."""
    _seen("transfer", amount=amount, yes=confirmed.yes)
    return f"transferred {amount}" if confirmed.yes else "kept"


def main() -> None:
    global _log_path
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("--log")
    parser.add_argument("--era", choices=("dual", "legacy", "current"), default="dual")
    args = parser.parse_args()
    _log_path = args.log
    if args.transport == "stdio":
        if args.era == "dual":
            server.run("stdio")
        else:
            import anyio

            anyio.run(_stdio_in_one_era, args.era)
        return
    import anyio
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app: Any = server.streamable_http_app()
    if args.era != "dual":
        app = _OneEra(app, args.era)
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
