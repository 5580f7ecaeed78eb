"""The Python front door: the agent a run spec describes, on the real adapters, in one call.

The configuration object is the spec itself (`RunSpec`, the same keys as ``spec.yaml``), so
a run started from Python and one started with ``twinflow run`` are configured alike, and
replay is rebuilt from that same object::

    spec = RunSpec(prompt="Add 2 and 3.", model=ModelSpec(url="embedded"), ...)
    with connect(spec, "run/trace.jsonl", tools=[add]) as agent:
        result = agent.run(spec.prompt)
    replay_run("run/trace.jsonl", spec, tools=[add])

This module is part of the composition root: only here are the real clock, ids and transport
constructed (the agent and the model clients receive them as ports).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from twinflow.agent import REPLAY_KINDS, Agent, ReplayMode, ReplayResult, Trace, replay
from twinflow.cli._spec import RunSpec, load_tools
from twinflow.cli._wiring import (
    EMBEDDED,
    build_agent,
    build_model,
    build_transport,
    check_agent,
    embedded_server,
    mcp_servers,
    model_base_url,
    numbered,
    replay_builder,
    run_environment,
)
from twinflow.kernel import SystemClock, SystemIds
from twinflow.trace import FileTraceSink, FileWriteError, MemoryTraceSink, UserError

__all__ = ["connect", "embedded_model", "replay_run", "trace_path_of"]


def _quiet(message: str) -> None:
    """Progress messages are for the command line; a library stays silent."""


def _tools(spec: RunSpec, tools: Sequence[Callable[..., Any]] | None) -> list[Callable[..., Any]]:
    return load_tools(spec) if tools is None else list(tools)


@contextlib.contextmanager
def connect(
    spec: RunSpec,
    trace: str | Path = "trace.jsonl",
    *,
    tools: Sequence[Callable[..., Any]] | None = None,
    resume: bool = False,
) -> Iterator[Agent[Any]]:
    """The agent ``spec`` describes, wired to the real clock, ids, transport and model.

    The trace file is claimed first: if ``trace`` exists, the run takes the next free name
    beside it (``trace.1.jsonl``, ``trace.2.jsonl``, ..., as ``twinflow run`` does), so
    running the same code again never fails on, or overwrites, an earlier run; the path
    taken is ``agent.writer.sink.path`` (and `trace_path_of`). Then, with ``model.url:
    embedded``, the bundled SmolLM2 server is started for the block (its log goes beside
    the trace). Everything opened is closed when the block exits: the trace file, the
    transport's connections, the embedded server.

    With ``resume=True`` the trace is one that exists, for ``agent.resume(trace)`` to
    continue (a run that stopped, or one waiting for decisions): no new trace is claimed.

    Args:
        spec: The run configuration (the same object ``spec.yaml`` loads into).
        trace: Where the new trace goes (its directory is made if missing).
        tools: The tool callables (default: imported from ``spec.tools``'s dotted paths).
        resume: ``trace`` exists and the block continues it with `Agent.resume`.

    Raises:
        SpecError: a tool or the output model does not resolve, or the policy names a tool
            that is not given.
        LaunchError, McpError: an MCP server of ``spec.mcp_servers`` did not start (its
            tools, named ``<server>.<tool>``, join ``tools``; it stops when the block exits).
        UserError: ``model.api_key_env`` names an unset variable, or the trace's directory
            already holds an absurd number of runs.
        FileWriteError (``link``): the trace's directory is a symbolic link.
    """
    callables = _tools(spec, tools)
    # Before anything is written or started: a usage error changes nothing.
    transport = build_transport(spec.model)
    with contextlib.ExitStack() as stack:
        stack.callback(transport.close)
        if spec.model.url != EMBEDDED:
            build_model(spec.model, transport, SystemIds())  # checks URL and dialect
        log_dir = Path(trace).parent
        # A resumed run's servers start only if it goes on past its recorded prefix.
        recorded = Trace.load(trace) if resume and spec.mcp_servers else None
        servers = stack.enter_context(mcp_servers(spec, log_dir, recorded=recorded))
        check_agent(spec, callables, "connect", servers)
        sink = None if resume else _claim_trace(Path(trace))
        if sink is not None:
            stack.callback(_drop_if_empty, sink)
        log_dir = Path(trace).parent if sink is None else sink.path.parent
        url = stack.enter_context(model_base_url(spec.model.url, log_dir, _quiet))
        ids = SystemIds()
        model = build_model(spec.model.model_copy(update={"url": url}), transport, ids)
        agent = build_agent(
            spec,
            model=model,
            clock=SystemClock(),
            ids=ids,
            trace=MemoryTraceSink() if sink is None else sink,
            tools=callables,
            environment=run_environment(spec),
            servers=servers,
        )
        with agent:
            yield agent


def trace_path_of(agent: Agent[Any]) -> Path:
    """The trace file `connect` claimed for ``agent`` (the next free name if the one asked for
    was taken).

    Raises:
        UserError: the agent does not write to a file.
    """
    sink = agent.writer.sink
    if not isinstance(sink, FileTraceSink):
        raise UserError("this agent's trace is not written to a file (it was not made by connect)")
    return sink.path


_MAX_TRACES = 100_000


def _claim_trace(path: Path) -> FileTraceSink:
    """A new trace file at ``path``, or at the first free numbered name beside it.

    Each name is created exclusively (`FileTraceSink`), so of runs racing for one name, one
    gets it and the others move on; an existing file or link is never opened, as
    `claim_run_files` skips them for ``twinflow run``.
    """
    if path.parent.is_symlink():
        raise FileWriteError(
            f"{path.parent} is a symbolic link; a trace is not written through it: name the "
            "real directory",
            path=path.parent,
            reason="link",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    for n in range(_MAX_TRACES):
        try:
            return FileTraceSink(numbered(path, n))
        except FileWriteError as exc:
            if exc.reason not in ("exists", "link"):
                raise
            continue  # a file, or a link planted at the name: never opened, the next name is tried
    raise UserError(
        f"{path.parent} holds {_MAX_TRACES} traces named like {path.name}: pick a new one"
    )


def _drop_if_empty(sink: FileTraceSink) -> None:
    """Remove a claimed trace no event reached (the server did not start, the block failed)."""
    sink.close()
    with contextlib.suppress(OSError):
        if sink.path.stat().st_size == 0:
            sink.path.unlink()


@contextlib.contextmanager
def embedded_model(log_dir: str | Path | None = None) -> Iterator[str]:
    """Start the bundled SmolLM2-135M-Instruct server; yields its base URL for the block.

    Raises:
        ModelSetupError: the ``demo`` extra is not installed (reason ``not-installed``).
        LaunchError: the server did not start in time.
    """
    with embedded_server(None if log_dir is None else Path(log_dir), on_progress=_quiet) as url:
        yield url


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
    loaded = Trace.load(trace, keep=REPLAY_KINDS)
    # Recorded mode starts no MCP server: the tool lists are the trace's own.
    with mcp_servers(
        spec, Path(trace).parent, recorded=None if mode == "live" else loaded, live=False
    ) as servers:
        return replay(loaded, replay_builder(spec, _tools(spec, tools), servers), mode=mode)
