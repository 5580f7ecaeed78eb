"""String formats, case-variant enums and literal unions, as the grammar enforces them.

Checked on llama-cpp-python's own converter: each pattern converts, compiles and cannot end its
string early, reads the usual values and refuses malformed ones, and whatever it lets the model
write validates as the pydantic type that asked for the format.
"""

from __future__ import annotations

import enum
import importlib
import json
import re
from ipaddress import IPv4Address, IPv6Address
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AnyUrl, HttpUrl, IPvAnyAddress, TypeAdapter

from twinflow.models._grammar import llama_cpp_grammar_check
from twinflow.models._pattern import grammar_pattern
from twinflow.models._preflight import FORMAT_PATTERNS, GrammarVerdict, preflight

CONVERTER: Any = importlib.import_module("llama_cpp.llama_grammar")


def sent_pattern(fmt: str) -> str:
    """The pattern pre-flight sends for a string of format `fmt`."""
    sent = preflight({"type": "string", "format": fmt}, "llama-cpp-python").sent_schema
    pattern = sent["pattern"]
    assert isinstance(pattern, str)
    return pattern


@pytest.mark.parametrize("fmt", sorted(FORMAT_PATTERNS))
def test_every_format_pattern_is_enforced_by_the_converter(fmt: str) -> None:
    """The converter makes a grammar of it that compiles and cannot end the string early."""
    check = llama_cpp_grammar_check()
    assert check is not None
    expected = GrammarVerdict(
        status="enforced",
        grammar_bytes=check({"type": "string", "pattern": sent_pattern(fmt)}).grammar_bytes,
    )
    assert expected == check({"type": "string", "pattern": sent_pattern(fmt)})


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("email", ["ada@example.org", "a.b+c@mail.example.co"], ["ada", "a@b", "a..b@x.org"]),
        (
            "uri",
            ["https://example.org/a/b?c=d#e", "ftp://files.example.org:21/x%20y"],
            ["x", "http//a"],
        ),
        ("url", ["http://example.org", "https://a.example/p?q"], ["ftp://example.org", "https://"]),
        ("hostname", ["example.org", "a-b.c"], ["-a.org", "a_b.org"]),
        ("ipv4", ["192.168.0.1", "0.0.0.0"], ["256.1.1.1", "1.2.3"]),
        ("ipv6", ["::1", "2001:db8::ff00:42:8329", "fe80::"], ["1::2::3", "12345::"]),
        ("ipvanyaddress", ["10.0.0.1", "::"], ["10.0.0", ":::"]),
    ],
)
def test_the_format_patterns_read_usual_values_and_refuse_malformed_ones(
    fmt: str, good: list[str], bad: list[str]
) -> None:
    """Written as JSON writes them, usual values full-match the sent pattern, malformed ones do not."""
    pattern = sent_pattern(fmt)

    def reads(value: str) -> bool:
        return re.fullmatch(pattern, json.dumps(value)[1:-1]) is not None

    assert ([True] * len(good), [False] * len(bad)) == (
        [reads(v) for v in good],
        [reads(v) for v in bad],
    )


_TYPES: dict[str, Any] = {
    "uri": AnyUrl,
    "url": HttpUrl,
    "ipv4": IPv4Address,
    "ipv6": IPv6Address,
    "ipvanyaddress": IPvAnyAddress,
}


@settings(suppress_health_check=list(HealthCheck), deadline=None, max_examples=100)
@given(data=st.data(), fmt=st.sampled_from(sorted(_TYPES)))
def test_whatever_a_format_pattern_lets_through_validates(data: st.DataObject, fmt: str) -> None:
    """Property: a text the sent pattern reads decodes to a value pydantic's type accepts."""
    text = data.draw(st.from_regex(sent_pattern(fmt), fullmatch=True))
    TypeAdapter(_TYPES[fmt]).validate_python(json.loads(f'"{text}"'))


def test_http_url_is_sent_as_an_http_pattern_and_the_rewrite_named() -> None:
    """`HttpUrl` (format uri, maxLength 2083) gets the http(s) pattern; the format rewrite is named."""
    report = preflight(TypeAdapter(HttpUrl), "llama-cpp-python")
    expected = (
        grammar_pattern(FORMAT_PATTERNS["url"]),
        [
            ("/format", "uri"),
            ("/minLength", 1),
            ("/pattern", FORMAT_PATTERNS["url"]),
            ("/maxLength", 2083),
        ],
    )
    assert expected == (
        report.sent_schema["pattern"],
        [(r.pointer, r.before) for r in report.rewrites],
    )


class Shade(enum.StrEnum):
    """Values that differ only in case."""

    LOWER = "red"
    TITLE = "Red"
    UPPER = "RED"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (Shade, 'root ::= "\\"red\\"" | "\\"Red\\"" | "\\"RED\\""'),
        (
            Literal["red", "Red"] | Literal["blue"],
            'alternative-0 ::= "\\"red\\"" | "\\"Red\\""\nalternative-1 ::= "\\"blue\\""',
        ),
    ],
)
def test_case_variants_and_literal_unions_are_enforced_value_by_value(
    source: Any, expected: str
) -> None:
    """The converter's grammar lists each value as written, and pre-flight reports nothing."""
    report = preflight(TypeAdapter(source), "llama-cpp-python")
    grammar = str(CONVERTER.json_schema_to_gbnf(json.dumps(report.sent_schema)))
    assert (True, ()) == (expected in grammar, report.findings)
