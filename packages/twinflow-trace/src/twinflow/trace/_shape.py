"""The strict readers of attestation JSON the statement checkers share (`_attest`, `_evidence`).

Each refuses what is not of its shape with one `TraceFormatError` (``attestation``); a statement
that does not match what it is checked against is `SignatureError` (``attestation_mismatch``).
"""

from __future__ import annotations

from typing import Any

from twinflow.trace._errors import SignatureError, TraceFormatError

_HEX64 = frozenset("0123456789abcdef")


def _malformed(message: str) -> TraceFormatError:
    """The bytes are not a DSSE envelope holding a twinflow run statement (nothing verified)."""
    return TraceFormatError(message, reason="attestation")


def _mismatch(message: str) -> SignatureError:
    """A signature does not verify, too few known keys signed, or the statement does not match
    the trace or checkpoint it is checked against."""
    return SignatureError(message, reason="attestation_mismatch")


def _text(value: object, where: str) -> str:
    if type(value) is not str:
        raise _malformed(f"{where} must be a string, found {type(value).__name__}")
    return value


def _object(value: object, where: str, members: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed(f"{where} must be a JSON object")
    if set(value) != members:
        missing, extra = sorted(members - set(value)), sorted(set(value) - members)
        raise _malformed(
            f"{where} must hold exactly {sorted(members)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; unknown {[m[:40] for m in extra[:5]]}" if extra else "")
        )
    return value


def _hex64(value: object, where: str) -> str:
    text = _text(value, where)
    if len(text) != 64 or not set(text) <= _HEX64:
        raise _malformed(f"{where} must be 64 lowercase hex digits")
    return text
