"""Untrusted text leaves through one door: secrets scrubbed, terminal controls escaped.

Text from a model, a server or a received file reaches the user's terminal, the trace and the
files of a run directory. Two functions decide what it may carry there, and every printer and
writer calls them rather than doing its own:

- `scrub` replaces every secret this process has read (each API key `read_api_key` returned,
  in the forms listed below) with `REDACTED`. The trace writer, the file writers
  (`write_new`, `write_replace`), a launched server's log, the transport's errors and
  `for_terminal` call it, so a key echoed in a streamed error event, a non-JSON event, a bad
  field, a server's stderr or the reply's own content is replaced whatever path carried it
  (docs/adr/0092).
- `for_terminal` is `scrub`, then every character that could drive a terminal shown as a
  visible escape: controls but newline and tab (so ``ESC`` of an OSC title, clear screen or
  OSC 52 clipboard write, and ``\\r`` overwrites), ``DEL``, C1 controls, the bidirectional
  overrides and isolates, and lone surrogates (which no terminal encoding can print). The
  terminal's printers (`twinflow show`, the streamed ``model>`` lines, every command's output
  and error line) all call it.

The forms of a secret that are scrubbed, for a key of at least `_MIN_INSIDE` characters: the
exact key in any case (upper, lower, mixed: a server that echoes it upper-cased still leaks
it); its JSON-escaped forms; its URL-encoding (``quote(key, safe="")``) when it differs; and,
from `_MIN_ENCODED` characters, the base64 of the key at each of the three alignments it can
have inside a longer base64 text (``user:key`` for Basic auth, ``Bearer key``, a JSON blob), so a
key base64-encoded after any prefix is found. The exact, JSON and URL forms are found with one
line break (raw or JSON-escaped) or space between any two characters, what a reader puts
between the blocks it joins (an MCP result's text blocks become one text joined by newlines);
`scrub_value` also finds a key split across the parts of a list that a reader joins (text
parts, content blocks, a list of strings), and `unfinished_secret` tells a streaming writer how
much to hold back. Not found: a key base64'd in another case or encoded twice.

A shorter key (``x``, ``ma``: the dummy a keyless local server is given) is no secret a
scrubber can keep: it is guessable, and matching it inside text would rewrite ordinary words
and field names and break the run's replay. Such a key is replaced only where it stands as a
whole token right after a word that introduces a credential (``Bearer ma``, ``api_key=ma``,
``"token": "ma"``), never inside other text and never in a field name.

`credential_shape` is the other half: it recognises a value that looks like a credential by
its shape (``user:password@`` in a URL, a well-known token prefix, a PEM block), for the places
that refuse one before it is written (a spec's ``env``, an endpoint URL).
"""

from __future__ import annotations

import base64
import functools
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
    "credential_shape",
    "for_terminal",
    "has_secrets",
    "holds_secret",
    "register_secret",
    "scrub",
    "scrub_bytes",
    "scrub_value",
    "unfinished_secret",
]

REDACTED = "[REDACTED:secret]"
"""What a secret is replaced with: in a trace it says that something was removed, and what."""

_MIN_INSIDE = 8
"""Shortest key scrubbed wherever it occurs; a shorter one only after a credential word."""
_MIN_ENCODED = 12
"""Shortest key whose encodings are scrubbed too (a shorter base64 core could match anything)."""

_LEAD = re.compile(
    r"""\b(?:bearer|basic|token|api[_-]?key|apikey|key|password|passwd|secret|authorization)"""
    r"""["']?\s*[:=]?\s*["']?\Z""",
    re.IGNORECASE,
)
"""What must end the text just before a short key for it to be a credential (``Bearer ma``,
``api_key=ma``, ``"token": "ma"``)."""
_LEAD_WINDOW = 24
"""How far before a short key `_LEAD` looks."""
_TOKEN = r"A-Za-z0-9_.~+/-"
"""The characters of a token: a short key must stand alone (``ma`` in ``mama`` is no key)."""
_VALUE_END = r"""(?=[\s"'`,;&)}\]<>\\]|\Z)"""
"""What must follow a short key: the end of the value a credential word introduced (a space,
a quote, a separator, an escape, the end), so ``"key": "ma@1"`` keeps its ``ma``: the value
there is ``ma@1``, not the key."""

_forms: set[str] = set()
"""Every form matched in any case, anywhere (keys of `_MIN_INSIDE` or more; it only grows)."""
_exact: set[str] = set()
"""Every base64 form, matched exactly (its case carries the bytes)."""
_short: set[str] = set()
"""Every key shorter than `_MIN_INSIDE`, matched only after a credential word."""
_pattern: re.Pattern[str] | None = None
_names_pattern: re.Pattern[str] | None = None
_bytes_pattern: re.Pattern[bytes] | None = None
_installed: tuple[frozenset[str], frozenset[str], frozenset[str]] = (
    frozenset(),
    frozenset(),
    frozenset(),
)
"""The forms the patterns above match (installed together with them)."""

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


_GAP = r"(?:\r?\n|(?:\\r)?\\n| )?"
"""What a reader may put between two pieces it joins (a line break, raw or JSON-escaped, or a
space): a key of `_MIN_INSIDE` characters is found with one such gap between any two of its
characters, so a key sent in two blocks that are joined by a newline is still found whole."""


def _alternatives(forms: Iterable[str], gap: str = "") -> str:
    # Longest first, so a form that contains another is replaced whole.
    ordered = sorted(forms, key=len, reverse=True)
    return "|".join(gap.join(re.escape(c) for c in f) if gap else re.escape(f) for f in ordered)


def _compile(
    forms: frozenset[str], exact: frozenset[str], short: frozenset[str]
) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[bytes]]:
    """The patterns for values, for field names (no short keys) and for bytes.

    A short key matches as a lone token (group ``short``); `_credential_at` then decides.
    """
    parts = [f"(?i:{_alternatives(forms, _GAP)})" if forms else "", _alternatives(exact)]
    names = "|".join(p for p in parts if p) or "(?!)"
    if short:
        parts.append(f"(?i:(?<![{_TOKEN}])(?P<short>{_alternatives(short)}){_VALUE_END})")
    text = "|".join(p for p in parts if p)
    return re.compile(text), re.compile(names), re.compile(text.encode("utf-8"))


def _credential_at(match: re.Match[str] | re.Match[bytes]) -> bool:
    """Whether a match is a secret: any match of a long form, a short key only after a
    credential word (`_LEAD`)."""
    if "short" not in match.re.groupindex or match.group("short") is None:
        return True
    start = match.start()
    before = match.string[max(0, start - _LEAD_WINDOW) : start]
    if isinstance(before, bytes):
        before = before.decode("utf-8", "replace")
    return _LEAD.search(before) is not None


def register_secret(secret: str) -> None:
    """Add ``secret`` (and its encodings) to what `scrub` removes, for the rest of the process.

    `read_api_key` calls it with every key it returns; call it for any other secret a command
    reads. An empty or all-space string is ignored; a key shorter than `_MIN_INSIDE`
    characters is replaced only after a credential word (the module's docstring says why).
    """
    secret = secret.strip()
    if not secret:
        return
    # Inside a JSON string (a trace line, a results file) a quote, a backslash or a control
    # character is escaped, and by default every non-ASCII character too: a screen of encoded
    # JSON finds the secret only in those forms.
    forms = {secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]}
    global _pattern, _names_pattern, _bytes_pattern, _installed
    if len(secret) < _MIN_INSIDE:
        _short.update(forms)
    else:
        forms.add(urllib.parse.quote(secret, safe=""))
        _forms.update(forms)
        if len(secret) >= _MIN_ENCODED:
            _exact.update(_base64_cores(secret.encode("utf-8")))
    # No lock (this leaf starts no threads and takes no lock): each caller installs patterns
    # built from a snapshot of every form, then checks that what is installed covers every form
    # registered by then; the last to install always checks, so none is lost to a race.
    while _installed != (frozenset(_forms), frozenset(_exact), frozenset(_short)):
        snapshot = (frozenset(_forms), frozenset(_exact), frozenset(_short))
        text, names, data = _compile(*snapshot)
        _pattern, _names_pattern, _bytes_pattern, _installed = text, names, data, snapshot


def _replace(match: re.Match[str]) -> str:
    return REDACTED if _credential_at(match) else match.group()


def _replace_bytes(match: re.Match[bytes]) -> bytes:
    return REDACTED.encode("ascii") if _credential_at(match) else match.group()


def scrub(text: str) -> str:
    """``text`` with every registered secret, in every form, replaced by `REDACTED`."""
    pattern = _pattern
    return text if pattern is None else pattern.sub(_replace, text)


def scrub_bytes(data: bytes) -> bytes:
    """`scrub` for bytes about to be written to a file (UTF-8 text, or bytes holding it)."""
    pattern = _bytes_pattern
    return data if pattern is None else pattern.sub(_replace_bytes, data)


def has_secrets() -> bool:
    """Tell whether any secret is registered (before the first, nothing is scrubbed)."""
    return _pattern is not None


def holds_secret(text: str | bytes) -> bool:
    """Tell whether `scrub` (or `scrub_bytes`, for bytes) would change ``text``."""
    matches: Iterable[re.Match[str] | re.Match[bytes]]
    if isinstance(text, bytes):
        matches = () if _bytes_pattern is None else _bytes_pattern.finditer(text)
    else:
        matches = () if _pattern is None else _pattern.finditer(text)
    return any(_credential_at(match) for match in matches)


def _scrub_name(name: str) -> str:
    """A field name: changed only by a key of `_MIN_INSIDE` characters or more inside it."""
    pattern = _names_pattern
    return name if pattern is None else pattern.sub(REDACTED, name)


def _piece(item: JsonValue) -> str | None:
    """The text a reader joins of a list's item: a string, or the ``text`` of a part or block."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        text: str = item["text"]
        return text
    return None


def _scrub_joined(items: list[JsonValue]) -> list[JsonValue]:
    """``items`` with every secret that spans two or more of their pieces (`_piece`) cut out.

    A reader joins the text parts of a message (or a list of strings) into one text, so a key
    sent in two parts is whole again there: each piece holding some of it has that some
    replaced by `REDACTED`.
    """
    pattern = _pattern
    pieces = [(i, text) for i, item in enumerate(items) if (text := _piece(item)) is not None]
    if pattern is None or len(pieces) < 2:
        return items
    joined = "".join(text for _, text in pieces)
    spans = [m.span() for m in pattern.finditer(joined) if _credential_at(m)]
    if not spans:
        return items
    out = list(items)
    offset = 0
    for index, text in pieces:
        end = offset + len(text)
        cuts = [
            (max(a, offset) - offset, min(b, end) - offset)
            for a, b in spans
            if a < end and b > offset
        ]
        # A span wholly inside one piece is that piece's own `scrub`'s to replace.
        if cuts and any(not (offset <= a and b <= end) for a, b in spans if a < end and b > offset):
            kept, last = [], 0
            for a, b in cuts:
                kept += [text[last:a], REDACTED]
                last = b
            new = "".join(kept) + text[last:]
            item = out[index]
            out[index] = new if isinstance(item, str) else {**item, "text": new}
        offset = end
    return out


def scrub_value(value: JsonValue) -> JsonValue:
    """A JSON value with `scrub` applied to every string in it.

    Field names are changed only by a key of `_MIN_INSIDE` characters or more inside one (no
    schema names a field so), never by a short key. A key split across the pieces of a list
    that a reader joins (text parts, content blocks, strings) is replaced in each piece.
    """
    if _pattern is None:
        return value
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [scrub_value(v) for v in _scrub_joined(value)]
    if isinstance(value, dict):
        return {_scrub_name(k): scrub_value(v) for k, v in value.items()}
    return value


@functools.lru_cache(maxsize=4)
def _begun(forms: frozenset[str]) -> re.Pattern[str]:
    """What matches the end of a text that begins one of ``forms`` (a gap allowed inside and
    after it, as `scrub` allows): ``c1(?:gap c2(?:gap c3 ...)?)?`` then an optional gap."""
    alternatives = []
    for form in forms:
        nested = ""
        for char in reversed(form[1:]):
            nested = f"(?:{_GAP}{re.escape(char)}{nested})?"
        alternatives.append(re.escape(form[0]) + nested)
    return re.compile(f"(?i:{'|'.join(alternatives)}){_GAP}\\Z")


def unfinished_secret(text: str) -> int:
    """Length of the longest end of ``text`` that begins a secret's form (0 if none).

    A streaming printer (and a server log's writer) holds that much back until the next piece
    arrives, so a secret split across two pieces is still found whole, while text that cannot
    begin one is shown at once. Forms matched in any case, or cut by a line break, are found
    so here too.
    """
    forms, exact, _ = _installed
    longest = 0
    if forms:
        # Twice the longest form: with a gap between every two characters, a begun form is
        # never longer than that.
        tail = text[-2 * max(len(f) for f in forms) - 2 :]
        found = _begun(forms).search(tail)
        longest = 0 if found is None else len(tail) - found.start()
    for form in exact:
        for size in range(min(len(form) - 1, len(text)), longest, -1):
            if text.endswith(form[:size]):
                longest = size
                break
    return longest


_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "a PEM block",
        re.compile(r"-----BEGIN [A-Z0-9 ]*(?:PRIVATE KEY|CERTIFICATE|KEY)[A-Z ]*-----"),
    ),
    ("a URL with user:password@", re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@")),
    (
        "an Authorization value",
        re.compile(r"(?i)\b(?:bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"),
    ),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    (
        "a token with a well-known prefix",
        re.compile(
            r"(?<![A-Za-z0-9])(?:(?:sk|pk|rk|ghp|gho|ghs|ghu|ghr|github_pat|glpat|xox[abposr]"
            r"|hf|gsk|r8|npm|pypi|shpat)[_-]|SG\.|AIza)[A-Za-z0-9_\-.]{12,}"
        ),
    ),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.")),
)
"""What a credential looks like, whatever it is called: the one table of shapes."""


def credential_shape(value: str) -> str | None:
    """What credential ``value`` holds by its shape (``"a PEM block"``...), or None.

    Recognised: a PEM block, a URL with ``user:password@``, a bearer/basic/token
    authorization value, an AWS access key id (``AKIA``...), a token with a well-known prefix
    (``sk-``, ``ghp_``, ``github_pat_``, ``glpat-``, ``xoxb-``, ``hf_``, ``AIza``...) and 12
    or more key characters, a JSON web token; and any secret this process registered.
    """
    if holds_secret(value):
        return "a key this process read"
    for what, shape in _SHAPES:
        if shape.search(value):
            return what
    return None


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
