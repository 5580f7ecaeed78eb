"""API keys and URLs that may carry them: one place that reads a key and one that hides one.

A key is read from an environment variable the caller names (``api_key_env``), once, and sent
by the transport in the header its API takes it in (a `KeyHeader`: ``Authorization: Bearer``
for OpenAI-compatible servers, ``x-api-key`` for Anthropic's Messages API; the model client
names it); it is never part of a URL, a body, a message, a trace event or a file. A URL with
credentials in it (``http://user:key@host/`` or ``?api_key=...``) is refused where a model
endpoint is configured, and every URL shown in an error or an event goes through `redact_url`
first. Every key read is registered with `register_secret`, so `scrub` removes it from whatever
is printed or written afterwards.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass

from twinflow._base._untrusted import credential_shape, register_secret
from twinflow.trace import UserError

__all__ = [
    "BEARER",
    "KeyHeader",
    "api_key_headers",
    "check_endpoint_url",
    "read_api_key",
    "redact_url",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# RFC 9110 field-name: a token.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass(frozen=True, slots=True)
class KeyHeader:
    """The request header an API takes its key in: ``name: prefix + key``.

    Where the key goes is the API's choice, not the caller's, so each model client names its
    own (`BEARER` for OpenAI-compatible servers and Ollama, ``KeyHeader("x-api-key")`` for
    Anthropic) and the transport puts the key there.
    """

    name: str
    """The header's name."""
    prefix: str = ""
    """What precedes the key in the header's value (``""``: the key alone)."""

    def __post_init__(self) -> None:
        """Refuse a name that is not an HTTP header name, or a prefix with a line break."""
        if not _HEADER_NAME.fullmatch(self.name):
            raise UserError(f"KeyHeader name {self.name!r} is not an HTTP header name")
        if any(c in self.prefix for c in "\r\n\0"):
            raise UserError(f"KeyHeader prefix {self.prefix!r} holds a line break or NUL")


BEARER = KeyHeader("Authorization", prefix="Bearer ")
"""``Authorization: Bearer <key>``: OpenAI's header, and most servers'."""


def redact_url(url: str) -> str:
    """``url`` without userinfo, query or fragment: what may be shown in a message or a trace.

    Total: a string that does not parse as a URL is shown as ``<unparseable URL>``.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparseable URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    if parts.username is not None or parts.password is not None:
        netloc = f"***@{netloc}"
    shown = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return shown + ("?***" if parts.query else "")


_KEY_WORD = re.compile(r"(?:key|api[_-]?key|token|ak|pk|rk)[_-]?[A-Za-z0-9_\-]{12,}", re.I)
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_\-.~+=]{32,}")


def _looks_like_a_key(segment: str) -> bool:
    """Tell whether a URL path segment looks like a credential.

    A credential by its shape (`credential_shape`: a well-known prefix such as ``sk-``,
    ``AIza``, ``ghp_``, ``hf_``, ``xoxb-``, an AWS key id...), a key word (``key``, ``token``)
    followed by 12 or more key characters, or a token of 32 or more characters, those two
    mixing letters and digits (a hex or base64 key, a UUID): longer than model and deployment
    names are. A secret this process read is found whatever it looks like.
    """
    segment = urllib.parse.unquote(segment)
    if credential_shape(segment) is not None:
        return True
    shaped = _KEY_WORD.fullmatch(segment) or _LONG_TOKEN.fullmatch(segment)
    return bool(shaped and any(c.isdigit() for c in segment) and any(c.isalpha() for c in segment))


def check_endpoint_url(url: str, *, where: str = "the model URL") -> str:
    """Refuse an endpoint URL that may carry credentials; return it.

    Refused: a ``user:password@`` part, a ``?query``, a ``#fragment`` (never sent to a server,
    so only a place to paste a key), and a path segment that looks like a key
    (`_looks_like_a_key`). The URL is copied into the run directory and the trace.

    Raises:
        UserError: The URL carries one of those; the message shows the URL redacted and points at
            ``api_key_env``.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:
        raise UserError(f"{where} {redact_url(url)} is not a URL") from None
    keyed_path = any(_looks_like_a_key(segment) for segment in parts.path.split("/"))
    if userinfo or parts.query or parts.fragment or keyed_path:
        what = (
            "credentials (user:key@)"
            if userinfo
            else "a query string (?...)"
            if parts.query
            else "a fragment (#...)"
            if parts.fragment
            else "a path segment that looks like a key"
        )
        shown = redact_url(url)
        if keyed_path and not (userinfo or parts.query or parts.fragment):
            shown = "/".join("***" if _looks_like_a_key(seg) else seg for seg in shown.split("/"))
        raise UserError(
            f"{where} {shown} carries {what}: they would not be sent as credentials "
            "and would be written into error messages, traces and the spec's copy. Put the key "
            "in an environment variable and name it with api_key_env (sent in the API's key "
            "header, such as 'Authorization: Bearer'); give the URL without them"
        )
    return url


def read_api_key(api_key_env: str, *, field: str = "api_key_env") -> str:
    """The API key in environment variable ``api_key_env``, surrounding white space removed.

    Args:
        api_key_env: The variable's name.
        field: What named it, for messages (``api_key_env``, an MCP server's ``pass_env``).

    Raises:
        UserError: The name is not a variable name, or the variable is unset, empty, or holds
            a line break or NUL (the message names the variable, never a value).
    """
    if not _ENV_NAME.fullmatch(api_key_env):
        raise UserError(
            f"{field} must name an environment variable (letters, digits, _), got "
            f"{len(api_key_env)} characters that are not one; give the variable's name, not the key"
        )
    key = os.environ.get(api_key_env, "")
    if not key.strip():
        raise UserError(
            f"{field} names {api_key_env}, which is unset or empty: export {api_key_env}=<your key>"
        )
    if any(c in key for c in "\r\n\0"):
        raise UserError(f"the key in {api_key_env} holds a line break or NUL: fix the variable")
    # From here on every printer and writer scrubs it (`twinflow._base._untrusted.scrub`), whatever
    # path carries it: a server's error event, the model's own reply, a failed run's message.
    register_secret(key)
    return key.strip()


def api_key_headers(api_key_env: str | None, key_header: KeyHeader = BEARER) -> dict[str, str]:
    """The header carrying the key in environment variable ``api_key_env``, as ``key_header``.

    Args:
        api_key_env: The variable's name, or None for no key (no header).
        key_header: The header the API takes its key in (default ``Authorization: Bearer``).

    Raises:
        UserError: As `read_api_key`.
    """
    if api_key_env is None:
        return {}
    return {key_header.name: key_header.prefix + read_api_key(api_key_env)}
