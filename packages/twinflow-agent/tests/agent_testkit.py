"""What several agent tests build the same way: an agent on replaying ports, a crashed trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twinflow.agent import Agent, ReplayPorts


def replaying_agent(ports: ReplayPorts, **config: Any) -> Agent[Any]:
    """An agent on every replaying port ``ports`` names but the environment (the factory's to
    choose); ``config`` is the rest of `Agent`'s keywords (tools, policy, output type...)."""
    return Agent(
        ports.model,
        clock=ports.clock,
        ids=ports.ids,
        trace=ports.trace,
        model_label=ports.model_label,
        tool_results=ports.tool_results,
        **config,
    )


def crashed_at(full: Path, size: int, into: Path) -> Path:
    """The trace a process killed after writing ``size`` events leaves on disk."""
    into.write_bytes(b"".join(full.read_bytes().splitlines(keepends=True)[:size]))
    return into
