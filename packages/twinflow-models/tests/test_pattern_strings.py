"""No pattern twinflow sends lets the model leave its JSON string: checked on the real converter.

Each test runs llama-cpp-python's own schema-to-grammar converter (the embedded server's) on the
sent pattern and searches the grammar it writes for a way out of the string.
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinflow.models._errors import InputRefused
from twinflow.models._grammar import llama_cpp_grammar_check
from twinflow.models._grammar_string import string_exit
from twinflow.models._pattern import grammar_pattern
from twinflow.models._preflight import JSON_STRING_TEXT, GrammarVerdict, preflight

CONVERTER: Any = importlib.import_module("llama_cpp.llama_grammar")


def exit_of(pattern: str) -> str | None:
    """The way out of the string in the converter's grammar for `pattern`, or None."""
    schema = {"type": "string", "pattern": pattern}
    return string_exit(str(CONVERTER.json_schema_to_gbnf(json.dumps(schema))))


_SPACE = "\\t\\n\\v\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"


def python_regex(pattern: str) -> re.Pattern[str]:
    """`pattern` with ECMA-262's meaning in Python's `re`: its `.`, `\\s`, `\\S` and `$`."""
    out = []
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        piece = pattern[i : i + 2] if ch == "\\" else ch
        i += len(piece)
        if piece == "\\s":
            piece = _SPACE if in_class else f"[{_SPACE}]"
        elif piece == "\\S":
            piece = "\\x00-\\U0010FFFF" if in_class else f"[^{_SPACE}]"
        elif in_class:
            in_class = piece != "]"
        elif piece == "[":
            in_class = True
        elif piece == ".":
            piece = "[^\\n\\r\\u2028\\u2029]"
        elif piece == "$":
            piece = "\\Z"
        out.append(piece)
    return re.compile("".join(out), re.ASCII)


# Pieces of ECMA-262 patterns: the ones that used to leave the string, and ordinary ones.
_ATOMS = st.sampled_from(
    [
        ".",
        "a",
        "7",
        '"',
        "\\\\",
        "\\.",
        "\\d",
        "\\D",
        "\\w",
        "\\W",
        "\\s",
        "\\S",
        "\\n",
        "\\t",
        "\\x22",
        "\\u005C",
        "[^a]",
        '[^"]',
        "[^\\\\]",
        "[a-z]",
        "[\\s\\S]",
        "[^\\d]",
        "[ -~]",
        "[\\x00-\\x1F]",
        "[^\\w.-]",
        "\\{",
        "{",
        "}",
        "é",
        '["\\\\]',
        "\\/",
    ]
)
_QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,3}", "{0,}", "*?"])


@st.composite
def patterns(draw: st.DrawFn, depth: int = 0) -> str:
    """A pattern of atoms, groups and alternatives, with or without its anchors."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 5)) == 0:
            inner = draw(patterns(depth + 1))
            parts.append(f"({'?:' if draw(st.booleans()) else ''}{inner})")
        else:
            parts.append(draw(_ATOMS))
        parts[-1] += draw(_QUANTIFIERS)
    body = "".join(parts)
    if draw(st.booleans()):
        body += "|" + draw(_ATOMS)
    return ("^" if draw(st.booleans()) else "") + body + ("$" if draw(st.booleans()) else "")


@settings(suppress_health_check=list(HealthCheck), deadline=None, max_examples=150)
@given(pattern=patterns())
def test_no_sent_pattern_lets_the_converted_grammar_leave_the_string(pattern: str) -> None:
    """Property: the converter's grammar of every rewritten pattern never ends the string early."""
    try:
        sent = grammar_pattern(pattern)
    except InputRefused:
        return
    assert None is exit_of(sent)


@settings(suppress_health_check=list(HealthCheck), deadline=None, max_examples=150)
@given(data=st.data(), pattern=patterns())
def test_every_text_the_rewrite_reads_is_a_json_string_the_pattern_finds(
    data: st.DataObject, pattern: str
) -> None:
    """Property: what the grammar lets the model write decodes to a value the pattern finds."""
    try:
        sent = grammar_pattern(pattern)
    except InputRefused:
        return
    text = data.draw(st.from_regex(sent, fullmatch=True))
    assert True is (python_regex(pattern).search(json.loads(f'"{text}"')) is not None)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # What twinflow sent for `\d+` before: its filler was `.` plus line terminators.
        (r"^(.|[\n\r\u2028\u2029])*([0-9]+)(.|[\n\r\u2028\u2029])*$", '"\x00'),
        (r"^[^\x00-\x1F]*[0-9]+$", '"""'),
        (r"^[^a]$", '"\x00'),
        (r"^[\x22]$", '"""'),
    ],
)
def test_the_search_finds_the_way_out_of_a_leaking_grammar(pattern: str, expected: str) -> None:
    """The converter's `.` and negated classes admit a bare quote or control: the search finds it."""
    assert expected == exit_of(pattern)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": JSON_STRING_TEXT},
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "uuid"},
        {"type": "string", "enum": ["a b", "c"]},
    ],
)
def test_the_strings_twinflow_sends_without_a_pattern_of_its_own_stay_strings(
    schema: dict[str, Any],
) -> None:
    """Plain strings, formats and enums as the converter writes them cannot end early either."""
    assert None is string_exit(str(CONVERTER.json_schema_to_gbnf(json.dumps(schema))))


def test_preflight_drops_a_pattern_whose_grammar_leaves_the_string() -> None:
    """A converter verdict with a way out makes the pattern unenforced: dropped and named."""

    def check(schema: dict[str, Any], /) -> GrammarVerdict:
        leaks = schema.get("pattern") == "^[a-z]+$"
        return GrammarVerdict(status="enforced", string_exit='"a"x' if leaks else "")

    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"p": {"type": "string", "pattern": "^[a-z]+$"}},
    }
    report = preflight(schema, "llama-cpp-python", grammar_check=check)
    finding = report.findings[0]
    expected = ({"type": "string"}, "/properties/p/pattern", True)
    props = report.sent_schema["properties"]
    assert isinstance(props, dict)
    assert expected == (props["p"], finding.pointer, "close the string early" in finding.reason)


def test_the_real_check_keeps_every_rewritten_pattern_and_reports_no_way_out() -> None:
    """With the real converter, the issue's unanchored patterns stay enforced, no finding."""
    check = llama_cpp_grammar_check()
    assert check is not None
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "zip": {"type": "string", "pattern": r"\d{5}"},
            "ref": {"type": "string", "pattern": r"^[A-Z]+"},
            "any": {"type": "string", "pattern": r"^[^,]*,\S+"},
        },
    }
    report = preflight(schema, "llama-cpp-python", grammar_check=check)
    sent: Any = report.sent_schema["properties"]
    verdicts = [check({"type": "string", "pattern": sent[k]["pattern"]}) for k in sent]
    assert ((), ["", "", ""]) == (report.findings, [v.string_exit for v in verdicts])


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"type": "string", "maxLength": 12},
        {"type": "string", "minLength": 3, "maxLength": 2083},
        {"type": "string", "pattern": r"^(?=a)\w+$"},
        {"type": "string", "format": "email"},
        {"type": "string", "format": "uri", "minLength": 1},
    ],
)
def test_every_string_preflight_sends_stays_one_json_string(schema: dict[str, Any]) -> None:
    """Plain, length-bounded, dropped-pattern and format strings: the sent grammar has no way out."""
    sent = preflight(
        schema, "llama-cpp-python", grammar_check=llama_cpp_grammar_check()
    ).sent_schema
    assert None is string_exit(str(CONVERTER.json_schema_to_gbnf(json.dumps(sent))))


def test_a_pattern_whose_grammar_the_check_cannot_read_is_kept_and_named() -> None:
    """Enforced, but not shown to keep its string closed: the pattern stays, a finding says so."""

    def check(schema: dict[str, Any], /) -> GrammarVerdict:
        return GrammarVerdict(status="enforced", reason="the string check cannot read this grammar")

    schema = {"type": "string", "pattern": "^a$"}
    report = preflight(schema, "llama-cpp-python", grammar_check=check)
    expected = ("^a$", [("/pattern", "pattern")])
    assert expected == (
        report.sent_schema["pattern"],
        [(f.pointer, f.keyword) for f in report.findings],
    )


@pytest.mark.parametrize(
    ("grammar", "expected"),
    [
        ('root ::= "\\"" [a-z]{2,3} "\\"" space\nspace ::= " "?', None),
        ('root ::= "\\"" [a"]{2,} "\\"" space\nspace ::= " "?', '"""'),
        ('root ::= "\\"" [^a]{2} "\\"" space\nspace ::= " "?', '"\x00'),
    ],
)
def test_the_search_reads_counted_repetitions(grammar: str, expected: str | None) -> None:
    """llama.cpp's newer grammars count repetitions with `{m,n}`: the search reads them."""
    assert expected == string_exit(grammar)


def test_literals_json_escapes_are_sent_as_a_pattern_the_server_can_parse() -> None:
    """A `Literal` with a quote, a backslash or a newline: enforced, and each value is writable."""
    values = ['say "hi"', "a\\b", "two\nlines", "plain"]
    check = llama_cpp_grammar_check()
    assert check is not None
    raw = {"enum": values}
    report = preflight(raw, "llama-cpp-python", grammar_check=check)
    pattern = report.sent_schema["pattern"]
    assert isinstance(pattern, str)
    written = [re.fullmatch(pattern, json.dumps(v)[1:-1]) is not None for v in values]
    expected = ("uncompilable", "enforced", "", [True] * len(values), ())
    assert expected == (
        check(raw).status,
        report.grammar.status if report.grammar else None,
        check({"type": "string", "pattern": pattern}).string_exit,
        written,
        report.findings,
    )
