"""API keys and URLs that may carry them: one place that reads a key and one that hides one.

A key is read from an environment variable the caller names (``api_key_env``) and sent as an
``Authorization: Bearer`` header by the transport; it is never part of a URL, a message, a
trace event or a file. A URL with credentials in it (``http://user:key@host/`` or
``?api_key=...``) is refused where a model endpoint is configured, and every URL shown in an
error or an event goes through `redact_url` first.
"""

from __future__ import annotations

import os
import re
import urllib.parse

from twinflow.vocab import UserError

__all__ = ["api_key_headers", "check_endpoint_url", "redact_url"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def check_endpoint_url(url: str, *, where: str = "the model URL") -> str:
    """Refuse an endpoint URL that carries credentials (userinfo or a query); return it.

    Raises:
        UserError: The URL has a ``user:password@`` part or a ``?query``; the message shows the
            URL redacted and points at ``api_key_env``.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:
        raise UserError(f"{where} {redact_url(url)} is not a URL") from None
    if userinfo or parts.query:
        what = "credentials (user:key@)" if userinfo else "a query string (?...)"
        raise UserError(
            f"{where} {redact_url(url)} carries {what}: they would not be sent as credentials "
            "and would be written into error messages and traces. Put the key in an environment "
            "variable and name it with api_key_env (sent as 'Authorization: Bearer'); give the "
            "URL without them"
        )
    return url


def api_key_headers(api_key_env: str | None) -> dict[str, str]:
    """The ``Authorization: Bearer`` header for the key in environment variable ``api_key_env``.

    Args:
        api_key_env: The variable's name, or None for no key (no header).

    Raises:
        UserError: The name is not a variable name, or the variable is unset or empty (the
            message names the variable, never a value).
    """
    if api_key_env is None:
        return {}
    if not _ENV_NAME.fullmatch(api_key_env):
        raise UserError(
            f"api_key_env must name an environment variable (letters, digits, _), got "
            f"{len(api_key_env)} characters that are not one; give the variable's name, not the key"
        )
    key = os.environ.get(api_key_env, "")
    if not key.strip():
        raise UserError(
            f"api_key_env names {api_key_env}, which is unset or empty: export {api_key_env}=<your key>"
        )
    if any(c in key for c in "\r\n\0"):
        raise UserError(f"the key in {api_key_env} holds a line break or NUL: fix the variable")
    return {"Authorization": f"Bearer {key.strip()}"}
