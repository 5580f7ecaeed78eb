"""RFC 8785 (JSON Canonicalization Scheme) encoding, digests and parsing.

The encoder is ours so the bottom layer depends on pydantic alone; `tests/test_canonical.py`
proves it byte-equal to the `rfc8785` package on generated inputs and on the published vectors.

Speed comes from letting the C JSON encoder do the work whenever its output is already
canonical: strings (with `ensure_ascii=False` it escapes exactly what JCS escapes), integers,
and the floats whose `repr` equals ECMAScript's `Number.prototype.toString`. One cheap walk
decides; anything else (other floats, keys outside the Basic Multilingual Plane, subclasses of
the JSON types) goes through the exact, slower writer.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any, TypeVar, overload

from pydantic import BaseModel, JsonValue, ValidationError

from twinflow.vocab._errors import CanonicalError, InvalidValueError

__all__ = ["canonical_bytes", "digest", "json_kind", "json_pointer", "parse_canonical"]

M = TypeVar("M", bound=BaseModel)

# I-JSON (RFC 7493) and JCS: a JSON number is an IEEE-754 double, so only integers that a double
# holds exactly are numbers; the `rfc8785` package draws the same line.
_MAX_SAFE = 2**53 - 1
_INF = float("inf")

_dumps = json.JSONEncoder(
    ensure_ascii=False,
    separators=(",", ":"),
    sort_keys=True,
    allow_nan=False,
    check_circular=False,
).encode


# What the C encoder's output of a pydantic JSON-mode dump of a model (an object with string
# keys and plain JSON types) may hold that is not canonical: a float, or an integer of 16 or more
# digits (it may lie beyond ±(2**53-1)), or a character outside the BMP (where code-point and
# UTF-16 key order may differ). With no whitespace in the output, every number token follows
# ":", "," or "[", and a float's repr always has a digit right before "." or "e". Matches inside
# strings are false alarms that only cost the exact path.
_NUMBER = re.compile(r"[:,\[]-?\d(?:\d*[.eE]|\d{15})")
_ASTRAL = re.compile(r"[\U00010000-\U0010ffff]")


class _Slow(Exception):
    """Internal: the fast walk found something only the exact writer can encode."""


def _fast_ok(value: Any) -> None:
    """Raise `_Slow` unless the C encoder's output for `value` is already canonical."""
    t = type(value)
    if t is str or value is None or t is bool:
        return
    if t is int:
        if -_MAX_SAFE <= value <= _MAX_SAFE:
            return
        raise _Slow
    if t is float:
        a = abs(value)
        # repr and ECMAScript agree on non-integral values in [1e-4, 1e16) and on [1e21, inf).
        if (1e-4 <= a < 1e16 and not value.is_integer()) or 1e21 <= a < _INF:
            return
        raise _Slow
    if t is dict:
        for k, v in value.items():
            # Code-point order equals UTF-16 order unless a key leaves the BMP.
            if type(k) is not str or not (k.isascii() or max(k) <= "\uffff"):
                raise _Slow
            _fast_ok(v)
        return
    if t is list or t is tuple:
        for v in value:
            _fast_ok(v)
        return
    raise _Slow


def es_number(value: float) -> str:
    """Format a finite float as ECMAScript's `Number.prototype.toString` does (ECMA-262 7.1.12.1).

    Python's `repr` already yields the shortest digits that round-trip, as ECMAScript requires;
    only the layout (where the point goes, when an exponent is used) differs.
    """
    if value == 0:
        return "0"  # also -0, per RFC 8785 3.2.2.3
    text = repr(value)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exp_text = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    raw = whole + frac
    stripped = raw.lstrip("0")
    # value = 0.<digits> * 10**n
    n = len(whole) - (len(raw) - len(stripped)) + (int(exp_text) if exp_text else 0)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = (
            digits[0]
            + ("." + digits[1:] if k > 1 else "")
            + ("e+" if e > 0 else "e-")
            + str(abs(e))
        )
    return sign + body


def _utf16_key(item: tuple[str, object]) -> bytes:
    return item[0].encode("utf-16-be", "surrogatepass")


def _write(value: object, out: list[str]) -> None:
    """The exact writer: every JSON type, subclasses included."""
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(encode_basestring(str.__str__(value)))
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        if not -_MAX_SAFE <= value <= _MAX_SAFE:
            raise _Unsupported
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (_INF, -_INF):
            raise _Unsupported
        out.append(es_number(value))
    elif isinstance(value, Mapping):
        items = list(value.items())
        if not all(isinstance(k, str) for k, _ in items):
            raise _Unsupported
        items.sort(key=_utf16_key)
        out.append("{")
        first = True
        for k, v in items:
            if not first:
                out.append(",")
            first = False
            out.append(encode_basestring(str.__str__(k)))
            out.append(":")
            _write(v, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        first = True
        for v in value:
            if not first:
                out.append(",")
            first = False
            _write(v, out)
        out.append("]")
    else:
        raise _Unsupported


class _Unsupported(Exception):
    """Internal: the exact writer met a value with no JSON form; located afterwards."""


def json_pointer(tokens: tuple[str | int, ...]) -> str:
    """Build an RFC 6901 JSON pointer from reference tokens (`()` is the whole document, `""`)."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def json_kind(value: object) -> str:
    """The JSON type a value encodes as (`null`, `boolean`, `number`, ...), for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _locate(value: object, path: tuple[str | int, ...]) -> tuple[str, str] | None:
    """Find the first value with no canonical form: (pointer, reason), or None."""
    if value is None or isinstance(value, str | bool):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return json_pointer(path), "a string holds a lone surrogate, which is not UTF-8"
        return None
    if isinstance(value, int):
        if not -_MAX_SAFE <= value <= _MAX_SAFE:
            return json_pointer(path), (
                f"integer {value} is outside the IEEE-754 safe range ±(2**53-1); "
                "send it as a string"
            )
        return None
    if isinstance(value, float):
        if value != value or value in (_INF, -_INF):
            return json_pointer(path), f"{value!r} has no JSON form"
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                return json_pointer(path), f"object key {k!r} is not a string"
            found = _locate(k, (*path, k)) or _locate(v, (*path, k))
            if found:
                return found
        return None
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = _locate(v, (*path, i))
            if found:
                return found
        return None
    return json_pointer(path), f"{type(value).__name__} is not a JSON type"


def _refuse(value: object, cause: BaseException | None) -> CanonicalError:
    if isinstance(cause, RecursionError):
        return CanonicalError("value nests too deeply (or contains itself) to be encoded as JSON")
    found = _locate(value, ())
    where, why = found if found else ("", "value has no JSON form")
    return CanonicalError(f"no RFC 8785 form at {where or '/'}: {why}")


def _encode_json(value: object) -> bytes:
    try:
        try:
            _fast_ok(value)
            text = _dumps(value)
        except _Slow:
            out: list[str] = []
            _write(value, out)
            text = "".join(out)
        return text.encode("utf-8")
    except (_Unsupported, UnicodeEncodeError, RecursionError, ValueError, TypeError) as exc:
        raise _refuse(value, exc) from None


def canonical_bytes(value: BaseModel | JsonValue) -> bytes:
    """Encode a value as RFC 8785 (JCS) canonical JSON.

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
        return _encode_dump(value.model_dump(mode="json"))
    return _encode_json(value)


def _encode_dump(value: JsonValue) -> bytes:
    """Encode a pydantic JSON-mode dump, skipping the type walk when the output shows no need.

    A JSON-mode dump of a model holds only string keys and plain JSON types, so the C encoder's
    output is canonical unless `_NUMBER` finds a float or a long integer in it or `_ASTRAL` an
    astral character (checked only in non-ASCII output); then, or on any error, the value takes
    the general path, which decides exactly.
    """
    if type(value) is dict:
        try:
            text = _dumps(value)
            if _NUMBER.search(text) is None and (text.isascii() or _ASTRAL.search(text) is None):
                return text.encode("utf-8")
        except (ValueError, TypeError, RecursionError):
            pass
    return _encode_json(value)


def digest(value: BaseModel | JsonValue) -> str:
    """Return the lowercase hex SHA-256 of `canonical_bytes(value)`.

    The digest depends only on the value: not on the process, hash seed, platform or Python
    version.

    Raises:
        CanonicalError: As `canonical_bytes`.
    """
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def _no_constant(name: str) -> Any:
    raise CanonicalError(f"{name} is not JSON; canonical JSON has no NaN or Infinity")


def _parse_int(text: str) -> int | float:
    # A JSON number is a double: an integer literal beyond the safe range reads as the double
    # it denotes (as in ECMAScript), so a float such as 2.0**53, printed "9007199254740992",
    # parses back to itself.
    value = int(text)
    return value if -_MAX_SAFE <= value <= _MAX_SAFE else float(value)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise CanonicalError(
                    f"object key {k!r} appears twice; canonical JSON has unique keys"
                )
            seen.add(k)
    return result


@overload
def parse_canonical(data: bytes, type_: None = None, *, strict: bool = True) -> JsonValue: ...
@overload
def parse_canonical(data: bytes, type_: type[M], *, strict: bool = True) -> M: ...
def parse_canonical(
    data: bytes, type_: type[BaseModel] | None = None, *, strict: bool = True
) -> BaseModel | JsonValue:
    """Parse canonical JSON bytes back to a value.

    Args:
        data: UTF-8 JSON, normally produced by `canonical_bytes`.
        type_: A pydantic model class to validate into; `None` returns the JSON value.
        strict: Refuse bytes that are valid JSON but not canonical (so a parsed record's digest
            is the digest of the bytes it came from). Pass False to read hand-written JSON.

    Returns:
        The JSON value, or an instance of `type_` equal to the one that was encoded.

    Raises:
        CanonicalError: The bytes are not UTF-8 JSON, hold duplicate keys, NaN or Infinity, or
            (with `strict`) are not in canonical form.
        InvalidValueError: The JSON does not validate as `type_`.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CanonicalError(f"canonical JSON must be UTF-8: {exc}") from None
    try:
        value: JsonValue = json.loads(
            text,
            parse_constant=_no_constant,
            parse_int=_parse_int,
            object_pairs_hook=_no_duplicates,
        )
    except json.JSONDecodeError as exc:
        raise CanonicalError(f"not JSON: {exc}") from None
    except RecursionError:
        raise CanonicalError("JSON nests too deeply to parse") from None
    if strict:
        again = _encode_json(value)
        if again != data:
            raise CanonicalError(
                "bytes are valid JSON but not RFC 8785 canonical (key order, whitespace, number "
                "or escape form); re-encode with canonical_bytes, or pass strict=False"
            )
    if type_ is None:
        return value
    try:
        return type_.model_validate(value)
    except ValidationError as exc:
        raise InvalidValueError(f"canonical JSON is not a valid {type_.__name__}: {exc}") from None
