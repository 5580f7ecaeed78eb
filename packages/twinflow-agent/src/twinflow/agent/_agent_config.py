"""What an `Agent` is built from that every agent of a process may share: the tool a function
is built into (`function_tool`), and the configuration its every run records (`run_config`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from twinflow.agent._events import AgentConfig, PartKindRecord
from twinflow.agent._run import class_path
from twinflow.agent._tools import Tool
from twinflow.vocab import OutputSchema, digest

if TYPE_CHECKING:
    from twinflow.agent._agent import Agent

__all__ = ["function_tool", "run_config"]

T = TypeVar("T")

_KEPT_MAX = 128
_tools: dict[Callable[..., Any], Tool] = {}
_schemas: dict[type[BaseModel], tuple[OutputSchema, str]] = {}


def _kept(kept: dict[Any, T], key: object, build: Callable[[], T]) -> T:
    """``kept[key]``, built by ``build()`` the first time: ``key`` is a function or a class,
    which hashes and compares by identity, and what is built from it is never changed, so
    agents in any thread share it. At most `_KEPT_MAX` are kept (all are let go when it is
    reached: a key made afresh for each agent never hits). Each step on the dict is one
    operation of the built-in dict, whole in any thread; two threads building for one key at
    once both build, and keep the first."""
    found = kept.get(key)
    if found is None:
        found = build()
        if len(kept) >= _KEPT_MAX:
            kept.clear()
        found = kept.setdefault(key, found)
    return found


def function_tool(function: Callable[..., Any]) -> Tool:
    """``Tool.from_function(function)``, built once per process for a plain function.

    A fleet is one agent per run, each given the same functions (``tools=[add]``), and
    building a tool makes a pydantic model and a JSON schema: more CPU than the rest of a
    run's start. The function is read as it is when its tool is first built (one renamed or
    re-annotated in place afterwards is not read again, as an agent built before would not).
    Other callables (a bound method, a callable object, whose equality is their own) are
    built each time.

    Raises:
        AgentConfigError: As `Tool.from_function` (a refused function is not kept).
    """
    if not inspect.isfunction(function):
        return Tool.from_function(function)
    return _kept(_tools, function, lambda: Tool.from_function(function))


def run_config(
    agent: Agent[Any], model_label: str | None
) -> tuple[OutputSchema | None, str | None, AgentConfig]:
    """The schema of the agent's answer and its digest (None for text), and the configuration
    runs record."""
    output_type = agent.output_type
    schema, schema_digest = (
        # Once per class: a JSON schema costs more than the rest of an agent's build.
        _kept(_schemas, output_type, lambda: _schema_of(output_type))
        if issubclass(output_type, BaseModel)
        else (None, None)
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
    return schema, schema_digest, config


def _schema_of(output_type: type[BaseModel]) -> tuple[OutputSchema, str]:
    schema = OutputSchema.for_model(output_type)
    return schema, digest(schema)
