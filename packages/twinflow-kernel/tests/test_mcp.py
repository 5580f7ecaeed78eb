"""The MCP client against real servers: the official SDK's `MCPServer`, and hostile ones."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from twinflow._base._untrusted import REDACTED, scrub
from twinflow.kernel import McpClient, McpError, SteppingClock, SubprocessLauncher
from twinflow.kernel._launcher import PipedProcess
from twinflow.kernel._mcp import MAX_TTL_MS, MCP_PROTOCOL_VERSIONS, McpLimits
from twinflow.kernel._mcp_wire import _header_value
from twinflow.trace import UserError
from twinflow.trace._format import DEFAULT_MAX_LINE_BYTES

SERVERS = Path(__file__).parent / "mcp_servers"
CALC = SERVERS / "calc_server.py"
HOSTILE = SERVERS / "hostile_server.py"


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Callable[..., McpClient]]:
    """Starts the hostile server in a mode; every one started is stopped afterwards."""
    started: list[McpClient] = []

    def start(mode: str, **limits: float) -> McpClient:
        client = McpClient.stdio(
            "bad",
            [sys.executable, str(HOSTILE), mode],
            log_path=tmp_path / "bad.log",
            limits=McpLimits(**limits),  # type: ignore[arg-type]  # the test passes known fields
        )
        started.append(client)
        return client

    yield start
    for client in started:
        client.close()


def test_stdio_lifecycle_against_the_official_sdk_server(tmp_path: Path) -> None:
    """initialize negotiates a version, tools/list lists, tools/call answers, close stops it."""
    with McpClient.stdio(
        "calc", [sys.executable, str(CALC), "stdio"], log_path=tmp_path / "calc.log"
    ) as client:
        assert client.session is not None
        assert client.session.protocol_version in MCP_PROTOCOL_VERSIONS
        assert "calc" == client.session.server_info["name"]
        assert "add" in [tool["name"] for tool in client.list_tools()]
        result = client.call_tool("add", {"a": 2, "b": 3})
        assert [{"type": "text", "text": "5"}] == result["content"]


def test_streamable_http_against_the_official_sdk_server(tmp_path: Path) -> None:
    """The same over Streamable HTTP: the session header is kept, SSE answers are read."""
    process = SubprocessLauncher().spawn(
        [sys.executable, str(CALC), "http"], log_path=tmp_path / "http.log"
    )
    with process:
        line = process.read_line(timeout=120, limit=100)
        assert line is not None and line.startswith(b"PORT ")
        url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        with McpClient.http("calc", url) as client:
            assert "divide" in [tool["name"] for tool in client.list_tools()]
            result = client.call_tool("divide", {"a": 1, "b": 4})
            assert {"value": 0.25} == result["structuredContent"]


def _calc(transport: str, era: str, tmp_path: Path, stack: list[PipedProcess]) -> McpClient:
    """The official SDK's server in one era, over stdio or Streamable HTTP, connected."""
    command = [sys.executable, str(CALC), transport, "--era", era]
    if transport == "stdio":
        return McpClient.stdio("calc", command, log_path=tmp_path / "calc.log")
    process = SubprocessLauncher().spawn(command, log_path=tmp_path / "http.log")
    stack.append(process)
    line = process.read_line(timeout=120, limit=100)
    assert line is not None and line.startswith(b"PORT ")
    return McpClient.http("calc", f"http://127.0.0.1:{int(line.split()[1])}/mcp")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize(
    ("era", "version", "ttl"),
    [("dual", "2026-07-28", 0), ("current", "2026-07-28", 0), ("legacy", "2025-11-25", None)],
)
def test_the_era_is_decided_by_discover_then_initialize(
    tmp_path: Path, transport: str, era: str, version: str, ttl: int | None
) -> None:
    """Discover finds 2026-07-28 (a stateless-only server too); a 2025 server gets the handshake."""
    processes: list[PipedProcess] = []
    try:
        with _calc(transport, era, tmp_path, processes) as client:
            assert client.session is not None
            assert (version, {"name": "calc", "version": "1.0.0"}) == (
                client.session.protocol_version,
                client.session.server_info,
            )
            assert "add" in [tool["name"] for tool in client.list_tools()]
            assert ttl == client.tools_ttl_ms
            assert [{"type": "text", "text": "5"}] == client.call_tool("add", {"a": 2, "b": 3})[
                "content"
            ]
    finally:
        for process in processes:
            process.stop()


@pytest.mark.parametrize("era", ["current", "legacy"])
def test_resources_templates_and_prompts_over_http_in_both_eras(tmp_path: Path, era: str) -> None:
    """Lists, a read whose URI is not ASCII (its Mcp-Name header base64), a filled prompt."""
    processes: list[PipedProcess] = []
    try:
        with _calc("http", era, tmp_path, processes) as client:
            assert ["notes://readme", "blobs://logo"] == [r["uri"] for r in client.list_resources()]
            assert ["notes://{name}"] == [
                t["uriTemplate"] for t in client.list_resource_templates()
            ]
            assert ["review"] == [p["name"] for p in client.list_prompts()]
            assert ["note caf\u00e9"] == [
                c["text"] for c in client.read_resource("notes://caf\u00e9")
            ]
            messages = client.get_prompt("review", {"language": "go"})
            assert [{"type": "text", "text": "Review this go code (strict: no)."}] == [
                m["content"] for m in messages
            ]
    finally:
        for process in processes:
            process.stop()


def test_a_stateless_only_server_refuses_the_handshake_with_a_reserved_code(
    tmp_path: Path,
) -> None:
    """initialize sent to a 2026-07-28-only server: -32022, named, with the versions it serves."""
    command = [sys.executable, str(CALC), "stdio", "--era", "current"]
    with McpClient.stdio("calc", command, log_path=tmp_path / "calc.log") as client:
        client.session = None
        with pytest.raises(McpError, check=lambda e: -32022 == e.code) as caught:
            client.initialize()
    assert "does not serve the requested protocol version (-32022); it serves 2026-07-28" in str(
        caught.value
    )


def test_a_server_claiming_the_current_revision_without_result_type_is_refused(
    hostile: Callable[..., McpClient],
) -> None:
    """A 2026-07-28 server whose tools/list has no resultType: McpError "protocol", named."""
    client = hostile("current-no-result-type")
    with pytest.raises(McpError, check=lambda e: "protocol" == e.reason) as caught:
        client.list_tools()
    assert "speaks 2026-07-28 and answered tools/list without a resultType" in str(caught.value)


@pytest.mark.parametrize(
    ("mode", "ttl", "stale"), [("ttl-zero", 0, True), ("ttl-years", MAX_TTL_MS, False)]
)
def test_a_lists_ttl_is_kept_and_a_ttl_of_years_is_capped(
    hostile: Callable[..., McpClient], mode: str, ttl: int, stale: bool
) -> None:
    """ttlMs 0 is stale at once; ten years is believed for a day at most."""
    client = hostile(mode)
    client.list_tools()
    assert (ttl, stale) == (client.tools_ttl_ms, client.tools_stale)


def test_a_negative_ttl_is_refused(hostile: Callable[..., McpClient]) -> None:
    """ttlMs -1: McpError "protocol" naming it."""
    with pytest.raises(McpError, check=lambda e: "protocol" == e.reason) as caught:
        hostile("ttl-negative").list_tools()
    assert "ttlMs '-1'" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "header"),
    [
        ("add", "add"),
        ("file:///é.txt", "=?base64?ZmlsZTovLy/DqS50eHQ=?="),
        (" x", "=?base64?IHg=?="),
    ],
)
def test_a_name_header_is_sent_verbatim_or_in_base64(value: str, header: str) -> None:
    """Printable ASCII goes as is; other characters or edge spaces go base64-wrapped."""
    assert header == _header_value(value)


def test_every_page_of_the_tool_list_is_read(hostile: Callable[..., McpClient]) -> None:
    """tools/list follows nextCursor to the last page."""
    assert ["add", "sub"] == [tool["name"] for tool in hostile("paged").list_tools()]


@pytest.mark.parametrize(
    ("mode", "reason", "words"),
    [
        ("garbage", "protocol", "not JSON"),
        ("oversize", "protocol", "more than"),
        ("deep", "protocol", "deeper"),
        ("exit", "closed", "exiting mid-call"),
    ],
)
def test_a_hostile_answer_to_a_call_is_one_typed_error(
    hostile: Callable[..., McpClient], mode: str, reason: str, words: str
) -> None:
    """Garbage, an oversize or deep line, an exit mid-call: a typed one-line error, no hang."""
    client = hostile(mode)
    client.list_tools()
    with pytest.raises(McpError) as caught:
        client.call_tool("add", {"a": 1, "b": 2})
    assert reason == caught.value.reason
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_server_that_never_answers_meets_the_deadline(
    hostile: Callable[..., McpClient],
) -> None:
    """A call the server never answers ends at the request's deadline (an McpError, "timeout")."""
    client = hostile("silent", timeout=0.5)
    with pytest.raises(McpError, check=lambda e: "timeout" == e.reason):
        client.call_tool("add", {"a": 1, "b": 2})


def test_a_server_that_pings_for_every_reply_meets_the_deadline(tmp_path: Path) -> None:
    """Pings answering each reply keep the inbox full: the request's deadline still ends it."""
    process = SubprocessLauncher().spawn(
        [sys.executable, str(HOSTILE), "http-ping"], log_path=tmp_path / "http.log"
    )
    with process:
        line = process.read_line(timeout=120, limit=100)
        assert line is not None and line.startswith(b"PORT ")
        url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        clock = SteppingClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(seconds=1))
        client = McpClient.http("bad", url, limits=McpLimits(timeout=5), clock=clock)
        with client, pytest.raises(McpError, check=lambda e: "timeout" == e.reason) as caught:
            client.call_tool("add", {"a": 1, "b": 2})
    assert "did not answer tools/call within 5 s" in str(caught.value)


@pytest.mark.parametrize(
    ("mode", "words"),
    [("many", "more than 1000 tools"), ("homoglyph", "tool names are 1 to 128 ASCII")],
)
def test_a_hostile_tool_list_is_refused(
    hostile: Callable[..., McpClient], mode: str, words: str
) -> None:
    """10,000 tools, or a name with a look-alike letter, is refused when listed."""
    with pytest.raises(McpError, check=lambda e: "protocol" == e.reason) as caught:
        hostile(mode).list_tools()
    assert words in str(caught.value)


def test_a_listing_heavier_than_its_limit_in_all_pages_is_refused(
    hostile: Callable[..., McpClient],
) -> None:
    """1 MiB tools on page after page: refused once their sum passes max_listing_bytes."""
    client = hostile("fat-pages", max_listing_bytes=3 * 1024 * 1024)
    with pytest.raises(McpError, check=lambda e: "protocol" == e.reason) as caught:
        client.list_tools()
    assert "lists tools of more than 3145728 bytes in all" in str(caught.value)


def test_the_default_listing_limit_leaves_room_in_a_trace_line() -> None:
    """A listing at the limit, with a server_info as large as a message, fits a trace line."""
    limits = McpLimits()
    assert limits.max_listing_bytes + limits.max_message_bytes < DEFAULT_MAX_LINE_BYTES


@pytest.mark.parametrize(
    ("mode", "method"),
    [("sampling", "sampling/createMessage"), ("elicitation", "elicitation/create")],
)
def test_requests_from_the_server_are_refused_and_remembered(
    hostile: Callable[..., McpClient], mode: str, method: str
) -> None:
    """The server's request gets a JSON-RPC error answer; the client remembers the method."""
    client = hostile(mode)
    result = client.call_tool("add", {"a": 1, "b": 2})
    assert [method] == client.take_refused()
    assert '"code": -32601' in str(result["content"])


def test_garbage_before_initialize_refuses_the_server(tmp_path: Path) -> None:
    """A server that writes a banner on stdout is refused at start, and is stopped."""
    with pytest.raises(McpError, check=lambda e: "protocol" == e.reason) as caught:
        McpClient.stdio(
            "bad",
            [sys.executable, str(HOSTILE), "init-garbage"],
            log_path=tmp_path / "bad.log",
        )
    assert "Starting server" in str(caught.value)


def test_the_servers_stderr_goes_to_its_log_and_it_is_stopped(tmp_path: Path) -> None:
    """stderr lands in the log file; closing the client leaves no process behind."""
    log = tmp_path / "bad.log"
    client = McpClient.stdio("bad", [sys.executable, str(HOSTILE), "silent"], log_path=log)
    channel = client._channel
    process = channel._process  # type: ignore[attr-defined]  # the stdio channel's process
    assert isinstance(process, PipedProcess)
    client.close()
    assert "hostile server stderr marker" in log.read_text()
    assert process.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)


def test_a_command_that_does_not_exist_is_one_typed_error(tmp_path: Path) -> None:
    """A missing program: McpError "closed" naming the status and the log's last line."""
    with pytest.raises(McpError, check=lambda e: "closed" == e.reason) as caught:
        McpClient.stdio("gone", ["/nonexistent/mcp-server"], log_path=tmp_path / "gone.log")
    assert "cannot start" in str(caught.value)


def test_a_servers_arguments_stay_out_of_its_error_messages(tmp_path: Path) -> None:
    """A token among the command's arguments never reaches McpError "closed" (a recorded tool error)."""
    command = [sys.executable, str(HOSTILE), "exit", "--token=tok-in-argv-0123456789"]
    with McpClient.stdio("bad", command, log_path=tmp_path / "bad.log") as client:
        client.list_tools()
        with pytest.raises(McpError, check=lambda e: "closed" == e.reason) as caught:
            client.call_tool("add", {"a": 1, "b": 2})
    assert "tok-in-argv" not in str(caught.value)
    assert f"({Path(sys.executable).name})" in str(caught.value)


def test_pass_env_forwards_a_variable_and_registers_it_as_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server gets the variable's value; scrub() replaces that value from then on."""
    token = "tok-pass-env-0123456789"
    monkeypatch.setenv("TWINFLOW_TEST_MCP_TOKEN", token)
    command = [sys.executable, str(HOSTILE), "echo-env"]
    with McpClient.stdio(
        "bad", command, log_path=tmp_path / "bad.log", pass_env=["TWINFLOW_TEST_MCP_TOKEN"]
    ) as client:
        answer = client.call_tool("add", {"a": 1, "b": 2})
    assert [{"type": "text", "text": token}] == answer["content"]
    assert REDACTED == scrub(f"echoed {token}").removeprefix("echoed ")


def test_pass_env_naming_an_unset_variable_is_one_usage_error(tmp_path: Path) -> None:
    """An unset pass_env variable: UserError naming it, and no server started."""
    with pytest.raises(UserError) as caught:
        McpClient.stdio(
            "bad",
            [sys.executable, str(HOSTILE), "echo-env"],
            log_path=tmp_path / "bad.log",
            pass_env=["TWINFLOW_TEST_MCP_UNSET_VARIABLE"],
        )
    assert "pass_env names TWINFLOW_TEST_MCP_UNSET_VARIABLE, which is unset" in str(caught.value)
    assert not (tmp_path / "bad.log").exists()
