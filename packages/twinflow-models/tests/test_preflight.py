"""Schema pre-flight: what the grammar converters do not enforce, and Ollama's pattern anchoring."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, HttpUrl, TypeAdapter

from twinflow.models import ModelError, SchemaError
from twinflow.models._pattern import anchor_pattern, grammar_pattern
from twinflow.models._preflight import JSON_STRING_TEXT, GrammarVerdict, preflight
from twinflow.trace import UserError

# Any run of characters, as the JSON text between a string's quotes.
ANY = r"([^\x00-\x1F\x22\x5C]|[\x5C]([\x22\x5Cbfnrt]|u00[01][0-9a-fA-F]))*"


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


def test_formats_without_a_grammar_rule_or_pattern_are_reported() -> None:
    """email and uri are sent as patterns, date-time and uuid have rules; duration has neither."""
    schema = {
        "properties": {
            "e": {"type": "string", "format": "email"},
            "u": {"type": "string", "format": "uri"},
            "d": {"type": "string", "format": "date-time"},
            "i": {"type": "string", "format": "uuid"},
            "s": {"type": "string", "format": "duration"},
        }
    }
    assert [("/properties/s/format", "format")] == keywords(schema)


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
    anchored = "^([A-Z]{3})$"
    assert anchored == report.sent_schema["properties"]["code"]["pattern"]
    expected = [("/properties/code/pattern", "[A-Z]{3}", anchored)]
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
    with pytest.raises(SchemaError) as caught:
        preflight(schema, "ollama", strict=True)
    message = str(caught.value)
    assert "uniqueItems at /uniqueItems" in message
    assert "maximum at /items/maximum" in message
    assert isinstance(caught.value, UserError)
    assert isinstance(caught.value, ModelError)
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


# --- schema compilation, the converter seam, and what preflight accepts ---------------------


class Node(BaseModel):
    """A recursive model."""

    name: str
    children: list[Node] = []


class Cat(BaseModel):
    """One branch of a tagged union."""

    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    """The other branch."""

    kind: Literal["dog"]
    bark: str


class Pet(BaseModel):
    """A discriminated union."""

    pet: Annotated[Cat | Dog, Field(discriminator="kind")]


class Verdicts:
    """A `GrammarCheck` fake: answers from a function of the schema, recording each call."""

    def __init__(self, decide: Callable[[dict[str, Any]], GrammarVerdict]) -> None:
        self.decide = decide
        self.calls: list[dict[str, Any]] = []

    def __call__(self, schema: dict[str, Any], /) -> GrammarVerdict:
        self.calls.append(copy.deepcopy(schema))
        return self.decide(schema)


def test_preflight_takes_a_model_class_a_type_adapter_or_a_dict() -> None:
    """A model class, its TypeAdapter and its schema dict give the same report."""
    by_class = preflight(Pet, "llama-cpp-python")
    by_adapter = preflight(TypeAdapter(Pet), "llama-cpp-python")
    by_dict = preflight(Pet.model_json_schema(), "llama-cpp-python")
    assert by_dict == by_class == by_adapter


def test_preflight_refuses_anything_else_with_a_usage_error() -> None:
    """Passing an instance or a string is a UserError that names what to pass."""
    with pytest.raises(UserError, match="TypeAdapter"):
        preflight("Pet", "llama-cpp-python")  # type: ignore[arg-type]  # the mistake under test


def test_a_discriminated_union_is_not_flagged() -> None:
    """oneOf whose branches carry distinct const tags is exclusive: no finding, strict passes."""
    report = preflight(Pet, "llama-cpp-python", strict=True)
    assert () == report.findings


def test_an_overlapping_one_of_is_flagged() -> None:
    """oneOf whose branches may both match is reported: the grammar treats it as anyOf."""
    schema = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert [("/oneOf", "oneOf")] == keywords(schema, "llama-cpp-python")


def test_prefix_items_alone_is_enforced_but_beside_items_it_is_flagged() -> None:
    """A tuple's prefixItems is enforced; next to `items` the converter ignores it."""
    assert [] == keywords(preflight(TypeAdapter(tuple[int, str]), "llama-cpp-python").sent_schema)
    mixed = {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}}
    assert [("/prefixItems", "prefixItems")] == keywords(mixed, "llama-cpp-python")


def test_a_root_ref_is_hoisted_and_the_rewrite_named() -> None:
    """A recursive model's root $ref becomes its definition; recursion stays through $defs."""
    report = preflight(Node, "llama-cpp-python")
    sent = report.sent_schema
    expected = ("object", "#/$defs/Node", "/$ref")
    items = sent["properties"]["children"]["items"]  # type: ignore[index,call-overload]  # JsonValue, of a shape the test knows
    assert expected == (sent["type"], items["$ref"], report.rewrites[0].pointer)
    assert "$ref" not in sent


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^\d{3}$", "^[0-9]{3}$"),
        (r"^(?:AB|CD)$", "^(AB|CD)$"),
        (r"[a-z]+\.com", r"^([a-z]+[\x2E]com)$"),
        (r"^[\w-]+$", r"^[\x2D0-9A-Z\x5Fa-z]+$"),
        (
            r'^"[^a]$',
            r"^([\x5C][\x22])([^\x00-\x1F\x22\x5Ca]|[\x5C]([\x22\x5Cbfnrt]|u00[01][0-9a-fA-F]))$",
        ),
        (r"^\t$", r"^([\x5C][t])$"),
        (r"^a+?b$", "^a+b$"),
        (r"^a|b$", "^((a)|(b))$"),
        ("", f"^{ANY}$"),
        (r"^a{b}c{2}$", r"^a[\x7B]b[\x7D]c{2}$"),
    ],
)
def test_patterns_are_rewritten_into_what_grammars_read(pattern: str, expected: str) -> None:
    """Classes like \\d are spelled out, groups plain, escapes as codes, anchors added."""
    assert expected == grammar_pattern(pattern)


@pytest.mark.parametrize("pattern", [r"^(?=a)b$", r"^(a)\1$", r"\bword\b", r"^a$|^b$x^"])
def test_a_pattern_no_grammar_can_read_is_dropped_and_reported(pattern: str) -> None:
    """A lookaround, a backreference or a word boundary is dropped, named; the text stays JSON."""
    report = preflight({"type": "string", "pattern": pattern}, "llama-cpp-python")
    expected = (
        {"type": "string", "pattern": JSON_STRING_TEXT},
        [("/pattern", "pattern")],
        [("/pattern", None), ("/pattern", JSON_STRING_TEXT)],
    )
    assert expected == (
        report.sent_schema,
        [(f.pointer, f.keyword) for f in report.findings],
        [(r.pointer, r.after) for r in report.rewrites],
    )


COUNTED = JSON_STRING_TEXT[:-2]


@pytest.mark.parametrize(
    ("schema", "pattern"),
    [
        ({"type": "string", "maxLength": 12}, COUNTED + "{0,12}$"),
        ({"type": "string", "minLength": 1}, COUNTED + "{1,}$"),
        ({"type": "string", "minLength": 2, "maxLength": 300}, COUNTED + "{2,}$"),
        ({"type": "string", "minLength": 300}, JSON_STRING_TEXT),
    ],
)
def test_length_bounds_become_a_count_of_json_string_characters(
    schema: dict[str, Any], pattern: str
) -> None:
    """Only length bounds: a pattern counts JSON string characters (a bound too deep is dropped)."""
    assert {"type": "string", "pattern": pattern} == preflight(
        schema, "llama-cpp-python"
    ).sent_schema


def test_a_bound_too_deep_for_the_grammar_is_dropped_and_reported() -> None:
    """HttpUrl's maxLength=2083 would nest past the grammar parser's depth: dropped, named."""
    report = preflight(TypeAdapter(HttpUrl), "llama-cpp-python")
    expected = (
        "maxLength" in report.sent_schema,
        ["/format", "/minLength", "/pattern", "/maxLength"],
    )
    assert (False, [r.pointer for r in report.rewrites]) == expected
    assert ["/maxLength"] == [f.pointer for f in report.findings]


def test_a_converter_fallback_makes_the_whole_schema_unenforced() -> None:
    """When the converter rejects the schema, the report says nothing is enforced, strict refuses."""
    check = Verdicts(lambda _s: GrammarVerdict(status="fallback", reason="KeyError: x"))
    report = preflight({"type": "integer"}, "llama-cpp-python", grammar_check=check)
    assert [("", "(schema)")] == [(f.pointer, f.keyword) for f in report.findings]
    assert False is report.enforced
    with pytest.raises(SchemaError, match="falls back to generic JSON"):
        preflight({"type": "integer"}, "llama-cpp-python", grammar_check=check, strict=True)


def test_a_pattern_whose_grammar_does_not_compile_is_dropped_before_sending() -> None:
    """The converter's refusal of one pattern drops that pattern, and the rest is re-checked."""

    def decide(schema: dict[str, Any]) -> GrammarVerdict:
        bad = "ZZ" in json.dumps(schema)
        return (
            GrammarVerdict(status="uncompilable", reason="parse")
            if bad
            else GrammarVerdict(status="enforced")
        )

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^ZZ$"},
            "b": {"type": "string", "pattern": "^ok$"},
        },
    }
    report = preflight(schema, "llama-cpp-python", grammar_check=Verdicts(decide))
    expected = (
        {"type": "string"},
        {"type": "string", "pattern": "^ok$"},
        "enforced",
        [("/properties/a/pattern", "pattern")],
    )
    props = report.sent_schema["properties"]
    assert isinstance(props, dict) and report.grammar is not None
    assert expected == (
        props["a"],
        props["b"],
        report.grammar.status,
        [(f.pointer, f.keyword) for f in report.findings],
    )


def test_a_schema_that_never_compiles_is_refused_before_any_request() -> None:
    """If the grammar fails even without patterns, pre-flight raises instead of sending it."""
    check = Verdicts(lambda _s: GrammarVerdict(status="uncompilable", reason="too deep"))
    with pytest.raises(SchemaError, match="too deep") as caught:
        preflight({"type": "integer"}, "llama-cpp-python", grammar_check=check)
    assert True is (isinstance(caught.value, UserError) and isinstance(caught.value, ModelError))


_PATTERNS = [
    r"^\d{3}$",
    r"\d+",
    r"^(?:AB|CD)$",
    r"[a-z]+\.com",
    r"^[\w.-]+@[\w-]+\.[a-z]{2,}$",
    r"^\s*\S+$",
    r"^[A-Z]{2}-\d{4}$",
    r"x|y",
    r"^a|b$",
    r"^\d$|z",
    r"^x{y}\d{1,2}$",
    r"^a+?b*?$",
    r'^"q"$',
]


@settings(suppress_health_check=list(HealthCheck), deadline=None, max_examples=60)
@given(data=st.data(), pattern=st.sampled_from(_PATTERNS))
def test_the_rewritten_pattern_accepts_every_match_of_the_original(
    data: st.DataObject, pattern: str
) -> None:
    """Property: the JSON text of a whole match of the original pattern full-matches the rewrite."""
    # ECMA-262's `$` does not match before a final newline, Python's does: `\Z` is ECMA's `$`.
    ecma = re.sub(r"(?<!\\)\$", r"\\Z", pattern)
    text = data.draw(
        st.from_regex(
            re.compile(ecma, re.ASCII), fullmatch=True, alphabet=st.characters(max_codepoint=127)
        )
    )
    json_text = json.dumps(text, ensure_ascii=False)[1:-1]
    assert True is (re.fullmatch(grammar_pattern(pattern), json_text) is not None)


class Bag(BaseModel):
    """Bounded lists, patterns, a recursive field, a dict and a tagged union."""

    items: list[Annotated[str, Field(pattern=r"^\d{2}[a-z]$")]] = Field(min_length=1, max_length=3)
    code: str = Field(pattern=r"^(?:AB|CD)-\d+$")
    tree: Node | None = None
    scores: dict[str, int] = {}
    pet: Pet | None = None


_BAGS = st.builds(
    Bag,
    items=st.lists(st.from_regex(r"\A[0-9]{2}[a-z]\Z"), min_size=1, max_size=3),
    code=st.from_regex(r"\A(AB|CD)-[0-9]+\Z"),
    tree=st.none() | st.builds(Node, name=st.text(max_size=5), children=st.just([])),
    scores=st.dictionaries(st.text(max_size=4), st.integers(-5, 5), max_size=3),
    pet=st.none()
    | st.builds(Pet, pet=st.builds(Cat, kind=st.just("cat"), lives=st.integers(0, 9))),
)


@settings(suppress_health_check=list(HealthCheck), deadline=None, max_examples=40)
@given(bag=_BAGS, hoisted=st.sampled_from([Bag, Node]))
def test_the_compiled_schema_accepts_every_instance_of_the_original(
    bag: Bag, hoisted: type[BaseModel]
) -> None:
    """Property: an instance valid for the original schema is valid for the rewritten one."""
    instance = bag.model_dump(mode="json") if hoisted is Bag else {"name": "n", "children": []}
    original = hoisted.model_json_schema()
    jsonschema.validate(instance, original, format_checker=None)
    compiled = preflight(hoisted, "llama-cpp-python").sent_schema
    # The grammar reads a string's pattern against its JSON text, escapes and all.
    jsonschema.validate(as_json_text(instance), compiled)


def as_json_text(value: Any) -> Any:
    """`value` with every string replaced by its text between the quotes of its JSON encoding."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)[1:-1]
    if isinstance(value, list):
        return [as_json_text(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json_text(v) for k, v in value.items()}
    return value


@settings(suppress_health_check=list(HealthCheck), deadline=None, max_examples=60)
@given(text=st.text(max_size=12))
def test_every_string_has_json_text_the_string_pattern_accepts(text: str) -> None:
    """Property: any string's JSON text matches the pattern a plain string is sent with."""
    assert True is (re.fullmatch(JSON_STRING_TEXT, as_json_text(text)) is not None)


def test_a_raw_control_character_is_outside_the_string_pattern() -> None:
    """The point of the string pattern: a raw newline is not JSON string text."""
    assert None is re.fullmatch(JSON_STRING_TEXT, "line\nbreak")


def test_a_pattern_that_makes_the_converter_fall_back_is_dropped_alone() -> None:
    """A pattern the converter rejects is dropped, so the rest of the schema stays enforced."""

    def decide(schema: dict[str, Any]) -> GrammarVerdict:
        bad = "QQ" in json.dumps(schema)
        return GrammarVerdict(status="fallback" if bad else "enforced", reason="KeyError: QQ")

    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^QQ$"}, "n": {"type": "integer"}},
    }
    report = preflight(schema, "llama-cpp-python", grammar_check=Verdicts(decide))
    assert report.grammar is not None
    expected = ("enforced", [("/properties/a/pattern", "pattern")])
    assert expected == (report.grammar.status, [(f.pointer, f.keyword) for f in report.findings])
