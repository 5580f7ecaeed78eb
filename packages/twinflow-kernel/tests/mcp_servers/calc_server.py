"""A real MCP server built with the official SDK's `MCPServer`, for tests and benchmarks.

    python calc_server.py stdio [--log FILE]
    python calc_server.py http [--log FILE]     (prints ``PORT <n>`` once it listens on port 0)

Every tool call it receives is appended to ``--log`` (one JSON line), so a test can show the
server never saw a call the policy denied. Tools: ``add``, ``divide`` (structured output; an
error for a zero divisor), ``echo``, ``picture`` (an image result), ``grow`` (adds a tool and
says its list changed).
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ImageContent
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


def main() -> None:
    global _log_path
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("--log")
    args = parser.parse_args()
    _log_path = args.log
    if args.transport == "stdio":
        server.run("stdio")
        return
    import anyio
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
