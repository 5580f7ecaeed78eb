"""A real MCP server built with the official SDK's `MCPServer` whose tool returns more than text.

    python media_server.py [--log FILE]     (stdio)

Tool ``gallery``: a caption, a one-pixel image and a link to the full picture. Every call is
appended to ``--log`` (one JSON line).
"""

from __future__ import annotations

import argparse
import base64
import json

from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent, ResourceLink, TextContent

server = MCPServer("media", version="1.0.0")
_log_path: str | None = None


@server.tool()
def gallery() -> list[TextContent | ImageContent | ResourceLink]:
    """A caption, a one-pixel image and a link to the full picture."""
    if _log_path is not None:
        with open(_log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": "gallery", "arguments": {}}) + "\n")
    return [
        TextContent(type="text", text="a picture"),
        ImageContent(type="image", mimeType="image/png", data=base64.b64encode(b"png").decode()),
        ResourceLink(type="resource_link", uri="file:///pictures/full.png", name="full.png"),
    ]


def main() -> None:
    global _log_path
    parser = argparse.ArgumentParser()
    parser.add_argument("--log")
    _log_path = parser.parse_args().log
    server.run("stdio")


if __name__ == "__main__":
    main()
