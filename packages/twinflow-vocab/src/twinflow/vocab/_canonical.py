"""RFC 8785 (JSON Canonicalization Scheme) of vocab's values: digests and parsing.

The encoder itself is `twinflow.trace`'s, the workspace's one canonical encoder: a model is
encoded by handing its JSON-mode dump to it. `tests/test_canonical.py` proves the result
byte-equal to the `rfc8785` package on generated inputs and on the published vectors.
"""

from __future__ import annotations

import hashlib
from typing import TypeVar, overload

from pydantic import BaseModel, JsonValue, ValidationError

from twinflow.trace import CanonicalError
from twinflow.trace import canonical_bytes as _canonical_bytes
from twinflow.trace._canonical import parse_json
from twinflow.vocab._errors import InvalidValueError

__all__ = ["digest", "parse_canonical", "value_bytes"]

M = TypeVar("M", bound=BaseModel)


def value_bytes(value: BaseModel | JsonValue) -> bytes:
    """Encode a value as RFC 8785 (JCS) canonical JSON: the bytes `digest` hashes.

    `twinflow.trace.canonical_bytes` for a JSON value, and for a pydantic model its JSON-mode
    dump.

    Args:
        value: A pydantic model (encoded as its JSON-mode dump) or a JSON value (dicts with
            string keys, lists or tuples, strings, booleans, None, integers within ±(2**53-1),
            finite floats).

    Returns:
        The canonical UTF-8 bytes: keys sorted by UTF-16 code units, no whitespace, numbers as
        ECMAScript prints them, only the escapes JSON requires.

    Raises:
        CanonicalError: The value (or a part of it, named by JSON pointer) has no canonical form:
            NaN or infinity, an integer beyond the IEEE-754 safe range, a lone surrogate, a
            non-string key, or a non-JSON type.
    """
    if isinstance(value, BaseModel):
        return _canonical_bytes(value.model_dump(mode="json"))
    return _canonical_bytes(value)


def digest(value: BaseModel | JsonValue) -> str:
    """Return the lowercase hex SHA-256 of `value_bytes(value)`.

    The digest depends only on the value: not on the process, hash seed, platform or Python
    version.

    Raises:
        CanonicalError: As `value_bytes`.
    """
    return hashlib.sha256(value_bytes(value)).hexdigest()


@overload
def parse_canonical(data: bytes, type_: None = None, *, strict: bool = True) -> JsonValue: ...
@overload
def parse_canonical(data: bytes, type_: type[M], *, strict: bool = True) -> M: ...
def parse_canonical(
    data: bytes, type_: type[BaseModel] | None = None, *, strict: bool = True
) -> BaseModel | JsonValue:
    """Parse canonical JSON bytes back to a value.

    Args:
        data: UTF-8 JSON, normally produced by `value_bytes`.
        type_: A pydantic model class to validate into; `None` returns the JSON value.
        strict: Refuse bytes that are valid JSON but not canonical (so a parsed record's digest
            is the digest of the bytes it came from). Pass False to read hand-written JSON.

    Returns:
        The JSON value, or an instance of `type_` equal to the one that was encoded.

    Raises:
        CanonicalError: The bytes are not UTF-8 JSON, nest too deeply, hold duplicate keys, NaN
            or Infinity, or (with `strict`) are not in canonical form.
        InvalidValueError: The JSON does not validate as `type_`.
    """
    try:
        value: JsonValue = parse_json(data, canonical=strict)
    except CanonicalError as exc:
        if exc.reason in ("whitespace", "number_form", "escape_form", "key_order"):
            raise CanonicalError(
                "bytes are valid JSON but not RFC 8785 canonical (key order, whitespace, number "
                f"or escape form: {exc}); re-encode with value_bytes, or pass strict=False",
                reason=exc.reason,
                pointer=exc.pointer,
                detail=exc.detail,
            ) from None
        raise
    if type_ is None:
        return value
    try:
        return type_.model_validate(value)
    except ValidationError as exc:
        raise InvalidValueError(f"canonical JSON is not a valid {type_.__name__}: {exc}") from None
