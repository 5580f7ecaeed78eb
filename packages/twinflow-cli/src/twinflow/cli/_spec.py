"""The run spec: a small YAML file naming the model endpoint, tools, policy and output schema.

A bad spec is refused with an error that names the file, the line and the offending key
(with a suggestion for a misspelt one), so it can be fixed without reading our source.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from twinflow.vocab import UserError

__all__ = [
    "ModelSpec",
    "PolicySpec",
    "RunSpec",
    "SpecError",
    "load_spec",
    "load_tools",
    "parse_spec",
    "resolve_dotted",
]


class SpecError(UserError):
    """A run spec that cannot be used: unreadable, not YAML, or a key with a bad value."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Strict):
    """Where the model is served and how to speak to it."""

    kind: Literal["openai-compatible", "ollama"] = "openai-compatible"
    """The server's API: OpenAI chat-completions or Ollama's /api/chat."""
    url: str
    """Base URL of the server (``http://127.0.0.1:8080``, ``http://127.0.0.1:11434``), or
    ``embedded`` to start the bundled SmolLM2-135M under llama-cpp-python for the run."""
    dialect: Literal["llama-cpp-python", "llama.cpp", "vllm", "lmstudio"] = "llama-cpp-python"
    """How structured output is requested from an OpenAI-compatible server."""
    name: str = "local"
    """The model name sent to the server."""
    mode: Literal["structured-action", "native"] = "structured-action"
    """How tool calls are obtained: constrained decoding of an action union, or native tool calling."""
    temperature: float = 0.0
    """Sampling temperature; 0 is the reproducible choice."""
    max_tokens: int = Field(default=256, ge=1)
    """Most tokens one reply may take. Grammar-constrained decoding lets a small model run on
    inside a JSON string until the context is full; this bound stops it (the reply then fails
    validation and is re-asked or recorded as invalid, instead of taking minutes)."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds to wait for one model response."""


class PolicySpec(_Strict):
    """Which tools may run, and how often. Anything not allowed is denied."""

    allow: tuple[str, ...] = ()
    """Tool names that may run."""
    per_tool_budget: dict[str, int] = Field(default_factory=dict)
    """Maximum calls per tool name."""
    max_tool_calls: int | None = Field(default=None, ge=0)
    """Maximum tool calls in the whole run."""


class RunSpec(_Strict):
    """Everything ``twinflow run`` needs."""

    prompt: str = Field(min_length=1)
    """The user's task."""
    system: str | None = None
    """An optional system prompt."""
    model: ModelSpec
    """The model endpoint."""
    tools: tuple[str, ...] = ()
    """Dotted paths to Python callables (``package.module:function`` or ``package.module.function``)."""
    policy: PolicySpec = PolicySpec()
    """The tool policy (deny by default)."""
    output: str | None = None
    """Dotted path to a pydantic model the final answer must validate against."""
    max_steps: int = Field(default=8, ge=1, le=1000)
    """Maximum model turns."""


def resolve_dotted(path: str) -> Any:
    """Import ``package.module:attribute`` (or ``package.module.attribute``) and return it.

    Modules are looked up as ``python -m`` would: the current directory first, then the
    installed packages.

    Raises:
        SpecError: the module or the attribute does not exist, or importing the module raised.
    """
    module_name, sep, attribute = path.partition(":")
    if not sep:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise SpecError(f"{path!r} is not a dotted path: write 'package.module:name'")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        # gate: loads user code (the module the user named; scripts/checks/determinism)
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SpecError(
            f"cannot import {module_name!r} for {path!r}: {exc}; is it installed in this environment?"
        ) from exc
    except Exception as exc:
        # The user's module itself is broken (a syntax error, code that raises at import):
        # a mistake in their code to fix, reported in one line like a missing module.
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise SpecError(f"cannot import {module_name!r} for {path!r}: {reason}") from exc
    target = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise SpecError(
                f"{module_name!r} has no attribute {attribute!r} (from {path!r})"
            ) from None
    return target


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (or of its nearest existing parent)."""
    line = None if node is None else node.start_mark.line + 1
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            found = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
            if found is None:
                return line
            # Point at the key itself: that is where an unknown or bad key is written.
            key_node = next(k for k, v in node.value if v is found)
            line = key_node.start_mark.line + 1
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _known_fields(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    model: type[BaseModel] = RunSpec
    for key in loc[:-1]:
        field = model.model_fields.get(str(key))
        annotation = getattr(field, "annotation", None)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            return ()
    return tuple(model.model_fields)


def _describe(error: Any, root: yaml.Node | None, source: str) -> str:
    loc: tuple[int | str, ...] = tuple(error["loc"])
    dotted = ".".join(str(part) for part in loc) or "(top level)"
    line = _line_of(root, loc)
    where = f"{source}:{line}" if line is not None else source
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        message = "unknown key"
        close = difflib.get_close_matches(str(loc[-1]), _known_fields(loc), n=1)
        if close:
            message += f" (did you mean {close[0]!r}?)"
    elif error["type"] == "missing":
        message = "required key is missing"
    return f"{where}: {dotted}: {message}"


def load_spec(path: Path) -> RunSpec:
    """Read and validate a run spec file.

    Raises:
        SpecError: naming the file, line and key of the first problem (and listing the rest).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, expected a YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read the spec ({exc})") from None
    return parse_spec(text, str(path))


def parse_spec(text: str, path: str) -> RunSpec:
    """Validate a run spec's YAML text; ``path`` names it in errors.

    Raises:
        SpecError: naming the file, line and key of the first problem (and listing the rest).
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}".replace("\n", " ")) from None
    if data is None:
        raise SpecError(f"{path}: the spec is empty; it needs at least 'prompt' and 'model'")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the spec must be a mapping of keys, not {type(data).__name__}")
    try:
        return RunSpec.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(error, root, path) for error in exc.errors()]
        more = (
            f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})"
            if len(problems) > 1
            else ""
        )
        raise SpecError(problems[0] + more) from None


def load_tools(spec: RunSpec) -> list[Callable[..., Any]]:
    """Resolve the spec's tool paths to callables.

    Raises:
        SpecError: a path does not resolve to a callable.
    """
    tools = []
    for index, dotted in enumerate(spec.tools):
        target = resolve_dotted(dotted)
        if not callable(target):
            raise SpecError(f"tools[{index}]: {dotted!r} is not callable")
        tools.append(target)
    return tools
