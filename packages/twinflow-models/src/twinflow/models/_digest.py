"""Request digests without re-encoding the schema: `digest(body)`, assembled member by member.

RFC 8785 writes an object as `{`, its members sorted by the UTF-16 code units of their keys and
joined by `,`, then `}`, each member being the canonical key, `:` and the canonical value. The
members are independent, so the canonical bytes of a body can be assembled from canonical
members, and the schema (the same object in every request made for one output type) can be
encoded once and its bytes reused. The result is the SHA-256 of exactly the bytes
`twinflow.vocab.canonical_bytes(body)` returns; the tests hold the two equal.
"""

from __future__ import annotations

import hashlib

from pydantic import JsonValue

from twinflow.vocab import value_bytes as canonical_bytes

_KEYS: dict[str, tuple[bytes, bytes]] = {}


def _key(key: str) -> tuple[bytes, bytes]:
    """The UTF-16 sort key and the canonical `"key":` prefix of a member, cached per key."""
    found = _KEYS.get(key)
    if found is None:
        if len(_KEYS) >= 256:  # bodies use a handful of keys; the cache never grows unbounded
            _KEYS.clear()
        found = _KEYS[key] = (key.encode("utf-16-be"), canonical_bytes(key) + b":")
    return found


def encoded(node: JsonValue, path: tuple[str, ...], value: object, value_bytes: bytes) -> bytes:
    """`canonical_bytes(node)`, taking `value_bytes` for `value` where it sits at `path`.

    Args:
        node: A JSON value.
        path: The keys, from `node` down, of the member whose encoding is known.
        value: That member's value: `value_bytes` is used only if the member is this very object.
        value_bytes: `canonical_bytes(value)`.

    Raises:
        CanonicalError: As `canonical_bytes`.
    """
    if not path:
        return value_bytes if node is value else canonical_bytes(node)
    if not isinstance(node, dict) or path[0] not in node:
        return canonical_bytes(node)
    members = []
    for key, member in node.items():
        if type(key) is not str:  # not JSON: let canonical_bytes refuse it
            return canonical_bytes(node)
        members.append((*_key(key), key, member))
    members.sort(key=lambda m: m[0])
    parts = [
        prefix
        + (
            encoded(member, path[1:], value, value_bytes)
            if key == path[0]
            else canonical_bytes(member)
        )
        for _, prefix, key, member in members
    ]
    return b"{" + b",".join(parts) + b"}"


def body_digest(body: JsonValue, path: tuple[str, ...], value: object, value_bytes: bytes) -> str:
    """The lowercase hex SHA-256 of `canonical_bytes(body)`, `value`'s encoding supplied.

    Equal to `twinflow.vocab.digest(body)`; see `encoded` for the arguments.

    Raises:
        CanonicalError: As `canonical_bytes`.
    """
    return hashlib.sha256(encoded(body, path, value, value_bytes)).hexdigest()
