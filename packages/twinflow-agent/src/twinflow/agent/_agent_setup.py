"""What an `Agent` is built from, checked: its model opened by name, the trace sink a path
names, its MCP servers' names, and the tool names its policy allows."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

from twinflow.agent._errors import AgentConfigError
from twinflow.agent._mcp import McpTools
from twinflow.agent._policy import Policy
from twinflow.agent._tools import Tool
from twinflow.agent._trace_file import claim_trace
from twinflow.models import open_model
from twinflow.trace import MemoryTraceSink, TraceSink
from twinflow.vocab import ChatModel

__all__ = ["check_policy_names", "check_server_names", "opened_model", "trace_sink"]


def opened_model(model: ChatModel | str | Sequence[str]) -> tuple[ChatModel, bool]:
    """The model, and whether the agent opened it (then `Agent.close` closes it)."""
    if isinstance(model, str | list | tuple):
        opened: ChatModel = open_model(model)
        return opened, True
    return cast("ChatModel", model), False


def trace_sink(trace: TraceSink | str | os.PathLike[str] | None) -> TraceSink:
    """The sink a ``trace`` argument names: a path is a new trace file, at that name or the
    first free numbered one beside it (``trace.1.jsonl``...); an existing file is never opened."""
    if trace is None:
        return MemoryTraceSink()
    if isinstance(trace, str | os.PathLike):
        return claim_trace(Path(trace))
    return trace


def check_server_names(servers: Sequence[McpTools]) -> None:
    """Refuse two MCP servers of one name.

    Raises:
        AgentConfigError: Two servers share a name.
    """
    if len({server.name for server in servers}) < len(servers):
        names = sorted(server.name for server in servers)
        raise AgentConfigError(f"two MCP servers share a name ({names}); names must be unique")


def check_policy_names(policy: Policy, tools: Mapping[str, Tool]) -> None:
    """Refuse a policy that allows, asks about or repeats a tool that is not registered.

    Raises:
        AgentConfigError: The policy names a tool not in ``tools``.
    """
    unknown = sorted((policy.allow | policy.ask | policy.repeat_safe) - set(tools))
    if unknown:
        raise AgentConfigError(
            f"the policy allows tools that are not registered: {unknown}; "
            f"registered: {sorted(tools)}"
        )
