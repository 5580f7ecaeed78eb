"""RFC 8785 (JSON Canonicalization Scheme) for plain JSON values: the workspace's one encoder.

`twinflow.vocab` encodes its pydantic models by handing their JSON-mode dumps to this module;
the trace writer and verifier use it directly. Its tests prove it byte-equal to the `rfc8785`
package on generated inputs and the published vectors.

Speed comes from letting the C JSON encoder (through the public `json.JSONEncoder`) do the work
whenever its output is already canonical: strings (with ``ensure_ascii=False`` it escapes exactly
what JCS escapes), integers, and the floats whose ``repr`` equals ECMAScript's
``Number.prototype.toString``. Anything else (other floats, keys outside the Basic Multilingual
Plane, subclasses of the JSON types) goes through the exact, slower writer.

Parsing is strict and bounded: `parse_json` refuses duplicate keys, NaN and Infinity, and a
nesting deeper than its limit, checked on the bytes before the recursive parser runs; with
``canonical=True`` it re-encodes what it parsed and names how the bytes differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from twinflow._base._json import MAX_SAFE_INTEGER, json_pointer, repeated_key
from twinflow.trace._errors import CanonicalError, _Slow

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "canonical_bytes",
    "es_number",
    "parse_json",
]

DEFAULT_MAX_DEPTH = 64
"""Default nesting limit of `parse_json` (objects and arrays): far above what an event holds,
far below what overflows a recursive parser."""

_MAX_SAFE = MAX_SAFE_INTEGER
_INF = float("inf")

_dumps = json.JSONEncoder(
    ensure_ascii=False,
    separators=(",", ":"),
    sort_keys=True,
    allow_nan=False,
    check_circular=False,
).encode


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


def _fast_copy(value: Any) -> Any:
    """``value`` with each integral float within ±(2**53-1) as the int it equals, or `_Slow`.

    Such a float's shortest digits are the integer's, so the C encoder prints the copy as
    ECMAScript prints the float (``1.0`` as ``1``, ``-0.0`` as ``0``); a score of ``1.0`` then
    costs a copy, not the exact writer. Anything else `_fast_ok` refuses is refused here too.
    """
    t = type(value)
    if t is str or value is None or t is bool:
        return value
    if t is int:
        if -_MAX_SAFE <= value <= _MAX_SAFE:
            return value
        raise _Slow
    if t is float:
        a = abs(value)
        if (1e-4 <= a < 1e16 and not value.is_integer()) or 1e21 <= a < _INF:
            return value
        if a <= _MAX_SAFE and value.is_integer():
            return int(value)
        raise _Slow
    if t is dict:
        copy = {}
        for k, v in value.items():
            if type(k) is not str or not (k.isascii() or max(k) <= "\uffff"):
                raise _Slow
            copy[k] = _fast_copy(v)
        return copy
    if t is list or t is tuple:
        return [_fast_copy(v) for v in value]
    raise _Slow


def es_number(value: float) -> str:
    """Format a finite float as ECMAScript's `Number.prototype.toString` does (ECMA-262 7.1.12.1).

    Python's `repr` already yields the shortest digits that round-trip, as ECMAScript requires;
    only the layout (where the point goes, when an exponent is used) differs.

    Args:
        value: A finite float.

    Returns:
        The ECMAScript text of the number.
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


def _write(value: object, out: list[str], sort: bool = True) -> None:
    """The exact writer: every JSON type, subclasses included (``sort=False`` keeps key order).

    A value with no JSON form raises `ValueError` or `TypeError`, as `json.dumps` does;
    `canonical_bytes` then locates it for its `CanonicalError`.
    """
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_dumps(str.__str__(value)))
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        if not -_MAX_SAFE <= value <= _MAX_SAFE:
            raise ValueError("integer out of range")
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (_INF, -_INF):
            raise ValueError("float not finite")
        out.append(es_number(value))
    elif isinstance(value, Mapping):
        items = list(value.items())
        if not all(isinstance(k, str) for k, _ in items):
            raise TypeError("key not a string")
        if sort:
            items.sort(key=_utf16_key)
        out.append("{")
        first = True
        for k, v in items:
            if not first:
                out.append(",")
            first = False
            out.append(_dumps(str.__str__(k)))
            out.append(":")
            _write(v, out, sort)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        first = True
        for v in value:
            if not first:
                out.append(",")
            first = False
            _write(v, out, sort)
        out.append("]")
    else:
        raise TypeError("not a JSON type")


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
        return CanonicalError(
            "value nests too deeply (or contains itself) to be encoded as JSON", reason="too_deep"
        )
    found = _locate(value, ())
    where, why = found if found else ("", "value has no JSON form")
    return CanonicalError(f"no RFC 8785 form at {where or '/'}: {why}", pointer=where, detail=why)


def canonical_bytes(value: object) -> bytes:
    """Encode a JSON value as RFC 8785 (JCS) canonical JSON.

    Args:
        value: A JSON value: dicts (any `Mapping`) with string keys, lists or tuples, strings,
            booleans, None, integers within ±(2**53-1), finite floats.

    Returns:
        The canonical UTF-8 bytes: keys sorted by UTF-16 code units, no whitespace, numbers as
        ECMAScript prints them, only the escapes JSON requires.

    Raises:
        CanonicalError: The value (or a part of it, named by JSON pointer) has no canonical form:
            NaN or infinity, an integer beyond the IEEE-754 safe range, a lone surrogate, a
            non-string key, or a non-JSON type.
    """
    try:
        try:
            _fast_ok(value)
            text = _dumps(value)
        except _Slow:
            try:
                text = _dumps(_fast_copy(value))
            except _Slow:
                out: list[str] = []
                _write(value, out)
                text = "".join(out)
        return text.encode("utf-8")
    except (UnicodeEncodeError, RecursionError, ValueError, TypeError) as exc:
        raise _refuse(value, exc) from None


# -- parsing --------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise CanonicalError(
        f"{name} is not JSON; canonical JSON has no NaN or Infinity", reason="non_finite"
    )


def _parse_int(text: str) -> int | float:
    # A JSON number is a double: an integer literal beyond the safe range reads as the double
    # it denotes (as in ECMAScript), so a float such as 2.0**53, printed "9007199254740992",
    # parses back to itself.
    if len(text) > 400:
        # int() of a huge literal is quadratic before Python's digit limit stops it.
        raise CanonicalError(
            f"a {len(text)}-digit number is not an IEEE-754 double", reason="number_form"
        )
    value = int(text)
    return value if -_MAX_SAFE <= value <= _MAX_SAFE else float(value)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    problem = repeated_key(pairs)
    if problem is not None:
        raise CanonicalError(problem, reason="duplicate_key")
    return dict(pairs)


# What the C encoder prints as it reads but RFC 8785 refuses or orders otherwise: an integer of
# 16 or more digits (it may pass +-(2**53-1)) and a 4-byte UTF-8 character (outside the BMP,
# where UTF-16 key order may differ from code-point order). Every digit maps to '0' and ','
# and '[' to ':', and '-' goes, so such an integer (a number token follows ':', ',' or '[', or
# starts the text) becomes ':' and sixteen '0's. A match inside a string is a false alarm that
# only costs the strict path.
_SCREEN = bytes.maketrans(b"0123456789,[", b"0000000000::")
_SIXTEEN = b"0" * 16
_LONG_INTEGER_SCREENED = b":" + _SIXTEEN
_ASTRAL_UTF8 = re.compile(rb"[\xf0-\xf4]")


def _beyond_the_encoder(data: bytes) -> bool:
    """Whether JSON bytes may hold a long integer or a character outside the BMP (see above)."""
    screen = data.translate(_SCREEN, b"-")
    return (
        _LONG_INTEGER_SCREENED in screen
        or screen.startswith(_SIXTEEN)
        or (not data.isascii() and _ASTRAL_UTF8.search(data) is not None)
    )


def _ecmascript_float(literal: str) -> float:
    """`json.loads`'s ``parse_float``: a float literal already in ECMAScript form, or ValueError."""
    value = float(literal)
    if value in (_INF, -_INF) or es_number(value) != literal:
        raise ValueError(f"{literal} is not in ECMAScript form")
    return value


_decoder = json.JSONDecoder(parse_float=_ecmascript_float)


# A string token, or an unterminated one running to the end: every match that starts succeeds, so
# a hostile line of escaped quotes is scanned once, not once per quote.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")
_WHITESPACE = re.compile(rb"[ \t\r\n]")


def _depth(data: bytes, limit: int) -> int:
    """The nesting depth of JSON bytes, or ``limit + 1`` as soon as it goes past ``limit``."""
    # One C-speed count settles nearly every line; only a bracket-heavy one is scanned.
    if data.count(b"[") + data.count(b"{") <= limit:
        return 0
    depth = 0
    for m in _BRACKET.finditer(_STRING.sub(b'""', data)):
        if m.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return depth
        else:
            depth -= 1
    return 0


def _difference(data: bytes, value: object) -> tuple[str, str]:
    """How bytes that parse to ``value`` differ from its canonical encoding: (reason, message)."""
    if _WHITESPACE.search(_STRING.sub(b'""', data)):
        return "whitespace", "whitespace outside strings; canonical JSON has none"
    out: list[str] = []
    try:
        _write(value, out, sort=False)
        in_order = "".join(out).encode("utf-8")
    except (ValueError, TypeError):  # no JSON form; a lone surrogate is a UnicodeEncodeError
        found = _locate(value, ())
        where, why = found if found else ("", "no JSON form")
        reason = "escape_form" if "surrogate" in why else "number_form"
        return reason, f"no RFC 8785 form at {where or '/'}: {why}"
    if in_order != data:
        if _STRING.sub(b'""', in_order) != _STRING.sub(b'""', data):
            return "number_form", "a number is not in ECMAScript form (as RFC 8785 3.2.2.3 asks)"
        return "escape_form", "a string uses an escape RFC 8785 does not (or misses one it does)"
    return "key_order", "object keys are not sorted by UTF-16 code units"


def parse_json(
    data: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH, canonical: bool = False, strict: bool = True
) -> Any:
    """Parse UTF-8 JSON bytes strictly, with a nesting limit; optionally require canonical form.

    Args:
        data: The bytes.
        max_depth: Deepest nesting of objects and arrays accepted (checked before parsing, so a
            hostile input never reaches the recursion limit).
        canonical: Also require ``data`` to be exactly ``canonical_bytes`` of what it parses to.
        strict: Refuse duplicate keys and NaN/Infinity while parsing, and read integers beyond
            ±(2**53-1) as doubles. ``False`` is the fast plain parse for callers that compare
            the canonical re-encoding themselves (equal bytes rule all of those out).

    Returns:
        The JSON value (integers beyond ±(2**53-1) read as the doubles they denote).

    Raises:
        CanonicalError: With ``reason`` naming the failure: ``not_utf8``, ``too_deep``,
            ``not_json``, ``duplicate_key``, ``non_finite``, and with ``canonical`` one of
            ``whitespace``, ``number_form``, ``escape_form``, ``key_order``.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CanonicalError(f"not UTF-8: {exc}", reason="not_utf8") from None
    if _depth(data, max_depth) > max_depth:
        raise CanonicalError(
            f"JSON nests deeper than {max_depth} levels (the limit)", reason="too_deep"
        )
    if canonical and not _beyond_the_encoder(data):
        # Parse, encode again, compare: an equal text rules out duplicate keys (the dict would
        # be smaller), NaN, whitespace, escapes and key order at once, and the hook lets
        # through only floats already in ECMAScript form. Only a text that differs is parsed
        # again strictly, to name what is wrong.
        try:
            value, end = _decoder.raw_decode(text)
            if end == len(text) and _dumps(value) == text:
                return value
        except (ValueError, RecursionError):
            pass
    return _strict(text, data, canonical=canonical, strict=strict)


def _strict(text: str, data: bytes, *, canonical: bool, strict: bool) -> Any:
    """`parse_json`'s strict path: every refusal named by its reason."""
    try:
        value = (
            json.loads(
                text,
                parse_constant=_no_constant,
                parse_int=_parse_int,
                object_pairs_hook=_no_duplicates,
            )
            if strict or canonical
            else json.loads(text)
        )
    except ValueError as exc:
        # JSONDecodeError, and int()'s digit limit on a plain parse.
        raise CanonicalError(f"not JSON: {exc}", reason="not_json") from None
    except RecursionError:  # pragma: no cover - the depth check runs first
        raise CanonicalError("JSON nests too deeply to parse", reason="too_deep") from None
    if canonical:
        try:
            again = canonical_bytes(value)
        except CanonicalError:
            again = b""
        if again != data:
            reason, message = _difference(data, value)
            raise CanonicalError(f"not RFC 8785 canonical JSON: {message}", reason=reason)
    return value
