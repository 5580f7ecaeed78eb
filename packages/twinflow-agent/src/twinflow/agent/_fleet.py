"""Many runs at once: `Agent.run_async` runs `Agent.run` on the kernel's bounded worker threads.

The loop is synchronous and its trace is the same whoever calls it, so the async API is the
sync run on a worker thread (`twinflow.kernel.ThreadExecutor.call`): the events are the
same, byte for byte, and nothing of the loop is written twice. What the event loop awaits is
the model server; a run's CPU (validation, canonical encoding, hashing) is the same either
way. One agent runs one run at a time (its trace is one run's): a fleet is one agent per run,
which is cheap because a spec's tools are built once for every run (`Resolved`), and a
function's tool once per process (`twinflow.agent._agent_config.function_tool`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from twinflow.agent._errors import AgentConfigError

if TYPE_CHECKING:
    from twinflow.agent._agent import Agent
    from twinflow.agent._run import RunResult

__all__ = ["Workers", "run_async"]

Workers = Callable[[Callable[[str], "RunResult[Any]"], str], Awaitable["RunResult[Any]"]]
"""Runs a call on a worker thread, awaited (the kernel's `ThreadExecutor.call`, which the
front door hands over: only a composition root takes the real adapter)."""


async def run_async(agent: Agent[Any], prompt: str, workers: Workers) -> RunResult[Any]:
    """`agent.run(prompt)` on a worker thread, awaited (`Agent.run_async`).

    Raises:
        AgentConfigError: The agent has a run in flight already.
        Exception: Whatever `Agent.run` raises.
    """
    if agent._running:
        raise AgentConfigError(
            "this agent has a run in flight: an agent's trace holds one run at a time, so give "
            "each concurrent run its own agent (its tools are built once and shared)"
        )
    agent._running = True
    try:
        return await workers(agent.run, prompt)
    finally:
        agent._running = False
