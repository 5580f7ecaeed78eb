"""In-session context and steering, rendered as tagged user-role envelopes.

Context the harness adds mid-session and steering a person sends between steps are not a new
role: they travel as a user message whose one text part is wrapped in a tag naming what it is
(the "system-reminder" pattern), so every wire adapter sends them as it sends any user turn and
none carries a special case. The enclosed text is escaped, so it cannot close its own envelope
or open another.
"""

from __future__ import annotations

from typing import Literal, get_args

from twinflow.trace import UserError
from twinflow.vocab._values import Message

__all__ = ["EnvelopeKind", "envelope"]

EnvelopeKind = Literal["context", "steering"]
"""What an envelope carries: harness-supplied context, or a person's steering message."""

_KINDS: tuple[str, ...] = get_args(EnvelopeKind)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def envelope(kind: EnvelopeKind, text: str) -> Message:
    """The user message that carries `text` as in-session `kind`.

    Args:
        kind: `"context"` or `"steering"`.
        text: What to say; `&`, `<` and `>` are escaped as XML entities.

    Returns:
        A user message with one text part, `<twinflow:{kind}>\\n{text}\\n</twinflow:{kind}>`.

    Raises:
        UserError: `kind` is not an envelope kind, or `text` is empty.
    """
    if kind not in _KINDS:
        raise UserError(f"envelope kind must be one of {_KINDS}, got {kind!r}")
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"a {kind} envelope needs non-empty text, got {text!r}")
    return Message.user(f"<twinflow:{kind}>\n{_escape(text)}\n</twinflow:{kind}>")
