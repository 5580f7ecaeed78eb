"""Untrusted text leaves through one door: secrets scrubbed, terminal controls escaped.

Text from a model, a server or a received file reaches the user's terminal, the trace and the
files of a run directory. Two functions decide what it may carry there, and every printer and
writer calls them rather than doing its own:

- `scrub` replaces every secret this process has read (each API key `read_api_key` returned,
  in the forms listed below) with `REDACTED`. The trace writer, the file writers
  (`write_new`, `write_replace`), the transport's errors and `for_terminal` call it, so a key
  echoed in a streamed error event, a non-JSON event, a bad field or the reply's own content is
  replaced whatever path carried it (docs/adr/0092).
- `for_terminal` is `scrub`, then every character that could drive a terminal shown as a
  visible escape: controls but newline and tab (so ``ESC`` of an OSC title, clear screen or
  OSC 52 clipboard write, and ``\\r`` overwrites), ``DEL``, C1 controls, the bidirectional
  overrides and isolates, and lone surrogates (which no terminal encoding can print). The
  terminal's printers (`twinflow show`, the streamed ``model>`` lines, every command's output
  and error line) all call it.

The forms of a secret that are scrubbed: the exact key; its URL-encoding (``quote(key,
safe="")``) when it differs; and the base64 of the key at each of the three alignments it can
have inside a longer base64 text (``user:key`` for Basic auth, ``Bearer key``, a JSON blob), so a
key base64-encoded after any prefix is found. Encodings are only derived for keys of at least
`_MIN_ENCODED` characters, where they cannot match ordinary text by accident.
"""

from __future__ import annotations

import base64
import json
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable
from typing import Any

JsonValue = Any
"""A plain JSON value (this leaf works on plain values; `scrub_value` keeps its shape)."""

__all__ = [
    "REDACTED",
    "for_terminal",
    "holds_secret",
    "register_secret",
    "scrub",
    "scrub_bytes",
    "scrub_value",
    "unfinished_secret",
]

REDACTED = "[REDACTED:secret]"
"""What a secret is replaced with: in a trace it says that something was removed, and what."""

_MIN_ENCODED = 12
"""Shortest key whose encodings are scrubbed too (a shorter base64 core could match anything)."""

_forms: set[str] = set()
"""Every form registered (it only grows)."""
_pattern: re.Pattern[str] | None = None
_bytes_pattern: re.Pattern[bytes] | None = None
_installed: frozenset[str] = frozenset()
"""The forms the two patterns above match (installed together with them)."""

# What may drive or mislead a terminal: controls (C0, DEL, C1), format characters (the bidi
# overrides and isolates, zero-width marks), line and paragraph separators, lone surrogates.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_PASS = frozenset("\n\t")


def _base64_cores(secret: bytes) -> Iterable[str]:
    """The base64 text of ``secret`` that is the same whatever precedes or follows it."""
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + secret).decode("ascii").rstrip("=")
        # Drop the characters that also encode the unknown bytes before and after the secret.
        # Character i holds bits [6i, 6i + 6); the secret holds bits [8 * offset, 8 * (offset + n)).
        start = -(-offset * 4 // 3)
        end = (4 * (offset + len(secret)) - 3) // 3 + 1
        core = encoded[start:end]
        if len(core) >= _MIN_ENCODED:
            yield core
        urlsafe = core.replace("+", "-").replace("/", "_")
        if urlsafe != core and len(urlsafe) >= _MIN_ENCODED:
            yield urlsafe


def register_secret(secret: str) -> None:
    """Add ``secret`` (and its encodings) to what `scrub` removes, for the rest of the process.

    `read_api_key` calls it with every key it returns; call it for any other secret a command
    reads. An empty or all-space string is ignored.
    """
    secret = secret.strip()
    if not secret:
        return
    # Inside a JSON string (a trace line, a results file) a quote, a backslash or a control
    # character is escaped, and by default every non-ASCII character too: a screen of encoded
    # JSON finds the secret only in those forms.
    forms = {secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]}
    if len(secret) >= _MIN_ENCODED:
        forms.add(urllib.parse.quote(secret, safe=""))
        forms.update(_base64_cores(secret.encode("utf-8")))
    global _pattern, _bytes_pattern, _installed
    _forms.update(forms)
    # No lock (this leaf starts no threads and takes no lock): each caller installs patterns
    # built from a snapshot of every form, then checks that what is installed covers every form
    # registered by then; the last to install always checks, so none is lost to a race.
    while _installed != frozenset(_forms):
        snapshot = frozenset(_forms)
        # Longest first, so a form that contains another is replaced whole.
        ordered = sorted(snapshot, key=len, reverse=True)
        text = re.compile("|".join(re.escape(f) for f in ordered))
        data = re.compile(b"|".join(re.escape(f.encode("utf-8")) for f in ordered))
        _pattern, _bytes_pattern, _installed = text, data, snapshot


def scrub(text: str) -> str:
    """``text`` with every registered secret, in every form, replaced by `REDACTED`."""
    pattern = _pattern
    return text if pattern is None else pattern.sub(REDACTED, text)


def scrub_bytes(data: bytes) -> bytes:
    """`scrub` for bytes about to be written to a file (UTF-8 text, or bytes holding it)."""
    pattern = _bytes_pattern
    return data if pattern is None else pattern.sub(REDACTED.encode("ascii"), data)


def holds_secret(text: str | bytes) -> bool:
    """Tell whether `scrub` (or `scrub_bytes`, for bytes) would change ``text``."""
    if isinstance(text, bytes):
        found = _bytes_pattern is not None and _bytes_pattern.search(text) is not None
    else:
        found = _pattern is not None and _pattern.search(text) is not None
    return found


def scrub_value(value: JsonValue) -> JsonValue:
    """A JSON value with `scrub` applied to every string in it, object keys included."""
    if _pattern is None:
        return value
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [scrub_value(v) for v in value]
    if isinstance(value, dict):
        return {scrub(k): scrub_value(v) for k, v in value.items()}
    return value


def unfinished_secret(text: str) -> int:
    """Length of the longest end of ``text`` that begins a secret's form (0 if none).

    A streaming printer holds that much back until the next piece arrives, so a secret split
    across two pieces is still found whole, while text that cannot begin one is shown at once.
    """
    forms = tuple(_installed)
    longest = 0
    for form in forms:
        for size in range(min(len(form) - 1, len(text)), longest, -1):
            if text.endswith(form[:size]):
                longest = size
                break
    return longest


def for_terminal(text: str) -> str:
    """``text`` as it may be written to a terminal: scrubbed, controls shown as escapes.

    Newline and tab pass; every other control character (Unicode category Cc: ``ESC``, ``\\r``,
    ``DEL``, the C1 controls), every format character (Cf: the bidirectional overrides and
    isolates, zero-width marks), the line and paragraph separators and a lone surrogate become
    visible Python escapes (``\\x1b``, ``\\r``, ``\\u202e``, ``\\ud800``), so the result
    always encodes as UTF-8 and cannot move the cursor, retitle the window, clear the screen,
    write the clipboard or reorder what follows.
    """
    text = scrub(text)
    if text.isprintable():
        return text
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if char not in _PASS and unicodedata.category(char) in _ESCAPED_CATEGORIES
        else char
        for char in text
    )
