"""The run spec: a small YAML file naming the model endpoint, tools, policy and output schema.

A bad spec is refused with an error that names the file, the line and the offending key
(with a suggestion for a misspelt one), so it can be fixed without reading our source.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

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

from twinflow._base._code import module_file, split_dotted
from twinflow._base._code import resolve_dotted as resolve_any_dotted
from twinflow._base._yaml import YamlLimits, read_user_file, read_yaml, validation_problems
from twinflow.cli._errors import CliError
from twinflow.kernel import check_endpoint_url, file_sha256
from twinflow.trace import UserError
from twinflow.vocab import ExtensionPart, FrozenValue

__all__ = [
    "CodeChangedError",
    "CodeRecord",
    "McpServerSpec",
    "ModelSpec",
    "ModuleDigest",
    "PolicySpec",
    "RunSpec",
    "SpecError",
    "check_code",
    "file_sha256",
    "load_part_kinds",
    "load_spec",
    "load_tools",
    "parse_spec",
    "read_code_record",
    "read_spec_text",
    "record_code",
    "resolve_dotted",
    "spec_directories",
    "spec_modules",
]


class SpecError(CliError, UserError):
    """A run spec that cannot be used: unreadable, not YAML, or a key with a bad value."""


class CodeChangedError(CliError):
    """A module a recorded run imported is no longer the file that ran (its sha256 differs)."""

    def __init__(self, message: str, module: str) -> None:
        super().__init__(message)
        self.module = module


# RFC 9110 field-name: a token.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HARMLESS_HEADERS = frozenset(
    {
        "accept",
        "accept-language",
        "anthropic-beta",
        "anthropic-version",
        "http-referer",
        "openai-beta",
        "openai-organization",
        "openai-project",
        "user-agent",
        "x-request-id",
        "x-title",
    }
)
"""The only header names a spec may set (lower case): ones known to carry no credential.

A spec is copied into the run directory and published with the trace, and a gateway can take a
key in any header (``X-Auth-Token``, ``Ocp-Apim-Subscription-Key``, ...): a list of the
credential headers is never complete, so the headers that may be written are listed instead
(docs/adr/0093). A key goes in the variable ``api_key_env`` names."""


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
        return _check_headers(headers)

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, url: str) -> str:
        try:
            return url if url == "embedded" else check_endpoint_url(url, where="model.url")
        except UserError as exc:
            raise ValueError(str(exc)) from None


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CREDENTIAL_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL|COOKIE|SESSION", re.I
)
"""Words in a variable's name that say it holds a credential (``GITHUB_TOKEN``, ``API_KEY``,
``DB_PASSWORD``): such a variable goes in ``pass_env``, never as a literal in ``env``."""


def _check_headers(headers: dict[str, str]) -> dict[str, str]:
    """Refuse a header that is not a plain one known to carry no credential (docs/adr/0093)."""
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an HTTP header name")
        if any(c in value for c in "\r\n\0"):
            raise ValueError(f"the value of header {name} holds a line break or NUL")
        if name.lower() not in _HARMLESS_HEADERS:
            raise ValueError(
                f"header {name} is not one known to carry no credential, and headers are "
                "copied into the run directory: a key goes in an environment variable named "
                "by api_key_env (sent in the API's key header); the headers a spec may set "
                f"are {', '.join(sorted(_HARMLESS_HEADERS))}"
            )
    return headers


class McpServerSpec(_Strict):
    """An MCP server whose tools the run offers, named ``<name>.<tool>``: a command or a URL."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The server's name: the first part of its tools' names (no ``.``)."""
    command: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=256)
    """The program and its arguments, for a server spoken to over stdin and stdout."""
    env: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Variables set for the command (it inherits only PATH, HOME, LANG and the like of
    ours). Copied into the run directory with the spec: never a key (a name that looks like
    one is refused; use ``pass_env``)."""
    pass_env: tuple[str, ...] = Field(default=(), max_length=64)
    """Variables of our environment forwarded to the command (its keys): the spec names them,
    each must be set, and their values are scrubbed from every message and trace."""
    cwd: str | None = None
    """The command's working directory, relative to the spec's directory (default: that
    directory)."""
    url: str | None = None
    """The Streamable HTTP endpoint (``http://127.0.0.1:8000/mcp``), for a server over HTTP."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The variable holding the HTTP server's key, sent as ``Authorization: Bearer``."""
    headers: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Extra request headers for the HTTP server (never a key)."""
    timeout: float = Field(default=30.0, gt=0, le=3600)
    """Seconds one request to the server may take."""

    @model_validator(mode="after")
    def _one_kind(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give the server a command (stdio) or a url (HTTP), not both")
        if self.command is None and (self.env or self.pass_env or self.cwd is not None):
            raise ValueError(
                "env, pass_env and cwd are for a command; an HTTP server takes api_key_env"
            )
        if self.url is None and (self.headers or self.api_key_env is not None):
            raise ValueError("api_key_env and headers are for a url; a command takes env")
        return self

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        return _check_headers(headers)

    @field_validator("env")
    @classmethod
    def _no_keys(cls, env: dict[str, str]) -> dict[str, str]:
        for name in env:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"env: {name[:64]!r} is not an environment variable name")
            if _CREDENTIAL_NAME.search(name):
                raise ValueError(
                    f"env: {name} looks like a credential, and env is copied into the run "
                    f"directory with the spec: leave it in your environment and name it in "
                    f"pass_env ([{name}]), which forwards it and scrubs it"
                )
        return env

    @field_validator("pass_env")
    @classmethod
    def _names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"pass_env: {name[:64]!r} is not an environment variable name")
        return names

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, url: str | None) -> str | None:
        try:
            return None if url is None else check_endpoint_url(url, where="mcp_servers[].url")
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
    ask: tuple[str, ...] = ()
    """Tool names that run only once a person approves each call (`twinflow approve`)."""
    repeat_safe: tuple[str, ...] = ()
    """Tool names `twinflow resume` may run again when a crash left a call without a result."""


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
    part_kinds: tuple[str, ...] = Field(default=(), max_length=256)
    """Dotted paths to the extension part classes (``twinflow.vocab.ExtensionPart``
    subclasses, ``package.module:CitationPart``) the model's replies may hold; recorded in the
    trace's ``run_started``."""

    _code_dir: Path | None = PrivateAttr(default=None)

    @field_validator("mcp_servers")
    @classmethod
    def _unique_servers(cls, servers: tuple[McpServerSpec, ...]) -> tuple[McpServerSpec, ...]:
        names = [server.name for server in servers]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"two MCP servers are named {twice[0]!r}: names must be unique")
        return servers

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


def spec_modules(spec: RunSpec) -> tuple[str, ...]:
    """The modules building an agent from ``spec`` would import (tools, output, then part kinds),
    unimported.

    Raises:
        SpecError: a path is not a dotted path.
    """
    # An output given as a class is already imported.
    paths = [
        *spec.tools,
        *([spec.output] if isinstance(spec.output, str) else []),
        *spec.part_kinds,
    ]
    try:
        return tuple(dict.fromkeys(split_dotted(p)[0] for p in paths))
    except UserError as exc:
        raise SpecError(str(exc)) from None


def spec_directories(spec: RunSpec) -> tuple[Path, ...]:
    """The directories a spec's code is imported from (its own, when read from a file)."""
    return () if spec.code_dir is None else (spec.code_dir,)


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


def load_part_kinds(spec: RunSpec) -> list[type[ExtensionPart]]:
    """Resolve the spec's part kind paths to extension part classes.

    Raises:
        SpecError: a path does not resolve to an `ExtensionPart` subclass.
    """
    kinds: list[type[ExtensionPart]] = []
    for index, dotted in enumerate(spec.part_kinds):
        target = resolve_dotted(dotted, spec.code_dir)
        if not (isinstance(target, type) and issubclass(target, ExtensionPart)):
            raise SpecError(
                f"part_kinds[{index}]: {dotted!r} is not an extension part class (a subclass of "
                "twinflow.vocab.ExtensionPart)"
            )
        kinds.append(target)
    return kinds


# -- where a run's code came from ---------------------------------------------------------

MAX_CODE_RECORD_BYTES = 256 * 1024
"""Largest code record read (it sits in a run directory: untrusted input like the spec)."""

_SHA256 = r"^[0-9a-f]{64}$"


class ModuleDigest(_Strict):
    """One module a run imported for its tools or output model, as it was when the run began."""

    module: str = Field(min_length=1, max_length=1000)
    """The dotted module name the spec names."""
    origin: Literal["code_dir", "installed"]
    """Found in the run's code directory, or in the installed packages."""
    sha256: str = Field(pattern=_SHA256)
    """The sha256 of the module's source file (hex)."""


class CodeRecord(_Strict):
    """Where a run's spec took its code from: written beside the spec copy as ``code.N.json``.

    ``code_dir`` is absolute, as the run resolved it, so a run directory can be moved and still
    replay; it is only ever read under ``replay --trust-spec``, and a module is imported from it
    only if its file has the digest recorded here.
    """

    code_dir: str | None = Field(default=None, max_length=4096)
    """The directory the spec's modules were imported from first (the spec file's directory)."""
    modules: tuple[ModuleDigest, ...] = Field(default=(), max_length=1000)
    """The tool and output modules that ran, with their digests."""


def record_code(spec: RunSpec) -> CodeRecord:
    """The record of ``spec``'s code: call after its modules were imported (the agent built).

    Raises:
        SpecError: a module's file cannot be found or read.
    """
    code_dir = spec.code_dir.resolve() if spec.code_dir is not None else None
    modules = []
    for name in _executed_modules(spec):
        path = _file_of(name, spec)
        if path is None:
            continue  # a built-in or namespace module has no file to digest
        try:
            digest = file_sha256(path)
        except OSError as exc:
            raise SpecError(f"cannot read module {name!r} at {path}: {exc}") from None
        inside = code_dir is not None and path.resolve().is_relative_to(code_dir)
        origin: Literal["code_dir", "installed"] = "code_dir" if inside else "installed"
        modules.append(ModuleDigest(module=name, origin=origin, sha256=digest))
    return CodeRecord(code_dir=None if code_dir is None else str(code_dir), modules=tuple(modules))


def _executed_modules(spec: RunSpec) -> tuple[str, ...]:
    """Every module whose file runs when the spec's modules are imported, parents first.

    Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` before ``c``: each is
    recorded, and checked before the next is looked up (looking up ``a.b`` imports ``a``).
    """
    names: dict[str, None] = {}
    for module in spec_modules(spec):
        parts = module.split(".")
        for end in range(1, len(parts) + 1):
            names[".".join(parts[:end])] = None
    return tuple(names)


def read_code_record(path: Path) -> CodeRecord | None:
    """The code record at ``path``, or None if the run wrote none (a run from before records).

    Raises:
        SpecError: the record is unreadable, too large, not the record's JSON, or names a
            code directory that is not an absolute, link-free path.
    """
    try:
        with path.open("rb") as file:
            data = file.read(MAX_CODE_RECORD_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the code record ({exc})") from None
    if len(data) > MAX_CODE_RECORD_BYTES:
        raise SpecError(
            f"{path}: over the limit of {MAX_CODE_RECORD_BYTES} bytes for a code record"
        )
    try:
        record = CodeRecord.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the record"
        raise SpecError(f"{path}: not a code record: {where}: {first['msg']}") from None
    if record.code_dir is not None:
        recorded = Path(record.code_dir)
        # A received run directory names this path: it is only a place to look (the digests
        # decide what is imported), and never one reached through a link or relative to the cwd.
        try:
            plain = recorded.is_absolute() and os.path.realpath(recorded) == os.path.normpath(
                recorded
            )
        except (OSError, ValueError):  # a NUL byte, a name too long for the system
            plain = False
        if not plain:
            raise SpecError(
                f"{path}: the code directory {record.code_dir!r} is not an absolute path free "
                "of links; replay with --spec PATH naming the spec you trust"
            )
    return record


def _file_of(name: str, spec: RunSpec) -> Path | None:
    """`twinflow.eval.module_file` from the spec's directories; its error as a spec's."""
    try:
        return module_file(name, spec_directories(spec))
    except UserError as exc:
        raise SpecError(str(exc)) from None


def check_code(spec: RunSpec, record: CodeRecord) -> None:
    """Refuse to rebuild ``spec``'s agent if a module it names differs from the one that ran.

    Every module the spec names must be in ``record``, be found (from ``spec.code_dir`` first,
    then the installed packages) and have the recorded sha256; nothing is imported before all of
    them are checked.

    Raises:
        SpecError: a module cannot be found (the message lists the directories searched) or
            has no digest in the record.
        CodeChangedError: a module's file differs from the one the run imported.
    """
    recorded = {m.module: m for m in record.modules}
    for name in _executed_modules(spec):
        path = _file_of(name, spec)
        if path is None:
            continue  # a namespace package: no file of its own runs
        entry = recorded.get(name)
        if entry is None:
            raise SpecError(
                f"the run's code record has no digest for module {name!r}: replay with --spec "
                "PATH naming the spec you trust"
            )
        try:
            digest = file_sha256(path)
        except OSError as exc:
            raise SpecError(f"cannot read module {name!r} at {path}: {exc}") from None
        if digest != entry.sha256:
            raise CodeChangedError(
                f"module {name!r} changed since the run: {path} has sha256 {digest}, the run "
                f"imported {entry.sha256}; restore it, or replay with --spec PATH to use the "
                "code as it is now",
                name,
            )
