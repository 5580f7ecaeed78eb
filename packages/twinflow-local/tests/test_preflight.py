"""Schema pre-flight: what the grammar converters do not enforce, and Ollama's pattern anchoring."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from twinflow.local_model import (
    LocalModelError,
    UnenforcedSchemaError,
    anchor_pattern,
    preflight,
)
from twinflow.vocab import UserError


def keywords(schema: dict, decoder: str = "llama.cpp") -> list[tuple[str, str]]:
    return [(f.pointer, f.keyword) for f in preflight(schema, decoder).findings]


@pytest.mark.parametrize(
    "keyword",
    [
        "uniqueItems",
        "contains",
        "not",
        "if",
        "patternProperties",
        "multipleOf",
        "minProperties",
    ],
)
def test_each_dropped_keyword_is_reported_with_its_pointer(keyword: str) -> None:
    """A keyword the grammar drops is named with a JSON pointer to it."""
    schema = {"type": "object", "properties": {"x": {keyword: True}}}
    assert [(f"/properties/x/{keyword}", keyword)] == keywords(schema)[:1]


def test_number_bounds_are_reported_for_every_decoder() -> None:
    """Bounds on non-integer numbers are not in any grammar."""
    schema = {"properties": {"p": {"type": "number", "minimum": 0, "exclusiveMaximum": 1}}}
    for decoder in ("llama.cpp", "ollama", "llama-cpp-python"):
        expected = [
            ("/properties/p/minimum", "minimum"),
            ("/properties/p/exclusiveMaximum", "exclusiveMaximum"),
        ]
        assert expected == keywords(schema, decoder)


def test_integer_bounds_are_reported_only_for_llama_cpp_python() -> None:
    """llama.cpp's converter enforces integer ranges; llama-cpp-python's port drops them."""
    schema = {"properties": {"age": {"type": "integer", "minimum": 50}}}
    assert keywords(schema, "llama.cpp") == []
    assert keywords(schema, "llama-cpp-python") == [("/properties/age/minimum", "minimum")]


def test_formats_without_a_grammar_rule_are_reported() -> None:
    """email and uri have no grammar rule; date-time and uuid do."""
    schema = {
        "properties": {
            "e": {"type": "string", "format": "email"},
            "u": {"type": "string", "format": "uri"},
            "d": {"type": "string", "format": "date-time"},
            "i": {"type": "string", "format": "uuid"},
        }
    }
    assert keywords(schema) == [
        ("/properties/e/format", "format"),
        ("/properties/u/format", "format"),
    ]


def test_a_pattern_shadows_length_bounds() -> None:
    """With a pattern present the grammar ignores minLength and maxLength."""
    schema = {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5}
    assert keywords(schema) == [("/minLength", "minLength"), ("/maxLength", "maxLength")]


def test_ref_edge_cases_are_reported() -> None:
    """Non-local references and keywords beside $ref are named."""
    schema = {
        "properties": {
            "a": {"$ref": "https://example.com/s.json"},
            "b": {"$ref": "#/$defs/B", "maxLength": 3},
            "c": {"$ref": "#/$defs/B", "description": "fine"},
        },
        "$defs": {"B": {"type": "string"}},
    }
    assert keywords(schema) == [("/properties/a/$ref", "$ref"), ("/properties/b/$ref", "$ref")]


def test_pydantic_schema_with_nested_defs_walks_into_definitions() -> None:
    """Findings inside `$defs` carry the pointer into `$defs`."""

    class Tag(BaseModel):
        """A tag."""

        score: float = Field(ge=0, le=1)

    class Doc(BaseModel):
        """A document."""

        tags: list[Tag]

    found = keywords(Doc.model_json_schema())
    assert sorted(found) == [
        ("/$defs/Tag/properties/score/maximum", "maximum"),
        ("/$defs/Tag/properties/score/minimum", "minimum"),
    ]


@pytest.mark.parametrize("decoder", ["ollama", "llama.cpp", "llama-cpp-python"])
def test_an_unanchored_pattern_is_anchored_and_the_rewrite_is_recorded(decoder: str) -> None:
    """An unanchored pattern is anchored for every decoder, the caller's schema untouched."""
    schema = {"properties": {"code": {"type": "string", "pattern": "[A-Z]{3}"}}}
    report = preflight(schema, decoder)
    assert "[A-Z]{3}" == schema["properties"]["code"]["pattern"]
    assert "^.*([A-Z]{3}).*$" == report.sent_schema["properties"]["code"]["pattern"]
    expected = [("/properties/code/pattern", "[A-Z]{3}", "^.*([A-Z]{3}).*$")]
    assert expected == [(r.pointer, r.before, r.after) for r in report.rewrites]
    assert () == report.findings


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("abc", "^.*(?:abc).*$"),
        ("^abc", "^(?:abc).*$"),
        ("abc$", "^.*(?:abc)$"),
        ("a\\$", "^.*(?:a\\$).*$"),
        ("^a|b$", "^.*(?:^a|b$).*$"),
    ],
)
def test_anchoring_keeps_existing_anchors(pattern: str, expected: str) -> None:
    """Only the missing side gets `.*`; top-level alternation is wrapped whole."""
    assert expected == anchor_pattern(pattern)


@given(
    st.sampled_from(["abc", "^ab", "b$", "a|bc", "^a|c$", "[ab]+", "x(y|z)"]),
    st.text(alphabet="abcxyz$", max_size=8),
)
def test_anchoring_matches_the_same_strings(pattern: str, text: str) -> None:
    """A JSON Schema pattern is a search; the anchored rewrite full-matches the same strings."""
    expected = re.search(pattern, text) is not None
    assert expected == (re.fullmatch(anchor_pattern(pattern), text, flags=re.S) is not None)


def test_strict_mode_raises_and_names_every_keyword() -> None:
    """Strict pre-flight refuses a schema the decoder would not enforce, naming what and where."""
    schema = {"type": "array", "uniqueItems": True, "items": {"type": "number", "maximum": 3}}
    with pytest.raises(UnenforcedSchemaError) as caught:
        preflight(schema, "ollama", strict=True)
    message = str(caught.value)
    assert "uniqueItems at /uniqueItems" in message
    assert "maximum at /items/maximum" in message
    assert isinstance(caught.value, UserError)
    assert isinstance(caught.value, LocalModelError)
    assert len(caught.value.report.findings) == 2


def test_strict_mode_passes_an_enforceable_schema() -> None:
    """A schema the grammar fully enforces passes strict pre-flight with a clean report."""
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}, "e": {"enum": ["a", "b"]}},
        "required": ["n"],
    }
    report = preflight(schema, "ollama", strict=True)
    assert report.enforced
    assert schema == report.sent_schema
