"""Benchmark: the MCP client's own CPU per `tools/call` over stdio, against the official SDK's.

Both clients call `add` on the same kind of server (the example's `MCPServer`,
examples/mcp-calculator/calc_server.py, one process per client) the same number of times, in
one run, taking turns. What is measured is the CPU time of this process (`time.process_time`)
per call: the client's own cost (encoding, the pipe, parsing, its event loop for the SDK), not
the server's, which runs in its own process and is the same for both.

Printed: microseconds of CPU per call for each, and ours / SDK's as a ratio (below 1: ours
costs less). Target: ratio <= 1.

Run: .venv/bin/python benchmarks/mcp_call.py [--calls N] [--rounds R] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from twinflow.kernel import McpClient

SERVER = Path(__file__).resolve().parents[1] / "examples" / "mcp-calculator" / "calc_server.py"


def ours(client: McpClient, calls: int) -> float:
    """CPU seconds per call of our client."""
    start = time.process_time()
    for i in range(calls):
        result = client.call_tool("add", {"a": i, "b": 1})
        assert result["content"] == [{"type": "text", "text": str(i + 1)}], result
    return (time.process_time() - start) / calls


async def sdk(session: ClientSession, calls: int) -> float:
    """CPU seconds per call of the SDK's client."""
    start = time.process_time()
    for i in range(calls):
        result = await session.call_tool("add", {"a": i, "b": 1})
        assert not result.is_error, result
    return (time.process_time() - start) / calls


async def main_async(calls: int, rounds: int) -> None:
    """Alternate the two clients for `rounds` rounds of `calls` calls; print medians."""
    with tempfile.TemporaryDirectory() as tmp:
        client = McpClient.stdio(
            "calc", [sys.executable, str(SERVER)], log_path=Path(tmp) / "calc.log"
        )
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                ours(client, 5)  # warm-up, both
                await sdk(session, 5)
                mine: list[float] = []
                theirs: list[float] = []
                for _ in range(rounds):
                    mine.append(ours(client, calls))
                    theirs.append(await sdk(session, calls))
        finally:
            client.close()
    us, them = statistics.median(mine) * 1e6, statistics.median(theirs) * 1e6
    print(f"tools/call over stdio, {calls} calls x {rounds} rounds, CPU of this process per call")
    print(f"  twinflow.kernel McpClient   {us:9.1f} us")
    print(f"  mcp SDK ClientSession       {them:9.1f} us")
    print(f"  ratio ours / SDK            {us / them:9.2f}   (target <= 1)")


def main() -> None:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="a few calls: proves it runs")
    args = parser.parse_args()
    calls, rounds = (5, 1) if args.smoke else (args.calls, args.rounds)
    asyncio.run(main_async(calls, rounds))


if __name__ == "__main__":
    main()
