"""Hostile input, MCP servers of the current revision (2026-07-28) and of 2025.

One class, each case a real server process (the official SDK's, or the stdlib hostile one), and
one invariant: each misbehaviour ends as the typed result it must, never a hang, a crash or a
wrong answer used:

- a server that claims 2026-07-28 and answers without `resultType`: `McpError("protocol")`;
- a `ttlMs` of -1: `McpError("protocol")`; of ten years: capped at a day; of 0: stale at once;
- a 2025 server (`server/discover` unknown): the handshake, its tools listed;
- a stateless-only server refusing `initialize`: -32022 named with the versions it serves;
- a server that answers `input_required` forever: the call's error after the limit of rounds;
- a resource past the message limit: the call's error, read no further.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _common import Figures

from twinflow.agent import McpTools
from twinflow.agent._errors import McpToolFailed
from twinflow.kernel import McpClient, McpError
from twinflow.kernel._mcp import MAX_TTL_MS

SERVERS = Path(__file__).resolve().parents[1] / "packages/twinflow-kernel/tests/mcp_servers"


def _stdio(script: str, *args: str, log: Path) -> McpClient:
    return McpClient.stdio("bad", [sys.executable, str(SERVERS / script), *args], log_path=log)


def mcp_eras(figures: Figures, work: Path) -> None:
    """Each case run once; the count of cases that ended as they must."""
    log = work / "mcp.log"

    def hostile(mode: str) -> McpClient:
        return _stdio("hostile_server.py", mode, log=log)

    def no_result_type() -> bool:
        with hostile("current-no-result-type") as client:
            try:
                client.list_tools()
            except McpError as exc:
                return exc.reason == "protocol" and "without a resultType" in str(exc)
        return False

    def ttl(mode: str, expected: int | None, stale: bool) -> Callable[[], bool]:
        def case() -> bool:
            with hostile(mode) as client:
                try:
                    client.list_tools()
                except McpError as exc:
                    return expected is None and exc.reason == "protocol"
                return (client.tools_ttl_ms, client.tools_stale) == (expected, stale)

        return case

    def older() -> bool:
        with hostile("paged") as client:
            assert client.session is not None
            names = [t["name"] for t in client.list_tools()]
            return (client.session.protocol_version, names) == ("2025-11-25", ["add", "sub"])

    def no_handshake() -> bool:
        with _stdio("calc_server.py", "stdio", "--era", "current", log=log) as client:
            client.session = None
            try:
                client.initialize()
            except McpError as exc:
                return exc.code == -32022 and "it serves 2026-07-28" in str(exc)
        return False

    def server_tool(name: str, arguments: dict[str, object], words: str) -> Callable[[], bool]:
        def case() -> bool:
            def connect() -> McpClient:
                return _stdio("calc_server.py", "stdio", log=log)

            server = McpTools(
                "calc", connect=connect, answer=lambda *_: {"yes": True}, resources=["notes://*"]
            )
            server.max_input_rounds = 3
            try:
                tool = {t.name: t for t in server.tools}[name]
                tool.call(dict(arguments))
            except (McpToolFailed, McpError) as exc:
                return words in str(exc)
            finally:
                server.close()
            return False

        return case

    cases: dict[str, Callable[[], bool]] = {
        "claims 2026-07-28 without resultType": no_result_type,
        "ttlMs -1": ttl("ttl-negative", None, False),
        "ttlMs ten years": ttl("ttl-years", MAX_TTL_MS, False),
        "ttlMs 0": ttl("ttl-zero", 0, True),
        "a 2025 server": older,
        "initialize to a stateless-only server": no_handshake,
        "input_required forever": server_tool("calc.nag", {}, "after 3 rounds answered"),
        "a resource past the message limit": server_tool(
            "calc.read_resource", {"uri": "notes://huge"}, "more than 4194304 bytes"
        ),
    }
    held = 0
    for name, case in cases.items():
        if case():
            held += 1
        else:
            figures.fail(f"mcp: {name}: not the typed result it must be")
    figures.values["mcp misbehaviours ended as typed results"] = f"{held} of {len(cases)}"


if __name__ == "__main__":
    figures = Figures("hostile-mcp", "short")
    with tempfile.TemporaryDirectory() as tmp:
        mcp_eras(figures, Path(tmp))
    sys.exit(figures.finish())
