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

from twinflow.agent import Agent, ReplayMode, ReplayResult, Trace, replay
from twinflow.cli._spec import RunSpec, load_tools
from twinflow.cli._wiring import (
    build_agent,
    build_model,
    build_transport,
    embedded_server,
    model_base_url,
    replay_builder,
)
from twinflow.kernel import SystemClock, SystemIds
from twinflow.trace import FileTraceSink

__all__ = ["connect", "embedded_model", "replay_run"]


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
) -> Iterator[Agent[Any]]:
    """The agent ``spec`` describes, wired to the real clock, ids, transport and model.

    With ``model.url: embedded`` the bundled SmolLM2 server is started for the block (its
    log goes beside the trace). Everything opened is closed when the block exits: the trace
    file, the transport's connections, the embedded server.

    Args:
        spec: The run configuration (the same object ``spec.yaml`` loads into).
        trace: The new trace file (its directory is made if missing).
        tools: The tool callables (default: imported from ``spec.tools``'s dotted paths).

    Raises:
        SpecError: a tool or the output model does not resolve.
        UserError: ``model.api_key_env`` names an unset variable.
        TargetExistsError: ``trace`` exists (traces are never overwritten).
    """
    callables = _tools(spec, tools)
    path = Path(trace)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Before the embedded server starts: an unset API key is refused at once.
    transport = build_transport(spec.model)
    with contextlib.ExitStack() as stack:
        stack.callback(transport.close)
        url = stack.enter_context(model_base_url(spec.model.url, path.parent, _quiet))
        ids = SystemIds()
        model = build_model(spec.model.model_copy(update={"url": url}), transport, ids)
        agent = build_agent(
            spec,
            model=model,
            clock=SystemClock(),
            ids=ids,
            trace=FileTraceSink(path),
            tools=callables,
        )
        with agent:
            yield agent


@contextlib.contextmanager
def embedded_model(log_dir: str | Path | None = None) -> Iterator[str]:
    """Start the bundled SmolLM2-135M-Instruct server; yields its base URL for the block.

    Raises:
        EmbeddedModelMissing: the ``demo`` extra is not installed.
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
    return replay(Trace.load(trace), replay_builder(spec, _tools(spec, tools)), mode=mode)
