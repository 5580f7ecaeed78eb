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
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, JsonValue, TypeAdapter

from twinflow.models._errors import InputRefused, SchemaError
from twinflow.models._pattern import grammar_pattern, held_to_match
from twinflow.trace import UserError
from twinflow.vocab import FrozenValue

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
    "additionalItems": "tuple positions are mishandled by the converter",
}
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# The only string formats llama.cpp's converter has rules for.
_ENFORCED_FORMATS = frozenset({"date", "time", "date-time", "uuid"})
# Keywords whose value is a schema, or a list / map of schemas, to walk into.
_SCHEMA_VALUED = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")


class SchemaFinding(FrozenValue):
    """One keyword of the schema that the decoder will not enforce."""

    pointer: str
    """JSON pointer (RFC 6901) to the keyword, e.g. `/properties/age/minimum`."""
    keyword: str
    """The JSON Schema keyword, e.g. `minimum`."""
    reason: str
    """Why the decoder lets through values this keyword refuses."""


class SchemaRewrite(FrozenValue):
    """One change pre-flight made to the schema before it is sent, with the same meaning."""

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


class GrammarVerdict(FrozenValue):
    """What the decoder's own schema-to-grammar converter made of a schema."""

    status: Literal["enforced", "fallback", "uncompilable"]
    """`enforced`: a grammar that compiles; `fallback`: the converter rejects the schema and the
    server decodes generic JSON instead (safe, nothing enforced); `uncompilable`: a grammar the
    server cannot compile (sending it crashes llama-cpp-python's server)."""
    reason: str = ""
    """The converter's or the grammar parser's complaint, when not `enforced`; when
    `enforced`, why the string check (`string_exit`) could not be made, if it could not."""
    grammar_bytes: int = 0
    """Size of the grammar the converter produced, when it produced one."""
    string_exit: str = ""
    """For a string schema: a shortest text its grammar lets the model write that stops being
    one JSON string (a quote that closes it and more text, a bare control character); empty
    when there is none."""


class GrammarCheck(Protocol):
    """The decoder's converter run in-process: a schema in, its verdict out.

    The local-model leaf has no converter of its own (its closure is pydantic's tree); the
    composition root injects one (`twinflow.cli` supplies llama-cpp-python's).
    """

    def __call__(self, schema: dict[str, JsonValue], /) -> GrammarVerdict:
        """Convert `schema` to a grammar and try to compile it."""
        ...


SchemaSource = type[BaseModel] | TypeAdapter[Any] | Mapping[str, JsonValue]
"""What `preflight` accepts: a model class, a `TypeAdapter`, or a JSON Schema dict."""


class PreflightReport(FrozenValue):
    """What a decoder will and will not enforce of one schema, and the schema actually sent."""

    decoder: Decoder
    """The grammar converter the report is for."""
    sent_schema: dict[str, JsonValue]
    """The schema as sent to the server: the caller's schema with the rewrites applied."""
    findings: tuple[SchemaFinding, ...] = ()
    """Every keyword the decoder will not enforce; the second validation must catch these."""
    rewrites: tuple[SchemaRewrite, ...] = ()
    """Every change made to the caller's schema before sending it."""
    grammar: GrammarVerdict | None = None
    """The decoder's converter's verdict on the sent schema, when a converter was available."""

    @property
    def enforced(self) -> bool:
        """True when the decoder enforces every keyword of the schema."""
        return not self.findings


def _escape(token: str) -> str:
    """Escape one reference token for a JSON pointer (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


# Above this, a length or item bound makes llama-cpp-python's converter nest one optional
# group per unit; llama.cpp's grammar parser refuses the depth (HttpUrl's maxLength=2083 does),
# and the server crashes on a grammar it cannot parse. Measured: 1000 parses, 2083 does not.
MAX_GRAMMAR_REPEAT = 256
_REPEAT_BOUNDS = ("minLength", "maxLength", "minItems", "maxItems")
JSON_STRING_TEXT = r'^([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4}))*$'
"""The text of a JSON string between its quotes, as a pattern the grammar converters read.

llama-cpp-python's converter gives a plain string the rule `[^"\\] | escape`, which lets raw
control characters through: a small model writes a raw newline, the reply is no longer JSON, and
the model never finds its way back to the closing quote. The grammar reads a `pattern` against
the raw text between the quotes, so a plain string is sent with this one: exactly the texts of
valid JSON strings, hence every string value, in its standard encoding."""
_STRING_SHAPERS = ("pattern", "format", "enum", "const", "minLength", "maxLength")

_IPV4_PART = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"({_IPV4_PART}\.){{3}}{_IPV4_PART}"
_H = "[0-9a-fA-F]{1,4}"
_IPV6 = (
    f"(({_H}:){{7}}{_H}|({_H}:){{1,7}}:|({_H}:){{1,6}}:{_H}|({_H}:){{1,5}}(:{_H}){{1,2}}"
    f"|({_H}:){{1,4}}(:{_H}){{1,3}}|({_H}:){{1,3}}(:{_H}){{1,4}}|({_H}:){{1,2}}(:{_H}){{1,5}}"
    f"|{_H}:(:{_H}){{1,6}}|:((:{_H}){{1,7}}|:))"
)
_LABEL = "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
# The last label starts with a letter: a URL host that ends in a number is read as an IPv4.
_HOST = rf"({_LABEL}\.)*[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?"
_URL_CHAR = r"([A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
_URL_TAIL = rf"(:[1-9][0-9]{{0,3}})?(/{_URL_CHAR}*)*(\?({_URL_CHAR}|[/?])*)?(#({_URL_CHAR}|[/?])*)?"
FORMAT_PATTERNS: dict[str, str] = {
    "email": rf"^[A-Za-z0-9_%+-]+(\.[A-Za-z0-9_%+-]+)*@({_LABEL}\.)+[A-Za-z]{{2,}}$",
    "uri": rf"^[a-zA-Z][a-zA-Z0-9+.-]*://{_HOST}{_URL_TAIL}$",
    "url": rf"^https?://{_HOST}{_URL_TAIL}$",
    "hostname": rf"^{_HOST}$",
    "ipv4": rf"^{_IPV4}$",
    "ipv6": rf"^{_IPV6}$",
    "ipvanyaddress": rf"^({_IPV4}|{_IPV6})$",
}
"""Formats no converter has a rule for, as anchored patterns of values every validator takes.

Each is narrower than its format (an email address without quoted parts or IP literals, a URL
whose host is a name): the grammar holds the model to common, valid values, and pydantic
still validates the answer. `date`, `time`, `date-time` and `uuid` keep the converter's rules."""
# pydantic's `HttpUrl` is `format: uri` with this `maxLength`: only http and https pass.
_HTTP_URL_MAX_LENGTH = 2083


def compile_into(
    schema: dict[str, JsonValue], rewrites: list[SchemaRewrite], findings: list[SchemaFinding]
) -> None:
    """Rewrite `schema` in place into a form grammar converters enforce, recording each change.

    Every rewrite accepts every instance of the caller's schema (the answer is validated
    against the caller's schema with pydantic in any case):

    - a root `$ref` is hoisted: the root becomes the referenced definition, `$defs` kept, so a
      recursive model recurses through `$defs` (llama-cpp-python's converter cannot resolve
      references under a root `$ref` and silently falls back to generic JSON);
    - a `format` no converter has a rule for becomes its pattern (`FORMAT_PATTERNS`), and
      string `enum`/`const` values JSON escapes become one pattern of their JSON texts;
    - every `pattern` is rewritten by `grammar_pattern` to match the string's JSON text, so no
      pattern can end the string early; one no grammar can read is dropped;
    - a string with only length bounds counts JSON string characters in a pattern;
    - a length or item bound above `MAX_GRAMMAR_REPEAT` is dropped (a grammar too deep to parse);
    - a plain string left (no pattern, format, enum, const or length) gets `JSON_STRING_TEXT`
      as its pattern, which the grammar matches against the string's JSON text (all of them).

    An unanchored pattern is the exception to the first sentence: the grammar holds the model
    to its match (see `grammar_pattern`), and values with text around it only validate.
    """
    _hoist_root_ref(schema, rewrites)
    for pointer, node in _string_nodes(schema, ""):
        _compile_format(node, pointer, rewrites)
        _escaped_choices(node, pointer, rewrites)
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            _compile_pattern(node, pattern, pointer, rewrites, findings)
        elif node.get("type") == "string" and not any(k in node for k in _STRING_SHAPERS[:4]):
            _bounded_text(node, pointer, rewrites)
        for keyword in _REPEAT_BOUNDS:
            bound = node.get(keyword)
            if isinstance(bound, int) and bound > MAX_GRAMMAR_REPEAT:
                del node[keyword]
                reason = (
                    f"{keyword}={bound} is over {MAX_GRAMMAR_REPEAT}: its grammar nests too deep "
                    "for the server to parse; dropped from the sent schema"
                )
                where = f"{pointer}/{keyword}"
                rewrites.append(
                    SchemaRewrite(
                        pointer=where, keyword=keyword, before=bound, after=None, reason=reason
                    )
                )
                findings.append(
                    SchemaFinding(
                        pointer=where, keyword=keyword, reason=reason + ", checked by pydantic"
                    )
                )
        if node.get("type") == "string" and not any(k in node for k in _STRING_SHAPERS):
            node["pattern"] = JSON_STRING_TEXT
            rewrites.append(
                SchemaRewrite(
                    pointer=f"{pointer}/pattern",
                    keyword="pattern",
                    before=None,
                    after=JSON_STRING_TEXT,
                    reason="a plain string gets the text of a JSON string as its grammar "
                    "pattern: the converter's own string rule lets raw control characters "
                    "through, and a raw newline ends in a runaway, non-JSON reply",
                )
            )


_JSON_CHAR = JSON_STRING_TEXT[1:-2]


def _bounded_text(node: dict[str, JsonValue], pointer: str, rewrites: list[SchemaRewrite]) -> None:
    """A string with only length bounds: the bounds become a count of JSON string characters.

    The converter writes length bounds with its own string character, which lets raw control
    characters through (see `JSON_STRING_TEXT`); the pattern counts the same characters, each
    bare or escaped. A bound too deep for the grammar is left to the rule that drops it.
    """
    low, high = node.get("minLength", 0), node.get("maxLength")
    if not isinstance(low, int) or not (high is None or isinstance(high, int)):
        return
    if low > MAX_GRAMMAR_REPEAT:
        return
    if high is not None and high > MAX_GRAMMAR_REPEAT:
        high = None  # dropped and reported with the other bounds too deep for the grammar
    pattern = f"^{_JSON_CHAR}{{{low},{'' if high is None else high}}}$"
    for keyword in ("minLength", "maxLength"):
        value = node.get(keyword)
        if isinstance(value, int) and value <= MAX_GRAMMAR_REPEAT:
            before = node.pop(keyword)
            rewrites.append(
                SchemaRewrite(
                    pointer=f"{pointer}/{keyword}",
                    keyword=keyword,
                    before=before,
                    after=None,
                    reason=f"counted in the string's pattern {pattern!r} instead: the "
                    "converter's own length rule lets raw control characters through",
                )
            )
    node["pattern"] = pattern


def _escaped_choices(
    node: dict[str, JsonValue], pointer: str, rewrites: list[SchemaRewrite]
) -> None:
    """String `enum`/`const` values JSON escapes, sent as one pattern of their JSON texts.

    The converter writes such a value as a grammar literal it does not escape right (a `"`
    ends the literal early) and the server cannot parse the grammar; the pattern spells each
    character as JSON writes it (`grammar_pattern`), and matches exactly the same values.
    """
    keyword = "const" if "const" in node else "enum" if "enum" in node else None
    if keyword is None or "pattern" in node:
        return
    value = node[keyword]
    choices = [value] if keyword == "const" else value
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        return
    texts = [c for c in choices if isinstance(c, str)]
    if not any(json.dumps(c, ensure_ascii=False)[1:-1] != c for c in texts):
        return
    pattern = "^(" + "|".join(re.escape(c) for c in texts) + ")$"
    del node[keyword]
    node["type"] = "string"
    node["pattern"] = pattern
    rewrites.append(
        SchemaRewrite(
            pointer=f"{pointer}/{keyword}",
            keyword=keyword,
            before=value,
            after=None,
            reason=f"a value JSON escapes: sent as the pattern {pattern!r} (the converter "
            "writes it as a grammar literal the server cannot parse)",
        )
    )


def _compile_format(
    node: dict[str, JsonValue], pointer: str, rewrites: list[SchemaRewrite]
) -> None:
    """Replace a `format` no converter enforces by its pattern (`FORMAT_PATTERNS`), recorded."""
    fmt = node.get("format")
    if not isinstance(fmt, str) or any(k in node for k in ("pattern", "enum", "const")):
        return
    if fmt == "uri" and node.get("maxLength") == _HTTP_URL_MAX_LENGTH:
        fmt = "url"
    pattern = FORMAT_PATTERNS.get(fmt)
    if pattern is None or node.get("type") not in ("string", None):
        return
    before = node.pop("format")
    node["pattern"] = pattern
    rewrites.append(
        SchemaRewrite(
            pointer=f"{pointer}/format",
            keyword="format",
            before=before,
            after=None,
            reason=f"no converter has a rule for format {before!r}: it is sent as a pattern of "
            "common valid values instead, which the grammar enforces (pydantic still validates)",
        )
    )
    if node.get("minLength") in (0, 1):  # every format pattern needs a character or more
        rewrites.append(
            SchemaRewrite(
                pointer=f"{pointer}/minLength",
                keyword="minLength",
                before=node.pop("minLength"),
                after=None,
                reason=f"implied by the pattern of format {before!r}, which needs a character",
            )
        )


def _hoist_root_ref(schema: dict[str, JsonValue], rewrites: list[SchemaRewrite]) -> None:
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/") or not isinstance(defs, dict):
        return
    target = defs.get(ref.removeprefix("#/$defs/").replace("~1", "/").replace("~0", "~"))
    if not isinstance(target, dict) or "$ref" in target:
        return
    del schema["$ref"]
    for key, value in target.items():
        schema.setdefault(key, copy.deepcopy(value))
    rewrites.append(
        SchemaRewrite(
            pointer="/$ref",
            keyword="$ref",
            before=ref,
            after=None,
            reason="root $ref hoisted: the root is now the referenced definition, $defs kept, "
            "so references (recursive ones included) resolve in the converter",
        )
    )


def _compile_pattern(
    node: dict[str, JsonValue],
    pattern: str,
    pointer: str,
    rewrites: list[SchemaRewrite],
    findings: list[SchemaFinding],
) -> None:
    where = f"{pointer}/pattern"
    try:
        rewritten = grammar_pattern(pattern)
    except InputRefused as exc:
        del node["pattern"]
        rewrites.append(
            SchemaRewrite(
                pointer=where,
                keyword="pattern",
                before=pattern,
                after=None,
                reason=f"dropped: it uses {exc}, which no grammar can express",
            )
        )
        findings.append(
            SchemaFinding(
                pointer=where,
                keyword="pattern",
                reason=f"uses {exc}, which no grammar can express; dropped from the sent "
                "schema, checked only by pydantic",
            )
        )
        return
    if rewritten == pattern:
        return
    node["pattern"] = rewritten
    rewrites.append(
        SchemaRewrite(
            pointer=where,
            keyword="pattern",
            before=pattern,
            after=rewritten,
            reason="rewritten into the regex subset grammars read, read against the string's "
            "JSON text (plain groups, every character bare or escaped as JSON writes it, so "
            "the string cannot end early)"
            + (
                "; unanchored, so the grammar holds the model to the match itself: text around "
                "it still validates, but the model cannot write it"
                if held_to_match(pattern)
                else ""
            ),
        )
    )


def _exclusive(branches: list[JsonValue]) -> bool:
    """True when some required property has a distinct `const` (or one-value enum) per branch."""
    tags: list[dict[str, JsonValue]] = []
    for branch in branches:
        if not isinstance(branch, dict) or not isinstance(branch.get("properties"), dict):
            return False
        required = branch.get("required")
        props = branch["properties"]
        assert isinstance(props, dict)
        consts: dict[str, JsonValue] = {}
        for name, sub in props.items():
            if not isinstance(sub, dict) or not isinstance(required, list) or name not in required:
                continue
            if "const" in sub:
                consts[name] = sub["const"]
            elif isinstance(enum := sub.get("enum"), list) and len(enum) == 1:
                consts[name] = enum[0]
        tags.append(consts)
    shared = set.intersection(*(set(t) for t in tags)) if tags else set()
    return any(len({repr(t[name]) for t in tags}) == len(tags) for name in shared)


class _Walker:
    def __init__(self, decoder: Decoder, root: dict[str, JsonValue]) -> None:
        self.decoder = decoder
        self.root = root
        self.findings: list[SchemaFinding] = []

    def _resolved_exclusive(self, branches: list[JsonValue]) -> bool:
        """`_exclusive` on the branches, local `$ref`s resolved (pydantic's tagged unions)."""
        defs = self.root.get("$defs")
        resolved: list[JsonValue] = []
        for branch in branches:
            ref = branch.get("$ref") if isinstance(branch, dict) else None
            if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
                resolved.append(defs.get(ref.removeprefix("#/$defs/")))
            else:
                resolved.append(branch)
        return _exclusive(resolved)

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
        one_of = node.get("oneOf")
        if isinstance(one_of, list) and not self._resolved_exclusive(one_of):
            self.note(pointer, "oneOf", "treated as anyOf: exactly-one is not enforced")
        if "prefixItems" in node and node.get("items") not in (None, False):
            self.note(pointer, "prefixItems", "beside items, the converter ignores tuple positions")
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


def _schema_of(source: SchemaSource) -> dict[str, JsonValue]:
    """The JSON Schema of a model class, a `TypeAdapter` or a schema dict (copied)."""
    if isinstance(source, type) and issubclass(source, BaseModel):
        return source.model_json_schema()
    if isinstance(source, TypeAdapter):
        schema: dict[str, JsonValue] = source.json_schema()
        return schema
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source))
    raise UserError(
        f"preflight() takes a pydantic model class, a TypeAdapter or a JSON Schema dict, "
        f"got {type(source).__name__}: pass Model, TypeAdapter(T) or Model.model_json_schema()"
    )


def preflight(
    schema: SchemaSource,
    decoder: Decoder,
    *,
    strict: bool = False,
    grammar_check: GrammarCheck | None = None,
) -> PreflightReport:
    """Compile `schema` for `decoder`, and report what the decoder will still not enforce.

    The schema is first rewritten into a form the decoder enforces where an equivalent exists
    (see `compile_schema`); then every keyword the decoder drops is named. With a
    `grammar_check` (the decoder's own schema-to-grammar converter, run in-process), the
    converter decides: a schema it rejects is reported unenforced as a whole, and a pattern
    whose grammar the server could not compile is dropped from the sent schema (the server
    would crash on it), so such a grammar is never sent.

    Args:
        schema: A pydantic model class, a `TypeAdapter`, or a JSON Schema dict (not modified).
        decoder: The grammar converter the schema will be sent to.
        strict: Raise instead of reporting when any part would go unenforced.
        grammar_check: The converter-backed check, if one is available in this process.

    Returns:
        The report, whose `sent_schema` is the schema to put on the wire.

    Raises:
        SchemaError: In strict mode, when the report has findings (reason `unenforced`);
            or the converter's grammar does not compile even without the patterns (reason
            `uncompilable`): nothing may be sent.
        UserError: `schema` is none of the accepted kinds.
    """
    sent = _schema_of(schema)
    rewrites: list[SchemaRewrite] = []
    findings: list[SchemaFinding] = []
    compile_into(sent, rewrites, findings)
    walker = _Walker(decoder, sent)
    walker.walk(sent, "")
    findings.extend(walker.findings)
    verdict = (
        None
        if grammar_check is None
        else _check_grammar(sent, decoder, grammar_check, rewrites, findings)
    )
    report = PreflightReport(
        decoder=decoder,
        sent_schema=sent,
        findings=tuple(findings),
        rewrites=tuple(rewrites),
        grammar=verdict,
    )
    if strict and report.findings:
        raise SchemaError.unenforced(report)
    return report


def _check_grammar(
    sent: dict[str, JsonValue],
    decoder: Decoder,
    grammar_check: GrammarCheck,
    rewrites: list[SchemaRewrite],
    findings: list[SchemaFinding],
) -> GrammarVerdict:
    """The converter's verdict on `sent`, after dropping the patterns that took it down.

    Raises:
        SchemaError: The grammar does not compile even without them (reason `uncompilable`).
    """
    # A pattern the converter cannot read alone takes the whole schema down with it (a
    # fallback to generic JSON, or a grammar that crashes the server), and one whose grammar
    # lets the string close early lets the model run on inside it: drop either.
    _drop_unsafe_patterns(sent, grammar_check, rewrites, findings)
    verdict = grammar_check(sent)
    if verdict.status == "uncompilable":
        raise SchemaError(
            f"the {decoder} server could not compile the grammar of this schema "
            f"({verdict.reason}), and sending it would crash the server; simplify the "
            "schema (fewer or smaller bounds, simpler patterns)",
            reason="uncompilable",
        )
    if verdict.status == "fallback":
        findings.insert(
            0,
            SchemaFinding(
                pointer="",
                keyword="(schema)",
                reason=f"the {decoder} converter rejects the schema ({verdict.reason}); "
                "the server falls back to generic JSON and enforces none of it",
            ),
        )
    return verdict


def _drop_unsafe_patterns(
    sent: dict[str, JsonValue],
    grammar_check: GrammarCheck,
    rewrites: list[SchemaRewrite],
    findings: list[SchemaFinding],
) -> None:
    """Drop each pattern whose grammar alone does not compile or lets its string end early."""
    for pointer, node in _string_nodes(sent, ""):
        pattern = node.get("pattern")
        if not isinstance(pattern, str):
            continue
        alone = grammar_check({"type": "string", "pattern": pattern})
        if alone.status == "enforced" and not alone.string_exit:
            if alone.reason:  # enforced, but the string check could not read the grammar
                findings.append(
                    SchemaFinding(
                        pointer=f"{pointer}/pattern",
                        keyword="pattern",
                        reason=f"{alone.reason}: kept, but not shown to keep its string closed",
                    )
                )
            continue
        if alone.status == "enforced":
            why = f"its grammar lets the model close the string early ({alone.string_exit!r})"
        else:
            why = f"the converter cannot make a working grammar of it ({alone.status}: {alone.reason})"
        del node["pattern"]
        rewrites.append(
            SchemaRewrite(
                pointer=f"{pointer}/pattern",
                keyword="pattern",
                before=pattern,
                after=None,
                reason=f"dropped: {why}",
            )
        )
        findings.append(
            SchemaFinding(
                pointer=f"{pointer}/pattern",
                keyword="pattern",
                reason=f"{why}; dropped from the sent schema, checked only by pydantic",
            )
        )


def _string_nodes(node: JsonValue, pointer: str) -> Iterator[tuple[str, dict[str, JsonValue]]]:
    """Every schema object under `node` with its pointer, depth first."""
    if not isinstance(node, dict):
        return
    yield pointer, node
    for keyword in _SCHEMA_VALUED:
        if keyword in node:
            yield from _string_nodes(node[keyword], f"{pointer}/{keyword}")
    for keyword in _SCHEMA_LISTS:
        children = node.get(keyword)
        if isinstance(children, list):
            for i, child in enumerate(children):
                yield from _string_nodes(child, f"{pointer}/{keyword}/{i}")
    for keyword in _SCHEMA_MAPS:
        children = node.get(keyword)
        if isinstance(children, dict):
            for name, child in children.items():
                yield from _string_nodes(child, f"{pointer}/{keyword}/{_escape(name)}")
