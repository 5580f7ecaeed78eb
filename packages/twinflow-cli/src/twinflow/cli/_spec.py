"""The run spec: a small YAML file naming the model endpoint, tools, policy and output schema.

A bad spec is refused with an error that names the file, the line and the offending key
(with a suggestion for a misspelt one), so it can be fixed without reading our source.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import yaml
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

from twinflow.cli._errors import CliError
from twinflow.eval import (
    ScorerError,
    split_dotted,
    validation_problems,
    yaml_syntax_problem,
)
from twinflow.eval import resolve_dotted as resolve_any_dotted
from twinflow.kernel import check_endpoint_url
from twinflow.vocab import FrozenValue, UserError

__all__ = [
    "ModelSpec",
    "PolicySpec",
    "RunSpec",
    "SpecError",
    "load_spec",
    "load_tools",
    "parse_spec",
    "read_spec_text",
    "resolve_dotted",
    "spec_modules",
]


class SpecError(CliError, UserError):
    """A run spec that cannot be used: unreadable, not YAML, or a key with a bad value."""


# RFC 9110 field-name: a token.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_KEY_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "x-goog-api-key"}
)
"""Header names that carry a credential (lower case): a spec may not write one."""


class _Strict(FrozenValue):
    """Base of the spec's sections: frozen, no extra keys, `SpecError` on bad input."""

    _invalid_error = SpecError


class ModelSpec(_Strict):
    """Where the model is served and how to speak to it."""

    kind: Literal["openai-compatible", "ollama", "anthropic"] = "openai-compatible"
    """The server's API: OpenAI chat-completions, Ollama's /api/chat, or Anthropic's Messages."""
    url: str
    """Base URL of the server (``http://127.0.0.1:8080``, ``http://127.0.0.1:11434``,
    ``https://api.anthropic.com``), or ``embedded`` to start the bundled SmolLM2-135M under
    llama-cpp-python for the run."""
    dialect: Literal["llama-cpp-python", "llama.cpp", "vllm", "lmstudio"] = "llama-cpp-python"
    """How structured output is requested from an OpenAI-compatible server."""
    name: str = "local"
    """The model name sent to the server."""
    mode: Literal["structured-action", "native"] = "structured-action"
    """How tool calls are obtained: constrained decoding of an action union, or native tool
    calling (the only mode of ``kind: anthropic``, and its default)."""
    temperature: float = 0.0
    """Sampling temperature; 0 is the reproducible choice."""
    max_tokens: int = Field(default=256, ge=1)
    """Most tokens one reply may take. Grammar-constrained decoding lets a small model run on
    inside a JSON string until the context is full; this bound stops it (the reply then fails
    validation and is re-asked or recorded as invalid, instead of taking minutes)."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds to wait for one model response."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable holding the server's API key, sent in the header the ``kind``'s
    API takes it in (``Authorization: Bearer``; ``x-api-key`` for anthropic). The spec names the
    variable, never the key; a key in ``url`` or ``headers`` is refused."""
    headers: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Extra request headers (a gateway's, ``anthropic-beta``, an ``anthropic-version`` other than
    the client's). They are copied into the run directory with the spec: never a key."""

    @model_validator(mode="before")
    @classmethod
    def _anthropic_is_native(cls, data: Any) -> Any:
        # Messages has its own tool calling and no decoder-side schema for an action union.
        if isinstance(data, dict) and data.get("kind") == "anthropic" and "mode" not in data:
            return {**data, "mode": "native"}
        return data

    @model_validator(mode="after")
    def _fits_the_kind(self) -> ModelSpec:
        if self.kind == "anthropic":
            if self.mode != "native":
                raise ValueError(
                    "kind anthropic takes mode native only (the Messages API's own tool "
                    "calling): remove `mode` or set it to native"
                )
            if self.url == "embedded":
                raise ValueError(
                    "the embedded model speaks the OpenAI-compatible API, not Anthropic's: "
                    "give the Messages API's base URL (https://api.anthropic.com), or drop "
                    "`kind: anthropic`"
                )
        return self

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            if any(c in value for c in "\r\n\0"):
                raise ValueError(f"the value of header {name} holds a line break or NUL")
            if name.lower() in _KEY_HEADERS:
                raise ValueError(
                    f"header {name} carries credentials, and headers are copied into the run "
                    "directory: put the key in an environment variable and name it with "
                    "api_key_env (sent in the API's key header)"
                )
        return headers

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, url: str) -> str:
        try:
            return url if url == "embedded" else check_endpoint_url(url, where="model.url")
        except UserError as exc:
            raise ValueError(str(exc)) from None


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
    output: str | SkipJsonSchema[type[BaseModel]] | None = None
    """The pydantic model the final answer must validate against: its dotted path, or (from
    Python) the class itself. A class is recorded under its ``module:QualName``."""
    max_steps: int = Field(default=8, ge=1, le=1000)
    """Maximum model turns."""

    _code_dir: Path | None = PrivateAttr(default=None)

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


@contextlib.contextmanager
def _importing_from(code_dir: Path | None) -> Iterator[None]:
    """Imports for the block look in ``code_dir`` first and never in the current directory.

    ``code_dir`` stays on ``sys.path`` afterwards (a tool may import its siblings when it runs);
    the current directory (``''`` under ``python -m``) is left out only while importing.
    """
    if code_dir is not None and str(code_dir) not in sys.path:
        sys.path.insert(0, str(code_dir))
    cwd = os.getcwd()
    saved = list(sys.path)
    keep = {str(code_dir)} if code_dir is not None else set()
    sys.path[:] = [p for p in saved if p in keep or (p not in ("", ".") and p != cwd)]
    try:
        yield
    finally:
        # Restore, keeping any entry the imported code added itself.
        sys.path[:] = [*(p for p in sys.path if p not in saved), *saved]


def spec_modules(spec: RunSpec) -> tuple[str, ...]:
    """The modules building an agent from ``spec`` would import (tools, then output), unimported.

    Raises:
        SpecError: a path is not a dotted path.
    """
    # An output given as a class is already imported.
    paths = [*spec.tools, *([spec.output] if isinstance(spec.output, str) else [])]
    try:
        return tuple(dict.fromkeys(split_dotted(p)[0] for p in paths))
    except ScorerError as exc:
        raise SpecError(str(exc)) from None


def resolve_dotted(path: str, code_dir: Path | None = None) -> Any:
    """Import ``package.module:attribute`` (or ``package.module.attribute``) and return it.

    Modules are looked up in ``code_dir`` (a spec's own directory) first, then in the installed
    packages; never implicitly in the current directory.

    Raises:
        SpecError: the module or the attribute does not exist, or importing the module raised.
    """
    try:
        with _importing_from(code_dir):
            return resolve_any_dotted(path)
    except ScorerError as exc:
        # The resolver is eval's (one for the workspace); its error is a spec's problem here.
        raise SpecError(str(exc)) from exc


MAX_SPEC_CHARS = 1024 * 1024
"""Largest run spec read (a spec may come with a received trace: it is untrusted input)."""
MAX_SPEC_DEPTH = 32
"""Deepest nesting of a spec's YAML."""
MAX_SPEC_NODES = 100_000
"""Most YAML nodes a spec expands to, aliases followed (a billion-laughs spec stops here)."""


def _check_nodes(root: yaml.Node | None, path: str) -> None:
    """Refuse a spec nested deeper than `MAX_SPEC_DEPTH` or expanding past `MAX_SPEC_NODES`."""
    stack: list[tuple[yaml.Node, int]] = [] if root is None else [(root, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_SPEC_NODES:
            raise SpecError(
                f"{path}: expands to more than {MAX_SPEC_NODES} YAML nodes (aliases included)"
            )
        if depth > MAX_SPEC_DEPTH:
            line = node.start_mark.line + 1
            raise SpecError(f"{path}:{line}: nested deeper than {MAX_SPEC_DEPTH} levels")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend(((key, depth + 1), (value, depth + 1)))


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
    try:
        with path.open("rb") as file:
            # Bounded: a spec may be hostile (a huge file, /dev/zero); parse_spec refuses the rest.
            data = file.read(4 * MAX_SPEC_CHARS + 1)
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, expected a YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read the spec ({exc})") from None
    return text


def parse_spec(text: str, path: str, *, code_dir: Path | None = None) -> RunSpec:
    """Validate a run spec's YAML text; ``path`` names it in errors.

    ``code_dir`` is where its tool and output modules are imported from (None: installed
    packages only).

    Raises:
        SpecError: naming the file, line and key of the first problem (and listing the rest).
    """
    if len(text) > MAX_SPEC_CHARS:
        raise SpecError(
            f"{path}: {len(text)} characters, over the limit of {MAX_SPEC_CHARS} for a run spec"
        )
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        _check_nodes(root, path)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(yaml_syntax_problem(exc, path)) from None
    except RecursionError:
        raise SpecError(f"{path}: nested too deeply to be a run spec") from None
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
    return spec


def load_tools(spec: RunSpec) -> list[Callable[..., Any]]:
    """Resolve the spec's tool paths to callables.

    Raises:
        SpecError: a path does not resolve to a callable.
    """
    tools = []
    for index, dotted in enumerate(spec.tools):
        target = resolve_dotted(dotted, spec.code_dir)
        if not callable(target):
            raise SpecError(f"tools[{index}]: {dotted!r} is not callable")
        tools.append(target)
    return tools
