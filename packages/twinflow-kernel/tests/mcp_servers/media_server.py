"""A real MCP server built with the official SDK's `MCPServer` whose tool returns more than text.

    python media_server.py [--log FILE] [--pixel BYTES]     (stdio)

Tool ``gallery``: a caption, a one-pixel image (whose bytes ``--pixel`` sets) and a link to the
full picture. Every call is appended to ``--log`` (one JSON line).
"""

from __future__ import annotations

import argparse
import base64
import json

from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent, ResourceLink, TextContent

server = MCPServer("media", version="1.0.0")
_log_path: str | None = None
_pixel = b"png"


@server.tool()
def gallery() -> list[TextContent | ImageContent | ResourceLink]:
    """A caption, a one-pixel image and a link to the full picture."""
    if _log_path is not None:
        with open(_log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": "gallery", "arguments": {}}) + "\n")
    return [
        TextContent(type="text", text="a picture"),
        ImageContent(type="image", mimeType="image/png", data=base64.b64encode(_pixel).decode()),
        ResourceLink(type="resource_link", uri="file:///pictures/full.png", name="full.png"),
    ]


def main() -> None:
    global _log_path, _pixel
    parser = argparse.ArgumentParser()
    parser.add_argument("--log")
    parser.add_argument("--pixel", default="png")
    args = parser.parse_args()
    _log_path = args.log
    _pixel = args.pixel.encode()
    server.run("stdio")


if __name__ == "__main__":
    main()
