"""Checks for MCP tools: which JSON Schemas may be used, a validator for each, and a
prompt's arguments (``get_prompt``, docs/adr/0184).

A schema holding a keyword whose check is not linear in the value's size, a non-local
reference, or an unknown ``$schema`` is refused when listed (docs/adr/0101); the rest are
checked with ``jsonschema`` and an empty registry, so no reference reaches the network.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from pydantic import JsonValue

from twinflow._base._json import decimal
from twinflow.kernel import McpError

_DRAFTS = (
    "http://json-schema.org/draft-03/schema",
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
)
"""The ``$schema`` a tool's schema may name (a trailing ``#`` allowed); none means 2020-12."""

_REFUSED_KEYWORDS = {
    "pattern": "its regular expression could take hours on a crafted string (ReDoS)",
    "patternProperties": "its regular expressions could take hours on a crafted name (ReDoS)",
    "uniqueItems": "checking it is quadratic in an array's length",
}
"""Keywords whose check is not linear in the value's size: a schema holding one is refused
when listed (docs/adr/0101), so no server's schema can make a check run for hours."""

_DYNAMIC = ("$dynamicRef", "$recursiveRef")

_MAX_EXPANDED = 100_000
"""Most JSON values (subschemas and keywords' values) a schema may expand to, its ``$ref``s
followed (`_expanded`): references shared through ``anyOf`` make a check's work grow
exponentially with the schema's size."""
_REF_DEPTH = 64
"""How many ``$ref``s deep `_expanded` follows: a value nests at most 64 levels (`McpLimits`,
a trace reader's limit), so a recursive schema is checked no deeper than that."""


_NAMED = ("properties", "$defs", "definitions", "dependentSchemas", "dependencies")
"""Keywords whose value maps names (any names, ``pattern`` too) to subschemas."""


def _unsafe(schema: JsonValue, path: str) -> str | None:
    """Why ``schema`` may not be checked against (a refused keyword, a non-local reference,
    an unknown ``$schema``), with where; None if it may."""
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            found = _unsafe(item, f"{path}/{i}")
            if found is not None:
                return found
        return None
    if not isinstance(schema, dict):
        return None
    for key, value in schema.items():
        here = f"{path}/{key}"
        if key in _REFUSED_KEYWORDS and value is not False:
            return f"{here}: {key} is refused ({_REFUSED_KEYWORDS[key]})"
        if key == "$ref" and not (
            isinstance(value, str) and (value == "#" or value.startswith("#/"))
        ):
            return (
                f"{here}: {str(value)[:100]!r} is not a local JSON Pointer reference ('#/...'); "
                "none is fetched"
            )
        if key in _DYNAMIC:
            return f"{here}: {key} is refused (only '#/...' references are followed)"
        if key == "$id" and path:
            return f"{here}: an $id below the root is refused (it would move what '#/...' means)"
        if key == "$schema" and (
            not isinstance(value, str) or value.removesuffix("#") not in _DRAFTS
        ):
            return f"{here}: {str(value)[:100]!r} names no JSON Schema draft twinflow knows"
        if key in _NAMED and isinstance(value, dict):
            inner = [(f"{here}/{name}", sub) for name, sub in value.items()]
        else:
            inner = [(here, value)]
        for where, sub in inner:
            found = _unsafe(sub, where)
            if found is not None:
                return found
    return None


def _pointer(root: JsonValue, ref: str) -> JsonValue:
    """What the local reference ``ref`` (``#`` or ``#/...``) points at in ``root``, or None."""
    node = root
    for raw in ref[2:].split("/") if ref != "#" else []:
        token = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and (index := decimal(token)) is not None and index < len(node):
            node = node[index]
        else:
            return None
    return node


def _expanded(root: JsonValue) -> int:
    """How many subschemas ``root`` expands to with its references followed `_REF_DEPTH`
    deep, counted up to just past `_MAX_EXPANDED` (each shared subschema counted once per
    depth, so the count takes linear time however large the expansion)."""
    memo: dict[tuple[int, int], int] = {}

    def size(node: JsonValue, depth: int) -> int:
        if isinstance(node, list):
            return min(sum(size(item, depth) for item in node), _MAX_EXPANDED + 1)
        if not isinstance(node, dict):
            return 1
        key = (id(node), depth)
        if key not in memo:
            total = 1
            for name, value in node.items():
                if name == "$ref" and isinstance(value, str) and depth > 0:
                    total += size(_pointer(root, value), depth - 1)
                else:
                    total += size(value, depth)
                if total > _MAX_EXPANDED:
                    break
            memo[key] = min(total, _MAX_EXPANDED + 1)
        return memo[key]

    return size(root, _REF_DEPTH)


def schema_validator(schema: dict[str, JsonValue], where: str, server: str) -> Any:
    """A validator for ``schema``, built once when the tool is listed (or replayed).

    Raises:
        McpError: The schema is not valid, or may not be checked against (`_unsafe`).
    """
    # jsonschema ships no type information; the validator is used through two methods only.
    from jsonschema import exceptions, validators  # type: ignore[import-untyped]  # no py.typed
    from referencing import Registry

    unsafe = _unsafe(schema, "")
    if unsafe is None and _expanded(schema) > _MAX_EXPANDED:
        unsafe = (
            f"the root: its $refs, followed, expand to more than {_MAX_EXPANDED} schema values "
            "(a check could take exponential time)"
        )
    if unsafe is not None:
        raise McpError(
            f"MCP server {server!r}: {where} cannot be used: at {unsafe}",
            reason="protocol",
            server=server,
        )
    declared = schema.get("$schema")
    drafts = (
        validators.Draft3Validator,
        validators.Draft4Validator,
        validators.Draft6Validator,
        validators.Draft7Validator,
        validators.Draft201909Validator,
        validators.Draft202012Validator,
    )
    cls = drafts[-1] if declared is None else drafts[_DRAFTS.index(str(declared).removesuffix("#"))]
    try:
        cls.check_schema(schema)
    except (exceptions.SchemaError, RecursionError) as exc:
        message = getattr(exc, "message", str(exc))
        raise McpError(
            f"MCP server {server!r}: {where} is not a valid JSON Schema: {str(message)[:300]}",
            reason="protocol",
            server=server,
        ) from None
    # An empty registry that retrieves nothing: no reference can reach the network.
    return cls(schema, registry=Registry())


def first_error(validator: Any, value: JsonValue) -> tuple[tuple[str | int, ...], str] | None:
    """Where and why ``value`` fails the schema, or None if it passes."""
    from jsonschema import exceptions
    from referencing.exceptions import Unresolvable

    try:
        error = exceptions.best_match(validator.iter_errors(value))
    except RecursionError:
        return (), "nests too deeply to check"
    except Unresolvable as exc:
        # A local reference to nothing (``#/$defs/missing``): the schema's fault, not the value's.
        return (), f"the schema has a reference that resolves to nothing ({exc})"[:500]
    if error is None:
        return None
    return tuple(error.absolute_path), str(error.message)[:500]


def prompt_arguments(prompt: dict[str, JsonValue]) -> list[dict[str, JsonValue]]:
    """A listed prompt's declared arguments (objects only)."""
    found = prompt.get("arguments")
    return [a for a in found if isinstance(a, dict)] if isinstance(found, list) else []


def prompt_problem(declared: list[tuple[str, bool]] | None, given: dict[str, object]) -> str | None:
    """Why ``given`` are not the arguments of a prompt that declares ``declared`` (each a
    name and whether it is required; None if the server lists no such prompt), or None."""
    if declared is None:
        return "the server lists no such prompt"
    names = {n for n, _ in declared}
    missing = [n for n, required in declared if required and n not in given]
    unknown = sorted(set(given) - names)
    wrong = sorted(k for k, v in given.items() if not isinstance(v, str))
    if not (missing or unknown or wrong):
        return None
    return "; ".join(
        f"{what}: {', '.join(found)}"
        for what, found in (("missing", missing), ("unknown", unknown), ("not strings", wrong))
        if found
    )
