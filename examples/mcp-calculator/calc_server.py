"""The example's MCP server: two arithmetic tools, built with the official `mcp` SDK.

twinflow starts it over stdio (``mcp_servers`` in spec.yaml) and offers its tools to the model
as ``calc.add`` and ``calc.multiply``; the policy allows only ``calc.add``.
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("calc", version="1.0.0")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


if __name__ == "__main__":
    server.run("stdio")
