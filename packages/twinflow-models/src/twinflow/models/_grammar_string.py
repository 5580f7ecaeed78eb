"""Whether a GBNF grammar for one JSON string lets the model close that string early.

The grammar converters match a string's `pattern` against the raw text between its quotes: a
rule that admits a bare `"` there lets the model end the string mid-value and go on writing,
with the grammar still counting the rest as the string (`10969"}` and then prose, up to the
token budget). `string_exit` reads the converter's own grammar text and searches every path
through it, with the state of a JSON string reader beside it, for a text that closes the
string and goes on, writes a bare control character, or an escape JSON does not have.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from functools import partial

from twinflow.models._errors import InputRefused

_Ranges = tuple[tuple[int, int], ...]
_MAX = 0x10FFFF
_TOKEN = re.compile(
    r"""\s+|\#[^\n]*|(?P<literal>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])"""
    r"""|(?P<name>[a-zA-Z0-9_-]+)|(?P<rep>\{\d*(?:,\d*)?\})|(?P<op>[()|*+?])"""
)
_SIMPLE = {"n": 0x0A, "r": 0x0D, "t": 0x09, "\\": 0x5C, '"': 0x22, "[": 0x5B, "]": 0x5D}
_BEFORE, _IN, _ESCAPE, _CLOSED = range(4)
# Characters a JSON string reader tells apart; any other character behaves as `a` does.
_SPECIAL = tuple(range(0x21)) + tuple(map(ord, '"\\/bfnrtu'))


def _char(text: str, i: int) -> tuple[int, int]:
    """The code point at `text[i]` (escapes read as GBNF reads them), and where it ends."""
    if text[i] != "\\":
        return ord(text[i]), i + 1
    kind = text[i + 1]
    if kind in "xuU":
        width = {"x": 2, "u": 4, "U": 8}[kind]
        return int(text[i + 2 : i + 2 + width], 16), i + 2 + width
    return _SIMPLE.get(kind, ord(kind)), i + 2


def _class(text: str) -> _Ranges:
    """The code points of a GBNF class `[...]`."""
    body = text[1:-1]
    negated = body.startswith("^")
    i = 1 if negated else 0
    ranges: list[tuple[int, int]] = []
    while i < len(body):
        lo, i = _char(body, i)
        hi = lo
        if body.startswith("-", i) and i + 1 < len(body):
            hi, i = _char(body, i + 1)
        ranges.append((lo, hi))
    if not negated:
        return tuple(ranges)
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in sorted(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= _MAX:
        out.append((nxt, _MAX))
    return tuple(out)


class _Nfa:
    """A Thompson automaton built from the grammar's rules, each reference inlined."""

    def __init__(self, rules: dict[str, list[tuple[str, str]]]) -> None:
        self.rules = rules
        self.empty: list[list[int]] = []
        self.moves: list[list[tuple[_Ranges, int]]] = []
        self.inlining: list[str] = []

    def state(self) -> int:
        self.empty.append([])
        self.moves.append([])
        return len(self.empty) - 1

    def rule(self, name: str) -> tuple[int, int]:
        if name not in self.rules:
            raise InputRefused(f"the grammar names an undefined rule {name!r}")
        if name in self.inlining:
            raise InputRefused(f"the rule {name!r} is recursive, not a string's")
        self.inlining.append(name)
        tokens = self.rules[name]
        fragment, end = self.alternatives(tokens, 0)
        self.inlining.pop()
        if end != len(tokens):
            raise InputRefused(f"unbalanced parentheses in the rule {name!r}")
        return fragment

    def alternatives(self, tokens: list[tuple[str, str]], i: int) -> tuple[tuple[int, int], int]:
        start, end = self.state(), self.state()
        while True:
            (first, last), i = self.sequence(tokens, i)
            self.empty[start].append(first)
            self.empty[last].append(end)
            if i < len(tokens) and tokens[i] == ("op", "|"):
                i += 1
                continue
            return (start, end), i

    def sequence(self, tokens: list[tuple[str, str]], i: int) -> tuple[tuple[int, int], int]:
        start = self.state()
        last = start
        while i < len(tokens) and tokens[i] not in (("op", "|"), ("op", ")")):
            at = i
            item, i = self.item(tokens, i)
            ops = 0
            while i < len(tokens) and tokens[i][0] in ("op", "rep") and tokens[i][1] not in "|()":
                if tokens[i][0] == "rep":
                    if ops:
                        raise InputRefused(f"a repetition {tokens[i][1]} after another")
                    item = self.counted(item, tokens[i][1], partial(self.copy, tokens, at))
                else:
                    item = self.repeated(item, tokens[i][1])
                ops += 1
                i += 1
            self.empty[last].append(item[0])
            last = item[1]
        return (start, last), i

    def copy(self, tokens: list[tuple[str, str]], i: int) -> tuple[int, int]:
        """A fresh fragment of the item at `tokens[i]`."""
        return self.item(tokens, i)[0]

    def item(self, tokens: list[tuple[str, str]], i: int) -> tuple[tuple[int, int], int]:
        kind, text = tokens[i]
        if kind == "op" and text == "(":
            fragment, i = self.alternatives(tokens, i + 1)
            if i >= len(tokens) or tokens[i] != ("op", ")"):
                raise InputRefused("an unclosed group in the grammar")
            return fragment, i + 1
        if kind == "name":
            return self.rule(text), i + 1
        start = self.state()
        last = start
        if kind == "cls":
            last = self.state()
            self.moves[start].append((_class(text), last))
            return (start, last), i + 1
        if kind == "literal":
            body = text[1:-1]
            j = 0
            while j < len(body):
                code, j = _char(body, j)
                nxt = self.state()
                self.moves[last].append((((code, code),), nxt))
                last = nxt
            return (start, last), i + 1
        raise InputRefused(f"unexpected {text!r} in the grammar")

    def repeated(self, item: tuple[int, int], op: str) -> tuple[int, int]:
        first, last = item
        if op in "*+?":
            start, end = self.state(), self.state()
            self.empty[start].append(first)
            self.empty[last].append(end)
            if op in "*?":
                self.empty[start].append(end)
            if op in "*+":
                self.empty[last].append(first)
            return start, end
        raise InputRefused(f"the repetition {op} in the grammar")

    def counted(
        self, item: tuple[int, int], op: str, again: Callable[[], tuple[int, int]]
    ) -> tuple[int, int]:
        """`item{m}`, `item{m,}` or `item{m,n}`: `again` builds one more copy of the item."""
        low_text, comma, high_text = op[1:-1].partition(",")
        low = int(low_text or 0)
        high = int(high_text) if high_text else (None if comma else low)
        start = last = self.state()
        copies = [item] + [again() for _ in range(max(low, high or low + 1) - 1)]
        for n, (first, end) in enumerate(copies):
            self.empty[last].append(first)
            if high is None and n == len(copies) - 1:
                self.empty[end].append(first)  # the last copy repeats
            if n >= low:
                self.empty[last].append(end)  # an optional copy may be skipped
            last = end
        return start, last

    def closure(self, states: list[int]) -> set[int]:
        seen = set(states)
        todo = list(states)
        while todo:
            for nxt in self.empty[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen


def _rules(grammar: str) -> dict[str, list[tuple[str, str]]]:
    rules: dict[str, list[tuple[str, str]]] = {}
    for line in re.split(r"\n(?=[a-zA-Z0-9_-]+\s*::=)", grammar.strip()):
        name, _, body = line.partition("::=")
        tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(body):
            match = _TOKEN.match(body, pos)
            if match is None:
                raise InputRefused(f"unreadable grammar text at {body[pos : pos + 20]!r}")
            pos = match.end()
            if match.lastgroup is not None:
                tokens.append((match.lastgroup, match.group()))
        rules[name.strip()] = tokens
    return rules


def _step(state: int, code: int) -> int | None:
    """A JSON string reader's next state after `code`; None when that text is wrong."""
    if state == _BEFORE:
        return _IN if code == 0x22 else None
    if state == _IN:
        if code < 0x20:
            return None
        return {0x22: _CLOSED, 0x5C: _ESCAPE}.get(code, _IN)
    if state == _ESCAPE:
        return _IN if chr(code) in '"\\/bfnrtu' else None
    return _CLOSED if chr(code) in " \t\n\r" else None


def _examples(ranges: _Ranges) -> list[int]:
    """One code point of `ranges` per behaviour of the reader."""
    found = [c for c in _SPECIAL if any(lo <= c <= hi for lo, hi in ranges)]
    for lo, hi in ranges:
        other = next(
            (c for c in range(lo, min(hi, lo + len(_SPECIAL)) + 1) if c not in _SPECIAL), None
        )
        if other is not None:
            found.append(other)
            break
    return found


def string_exit(grammar: str, root: str = "root") -> str | None:
    """A text the grammar's `root` lets a model write that is not one JSON string, or None.

    Every path through the rule is searched (breadth first, so the text is a shortest one):
    a text the grammar allows a model to write, as far as the first character at which it
    stops being a JSON string followed by optional whitespace: a quote that closes the string
    and more text, a bare control character, or a backslash JSON does not read as an escape.

    Raises:
        InputRefused: The grammar is not one the converters write for a string.
    """
    nfa = _Nfa(_rules(grammar))
    start, _ = nfa.rule(root)
    first = frozenset(nfa.closure([start]))
    parents: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {}
    todo: deque[tuple[int, int]] = deque()
    for q in first:
        parents[(q, _BEFORE)] = None
        todo.append((q, _BEFORE))
    while todo:
        q, state = todo.popleft()
        for ranges, target in nfa.moves[q]:
            for code in _examples(ranges):
                after = _step(state, code)
                if after is None:
                    return _path(parents, (q, state)) + chr(code)
                for nxt in nfa.closure([target]):
                    if (nxt, after) not in parents:
                        parents[(nxt, after)] = ((q, state), code)
                        todo.append((nxt, after))
    return None


def _path(
    parents: dict[tuple[int, int], tuple[tuple[int, int], int] | None], node: tuple[int, int]
) -> str:
    codes: list[int] = []
    step = parents[node]
    while step is not None:
        node, code = step
        codes.append(code)
        step = parents[node]
    return "".join(map(chr, reversed(codes)))
