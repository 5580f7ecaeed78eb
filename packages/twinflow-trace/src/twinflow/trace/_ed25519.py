"""Ed25519 signature verification (RFC 8032, section 5.1.7) in the standard library alone.

Verification only: it handles public data (a public key, a message, a signature), so running
in variable time leaks nothing. Signing and key derivation handle the secret seed and go
through the ``cryptography`` library instead (``twinflow-trace[signatures]``, docs/adr/0006).

The rules are RFC 8032's, which are also Go's ``crypto/ed25519`` rules on every input that a
key holder can produce: a signature's ``S`` must be below the group order, ``R`` and ``A``
must be canonical encodings of curve points (y below p, no negative zero), and the check is
the cofactorless ``[S]B == R + [k]A``. Go additionally accepts a public key whose y is
encoded non-canonically (y >= p, at most 19 such points, none of them a key anyone
generates); this module refuses it, as RFC 8032 says. Held by ``test_signed_note.py``: the
RFC 8032 vectors, a cross-check against ``cryptography`` on random keys and mutations, and the
Go interoperability test.
"""

from __future__ import annotations

import hashlib

__all__ = ["is_public_key", "verify"]

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, -1, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)

# Extended homogeneous coordinates (X, Y, Z, T) with x = X/Z, y = Y/Z, x*y = T/Z.
_Point = tuple[int, int, int, int]
_IDENTITY: _Point = (0, 1, 1, 0)


def _recover_x(y: int, sign: int) -> int | None:
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, -1, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    if x & 1 != sign:
        x = _P - x
    return x


def _decode_point(encoded: bytes) -> _Point | None:
    if len(encoded) != 32:
        return None
    y = int.from_bytes(encoded, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % _P)


_B_Y = 4 * pow(5, -1, _P) % _P
_B_X = _recover_x(_B_Y, 0)
assert _B_X is not None  # the base point is on the curve by construction
_BASE: _Point = (_B_X, _B_Y, 1, _B_X * _B_Y % _P)


def _add(p: _Point, q: _Point) -> _Point:
    # RFC 8032, section 5.1.4 (complete formula: also correct for doubling and the identity).
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _double_scalar_mult(s: int, p: _Point, k: int, q: _Point) -> _Point:
    """Return ``[s]p + [k]q`` (Straus-Shamir: one doubling chain for both scalars)."""
    both = _add(p, q)
    acc = _IDENTITY
    for bit in range(max(s.bit_length(), k.bit_length()) - 1, -1, -1):
        acc = _add(acc, acc)
        s_bit, k_bit = (s >> bit) & 1, (k >> bit) & 1
        if s_bit and k_bit:
            acc = _add(acc, both)
        elif s_bit:
            acc = _add(acc, p)
        elif k_bit:
            acc = _add(acc, q)
    return acc


def _equal(p: _Point, q: _Point) -> bool:
    return (p[0] * q[2] - q[0] * p[2]) % _P == 0 and (p[1] * q[2] - q[1] * p[2]) % _P == 0


def is_public_key(public_key: bytes) -> bool:
    """Whether ``public_key`` is 32 bytes canonically encoding a point of the curve."""
    return _decode_point(public_key) is not None


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is a valid Ed25519 signature of ``message`` under ``public_key``.

    Args:
        public_key: The 32-byte RFC 8032 public key.
        message: The signed bytes.
        signature: The 64-byte signature ``R || S``.

    Returns:
        True if the signature verifies; False for any malformed key or signature too.
    """
    if len(signature) != 64:
        return False
    a = _decode_point(public_key)
    r = _decode_point(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    digest = hashlib.sha512(signature[:32] + public_key + message).digest()
    k = int.from_bytes(digest, "little") % _L
    # [S]B - [k]A == R, computed as [S]B + [k](-A) in one chain.
    minus_a = ((_P - a[0]) % _P, a[1], a[2], (_P - a[3]) % _P)
    return _equal(_double_scalar_mult(s, _BASE, k, minus_a), r)
