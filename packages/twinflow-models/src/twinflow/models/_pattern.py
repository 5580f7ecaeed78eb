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


# A character set is a sorted list of disjoint, non-adjacent inclusive code point ranges.
_Ranges = list[tuple[int, int]]
_MAX = 0x10FFFF
_DIGITS: _Ranges = [(0x30, 0x39)]
_WORD: _Ranges = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
# ECMA-262's white space and line terminators.
_SPACE: _Ranges = [
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
]
# ECMA-262's `.`: any character but a line terminator.
_DOT: _Ranges = [(0, 0x09), (0x0B, 0x0C), (0x0E, 0x2027), (0x202A, _MAX)]
_CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "v": 0x0B, "0": 0x00}
# The characters a JSON string holds only escaped, and their short escapes.
_SHORT_ESCAPES = {
    0x22: "\\x22",
    0x5C: "\\x5C",
    0x08: "b",
    0x0C: "f",
    0x0A: "n",
    0x0D: "r",
    0x09: "t",
}
_UNESCAPED_ILLEGAL: _Ranges = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]
_HEX_ESCAPE = re.compile(r"\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}")
_QUANTIFIER = re.compile(r"\{\d+(,\d*)?\}")
_LAZY = re.compile(r"([*+?}])\?")
# Characters written bare outside a class: the converter reads them as literal text.
_BARE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-,;:!@#%&=~'<>/ ")


def _normal(ranges: _Ranges) -> _Ranges:
    """`ranges` sorted, overlapping and adjacent ones merged."""
    merged: _Ranges = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _complement(ranges: _Ranges) -> _Ranges:
    """Every code point not in `ranges`."""
    out: _Ranges = []
    nxt = 0
    for lo, hi in _normal(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX:
        out.append((nxt, _MAX))
    return out


def _minus(ranges: _Ranges, removed: _Ranges) -> _Ranges:
    """The code points of `ranges` not in `removed`."""
    kept = _complement(removed)
    return _normal(
        [(max(a, c), min(b, d)) for a, b in ranges for c, d in kept if max(a, c) <= min(b, d)]
    )


def _contains(ranges: _Ranges, code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in ranges)


def _code(code: int) -> str:
    """One code point as the grammar spells it inside a class."""
    if code < 0x80 and chr(code).isalnum():
        return chr(code)
    if code < 0x100:
        return f"\\x{code:02X}"
    if code < 0x10000:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def _class(ranges: _Ranges) -> str:
    """A grammar class for `ranges`, negated when that is shorter."""
    outside = _complement(ranges)
    negated = bool(ranges) and ranges[-1][1] == _MAX and len(outside) <= len(ranges)
    shown = outside if negated else ranges
    body = "".join(_code(lo) if lo == hi else f"{_code(lo)}-{_code(hi)}" for lo, hi in shown)
    return f"[^{body}]" if negated else f"[{body}]"


def json_text(ranges: _Ranges) -> str:
    """The JSON text of one character of `ranges`, as a grammar regex unit.

    The grammar reads a pattern against the raw text between a JSON string's quotes, so a
    character is matched as it is written there: bare when JSON allows it bare, else as its
    short escape (`\\"`, `\\\\`, `\\n`...) or `\\u00XX` for the other control characters.
    No alternative contains a bare `"`, `\\` or control character: the string cannot end early.

    Raises:
        InputRefused: `ranges` is empty (a class that matches nothing).
    """
    alternatives: list[str] = []
    bare = _minus(ranges, _UNESCAPED_ILLEGAL)
    if bare:
        alternatives.append(_class(bare))
    short = [escape for code, escape in _SHORT_ESCAPES.items() if _contains(ranges, code)]
    controls = [c for c in range(0x20) if c not in _SHORT_ESCAPES and _contains(ranges, c)]
    after: list[str] = []
    if short:
        after.append(f"[{''.join(short)}]")
    if all(_contains(ranges, c) for c in range(0x20)):
        after.append("u00[01][0-9a-fA-F]")
    elif controls:
        after.append("u00" + _hex_pairs(controls))
    if after:
        alternatives.append("[\\x5C]" + (after[0] if len(after) == 1 else f"({'|'.join(after)})"))
    if not alternatives:
        raise InputRefused("a character class that matches nothing")
    # One unit to a quantifier: a bare class as it is, an escape (two or more units) grouped.
    return alternatives[0] if not after else f"({'|'.join(alternatives)})"


def _hex_pairs(codes: list[int]) -> str:
    """The two hex digits of each of `codes` (all below 0x20), either case, as alternatives."""
    groups = []
    for high in (0, 1):
        lows = [f"{c & 0xF:x}" for c in codes if c >> 4 == high]
        if lows:
            digits = "".join(d + d.upper() if d.isalpha() else d for d in lows)
            groups.append(f"{high}[{digits}]")
    return groups[0] if len(groups) == 1 else f"({'|'.join(groups)})"


# Any run of characters, line terminators included (a search finds its match anywhere in a
# multi-line string), as JSON text.
_ANY = json_text([(0, _MAX)]) + "*"


def grammar_pattern(pattern: str) -> str:
    """Rewrite a JSON Schema `pattern` into the regex subset the grammar converters read.

    The grammar matches a pattern against the JSON text between a string's quotes, not the
    decoded value, so the result full-matches the JSON text (each character bare, or escaped as
    `json.dumps` escapes it) of exactly the strings `pattern` finds: it is anchored with `^...$`
    (see `anchor_pattern`), non-capturing groups are plain groups, lazy quantifiers are greedy
    (a full match does not care), and every character, class and `.` is spelled as the JSON
    text of its characters (`json_text`), so no part of it can close the string early.

    Args:
        pattern: An ECMA-262 regular expression as written in the schema.

    Returns:
        The rewritten pattern.

    Raises:
        ValueError: The pattern uses a construct no grammar can express (a lookaround, a
            backreference, a word boundary, a Unicode property, an inner anchor).
    """
    body = _LAZY.sub(r"\1", _translate(pattern))
    anchored = _anchored(body)
    inner = anchored[1:-1]
    if re.search(r"(?<!\\)[$^](?<!\[\^)", inner.replace("[^", "[")):
        raise InputRefused("an anchor inside the pattern")
    return anchored


def _translate(pattern: str) -> str:
    """`pattern` token by token in the grammar's subset, not yet anchored."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            ranges, i = _escape_at(pattern, i, in_class=False)
            out.append(_unit(ranges))
        elif ch == "[":
            ranges, i = _class_at(pattern, i)
            out.append(json_text(ranges))
        elif ch == ".":
            out.append(json_text(_DOT))
            i += 1
        else:
            text, i = _outside_class(pattern, i)
            out.append(text)
    return "".join(out)


def _unit(ranges: _Ranges) -> str:
    """One character set outside a class: a bare character when the converter reads it so."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1] and chr(ranges[0][0]) in _BARE:
        return chr(ranges[0][0])
    return json_text(ranges)


def _class_at(pattern: str, i: int) -> tuple[_Ranges, int]:
    """The character set of the class opening at `pattern[i]`, and where it ends."""
    i += 1
    negated = pattern.startswith("^", i)
    i += negated
    ranges: _Ranges = []
    while True:
        if i >= len(pattern):
            raise InputRefused("an unclosed character class")
        if pattern[i] == "]":
            break
        first, i = _class_atom(pattern, i)
        dash = pattern.startswith("-", i) and i + 1 < len(pattern) and pattern[i + 1] != "]"
        if dash and len(first) == 1 and first[0][0] == first[0][1]:
            last, i = _class_atom(pattern, i + 1)
            if len(last) != 1 or last[0][0] != last[0][1] or last[0][0] < first[0][0]:
                raise InputRefused("a character range out of order")
            ranges.append((first[0][0], last[0][0]))
        else:
            ranges.extend(first)
    ranges = _normal(ranges)
    return (_complement(ranges) if negated else ranges), i + 1


def _class_atom(pattern: str, i: int) -> tuple[_Ranges, int]:
    if pattern[i] == "\\":
        return _escape_at(pattern, i, in_class=True)
    return [(ord(pattern[i]), ord(pattern[i]))], i + 1


def _escape_at(pattern: str, i: int, *, in_class: bool) -> tuple[_Ranges, int]:
    """The character set of the escape at `pattern[i]` (a backslash), and where it ends."""
    if i + 1 >= len(pattern):
        raise InputRefused("a trailing backslash")
    nxt = pattern[i + 1]
    classes = {"d": _DIGITS, "w": _WORD, "s": _SPACE}
    if nxt.lower() in classes:
        ranges = classes[nxt.lower()]
        return (ranges if nxt.islower() else _complement(ranges)), i + 2
    if nxt in _CONTROL_ESCAPES:
        code = _CONTROL_ESCAPES[nxt]
        return [(code, code)], i + 2
    if in_class and nxt == "b":
        return [(0x08, 0x08)], i + 2
    if nxt in "xu" and _HEX_ESCAPE.match(pattern, i):
        end = i + 2 + (2 if nxt == "x" else 4)
        code = int(pattern[i + 2 : end], 16)
        return [(code, code)], end
    if not nxt.isalnum():
        return [(ord(nxt), ord(nxt))], i + 2
    raise InputRefused(f"the escape \\{nxt}")


def _outside_class(pattern: str, i: int) -> tuple[str, int]:
    """The token at `pattern[i]`, outside a class and not an escape, and where it ends."""
    ch = pattern[i]
    if ch == "(" and pattern.startswith("?", i + 1):
        if not pattern.startswith("?:", i + 1):
            raise InputRefused("a lookaround or named group")
        return "(", i + 3
    if ch == "{":
        # A brace that does not open a quantifier is a literal in ECMA-262; the converter
        # would read it as a broken quantifier and reject the whole schema.
        quantifier = _QUANTIFIER.match(pattern, i)
        if quantifier is not None:
            return quantifier.group(), quantifier.end()
        return _unit([(0x7B, 0x7B)]), i + 1
    if ch in "()|*+?^$":
        return ch, i + 1
    return _unit([(ord(ch), ord(ch))]), i + 1


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
    """One alternative of a search, held to its match: the text around it is left out.

    A search also finds its match inside longer text, but a grammar that lets the model write
    text around the match lets a small model run on inside the string (`10969 }. This is...`)
    to the token budget. The grammar holds it to the match itself; a value with text around
    the match still validates. A branch with nothing but anchors is any text, as it finds.
    """
    anchored_start = branch.startswith("^")
    anchored_end = branch.endswith("$") and not branch.endswith("\\$")
    branch = branch[1 if anchored_start else 0 : len(branch) - (1 if anchored_end else 0)]
    if branch:
        return f"({branch})"
    return "" if anchored_start and anchored_end else _ANY


def held_to_match(pattern: str) -> bool:
    """True when some branch of the search `pattern` has an unanchored side."""
    return any(
        not (b.startswith("^") and b.endswith("$") and not b.endswith("\\$"))
        for b in _top_level_branches(pattern)
    ) and not (
        pattern.startswith("^")
        and pattern.endswith("$")
        and not pattern.endswith("\\$")
        and not _has_top_level_alternation(pattern)
    )
