"""Schema pre-flight: which parts of a JSON Schema a grammar-constrained decoder will not enforce.

llama.cpp turns a JSON Schema into a GBNF grammar, and Ollama uses the same converter. The
converter understands a subset of JSON Schema: the rest is dropped (the grammar accepts values the
schema refuses) or, for an unanchored `pattern`, refused outright by Ollama. This module walks a
schema, names every such keyword with a JSON pointer, and for Ollama rewrites unanchored patterns
into anchored ones with the same meaning, recording each rewrite. Nothing here makes a guarantee
the decoder does not: the answer is always validated again with pydantic.
"""

from __future__ import annotations

import copy
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from twinflow.local_model._errors import UnenforcedSchemaError

__all__ = [
    "Decoder",
    "PreflightReport",
    "SchemaFinding",
    "SchemaRewrite",
    "anchor_pattern",
    "preflight",
]

Decoder = Literal["llama.cpp", "llama-cpp-python", "ollama"]
"""The grammar converters this module knows.

`llama.cpp` is the C++ converter of llama.cpp's own server (also behind LM Studio's GGUF models);
`ollama` is the same converter plus Ollama's refusal of unanchored patterns; `llama-cpp-python`
is the older Python port bundled with llama-cpp-python's server, which also drops integer bounds.
"""

# Keywords no converter above turns into grammar: the grammar accepts whatever they would refuse.
_DROPPED: dict[str, str] = {
    "multipleOf": "the grammar cannot count",
    "uniqueItems": "the grammar cannot compare array items",
    "contains": "the grammar does not constrain some-item-matches",
    "minContains": "the grammar does not constrain some-item-matches",
    "maxContains": "the grammar does not constrain some-item-matches",
    "not": "the grammar has no negation",
    "if": "conditional schemas are dropped",
    "then": "conditional schemas are dropped",
    "else": "conditional schemas are dropped",
    "patternProperties": "property names are not constrained by pattern",
    "propertyNames": "property names are not constrained",
    "dependentRequired": "dependencies between properties are dropped",
    "dependentSchemas": "dependencies between properties are dropped",
    "dependencies": "dependencies between properties are dropped",
    "unevaluatedProperties": "unevaluated* keywords are dropped",
    "unevaluatedItems": "unevaluated* keywords are dropped",
    "minProperties": "property counts are not constrained",
    "maxProperties": "property counts are not constrained",
    "prefixItems": "tuple positions are mishandled by the converter",
    "additionalItems": "tuple positions are mishandled by the converter",
}
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# The only string formats llama.cpp's converter has rules for.
_ENFORCED_FORMATS = frozenset({"date", "time", "date-time", "uuid"})
# Keywords whose value is a schema, or a list / map of schemas, to walk into.
_SCHEMA_VALUED = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")


class SchemaFinding(BaseModel):
    """One keyword of the schema that the decoder will not enforce."""

    model_config = ConfigDict(frozen=True)

    pointer: str
    """JSON pointer (RFC 6901) to the keyword, e.g. `/properties/age/minimum`."""
    keyword: str
    """The JSON Schema keyword, e.g. `minimum`."""
    reason: str
    """Why the decoder lets through values this keyword refuses."""


class SchemaRewrite(BaseModel):
    """One change pre-flight made to the schema before it is sent, with the same meaning."""

    model_config = ConfigDict(frozen=True)

    pointer: str
    """JSON pointer (RFC 6901) to the rewritten keyword."""
    keyword: str
    """The JSON Schema keyword rewritten, e.g. `pattern`."""
    before: JsonValue
    """The keyword's value in the caller's schema."""
    after: JsonValue
    """The keyword's value in the schema sent to the server."""
    reason: str
    """Why the rewrite was needed."""


class PreflightReport(BaseModel):
    """What a decoder will and will not enforce of one schema, and the schema actually sent."""

    model_config = ConfigDict(frozen=True)

    decoder: Decoder
    """The grammar converter the report is for."""
    sent_schema: dict[str, JsonValue]
    """The schema as sent to the server: the caller's schema with the rewrites applied."""
    findings: tuple[SchemaFinding, ...] = ()
    """Every keyword the decoder will not enforce; the second validation must catch these."""
    rewrites: tuple[SchemaRewrite, ...] = ()
    """Every change made to the caller's schema before sending it."""

    @property
    def enforced(self) -> bool:
        """True when the decoder enforces every keyword of the schema."""
        return not self.findings


def _escape(token: str) -> str:
    """Escape one reference token for a JSON pointer (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


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


def _is_anchored(pattern: str) -> bool:
    return (
        pattern.startswith("^")
        and pattern.endswith("$")
        and not pattern.endswith("\\$")
        and not _has_top_level_alternation(pattern)
    )


class _Walker:
    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.findings: list[SchemaFinding] = []
        self.rewrites: list[SchemaRewrite] = []

    def note(self, pointer: str, keyword: str, reason: str) -> None:
        self.findings.append(
            SchemaFinding(pointer=f"{pointer}/{_escape(keyword)}", keyword=keyword, reason=reason)
        )

    def walk(self, node: JsonValue, pointer: str) -> None:
        if not isinstance(node, dict):
            return
        for keyword, reason in _DROPPED.items():
            if keyword in node:
                self.note(pointer, keyword, reason)
        self._bounds(node, pointer)
        self._strings(node, pointer)
        self._ref(node, pointer)
        if "oneOf" in node:
            self.note(pointer, "oneOf", "treated as anyOf: exactly-one is not enforced")
        for keyword in _SCHEMA_VALUED:
            if keyword in node:
                self.walk(node[keyword], f"{pointer}/{keyword}")
        for keyword in _SCHEMA_LISTS:
            children = node.get(keyword)
            if isinstance(children, list):
                for i, child in enumerate(children):
                    self.walk(child, f"{pointer}/{keyword}/{i}")
        for keyword in _SCHEMA_MAPS:
            children = node.get(keyword)
            if isinstance(children, dict):
                for name, child in children.items():
                    self.walk(child, f"{pointer}/{keyword}/{_escape(name)}")

    def _bounds(self, node: dict[str, JsonValue], pointer: str) -> None:
        present = [k for k in _NUMBER_BOUNDS if k in node]
        if not present:
            return
        types = node.get("type")
        integer_only = types == "integer" or types == ["integer"]
        if integer_only and self.decoder != "llama-cpp-python":
            return
        reason = (
            "llama-cpp-python's converter drops integer bounds"
            if integer_only
            else "the grammar does not bound non-integer numbers"
        )
        for keyword in present:
            self.note(pointer, keyword, reason)

    def _strings(self, node: dict[str, JsonValue], pointer: str) -> None:
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt not in _ENFORCED_FORMATS:
            self.note(pointer, "format", f"format {fmt!r} has no grammar rule; any string passes")
        pattern = node.get("pattern")
        if not isinstance(pattern, str):
            return
        for keyword in ("minLength", "maxLength"):
            if keyword in node:
                self.note(pointer, keyword, "a pattern shadows length bounds in the grammar")
        if _is_anchored(pattern):
            return
        if self.decoder == "ollama":
            anchored = anchor_pattern(pattern)
            node["pattern"] = anchored
            self.rewrites.append(
                SchemaRewrite(
                    pointer=f"{pointer}/pattern",
                    keyword="pattern",
                    before=pattern,
                    after=anchored,
                    reason="Ollama refuses patterns not anchored with ^ and $; "
                    "anchored with .* so the same strings match",
                )
            )
        else:
            self.note(pointer, "pattern", "unanchored patterns are not enforced by the grammar")

    def _ref(self, node: dict[str, JsonValue], pointer: str) -> None:
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return
        local = ref.startswith("#/$defs/") or ref.startswith("#/definitions/")
        if not local:
            self.note(
                pointer, "$ref", f"only #/$defs/ and #/definitions/ references resolve, not {ref!r}"
            )
        siblings = sorted(k for k in node if k not in {"$ref", "description", "title", "default"})
        if siblings:
            self.note(pointer, "$ref", f"keywords beside $ref are ignored: {', '.join(siblings)}")


def preflight(
    schema: dict[str, JsonValue], decoder: Decoder, *, strict: bool = False
) -> PreflightReport:
    """Report what `decoder` will not enforce of `schema`, and rewrite what it would refuse.

    Args:
        schema: A JSON Schema (for example `Model.model_json_schema()`); it is not modified.
        decoder: The grammar converter the schema will be sent to.
        strict: Raise instead of reporting when any keyword would go unenforced.

    Returns:
        The report, whose `sent_schema` is the schema to put on the wire.

    Raises:
        UnenforcedSchemaError: In strict mode, when the report has findings.
    """
    sent = copy.deepcopy(schema)
    walker = _Walker(decoder)
    walker.walk(sent, "")
    report = PreflightReport(
        decoder=decoder,
        sent_schema=sent,
        findings=tuple(walker.findings),
        rewrites=tuple(walker.rewrites),
    )
    if strict and report.findings:
        raise UnenforcedSchemaError(report)
    return report
