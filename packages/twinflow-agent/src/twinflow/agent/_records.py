"""The values a run records about itself: its configuration (`AgentConfig`, in ``run_started``,
digested), the run a fork continues from, and where it ran (`Environment`).

`_Frozen` is the base of the agent's values: frozen, no extra fields, `AgentConfigError` on bad
input.
"""

from __future__ import annotations

from pydantic import Field

from twinflow.agent._errors import AgentConfigError
from twinflow.vocab import FrozenValue, ModelSettings, OutputSchema, ToolSpec

__all__ = ["AgentConfig", "Environment", "ForkParent", "PartKindRecord", "PolicyRecord"]


class _Frozen(FrozenValue):
    """Base of the agent's values: frozen, no extra fields, `AgentConfigError` on bad input."""

    _invalid_error = AgentConfigError


class PolicyRecord(_Frozen):
    """The data part of a `Policy`, as recorded in the trace (the hook by name only)."""

    allow: tuple[str, ...]
    """Allowed tool names, sorted."""
    tool_budgets: dict[str, int]
    """Per-tool call budgets for one run."""
    run_budget: int | None
    """Tool calls allowed in one run, all tools together; None for no limit."""
    approval: str | None
    """Qualified name of the approval hook, if any."""
    max_output_chars: int
    """Tool output above this many characters is truncated with a marker."""
    include_traceback: bool
    """Whether a raising tool's error result carries the traceback."""
    ask: tuple[str, ...] = Field(default=(), exclude_if=lambda value: not value)
    """Tools whose calls wait for a person's decision, sorted (absent when none, so
    configurations recorded before approvals existed keep their digests)."""


class PartKindRecord(_Frozen):
    """An extension part kind a run declared (`Agent(part_kinds=...)`), as recorded."""

    kind: str
    """The kind's name, as its parts carry it."""
    type: str
    """The class defining it, as ``module:QualName`` (``twinflow.vocab:...`` for vocab's own)."""


class AgentConfig(_Frozen):
    """The configuration of an agent, recorded in ``run_started`` and digested."""

    model: str
    """The model object's type name."""
    system_prompt: str | None
    """System prompt, if any."""
    tools: tuple[ToolSpec, ...]
    """The tool specs the model is shown."""
    policy: PolicyRecord
    """The tool policy."""
    output_schema: OutputSchema | None
    """Schema of the structured output, if any."""
    max_steps: int
    """Model requests allowed for tool steps in one run."""
    usage_limits: dict[str, int | float | None]
    """Usage limits by name."""
    settings: ModelSettings
    """Model settings sent with every request."""
    part_kinds: tuple[PartKindRecord, ...] = Field(default=(), exclude_if=lambda value: not value)
    """The extension part kinds the run's model may reply with, by kind (absent when none, so
    configurations recorded before extension kinds existed keep their digests)."""


class ForkParent(_Frozen):
    """The run a fork continues from: the parent trace's prefix it re-ran, and where it branched."""

    root: str
    """Merkle root of the parent trace, as it was when forked (hex)."""
    size: int = Field(ge=1)
    """Events in the parent trace when forked (``root`` covers that many)."""
    step: int = Field(ge=1)
    """The step the fork asked the model afresh: steps before it are the parent's."""


class Environment(_Frozen):
    """Where a run ran: the interpreter, the platform, the code and the model (a fingerprint).

    Recorded in ``run_started`` (and in ``run_resumed`` when a continuation ran elsewhere). It
    is evidence, not configuration: replay carries the recorded one forward and reports how
    the replaying machine differs, never failing on it (docs/adr/0122).
    """

    python: str = Field(max_length=200)
    """The Python version (``platform.python_version()``)."""
    implementation: str = Field(max_length=200)
    """The Python implementation (``CPython``, ``PyPy``...)."""
    platform: str = Field(max_length=1000)
    """The platform (``platform.platform()``: system, release, machine, libc)."""
    distributions: dict[str, str] = Field(default_factory=dict, max_length=10_000)
    """Installed distributions the process had imported when the run began, name to version."""
    model: str | None = Field(default=None, max_length=2000)
    """The model: the embedded model's file name and sha256, or a server's API, endpoint
    (without credentials) and model name (each reply records the id the server reports)."""
    spec_digest: str | None = Field(default=None, max_length=200)
    """The digest of the run spec, when the run had one."""
    modules: dict[str, str] = Field(default_factory=dict, max_length=10_000)
    """The spec's tool and output modules (parent packages too), module to file sha256."""

    def differences(self, other: Environment, *, imports: bool = True) -> tuple[str, ...]:
        """What differs from this environment to ``other``, one line each (``what: a -> b``).

        Args:
            other: The environment compared with this one.
            imports: Also list distributions only one side imported (``absent``). Without it
                only versions of distributions both imported are compared: a process that
                imported more (a replay verifying signatures, say) is not another machine.
        """
        lines = [
            f"{name}: {getattr(self, name)} -> {getattr(other, name)}"
            for name in ("python", "implementation", "platform", "model", "spec_digest")
            if getattr(self, name) != getattr(other, name)
        ]
        shared = self.distributions.keys() & other.distributions.keys()
        for label, mine, theirs, names in (
            (
                "distribution",
                self.distributions,
                other.distributions,
                self.distributions.keys() | other.distributions.keys() if imports else shared,
            ),
            ("module", self.modules, other.modules, self.modules.keys() | other.modules.keys()),
        ):
            for key in sorted(names):
                a, b = mine.get(key, "absent"), theirs.get(key, "absent")
                if a != b:
                    lines.append(f"{label} {key}: {a} -> {b}")
        return tuple(lines)
