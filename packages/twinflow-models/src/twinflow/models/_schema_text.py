"""The output schema told to the model: a compact, readable rendering of a JSON Schema.

The decoder's grammar keeps a reply to the schema's shape, but it cannot say what a field means:
a small model constrained to `{"drink": "tea" | "coffee" | "juice"}` still picks a value before
it has seen the field's name, options and description together. `schema_text` writes the schema
as the model reads best, a JSON-like outline with the field names, types, enums, formats, bounds
and descriptions as comments, and the chat model puts it in the system message of every
structured request (ADR 0202). It is a pure function of the schema: the same schema gives the
same bytes, so the request digests stay reproducible.

    {
      "drink": "tea" or "coffee" or "juice",
      "size": "small" or "medium" or "large",  // the cup
      "born": string  // a date, YYYY-MM-DD
    }
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import JsonValue

MAX_CHARS = 6000
"""A rendering longer than this is not sent (the grammar still constrains the reply): a huge
schema would crowd the question out of a small model's context."""

_MAX_DEPTH = 12

_FORMATS = {
    "date": "a date, YYYY-MM-DD",
    "date-time": "a date and time, YYYY-MM-DDThh:mm:ssZ",
    "time": "a time, hh:mm:ss",
    "email": "an email address",
    "idn-email": "an email address",
    "uri": "a URL",
    "url": "a URL",
    "iri": "a URL",
    "uuid": "a UUID",
    "ipv4": "an IPv4 address",
    "ipv6": "an IPv6 address",
    "duration": "an ISO 8601 duration",
}

INSTRUCTIONS = (
    "Reply with one JSON object of this shape, its values taken from the conversation "
    "(an optional field with no value in the conversation is left out):"
)
"""What precedes the rendering in the system message."""


def outline(schema: Mapping[str, JsonValue]) -> str | None:
    """`schema` as the model reads it, or None when it would be too long or too deep."""
    renderer = _Renderer(schema)
    try:
        body = renderer.render(schema, 0, ())
        root = schema.get("$ref")
        name = renderer.ref_name(root) if isinstance(root, str) else None
        if name is not None and name in renderer.recursive:
            body = name  # a recursive root is told once, by its name
        named = [
            f"where {name} is {renderer.render(renderer.defs[name], 0, (name,))}"
            for name in renderer.recursive
        ]
    except OverflowError:
        return None
    about = schema.get("description")
    if isinstance(about, str) and about.strip():
        body = f"// {' '.join(about.split())}\n{body}"
    text = "\n".join([body, *named])
    return text if len(text) <= MAX_CHARS else None


def schema_text(schema: Mapping[str, JsonValue]) -> str | None:
    """The system text that tells the model `schema`, or None when it is not told."""
    told = outline(schema)
    return None if told is None else f"{INSTRUCTIONS}\n{told}"


class _Renderer:
    def __init__(self, root: Mapping[str, JsonValue]) -> None:
        defs = root.get("$defs", root.get("definitions"))
        self.defs: dict[str, Mapping[str, JsonValue]] = (
            {k: v for k, v in defs.items() if isinstance(v, dict)} if isinstance(defs, dict) else {}
        )
        self.recursive: list[str] = []
        # Definitions are inlined where used, so a schema of a few lines can expand without
        # end (ten fields of a type of ten fields of...): the nodes rendered are counted, and
        # each writes at least a character, so past MAX_CHARS of them the outline is too long.
        self.nodes = 0

    def ref_name(self, ref: str) -> str | None:
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix) and ref[len(prefix) :] in self.defs:
                return ref[len(prefix) :]
        return None

    def render(
        self, node: JsonValue | Mapping[str, JsonValue], depth: int, expanding: tuple[str, ...]
    ) -> str:
        """`node` as the model reads it, indented for `depth` (its comment not included)."""
        self.nodes += 1
        if depth > _MAX_DEPTH or self.nodes > MAX_CHARS:
            # Deeper, or further expanded, than a model is usefully told (a builtin: the
            # workspace caps its own exception classes).
            raise OverflowError
        if not isinstance(node, Mapping):
            return "any value"
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = self.ref_name(ref)
            if name is None:
                return "any value"
            if name in expanding:
                if name not in self.recursive:
                    self.recursive.append(name)
                return name
            return self.render(self.defs[name], depth, (*expanding, name))
        if "const" in node:
            return _json(node["const"])
        enum = node.get("enum")
        if isinstance(enum, list) and enum:
            return " or ".join(_json(value) for value in enum)
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                return " or ".join(self.render(b, depth, expanding) for b in branches)
        everything = node.get("allOf")
        if isinstance(everything, list) and len(everything) == 1:
            return self.render(everything[0], depth, expanding)
        kind = node.get("type")
        if isinstance(kind, list):
            return " or ".join(self.render({**node, "type": k}, depth, expanding) for k in kind)
        if kind == "object" or "properties" in node:
            return self._object(node, depth, expanding)
        if kind == "array":
            return self._array(node, depth, expanding)
        if kind in ("string", "integer", "number", "boolean", "null"):
            return str(kind)
        return "any value"

    def _object(self, node: Mapping[str, JsonValue], depth: int, expanding: tuple[str, ...]) -> str:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if not isinstance(properties, dict) or not properties:
            if isinstance(extra, dict):
                value = self.render(extra, depth + 1, expanding)
                return f"{{string: {value}, ...}}"
            return "{...}" if extra is not False else "{}"
        required = node.get("required")
        needed = set(required) if isinstance(required, list) else set()
        pad = "  " * (depth + 1)
        lines = []
        items = list(properties.items())
        for index, (name, sub) in enumerate(items):
            value = self.render(sub, depth + 1, expanding)
            comma = "," if index < len(items) - 1 else ""
            notes = _notes(sub, self)
            if name not in needed:
                notes.insert(0, "optional")
            comment = f"  // {'; '.join(notes)}" if notes else ""
            lines.append(f"{pad}{json.dumps(name)}: {value}{comma}{comment}")
        return "{\n" + "\n".join(lines) + "\n" + "  " * depth + "}"

    def _array(self, node: Mapping[str, JsonValue], depth: int, expanding: tuple[str, ...]) -> str:
        prefix = node.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            return "[" + ", ".join(self.render(p, depth, expanding) for p in prefix) + "]"
        items = node.get("items")
        if isinstance(items, dict):
            return f"[{self.render(items, depth, expanding)}, ...]"
        return "[...]"


def _notes(node: JsonValue, renderer: _Renderer) -> list[str]:
    """What a field's comment says: its description, format, pattern and bounds."""
    if not isinstance(node, dict):
        return []
    ref = node.get("$ref")
    target: Mapping[str, JsonValue] = node
    if isinstance(ref, str):
        name = renderer.ref_name(ref)
        if name is not None:
            target = {**renderer.defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
    branches = target.get("anyOf")
    if isinstance(branches, list):
        # `X | None`: the bounds and format of X are the field's.
        for branch in branches:
            if isinstance(branch, dict) and branch.get("type") != "null":
                target = {**branch, **{k: v for k, v in target.items() if k != "anyOf"}}
                break
    notes: list[str] = []
    description = target.get("description")
    if isinstance(description, str) and description.strip():
        notes.append(" ".join(description.split()))
    fmt = target.get("format")
    if isinstance(fmt, str):
        notes.append(_FORMATS.get(fmt, fmt))
    pattern = target.get("pattern")
    if isinstance(pattern, str):
        notes.append(f"matching {pattern}")
    notes.extend(_bound(target, "minLength", "maxLength", "characters"))
    notes.extend(_bound(target, "minItems", "maxItems", "items"))
    notes.extend(_bound(target, "minimum", "maximum", ""))
    for key, word in (("exclusiveMinimum", "over"), ("exclusiveMaximum", "under")):
        value = target.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            notes.append(f"{word} {_number(value)}")
    return notes


def _bound(node: Mapping[str, JsonValue], low_key: str, high_key: str, unit: str) -> list[str]:
    low, high = node.get(low_key), node.get(high_key)
    low = low if isinstance(low, int | float) and not isinstance(low, bool) else None
    high = high if isinstance(high, int | float) and not isinstance(high, bool) else None
    if unit == "characters" and high is not None and high > 200:
        high = None  # a URL's 2,083: no help to the model
    if unit == "characters" and low == 1 and high is None:
        low = None  # "not empty": what the model writes anyway
    tail = f" {unit}" if unit else ""
    if low is not None and high is not None:
        if low == high:
            return [f"exactly {_number(low)}{tail}"]
        return [f"{_number(low)} to {_number(high)}{tail}"]
    if low is not None:
        return [f"at least {_number(low)}{tail}"]
    if high is not None:
        return [f"at most {_number(high)}{tail}"]
    return []


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _json(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False)
