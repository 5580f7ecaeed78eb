"""Tools from a real MCP server (the official SDK's `MCPServer`, over stdio) in the agent loop."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from twinflow.agent import (
    Agent,
    FunctionModel,
    McpTools,
    Policy,
    RunPaused,
    ToolReturned,
    ToolsListed,
    Trace,
    replay,
)
from twinflow.agent._events import ListedTool
from twinflow.agent._replay import ReplayPorts
from twinflow.kernel import (
    CountingIds,
    McpClient,
    McpError,
    ReplayDivergenceError,
    SteppingClock,
)
from twinflow.trace import MemoryTraceSink, verify_trace
from twinflow.vocab import (
    CallId,
    MediaPart,
    Message,
    ModelRequest,
    ResourceLinkPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from twinflow.vocab._parts import carried_parts

SERVERS = Path(__file__).resolve().parents[2] / "twinflow-kernel" / "tests" / "mcp_servers"
CALC = SERVERS / "calc_server.py"
START = datetime(2026, 1, 1, tzinfo=UTC)


def calls(*steps: tuple[str, dict[str, Any]]) -> Callable[[ModelRequest], Message]:
    """A model that makes one call per step, in order, then answers with the last result."""

    def handler(request: ModelRequest) -> Message:
        done = [m for m in request.transcript.messages if m.role == "tool"]
        if len(done) < len(steps):
            name, arguments = steps[len(done)]
            call = ToolCallPart(id=CallId(f"c{len(done)}"), name=name, arguments=arguments)
            return Message(role="assistant", parts=(call,))
        return Message.assistant(done[-1].tool_results[0].content)

    return handler


@pytest.fixture
def server_log(tmp_path: Path) -> Path:
    """Where the server writes each call it receives."""
    return tmp_path / "seen.jsonl"


@pytest.fixture
def connect(tmp_path: Path, server_log: Path) -> Iterator[Callable[[], McpClient]]:
    """Starts the calc server over stdio; every server started is stopped afterwards."""
    started: list[McpClient] = []

    def start() -> McpClient:
        client = McpClient.stdio(
            "calc",
            [sys.executable, str(CALC), "stdio", "--log", str(server_log)],
            log_path=tmp_path / "calc.stderr.log",
        )
        started.append(client)
        return client

    yield start
    for client in started:
        client.close()


def agent(
    handler: Callable[[ModelRequest], Message],
    server: McpTools,
    allow: set[str],
    ports: ReplayPorts | None = None,
    max_output_chars: int = 16_000,
) -> Agent[str]:
    """The agent under test, fresh or on replaying ports."""
    if ports is None:
        return Agent(
            FunctionModel(handler),
            clock=SteppingClock(START, timedelta(milliseconds=5)),
            ids=CountingIds(),
            tools=[server],
            policy=Policy(allow=frozenset(allow), max_output_chars=max_output_chars),
            trace=MemoryTraceSink(),
        )
    return Agent(
        ports.model,
        clock=ports.clock,
        ids=ports.ids,
        tools=[server],
        policy=Policy(allow=frozenset(allow)),
        trace=ports.trace,
        model_label=ports.model_label,
        tool_results=ports.tool_results,
    )


def recorded(run: Agent[str]) -> Trace:
    """The trace a finished agent wrote."""
    sink = run.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    return Trace.load(sink.data)


def seen(log: Path) -> list[dict[str, Any]]:
    """The calls the server received, from its own log."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def results(trace: Trace) -> list[ToolReturned]:
    """Every tool result of a trace."""
    return [e.body for e in trace.events if isinstance(e.body, ToolReturned)]


def test_an_mcp_tool_runs_under_the_policy_and_its_list_is_in_the_trace(
    connect: Callable[[], McpClient], server_log: Path
) -> None:
    """The server's list is a tools_listed event after run_started; an allowed call reaches it."""
    run = agent(calls(("calc.add", {"a": 2, "b": 3})), McpTools.live("calc", connect), {"calc.add"})
    assert "5" == run.run("add").output
    trace = recorded(run)
    listed = trace.events[1].body
    assert isinstance(listed, ToolsListed)
    assert ("calc", 1, "calc") == (listed.server, listed.step, listed.server_info["name"])
    assert {
        "calc.add",
        "calc.divide",
        "calc.echo",
        "calc.grow",
        "calc.picture",
        "calc.pay",
        "calc.nag",
        "calc.muse",
        "calc.transfer",
    } == {t.name for t in listed.tools}
    assert [{"tool": "add", "arguments": {"a": 2, "b": 3}}] == seen(server_log)
    # The stdlib verifier verifies a trace holding the new kind of event.
    sink = run.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    assert None is verify_trace(sink.data).problem


def test_a_denied_mcp_call_never_reaches_the_server(
    connect: Callable[[], McpClient], server_log: Path
) -> None:
    """A tool the policy does not allow is denied; the server's own log shows no call."""
    run = agent(calls(("calc.echo", {"text": "hi"})), McpTools.live("calc", connect), {"calc.add"})
    run.run("echo")
    assert ["ToolDenied"] == [r.error_type for r in results(recorded(run))]
    assert [] == seen(server_log)


def test_arguments_that_fail_the_input_schema_never_reach_the_server(
    connect: Callable[[], McpClient], server_log: Path
) -> None:
    """The inputSchema is checked before the call: a string for an integer is refused here."""
    run = agent(
        calls(("calc.add", {"a": "two", "b": 3})), McpTools.live("calc", connect), {"calc.add"}
    )
    run.run("add")
    assert ["InvalidArguments"] == [r.error_type for r in results(recorded(run))]
    assert [] == seen(server_log)


def test_an_error_result_is_a_tool_error_and_structured_results_are_checked(
    connect: Callable[[], McpClient],
) -> None:
    """isError becomes McpToolFailed; a structured result matching its outputSchema passes."""
    run = agent(
        calls(("calc.divide", {"a": 1, "b": 0}), ("calc.divide", {"a": 1, "b": 4})),
        McpTools.live("calc", connect),
        {"calc.divide"},
    )
    run.run("divide")
    got = results(recorded(run))
    assert ["McpToolFailed", None] == [r.error_type for r in got]
    assert {"value": 0.25} == json.loads(got[1].result.content)


def test_a_changed_tool_list_is_listed_again_before_the_next_step(
    connect: Callable[[], McpClient],
) -> None:
    """After notifications/tools/list_changed the new list is traced and its tool offered."""
    run = agent(
        calls(("calc.grow", {}), ("calc.shout", {"text": "hi"})),
        McpTools.live("calc", connect),
        {"calc.grow"},
    )
    run.run("grow")
    trace = recorded(run)
    listings = [e.body for e in trace.events if isinstance(e.body, ToolsListed)]
    assert [1, 2] == [listed.step for listed in listings]
    assert "calc.shout" in {t.name for t in listings[1].tools}
    # Not allowed by the policy, but now known: denied, not unknown.
    assert [None, "ToolDenied"] == [r.error_type for r in results(trace)]


def test_recorded_replay_needs_no_server_and_live_replay_catches_a_changed_list(
    connect: Callable[[], McpClient],
) -> None:
    """Recorded replay builds the tools from the trace alone; live replay compares the list."""
    run = agent(calls(("calc.add", {"a": 2, "b": 3})), McpTools.live("calc", connect), {"calc.add"})
    run.run("add")
    trace = recorded(run)
    listed = [e.body for e in trace.events if isinstance(e.body, ToolsListed)]

    def offline(ports: ReplayPorts) -> Agent[str]:
        return agent(calls(), McpTools.recorded("calc", listed), {"calc.add"}, ports)

    assert trace.size == replay(trace, offline, mode="recorded").events
    assert (
        trace.size
        == replay(
            trace,
            lambda p: agent(calls(), McpTools.live("calc", connect), {"calc.add"}, p),
            mode="live",
        ).events
    )
    changed = listed[0].model_copy(update={"server_info": {"name": "calc", "version": "2.0.0"}})
    with pytest.raises(ReplayDivergenceError) as caught:
        replay(
            trace,
            lambda p: agent(calls(), McpTools.recorded("calc", [changed]), {"calc.add"}, p),
            mode="recorded",
        )
    assert 1 == caught.value.seq


def test_non_text_content_is_carried_as_parts_and_replays_without_the_server(
    tmp_path: Path,
) -> None:
    """Text, an image and a resource link from an SDK server are the result's parts, in order;
    the text blocks are its content, and recorded replay serves the parts with no server."""

    def start() -> McpClient:
        command = [sys.executable, str(SERVERS / "media_server.py")]
        return McpClient.stdio("media", command, log_path=tmp_path / "media.log")

    server = McpTools.live("media", start)
    try:
        run = agent(calls(("media.gallery", {})), server, {"media.gallery"})
        run.run("gallery")
    finally:
        server.close()
    trace = recorded(run)
    result = results(trace)[0].result
    assert "a picture" == result.content
    assert (
        TextPart(text="a picture"),
        MediaPart(media_type="image/png", uri="data:image/png;base64,cG5n"),
        ResourceLinkPart(uri="file:///pictures/full.png", name="full.png"),
    ) == result.parts
    listed = [e.body for e in trace.events if isinstance(e.body, ToolsListed)]

    def offline(ports: ReplayPorts) -> Agent[str]:
        return agent(calls(), McpTools.recorded("media", listed), {"media.gallery"}, ports)

    assert trace.size == replay(trace, offline, mode="recorded").events


def test_max_output_chars_caps_the_text_parts_the_model_is_sent(tmp_path: Path) -> None:
    """A result with an image is cut like a text one: its text parts hold at most the cap."""

    def start() -> McpClient:
        command = [sys.executable, str(SERVERS / "hostile_server.py"), "long-with-image"]
        return McpClient.stdio("bad", command, log_path=tmp_path / "bad.log")

    server = McpTools.live("bad", start)
    try:
        handler = calls(("bad.add", {"a": 1, "b": 2}))
        run = agent(handler, server, {"bad.add"}, max_output_chars=50)
        run.run("add")
    finally:
        server.close()
    got = results(recorded(run))[0]
    marker = "[truncated: 151 more characters]"
    assert 151 == got.truncated_chars
    assert "A" * 50 + "\n" + marker == got.result.content
    assert (
        TextPart(text="A" * 50 + "\n" + marker),
        MediaPart(media_type="image/png", uri="data:image/png;base64,cG5n"),
    ) == got.result.parts
    (sent,) = carried_parts([got.result], "test")
    assert isinstance(sent, ToolResultPart)
    assert "A" * 50 + "\n" + marker + "\n[image/png: 3 bytes]" == sent.content


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("bad-base64", "data is not valid base64 (at /content/0/data)"),
        ("bad-mime", "data: URI declares 'image/png' but media_type is 'image/png,x'"),
        ("huge-image", "bytes of content, over the limit of 1048576"),
        ("unknown-block", "unknown content block type 'hologram'"),
    ],
)
def test_content_that_maps_onto_no_part_is_a_typed_tool_error(
    tmp_path: Path, mode: str, words: str
) -> None:
    """A malformed image, a huge one, an unknown block type: the call's recorded error result."""

    def start() -> McpClient:
        command = [sys.executable, str(SERVERS / "hostile_server.py"), mode]
        return McpClient.stdio("bad", command, log_path=tmp_path / "bad.log")

    server = McpTools.live("bad", start)
    try:
        run = agent(calls(("bad.add", {"a": 1, "b": 2})), server, {"bad.add"})
        run.run("add")
    finally:
        server.close()
    got = results(recorded(run))[0]
    assert ("McpToolFailed", True) == (got.error_type, got.result.is_error)
    assert words in got.result.content
    assert 1 == len(got.result.content.splitlines())
    assert () == got.result.parts


def listing(schema: dict[str, Any], *, output: bool = False) -> ToolsListed:
    """A recorded listing of one tool whose input (or output) schema is ``schema``."""
    plain: dict[str, Any] = {"type": "object"}
    return ToolsListed(
        server="bad",
        step=1,
        protocol_version="2025-06-18",
        server_info={"name": "bad"},
        tools=(
            ListedTool(
                name="bad.t",
                description="",
                parameters=plain if output else schema,
                output_schema=schema if output else None,
            ),
        ),
    )


@pytest.mark.parametrize("output", [False, True])
@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|a)*$"}}},
            "pattern is refused",
        ),
        ({"type": "object", "patternProperties": {"^(a|a)*$": {}}}, "patternProperties is refused"),
        (
            {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}},
            "uniqueItems is refused",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/s"}}},
            "not a local JSON Pointer reference",
        ),
        ({"type": "object", "properties": {"a": {"$ref": "#name"}}}, "not a local JSON Pointer"),
        (
            {"type": "object", "$defs": {"d": {"$dynamicRef": "#x"}}},
            "$dynamicRef is refused",
        ),
        ({"type": "object", "$defs": {"d": {"$id": "http://x/y"}}}, "an $id below the root"),
        (
            # d0 tries d1 twice, d1 tries d2 twice...: 2**40 checks of one value.
            {
                "type": "object",
                "$defs": {
                    f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(40)
                }
                | {"d40": {"type": "string"}},
                "properties": {"a": {"$ref": "#/$defs/d0"}},
            },
            "expand to more than 100000 schema values",
        ),
        (
            # Two ways down at every level of a 64-deep value: 2**64 checks.
            {
                "type": "object",
                "anyOf": [
                    {"properties": {"a": {"$ref": "#"}}, "required": ["x"]},
                    {"properties": {"a": {"$ref": "#"}}, "required": ["y"]},
                ],
            },
            "expand to more than 100000 schema values",
        ),
        ({"type": "object", "$schema": {}}, "names no JSON Schema draft"),
        (
            {"type": "object", "$schema": "https://example.com/my-draft"},
            "names no JSON Schema draft",
        ),
        ({"type": "object", "properties": {"a": {"type": 5}}}, "not a valid JSON Schema"),
    ],
)
def test_a_schema_that_could_hang_crash_or_fetch_is_refused_when_listed(
    schema: dict[str, Any], words: str, output: bool
) -> None:
    """ReDoS patterns, quadratic checks, remote references, an unknown $schema: one typed error."""
    tools = McpTools.recorded("bad", [listing(schema, output=output)])
    with pytest.raises(McpError, check=lambda e: "protocol" == e.reason) as caught:
        tools.start()
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_known_draft_and_local_references_are_used() -> None:
    """Draft-07, a local $ref, a property named pattern, a recursive tree: used; a dangling
    $ref fails the value, no crash."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"n": {"type": "integer"}},
        "properties": {
            "a": {"$ref": "#/definitions/n"},
            "b": {"$ref": "#/definitions/gone"},
            "pattern": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
        "uniqueItems": False,
    }
    tool = McpTools.recorded("bad", [listing(schema)]).tools[0]
    assert {"a": 1} == tool.validate({"a": 1})
    tree = {"children": [{"children": [{"a": 2}]}]}
    assert tree == tool.validate(tree)
    with pytest.raises(ValidationError) as caught:
        tool.validate({"a": "x"})
    assert "is not of type 'integer'" in str(caught.value)
    with pytest.raises(ValidationError) as dangling:
        tool.validate({"b": 1})
    assert "resolves to nothing" in str(dangling.value)


def test_a_relisted_tool_with_the_same_name_but_a_new_schema_changes_the_offer_digest(
    connect: Callable[[], McpClient],
) -> None:
    """A new listing that keeps a tool's name but changes its description is a new offer: the
    next request's tools_digest is the digest of what it offers, not of the first listing."""
    first = agent(
        calls(("calc.add", {"a": 2, "b": 3})), McpTools.live("calc", connect), {"calc.add"}
    )
    first.run("add")
    listed = [e.body for e in recorded(first).events if isinstance(e.body, ToolsListed)]
    tools = tuple(
        t.model_copy(update={"description": t.description + " (new)"}) for t in listed[0].tools
    )
    again = listed[0].model_copy(update={"step": 2, "tools": tools})
    run = agent(
        calls(("calc.add", {"a": 2, "b": 3}), ("calc.add", {"a": 1, "b": 1})),
        McpTools.recorded("calc", [listed[0], again], connect),
        {"calc.add"},
    )
    run.run("add twice")
    trace = recorded(run)
    requested = [e.body for e in trace.events if e.body.kind == "model_requested"]
    assert 3 == len(requested)
    assert requested[0].tools_digest != requested[1].tools_digest
    assert requested[1].tools_digest == requested[2].tools_digest


@pytest.mark.parametrize(("era", "version"), [("current", "2026-07-28"), ("legacy", "2025-11-25")])
def test_either_era_is_recorded_and_replays_with_the_server_removed(
    tmp_path: Path, era: str, version: str
) -> None:
    """A stateless-only server and a 2025 one: the listing says which; replay starts nothing."""
    command = [sys.executable, str(CALC), "stdio", "--era", era]
    server = McpTools.live(
        "calc", lambda: McpClient.stdio("calc", command, log_path=tmp_path / "calc.log")
    )
    run = agent(calls(("calc.add", {"a": 2, "b": 3})), server, {"calc.add"})
    try:
        assert "5" == run.run("add").output
    finally:
        server.close()
    trace = recorded(run)
    listed = [e.body for e in trace.events if isinstance(e.body, ToolsListed)]
    assert [(version, None if era == "legacy" else 0)] == [
        (x.protocol_version, x.ttl_ms) for x in listed
    ]

    def offline(ports: ReplayPorts) -> Agent[str]:
        return agent(calls(), McpTools.recorded("calc", listed), {"calc.add"}, ports)

    assert trace.size == replay(trace, offline, mode="recorded").events


def test_an_expired_list_is_listed_again_and_traced_only_when_it_changed(tmp_path: Path) -> None:
    """ttlMs 0 from a stateless-only server: each step asks again; only the grown list is traced."""
    command = [sys.executable, str(CALC), "stdio", "--era", "current"]
    server = McpTools.live(
        "calc", lambda: McpClient.stdio("calc", command, log_path=tmp_path / "calc.log")
    )
    run = agent(
        calls(("calc.add", {"a": 1, "b": 1}), ("calc.grow", {}), ("calc.shout", {"text": "hi"})),
        server,
        {"calc.add", "calc.grow"},
    )
    try:
        run.run("grow")
    finally:
        server.close()
    listings = [e.body for e in recorded(run).events if isinstance(e.body, ToolsListed)]
    assert [(1, False), (3, True)] == [
        (x.step, "calc.shout" in {t.name for t in x.tools}) for x in listings
    ]


def _paying(
    connect: Callable[[], McpClient], answer: Any, tool: str = "calc.pay", **arguments: Any
) -> tuple[str | None, str]:
    """One call of ``tool`` answered by ``answer``: its error type and the content recorded."""
    server = McpTools.live("calc", connect, answer=answer)
    server.max_input_rounds = 2
    run = agent(calls((tool, arguments)), server, {tool})
    run.run("pay")
    got = results(recorded(run))[0]
    return got.error_type, got.result.content


def test_an_input_required_round_is_answered_by_the_callback_and_retried(
    connect: Callable[[], McpClient], server_log: Path
) -> None:
    """The form's message and schema reach the callback; the retry carries answer and state."""
    asked: list[tuple[str, str, list[str]]] = []

    def answer(tool: str, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        asked.append((tool, message, schema["required"]))
        return {"yes": True}

    assert (None, "paid 3") == _paying(connect, answer, amount=3)
    assert [("calc.pay", "Pay 3?", ["yes"])] == asked
    assert [("accept", {"yes": True})] == [
        (s["arguments"]["answer"]["action"], s["arguments"]["answer"]["content"])
        for s in seen(server_log)
    ]


@pytest.mark.parametrize(
    ("answer", "tool", "expected"),
    [
        (lambda *_: None, "calc.pay", (None, "not paid (decline)")),
        (lambda *_: {"yes": "sure"}, "calc.pay", ("McpToolFailed", "does not match its schema")),
        (lambda *_: {"yes": True}, "calc.nag", ("McpToolFailed", "after 2 rounds answered")),
        (lambda *_: {"yes": True}, "calc.muse", ("McpToolFailed", "sampling/createMessage")),
        (lambda *_: {"yes": True}, "calc.transfer", (None, "transferred 3")),
    ],
)
def test_a_round_declined_unanswerable_invalid_endless_or_sampling_is_a_typed_result(
    connect: Callable[[], McpClient],
    server_log: Path,
    answer: Any,
    tool: str,
    expected: tuple[str | None, str],
) -> None:
    """Decline reaches the server; no callback, a bad answer, endless asking, sampling: errors;
    the SDK's own resolver gets its answer only when the form capability is declared."""
    arguments = {"amount": 3} if tool in ("calc.pay", "calc.transfer") else {}
    error_type, content = _paying(connect, answer, tool, **arguments)
    assert expected[0] == error_type
    assert expected[1] in content
    if expected[0] is not None:
        assert [] == seen(server_log)


@pytest.mark.parametrize("tool", ["calc.pay", "calc.transfer"])
def test_without_a_callback_a_form_pauses_the_run_and_the_server_sees_no_answer(
    connect: Callable[[], McpClient], server_log: Path, tool: str
) -> None:
    """The form capability is declared for every run: the SDK's resolver asks too, and waits."""
    server = McpTools.live("calc", connect)
    run = agent(calls((tool, {"amount": 3})), server, {tool})
    with pytest.raises(RunPaused) as paused:
        run.run("pay")
    server.close()
    assert ["input_requested"] == [p.kind for p in paused.value.paused.pending]
    assert [] == seen(server_log)


def _reading(
    connect: Callable[[], McpClient], tool: str, arguments: dict[str, Any]
) -> tuple[Trace, ToolReturned]:
    """One call of a built-in tool, with notes:// resources and review* prompts allowed."""
    server = McpTools(
        "calc", connect=connect, resources=["notes://*", "blobs://*"], prompts=["review*"]
    )
    run = agent(calls((tool, arguments)), server, {tool})
    try:
        run.run("read")
    finally:
        server.close()
    trace = recorded(run)
    return trace, results(trace)[0]


def test_a_resource_is_read_through_the_built_in_tool_and_replays_without_the_server(
    connect: Callable[[], McpClient],
) -> None:
    """read_resource is listed with what the patterns allow, returns the text, and replays."""
    trace, got = _reading(connect, "calc.read_resource", {"uri": "notes://readme"})
    assert (None, "read me") == (got.error_type, got.result.content)
    listed = [e.body for e in trace.events if isinstance(e.body, ToolsListed)]
    builtin = {t.name: t for t in listed[0].tools}["calc.read_resource"]
    assert "- notes://readme: The readme." in builtin.description
    assert "- notes://{name}: A note, by name." in builtin.description

    def offline(ports: ReplayPorts) -> Agent[str]:
        server = McpTools.recorded("calc", listed, resources=["notes://*", "blobs://*"])
        return agent(calls(), server, {"calc.read_resource"}, ports)

    assert trace.size == replay(trace, offline, mode="recorded").events


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("calc.read_resource", {"uri": "secret://key"}, "matches none of the patterns"),
        ("calc.read_resource", {"uri": "blobs://logo"}, "is bytes (image/png), not text"),
        ("calc.read_resource", {"uri": "notes://huge"}, "more than 4194304 bytes (the limit)"),
        ("calc.get_prompt", {"name": "secret"}, "matches none of the names allowed"),
        ("calc.get_prompt", {"name": "review"}, "do not validate (missing: language)"),
        (
            "calc.get_prompt",
            {"name": "review", "arguments": {"language": "go", "colour": "red"}},
            "do not validate (unknown: colour)",
        ),
    ],
)
def test_a_denied_binary_huge_or_invalid_read_is_a_typed_error_result(
    connect: Callable[[], McpClient],
    server_log: Path,
    tool: str,
    arguments: dict[str, Any],
    expected: str,
) -> None:
    """A URI or prompt not allowed, bytes, 5 MiB, bad prompt arguments: the call's error."""
    _, got = _reading(connect, tool, arguments)
    assert "McpToolFailed" == got.error_type or "McpError" == got.error_type
    assert expected in got.result.content
    assert [] == [s for s in seen(server_log) if s["tool"] == "review"]


def test_a_prompt_is_filled_through_the_built_in_tool(
    connect: Callable[[], McpClient], server_log: Path
) -> None:
    """get_prompt checks the arguments, fills the prompt on the server and returns its text."""
    _, got = _reading(
        connect, "calc.get_prompt", {"name": "review", "arguments": {"language": "go"}}
    )
    assert (None, "user: Review this go code (strict: no).") == (
        got.error_type,
        got.result.content,
    )
    assert [{"language": "go", "strict": "no"}] == [
        s["arguments"] for s in seen(server_log) if s["tool"] == "review"
    ]


@pytest.mark.parametrize("index", ["²", "9" * 5000, "01", "\u0660"])
def test_a_reference_with_an_index_int_refuses_is_a_dangling_one(index: str) -> None:
    """A ``$ref`` into an array by superscript digits or thousands of digits (``str.isdigit``
    takes both, ``int`` refuses them): listed like any reference that points at nothing."""
    schema = {
        "type": "object",
        "allOf": [{"type": "object"}],
        "properties": {"a": {"$ref": f"#/allOf/{index}"}},
    }
    tools = McpTools.recorded("bad", [listing(schema)])
    tools.start()
    assert ["bad.t"] == [tool.name for tool in tools.tools]
