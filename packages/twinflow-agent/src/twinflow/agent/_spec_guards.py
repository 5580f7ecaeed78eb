"""The spec's values that guard what is copied into a run directory: headers, MCP servers.

A spec is copied into the run directory and published with the trace, so a header or an
environment variable that could carry a credential is refused here, with what to write instead.
"""

from __future__ import annotations

import re

from pydantic import Field, ValidationInfo, field_validator, model_validator

from twinflow._base._untrusted import credential_shape
from twinflow.agent._code_record import SpecValue
from twinflow.agent._errors import SpecError
from twinflow.kernel._credentials import check_endpoint_url
from twinflow.trace import UserError

__all__ = ["EMBEDDED", "McpServerSpec", "check_headers"]

EMBEDDED = "embedded"
"""A spec's ``model.url`` that means: start the embedded SmolLM2 server for the run."""


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


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CREDENTIAL_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL|COOKIE|SESSION", re.I
)
"""Words in a variable's name that say it holds a credential (``GITHUB_TOKEN``, ``API_KEY``,
``DB_PASSWORD``): such a variable goes in ``pass_env``, never as a literal in ``env``."""


def check_headers(headers: dict[str, str]) -> dict[str, str]:
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


class McpServerSpec(SpecValue):
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
    resources: tuple[str, ...] = Field(default=(), max_length=64)
    """URI patterns (``*`` and ``?`` wildcards) of the server's resources the model may read,
    through the tool ``<name>.read_resource`` (which the policy must allow too); none: no such
    tool."""
    prompts: tuple[str, ...] = Field(default=(), max_length=64)
    """Name patterns of the server's prompts the model may fill, through the tool
    ``<name>.get_prompt`` (which the policy must allow too); none: no such tool."""

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
        return check_headers(headers)

    @field_validator("env")
    @classmethod
    def _no_keys(cls, env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        for name, value in env.items():
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"env: {name[:64]!r} is not an environment variable name")
            # By name (GITHUB_TOKEN) or by what the value looks like (DATABASE_URL holding
            # user:password@, a ghp_ token, a PEM block).
            shape = None if _CREDENTIAL_NAME.search(name) else credential_shape(value)
            if _CREDENTIAL_NAME.search(name) or shape is not None:
                looks = "looks like a credential" if shape is None else f"holds {shape}"
                # Raised as is, not as a ValueError: a validation error quotes the input, and
                # this message must name the variable, never show its value.
                raise SpecError(
                    f"mcp_servers: server {info.data.get('name', '?')!r}: env: {name} {looks}, "
                    "and env is copied into the run directory with the spec: leave it in your "
                    f"environment and name it in pass_env ([{name}]), which forwards it and "
                    "scrubs it"
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
