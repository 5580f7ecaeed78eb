"""A `max_tokens` for a structured request, derived from the schema's largest valid instance.

Without a bound, a small model that opens a string and never closes it (the grammar's string
rule lets anything but a quote through) generates until the client's timeout: a request runs
that long because of the schema's shape, not the question. The budget is the length of the
largest instance the schema allows, counted in characters of compact JSON, with the parts
the schema leaves open given a fixed allowance: an unbounded string `OPEN_STRING` characters,
an unbounded array `OPEN_ITEMS` items, an open object `OPEN_ITEMS` extra members, and a
recursive reference followed `OPEN_DEPTH` levels; then `_TOKENS_PER_CHAR` tokens a character.
An answer longer than that is cut, refused by validation, and re-asked like any invalid reply
(the re-ask samples differently, so it need not run away the same way).
"""

from __future__ import annotations

import json
import math

from pydantic import JsonValue

OPEN_STRING = 40
"""Characters allowed for a string with no `maxLength` (and no enum, const or format)."""
OPEN_ITEMS = 3
"""Items allowed for an array with no `maxItems`, and extra members for an open object."""
OPEN_DEPTH = 1
"""Levels a recursive `$ref` is followed; past them it counts as its smallest form."""
MIN_BUDGET = 64
"""The fewest tokens any structured request gets."""
MAX_BUDGET = 1024
"""The most tokens any structured request gets (the embedded server's context is 2048)."""

_FORMAT_CHARS = {"date": 10, "time": 21, "date-time": 35, "uuid": 36, "duration": 32}
_NUMBER_CHARS = 24
# Tokens per character of the largest instance: the grammar allows a space after every token,
# and a small model's tokenizer spends one token on most JSON punctuation and on each digit,
# but a word of text is one token for several characters.
_TOKENS_PER_CHAR = 0.8


def max_tokens_for(schema: dict[str, JsonValue]) -> int:
    """The `max_tokens` for a request constrained by `schema` (see the module docstring)."""
    chars = largest_instance_chars(schema)
    return max(MIN_BUDGET, min(MAX_BUDGET, math.ceil(chars * _TOKENS_PER_CHAR) + 16))


def largest_instance_chars(schema: dict[str, JsonValue]) -> int:
    """Characters of the schema's largest instance in compact JSON, open parts at their allowance."""
    defs = schema.get("$defs")
    return _size(schema, defs if isinstance(defs, dict) else {}, {}, 0)


def _size(node: JsonValue, defs: dict[str, JsonValue], seen: dict[str, int], depth: int) -> int:
    if not isinstance(node, dict) or depth > 64:
        return _NUMBER_CHARS if node is not False else 0
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.removeprefix("#/$defs/")
        if seen.get(name, 0) >= OPEN_DEPTH or name not in defs:
            return 2  # the recursion ends in its smallest form, e.g. `[]` or `{}`
        inner = {**seen, name: seen.get(name, 0) + 1}
        return _size(defs[name], defs, inner, depth + 1)
    if "const" in node:
        return len(json.dumps(node["const"]))
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        return max(len(json.dumps(v)) for v in enum)
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list) and branches:
            return max(_size(b, defs, seen, depth + 1) for b in branches)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and all_of:
        return sum(_size(b, defs, seen, depth + 1) for b in all_of)
    kind = node.get("type")
    if isinstance(kind, list):
        return max((_size({**node, "type": k}, defs, seen, depth + 1) for k in kind), default=4)
    if kind == "string" or (kind is None and ("pattern" in node or "format" in node)):
        return 2 + _string_chars(node)
    if kind in ("integer", "number"):
        return _NUMBER_CHARS
    if kind == "boolean":
        return 5
    if kind == "null":
        return 4
    if kind == "array" or "items" in node or "prefixItems" in node:
        return _array_chars(node, defs, seen, depth)
    if kind == "object" or "properties" in node:
        return _object_chars(node, defs, seen, depth)
    return OPEN_STRING  # an unconstrained value: the allowance of an open string


def _string_chars(node: dict[str, JsonValue]) -> int:
    bound = node.get("maxLength")
    if isinstance(bound, int):
        return bound
    fmt = node.get("format")
    if isinstance(fmt, str) and fmt in _FORMAT_CHARS:
        return _FORMAT_CHARS[fmt]
    low = node.get("minLength")
    return max(OPEN_STRING, low if isinstance(low, int) else 0)


def _array_chars(
    node: dict[str, JsonValue], defs: dict[str, JsonValue], seen: dict[str, int], depth: int
) -> int:
    prefix = node.get("prefixItems")
    fixed = prefix if isinstance(prefix, list) else []
    total = 2 + sum(_size(item, defs, seen, depth + 1) + 1 for item in fixed)
    items = node.get("items")
    if items is False or (fixed and items is None):
        return total
    bound = node.get("maxItems")
    low = node.get("minItems")
    count = bound if isinstance(bound, int) else max(OPEN_ITEMS, low if isinstance(low, int) else 0)
    count = max(0, count - len(fixed))
    return total + count * (_size(items, defs, seen, depth + 1) + 1)


def _object_chars(
    node: dict[str, JsonValue], defs: dict[str, JsonValue], seen: dict[str, int], depth: int
) -> int:
    props = node.get("properties")
    total = 2
    if isinstance(props, dict):
        for name, sub in props.items():
            total += len(json.dumps(name)) + 2 + _size(sub, defs, seen, depth + 1)
    extra = node.get("additionalProperties")
    if extra is not None and extra is not False and not isinstance(props, dict):
        value = _size(extra if isinstance(extra, dict) else {}, defs, seen, depth + 1)
        total += OPEN_ITEMS * (OPEN_STRING // 2 + 4 + value)
    return total
