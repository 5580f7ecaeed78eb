"""The run spec: a small YAML file naming the model endpoint, tools, policy and output schema.

`RunSpec` is both the YAML file and the Python configuration object (the same keys), so a run
started from Python and one started with ``twinflow run`` are configured alike. A bad spec is
refused with an error that names the file, the line and the offending key (with a suggestion
for a misspelt one), so it can be fixed without reading our source. Building the agent a spec
describes is `twinflow.agent._connect`'s, in one pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from twinflow._base._code import resolve_dotted as resolve_any_dotted
from twinflow._base._code import split_dotted
from twinflow._base._yaml import YamlLimits, read_user_file, read_yaml, validation_problems
from twinflow.agent._code_record import (
    CodeRecord,
    SpecValue,
    check_code,
    read_code_record,
    record_code,
)
from twinflow.agent._errors import SpecError
from twinflow.agent._model_spec import ModelSpec, model_string_schema
from twinflow.agent._retry import RetryLimits
from twinflow.agent._run import UsageLimits
from twinflow.agent._sandboxed import (
    SandboxSession,
    SandboxSpec,
    ToolEntry,
    builtin_tools,
    sandboxed,
)
from twinflow.agent._spec_guards import McpServerSpec
from twinflow.models._providers import PROVIDERS
from twinflow.trace import UserError
from twinflow.vocab import ExtensionPart

if TYPE_CHECKING:
    from twinflow.agent._agent import Agent
    from twinflow.agent._connect import Resolved
    from twinflow.agent._events import Environment
    from twinflow.agent._mcp import McpTools
    from twinflow.agent._replay import ReplayPorts
    from twinflow.agent._verify import Trace

__all__ = [
    "McpServerSpec",
    "ModelSpec",
    "PolicySpec",
    "RunSpec",
    "SubAgentSpec",
    "load_spec",
    "parse_spec",
    "read_spec_text",
    "resolve_dotted",
]


class PolicySpec(SpecValue):
    """Which tools may run, and how often. Anything not allowed is denied."""

    allow: tuple[str, ...] = ()
    """Tool names that may run."""
    per_tool_budget: dict[str, int] = Field(default_factory=dict)
    """Maximum calls per tool name."""
    max_tool_calls: int | None = Field(default=None, ge=0)
    """Maximum tool calls in the whole run."""
    ask: tuple[str, ...] = ()
    """Tool names that run only once a person approves each call (`twinflow approve`)."""
    repeat_safe: tuple[str, ...] = ()
    """Tool names `twinflow resume` may run again when a crash left a call without a result."""


def unpriced(model: ModelSpec) -> str | None:
    """Why a cost budget cannot be kept for ``model`` (it or a fallback has no price in the
    price table twinflow ships), or None when every one of them is priced."""
    from twinflow.agent._connect import model_label  # the connecting module reads this one

    for one in (model, *model.fallbacks):
        label = model_label(one)
        if PROVIDERS.price(label) is None:
            return (
                f"no price for {label} in the price table ({PROVIDERS.price_table()}), so its "
                "cost is unknown and a cost budget cannot be kept: remove the cost_usd budget, "
                "or bound tokens instead"
            )
    return None


class BudgetSpec(SpecValue):
    """What one run may use; crossing any ends it (``budget_exceeded``, then ``run_failed``)."""

    tokens: int | None = Field(default=None, ge=0)
    """Input plus output tokens, summed over requests."""
    input_tokens: int | None = Field(default=None, ge=0)
    """Prompt tokens, summed over requests."""
    output_tokens: int | None = Field(default=None, ge=0)
    """Generated tokens, summed over requests."""
    cost_usd: float | None = Field(default=None, gt=0)
    """US dollars, by the price table twinflow ships (`twinflow show` prints each reply's
    cost). Refused before the run starts when a model of the spec has no price there."""
    wall_seconds: float | None = Field(default=None, gt=0)
    """Seconds from the run's start to its latest event, by the run's clock (waits count)."""
    requests: int | None = Field(default=None, ge=1)
    """Model requests, re-asks included."""
    tool_calls: int | None = Field(default=None, ge=0)
    """Tool calls the model made, all tools together."""

    def limits(self) -> UsageLimits:
        """The agent's usage limits this budget sets."""
        return UsageLimits(
            requests=self.requests,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.tokens,
            tool_calls=self.tool_calls,
            wall_seconds=self.wall_seconds,
            cost_usd=self.cost_usd,
        )


class SplitSpec(SpecValue):
    """The part of the calling run's budget each call of a sub-agent may use, counted against
    the calling run (a split budget)."""

    steps: int | None = Field(default=None, ge=1)
    """Model requests (the child's steps, re-asks included)."""
    tokens: int | None = Field(default=None, ge=0)
    """Input plus output tokens."""
    tool_calls: int | None = Field(default=None, ge=0)
    """Tool calls."""


class SubAgentSpec(SpecValue):
    """Another agent offered to this one as a tool taking one argument, ``prompt``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The tool's name: the one this spec's ``policy`` allows."""
    spec: str = Field(min_length=1, max_length=1000)
    """The child's own run spec (its tools, policy, output, limits), a path relative to this
    spec's directory. The child runs on this spec's model server (its ``model`` must name the
    same server and model; its temperature and max_tokens are its own) and its ``prompt`` is
    unused: each call's ``prompt`` argument is the child run's prompt."""
    description: str = Field(default="", max_length=10_000)
    """What this spec's model is told the child does (default: the child's ``system``)."""
    budget: Literal["own", "shared"] | SplitSpec = "own"
    """``own``: the child's limits; ``shared``: also bounded by the steps (model requests),
    tokens and tool calls the calling run has left, and counted against it; a mapping of
    ``steps``, ``tokens``, ``tool_calls`` (a split): also bounded by that part of what the
    calling run has left, and counted against it likewise."""

    def tool_budget(self) -> Literal["own", "shared"] | dict[str, int]:
        """The budget as `Agent.as_tool` takes it: ``own``, ``shared`` or the split's mapping."""
        if isinstance(self.budget, str):
            return self.budget
        return self.budget.model_dump(exclude_none=True)


class RunSpec(SpecValue):
    """Everything ``twinflow run`` needs."""

    prompt: str = Field(min_length=1)
    """The user's task."""
    system: str | None = None
    """An optional system prompt."""
    model: ModelSpec = Field(json_schema_extra=model_string_schema)
    """The model endpoint: its keys, or one string (``openai:gpt-4o-mini``, ``embedded``;
    `twinflow models` lists the providers)."""
    tools: tuple[str | ToolEntry, ...] = ()
    """Dotted paths to Python callables (``package.module:function`` or ``package.module.function``),
    or mappings ``{name: <dotted path>, sandbox: true}`` for a tool run in the sandbox."""
    sandbox: SandboxSpec | None = None
    """Sandbox settings (limits); present, every tool of ``tools`` runs in the sandbox, and
    they are the limits of ``builtin_tools`` (docs/how-to/sandboxed-tools.md)."""
    builtin_tools: tuple[Literal["run_python", "run_shell"], ...] = ()
    """Tools twinflow provides, always sandboxed: ``run_python`` runs its ``code`` argument
    with the run's interpreter, ``run_shell`` with ``/bin/sh``; allowed by name in ``policy``."""
    mcp_servers: tuple[McpServerSpec, ...] = Field(default=(), max_length=64)
    """MCP servers whose tools the run offers, each named ``<server>.<tool>`` (and allowed
    only by that name in ``policy``)."""
    policy: PolicySpec = PolicySpec()
    """The tool policy (deny by default)."""
    output: str | SkipJsonSchema[type[BaseModel]] | None = None
    """The pydantic model the final answer must validate against: its dotted path, or (from
    Python) the class itself. A class is recorded under its ``module:QualName``."""
    max_steps: int = Field(default=8, ge=1, le=1000)
    """Maximum model turns."""
    budget: BudgetSpec | None = Field(default=None, exclude_if=lambda value: value is None)
    """What the run may use: ``tokens``, ``input_tokens``, ``output_tokens``, ``requests``,
    ``tool_calls``, ``wall_seconds``, ``cost_usd`` (refused for a model without a price).
    Crossing one ends the run with a ``budget_exceeded`` event naming it."""
    retries: RetryLimits | None = Field(default=None, exclude_if=lambda value: value is None)
    """How a model request the server refused for now (429, 503, 529, a connection reset
    before it was sent) is sent again: ``attempts`` (4 sends), ``base_seconds`` (1),
    ``max_wait_seconds`` (60), ``total_wait_seconds`` (300 a run); each wait is a
    ``model_waited`` event. Absent: those defaults."""
    part_kinds: tuple[str, ...] = Field(default=(), max_length=256)
    """Dotted paths to the extension part classes (``twinflow.vocab.ExtensionPart``
    subclasses, ``package.module:CitationPart``) the model's replies may hold; recorded in the
    trace's ``run_started``."""

    agents: tuple[SubAgentSpec, ...] = Field(default=(), max_length=64)
    """Sub-agents offered as tools, each a run spec of its own, run into its own trace file
    beside this run's (nested at most four levels; a spec naming one of its parents is
    refused before anything starts)."""

    _code_dir: Path | None = PrivateAttr(default=None)
    # The file the spec was read from (`load_spec`): a sub-agent naming it is a cycle.
    _file: Path | None = PrivateAttr(default=None)

    @field_validator("mcp_servers")
    @classmethod
    def _unique_servers(cls, servers: tuple[McpServerSpec, ...]) -> tuple[McpServerSpec, ...]:
        names = [server.name for server in servers]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"two MCP servers are named {twice[0]!r}: names must be unique")
        return servers

    @model_validator(mode="after")
    def _priced_budget(self) -> Self:
        if self.budget is not None and self.budget.cost_usd is not None:
            problem = unpriced(self.model)
            if problem is not None:
                raise ValueError(f"budget.cost_usd: {problem}")
        return self

    @field_serializer("output")
    def _output_name(self, output: str | type[BaseModel] | None) -> str | None:
        """A class given from Python is written (and digested) as its ``module:QualName``."""
        if isinstance(output, type):
            return f"{output.__module__}:{output.__qualname__}"
        return output

    @property
    def code_dir(self) -> Path | None:
        """The directory the spec's own modules are imported from (the spec file's directory)."""
        return self._code_dir

    def resolve(self, tools: Sequence[Callable[..., Any]] | None = None) -> Resolved:
        """The spec read once: its tools (unless given), output model and part kinds imported,
        its policy built; ``.agent(model=..., clock=..., ids=..., trace=...)`` is the agent it
        describes on those ports and ``.check(servers)`` builds it once without a model.

        Raises:
            SpecError: a tool, the output model or a part kind does not resolve.
        """
        from twinflow.agent._connect import resolve

        return resolve(self, tools)

    def open_mcp_servers(
        self, log_dir: Path, *, recorded: Trace | None = None, live: bool = True
    ) -> contextlib.AbstractContextManager[list[McpTools]]:
        """The spec's MCP servers for a ``with`` block, each closed when it exits.

        Without ``recorded``, each server is started (or its session opened) and listed now;
        with it, the tool lists come from the trace and a server connects only if the run goes
        on past the record (``live``). A stdio server's stderr goes to
        ``log_dir/mcp-<name>.log``.

        Raises:
            LaunchError, McpError: a server did not start, initialize or list its tools.
            AgentConfigError: ``recorded`` has no tool list of a server the spec names.
        """
        from twinflow.agent._connect import mcp_servers

        return mcp_servers(self, log_dir, recorded=recorded, live=live)

    def environment(self, model: str | None = None, spec_digest: str | None = None) -> Environment:
        """Where a run of this spec runs: this process's interpreter, platform and imported
        distributions, the model (``model``, or `ModelSpec.identity`'s), the spec's digest
        (``spec_digest``: the one computed before its URL was resolved, or this spec's) and
        its modules'. Call it once the spec's code is imported."""
        from twinflow.agent._connect import run_environment

        return run_environment(self, model, spec_digest)

    def replay_builder(
        self,
        tools: Sequence[Callable[..., Any]] | None = None,
        servers: Sequence[McpTools] = (),
    ) -> Callable[[ReplayPorts], Agent[Any]]:
        """The agent factory `replay` calls: the agent this spec describes on the replaying
        ports (the one builder behind ``twinflow replay`` and `replay_run`)."""
        from twinflow.agent._connect import replay_builder, resolve

        return replay_builder(resolve(self, tools), servers)

    @property
    def directories(self) -> tuple[Path, ...]:
        """The directories the spec's code is imported from (its own, when read from a file)."""
        return () if self._code_dir is None else (self._code_dir,)

    @classmethod
    def parse(cls, text: str, path: str, *, code_dir: Path | None = None) -> RunSpec:
        """Validate a run spec's YAML text; ``path`` names it in errors.

        ``code_dir`` is where its tool and output modules are imported from (None: installed
        packages only).

        Raises:
            SpecError: naming the file, line and key of the first problem (and the rest).
        """
        return parse_spec(text, path, code_dir=code_dir)

    @staticmethod
    def read_text(path: Path) -> str:
        """A spec file's text (read once: what is validated is what a run copies).

        Raises:
            SpecError: the file is missing or unreadable.
        """
        return read_spec_text(path)

    def modules(self) -> tuple[str, ...]:
        """The modules building the agent would import (tools, output, part kinds), unimported.

        Raises:
            SpecError: a path is not a dotted path.
        """
        # An output given as a class is already imported.
        paths = [
            *self.tool_paths(),
            *([self.output] if isinstance(self.output, str) else []),
            *self.part_kinds,
        ]
        try:
            return tuple(dict.fromkeys(split_dotted(p)[0] for p in paths))
        except UserError as exc:
            raise SpecError(str(exc)) from None

    def load_tools(self) -> list[Callable[..., Any]]:
        """Resolve the spec's tool paths to callables (`sandboxed_tools` puts them in the sandbox).

        Raises:
            SpecError: a path does not resolve to a callable.
        """
        tools: list[Callable[..., Any]] = []
        for index, dotted in enumerate(self.tool_paths()):
            target = resolve_dotted(dotted, self._code_dir)
            if not callable(target):
                raise SpecError(f"tools[{index}]: {dotted!r} is not callable")
            tools.append(target)
        return tools

    def sandboxed_tools(self, tools: Sequence[Callable[..., Any]]) -> list[Callable[..., Any]]:
        """One run's tools: those the spec sandboxes (matched by name) wrapped to run in the
        sandbox, then the ``builtin_tools``, all on one new session (one work directory)."""
        session = SandboxSession(self.sandbox or SandboxSpec())
        settings: dict[str, bool | SandboxSpec] = {}
        for entry in self.tools:
            dotted = entry if isinstance(entry, str) else entry.name
            name = split_dotted(dotted)[1].rpartition(".")[2]
            settings[name] = self.sandbox is not None if isinstance(entry, str) else entry.sandbox
        made: list[Callable[..., Any]] = []
        for tool in tools:
            name = str(getattr(tool, "__name__", ""))
            setting = settings.get(name, False)
            if isinstance(setting, SandboxSpec):
                made.append(sandboxed(tool, SandboxSession(setting), name))
            elif setting:
                made.append(sandboxed(tool, session, name))
            else:
                made.append(tool)
        return [*made, *builtin_tools(self.builtin_tools, session)]

    def tool_paths(self) -> tuple[str, ...]:
        """The dotted paths of ``tools``, however each is written."""
        return tuple(entry if isinstance(entry, str) else entry.name for entry in self.tools)

    def load_part_kinds(self) -> list[type[ExtensionPart]]:
        """Resolve the spec's part kind paths to extension part classes.

        Raises:
            SpecError: a path does not resolve to an `ExtensionPart` subclass.
        """
        kinds: list[type[ExtensionPart]] = []
        for index, dotted in enumerate(self.part_kinds):
            target = resolve_dotted(dotted, self._code_dir)
            if not (isinstance(target, type) and issubclass(target, ExtensionPart)):
                raise SpecError(
                    f"part_kinds[{index}]: {dotted!r} is not an extension part class (a "
                    "subclass of twinflow.vocab.ExtensionPart)"
                )
            kinds.append(target)
        return kinds

    def output_type(self) -> type[BaseModel] | None:
        """The pydantic model ``output`` names, if any.

        Raises:
            SpecError: the path does not name a pydantic model.
        """
        if self.output is None or isinstance(self.output, type):
            return self.output
        target = resolve_dotted(self.output, self._code_dir)
        if not (isinstance(target, type) and issubclass(target, BaseModel)):
            raise SpecError(f"output: {self.output!r} is not a pydantic model class")
        return target

    def code_record(self) -> CodeRecord:
        """Where the spec's code comes from, with each module's digest: call after its modules
        were imported (the agent built).

        Raises:
            SpecError: a module's file cannot be found or read.
        """
        return record_code(self)

    def check_code(self, record: CodeRecord) -> None:
        """Refuse to rebuild the agent if a module the spec names differs from the one that ran.

        Raises:
            SpecError: a module cannot be found or has no digest in ``record``, or (``reason``
                ``code_changed``) its file differs from the one the run imported.
        """
        check_code(self, record)

    @staticmethod
    def read_code_record(path: Path) -> CodeRecord | None:
        """The code record a run wrote at ``path``, or None if it wrote none.

        Raises:
            SpecError: the record is unreadable, too large, or not a code record.
        """
        return read_code_record(path)


def resolve_dotted(path: str, code_dir: Path | None = None) -> Any:
    """Import ``package.module:attribute`` (or ``package.module.attribute``) and return it.

    Modules are looked up in ``code_dir`` (a spec's own directory) first, then in the installed
    packages; never implicitly in the current directory (`twinflow.eval.resolve_dotted`).

    Raises:
        SpecError: the module or the attribute does not exist (naming where it was looked for),
            or importing the module raised.
    """
    try:
        return resolve_any_dotted(path, () if code_dir is None else (code_dir,))
    except UserError as exc:
        # The resolver is the workspace's one; its error is a spec's problem here.
        raise SpecError(str(exc)) from exc


MAX_SPEC_CHARS = 1024 * 1024
"""Largest run spec read (a spec may come with a received trace: it is untrusted input)."""
MAX_SPEC_DEPTH = 32
"""Deepest nesting of a spec's YAML."""
MAX_SPEC_NODES = 100_000
"""Most YAML nodes a spec expands to, aliases followed (a billion-laughs spec stops here)."""
_SPEC_LIMITS = YamlLimits("run spec", MAX_SPEC_CHARS, MAX_SPEC_DEPTH, MAX_SPEC_NODES)


def load_spec(path: Path) -> RunSpec:
    """Read and validate a run spec file; its modules are imported from its directory.

    Raises:
        SpecError: naming the file, line and key of the first problem (and listing the rest).
    """
    return parse_spec(read_spec_text(path), str(path), code_dir=path.resolve().parent)


def read_spec_text(path: Path) -> str:
    """A spec file's text (read once: what is validated is what a run copies).

    Raises:
        SpecError: the file is missing or unreadable.
    """
    # Bytes up to four per character: parse_spec refuses a text over MAX_SPEC_CHARS.
    return read_user_file(path, 4 * MAX_SPEC_CHARS, SpecError, "run spec")


def parse_spec(text: str, path: str, *, code_dir: Path | None = None) -> RunSpec:
    """Validate a run spec's YAML text; ``path`` names it in errors.

    ``code_dir`` is where its tool and output modules are imported from (None: installed
    packages only).

    Raises:
        SpecError: naming the file, line and key of the first problem (and listing the rest).
    """
    root, data = read_yaml(text, path, _SPEC_LIMITS, SpecError)
    if data is None:
        raise SpecError(f"{path}: the spec is empty; it needs at least 'prompt' and 'model'")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the spec must be a mapping of keys, not {type(data).__name__}")
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc, root, path, RunSpec)
        more = (
            f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})"
            if len(problems) > 1
            else ""
        )
        raise SpecError(problems[0] + more) from None
    spec._code_dir = code_dir
    if code_dir is not None:
        spec._file = (code_dir / Path(path).name).resolve()
    return spec
