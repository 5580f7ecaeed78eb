"""The request digest assembled from reused schema bytes equals vocab's digest of the body."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinflow.models._digest import body_digest
from twinflow.trace import CanonicalError
from twinflow.vocab import digest
from twinflow.vocab import value_bytes as canonical_bytes

KEYS = st.sampled_from(
    ["a", "format", "messages", "z", "é", "\U0001f600", "\uff61", "response_format"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(
    schema=st.dictionaries(st.text(max_size=4), JSON, max_size=4),
    rest=st.dictionaries(KEYS, JSON, max_size=5),
    path=st.sampled_from(
        [("format",), ("response_format", "schema"), ("response_format", "json_schema", "schema")]
    ),
)
def test_the_assembled_digest_equals_the_digest_of_the_body(
    schema: dict[str, Any], rest: dict[str, Any], path: tuple[str, ...]
) -> None:
    """Wherever the schema sits, among whatever members, the digest is `digest(body)`."""
    body: dict[str, Any] = dict(rest)
    node = body
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node.get(key, {}), dict) else {}
    node[path[-1]] = schema
    assert digest(body) == body_digest(body, path, schema, canonical_bytes(schema))


@given(body=st.dictionaries(KEYS, JSON, max_size=5))
def test_bytes_of_another_object_are_never_used(body: dict[str, Any]) -> None:
    """Only the very schema object takes the supplied bytes; an equal copy is encoded afresh."""
    body["format"] = {"type": "object"}
    assert digest(body) == body_digest(body, ("format",), {"type": "object"}, b'"wrong"')


def test_a_body_that_is_not_json_is_refused_as_by_canonical_bytes() -> None:
    """NaN in a member is refused with the same error type as `digest`."""
    schema = {"type": "object"}
    with pytest.raises(CanonicalError):
        body_digest({"format": schema, "options": {"t": float("nan")}}, ("format",), schema, b"{}")
