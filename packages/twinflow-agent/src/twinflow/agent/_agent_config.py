"""`run_config`: the configuration an `Agent`'s every run records, built from the agent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from twinflow.agent._events import AgentConfig, PartKindRecord
from twinflow.agent._run import class_path
from twinflow.vocab import OutputSchema

if TYPE_CHECKING:
    from twinflow.agent._agent import Agent

__all__ = ["run_config"]


def run_config(
    agent: Agent[Any], model_label: str | None
) -> tuple[OutputSchema | None, AgentConfig]:
    """The schema of the agent's answer (None for text), and the configuration runs record."""
    schema = (
        OutputSchema.for_model(agent.output_type)
        if issubclass(agent.output_type, BaseModel)
        else None
    )
    config = AgentConfig(
        part_kinds=tuple(
            PartKindRecord(kind=kind, type=class_path(cls))
            for kind, cls in agent.part_kinds.items()
        ),
        model=type(agent.model).__name__ if model_label is None else model_label,
        system_prompt=agent.system,
        tools=agent._specs,
        policy=agent.policy.record(),
        output_schema=schema,
        max_steps=agent.max_steps,
        usage_limits=agent.usage_limits.record(),
        settings=agent.settings,
    )
    return schema, config
