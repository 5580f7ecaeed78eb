"""JSON Schema `pattern`s as the grammar converters read them: anchored, in their regex subset.

JSON Schema patterns are ECMA-262 searches; llama.cpp's and llama-cpp-python's converters read
a full match in a smaller regex language. `grammar_pattern` rewrites one into the other, or
says why it cannot (`InputRefused`, a `ValueError`).
"""

from __future__ import annotations

import re

from twinflow.models._errors import InputRefused


def _has_top_level_alternation(pattern: str) -> bool:
    """True when `|` appears outside any group or class, where anchors bind to one branch only."""
    depth = 0
    in_class = False
    escaped = False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return True
    return False


def anchor_pattern(pattern: str) -> str:
    """Anchor a JSON Schema `pattern` without changing what it matches.

    JSON Schema patterns are searches, not full matches: `abc` matches any string containing
    `abc`. The anchored equivalent is `^.*(?:abc).*$`; an existing `^` or `$` drops its `.*`.

    Args:
        pattern: An ECMA-262 regular expression as written in the schema.

    Returns:
        A pattern that starts with `^` and ends with `$` and matches the same strings.
    """
    if _has_top_level_alternation(pattern):
        return f"^.*(?:{pattern}).*$"
    core = pattern
    lead = ".*"
    trail = ".*"
    if core.startswith("^"):
        core, lead = core[1:], ""
    if core.endswith("$") and not core.endswith("\\$"):
        core, trail = core[:-1], ""
    return f"^{lead}(?:{core}){trail}$"


# What a grammar can read of a regex, outside and inside a character class. GBNF knows only
# the escapes \t \n \r \\ \" \[ \] \xHH \uHHHH, so classes such as \d are spelled out and an
# escaped punctuation character becomes its \xHH code (ECMA-262 classes are ASCII).
_CLASSES_OUTSIDE = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[a-zA-Z0-9_]",
    "W": "[^a-zA-Z0-9_]",
    "s": "[ \\t\\n\\r\\x0B\\x0C]",
    "S": "[^ \\t\\n\\r\\x0B\\x0C]",
}
_CLASSES_INSIDE = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " \\t\\n\\r\\x0B\\x0C"}
_KEPT_ESCAPES = frozenset("tnr")
# Any run of characters, line terminators included (ECMA-262's `.` stops at them, and a
# search finds its match anywhere in a multi-line string).
_ANY = "(.|[\\n\\r\\u2028\\u2029])*"
_HEX_ESCAPE = re.compile(r"\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}")
_QUANTIFIER = re.compile(r"\{\d+(,\d*)?\}")
_LAZY = re.compile(r"([*+?}])\?")


def grammar_pattern(pattern: str) -> str:
    """Rewrite a JSON Schema `pattern` into the regex subset the grammar converters read.

    The result full-matches exactly the strings `pattern` finds (JSON Schema patterns are
    searches; ECMA-262 classes are ASCII): it is anchored with `^...$` (see `anchor_pattern`),
    non-capturing groups are plain groups, lazy quantifiers are greedy (a full match does not
    care), `\\d`, `\\w`, `\\s` and their negations are spelled out as classes, and escaped
    punctuation becomes a one-character class with its `\\xHH` code.

    Args:
        pattern: An ECMA-262 regular expression as written in the schema.

    Returns:
        The rewritten pattern.

    Raises:
        ValueError: The pattern uses a construct no grammar can express (a lookaround, a
            backreference, a word boundary, a Unicode property, an inner anchor).
    """
    body = _LAZY.sub(r"\1", _translate(pattern)).replace("(?:", "(")
    anchored = _anchored(body)
    inner = anchored[1:-1]
    if re.search(r"(?<!\\)[$^](?<!\[\^)", inner.replace("[^", "[")):
        raise InputRefused("an anchor inside the pattern")
    return anchored


def _translate(pattern: str) -> str:
    """`pattern` token by token in the grammar's subset, not yet anchored."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            text, i = _escape_at(pattern, i, in_class)
        elif in_class:
            in_class = ch != "]"
            text, i = (f"\\x{ord(ch):02X}" if ch in '"[' else ch), i + 1
        elif ch == "[":
            in_class = True
            negated = pattern.startswith("^", i + 1)
            text, i = ("[^" if negated else "["), i + (2 if negated else 1)
        else:
            text, i = _outside_class(pattern, i)
        out.append(text)
    if in_class:
        raise InputRefused("an unclosed character class")
    return "".join(out)


def _escape_at(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The escape at `pattern[i]` (a backslash) as the grammar reads it, and where it ends."""
    if i + 1 >= len(pattern):
        raise InputRefused("a trailing backslash")
    nxt = pattern[i + 1]
    if nxt in _KEPT_ESCAPES:
        return "\\" + nxt, i + 2
    if nxt in "xu" and _HEX_ESCAPE.match(pattern, i):
        end = i + 2 + (2 if nxt == "x" else 4)
        code = pattern[i:end]
        return (code if in_class else f"[{code}]"), end
    if in_class and nxt in _CLASSES_INSIDE:
        return _CLASSES_INSIDE[nxt], i + 2
    if not in_class and nxt in _CLASSES_OUTSIDE:
        return _CLASSES_OUTSIDE[nxt], i + 2
    if not nxt.isalnum():
        code = f"\\x{ord(nxt):02X}" if ord(nxt) < 0x100 else f"\\u{ord(nxt):04X}"
        return (code if in_class else f"[{code}]"), i + 2
    raise InputRefused(f"the escape \\{nxt}")


def _outside_class(pattern: str, i: int) -> tuple[str, int]:
    """The token at `pattern[i]`, outside a class and not an escape, and where it ends."""
    ch = pattern[i]
    if ch == "(" and pattern.startswith("?", i + 1):
        if not pattern.startswith("?:", i + 1):
            raise InputRefused("a lookaround or named group")
        return "(", i + 3
    if ch == '"':
        return "[\\x22]", i + 1
    if ch == "{":
        # A brace that does not open a quantifier is a literal in ECMA-262; the converter
        # would read it as a broken quantifier and reject the whole schema.
        quantifier = _QUANTIFIER.match(pattern, i)
        if quantifier is not None:
            return quantifier.group(), quantifier.end()
        return "[\\x7B]", i + 1
    if ch == "}":
        return "[\\x7D]", i + 1
    return ch, i + 1


def _anchored(body: str) -> str:
    """`body` as a full match: as it is when anchored whole, else each branch anchored."""
    if (
        body.startswith("^")
        and body.endswith("$")
        and not body.endswith("\\$")
        and not _has_top_level_alternation(body)
    ):
        return body
    # Each branch is a search of its own: anchor them one by one, so no anchor stays inside.
    branches = [_anchor_branch(b) for b in _top_level_branches(body)]
    return "^" + (branches[0] if len(branches) == 1 else f"({'|'.join(branches)})") + "$"


def _top_level_branches(pattern: str) -> list[str]:
    """Split `pattern` at each `|` outside any group or class."""
    branches: list[str] = []
    depth = 0
    in_class = False
    escaped = False
    start = 0
    for i, ch in enumerate(pattern):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
    branches.append(pattern[start:])
    return branches


def _anchor_branch(branch: str) -> str:
    """One alternative of a search, as a full match: `.*` where it has no anchor."""
    lead = trail = _ANY
    if branch.startswith("^"):
        branch, lead = branch[1:], ""
    if branch.endswith("$") and not branch.endswith("\\$"):
        branch, trail = branch[:-1], ""
    return f"{lead}({branch}){trail}" if branch else lead + trail
