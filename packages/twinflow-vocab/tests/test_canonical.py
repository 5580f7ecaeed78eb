"""Canonical encoding: byte-equal to the rfc8785 package, the published vectors, stable digests."""

import json
import struct
import sys
from pathlib import Path

import pytest
import rfc8785
from hypothesis import example, given
from hypothesis import strategies as st
from vocab_strategies import SAFE, json_values, transcripts

from twinflow.trace import CanonicalError
from twinflow.vocab import (
    InvalidValueError,
    JsonValue,
    Message,
    StructuredPart,
    Transcript,
    Usage,
    diff,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._canonical import parse_canonical

# pytester runs a fresh interpreter: the one place these tests need another process (another
# hash seed); ruff bans importing subprocess outside the kernel.
pytest_plugins = ["pytester"]

FIXTURES = Path(__file__).parent / "fixtures" / "jcs"
VECTORS = sorted(p.name for p in (FIXTURES / "input").glob("*.json"))
NUMBERS = json.loads((FIXTURES / "numbers.json").read_text())


@pytest.mark.parametrize("name", VECTORS)
def test_published_vectors(name: str) -> None:
    """Each cyberphone/json-canonicalization test vector encodes to its published output."""
    value = json.loads((FIXTURES / "input" / name).read_text(encoding="utf-8"))
    assert (FIXTURES / "output" / name).read_bytes() == canonical_bytes(value)


@pytest.mark.parametrize(("bits", "expected"), sorted(NUMBERS.items()))
def test_rfc8785_appendix_b_numbers(bits: str, expected: str | None) -> None:
    """Each IEEE-754 vector of RFC 8785 Appendix B prints as the RFC says (or is refused)."""
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    if expected is None:
        with pytest.raises(CanonicalError, match="no JSON form"):
            canonical_bytes(value)
    else:
        assert expected.encode() == canonical_bytes(value)
        assert rfc8785.dumps(value) == canonical_bytes([value])[1:-1]


@given(json_values)
def test_byte_equal_to_rfc8785(value: JsonValue) -> None:
    """On generated JSON values our encoder's bytes equal the rfc8785 package's."""
    assert rfc8785.dumps(value) == canonical_bytes(value)


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=20))
def test_floats_byte_equal_to_rfc8785(values: list[float]) -> None:
    """Floats over the whole double range print as the rfc8785 package prints them."""
    assert rfc8785.dumps(values) == canonical_bytes(values)


@given(json_values)
def test_tuples_encode_as_arrays(value: JsonValue) -> None:
    """A tuple encodes as the list with the same items, as in the rfc8785 package."""
    assert rfc8785.dumps((value, [value])) == canonical_bytes((value, (value,)))  # type: ignore[arg-type]  # a tuple is not a JsonValue; the encoder takes it as an array


@given(json_values)
@example(2.0**53)
@example({"n": [-(2.0**60), 1e20, 1e-7]})
def test_round_trip(value: JsonValue) -> None:
    """Parsing canonical bytes gives back an equal value, and re-encoding the same bytes."""
    data = canonical_bytes(value)
    parsed = parse_canonical(data)
    assert None is diff(value, parsed)
    assert data == canonical_bytes(parsed)


@given(transcripts())
def test_transcript_round_trip(transcript: Transcript) -> None:
    """A generated transcript round-trips through canonical bytes to an equal value."""
    data = canonical_bytes(transcript)
    assert rfc8785.dumps(transcript.model_dump(mode="json")) == data
    assert transcript == parse_canonical(data, Transcript)


@given(json_values)
@example({"k": [1e16, 0.5, 1.0, -(10**15), 10**15, 2**53 - 1]})
@example({"\U0001f600": 1, "\uffff": 2, ":1.5": "x,[9e1"})
@example({"at": "10:45:55.46", "n": [1e16, -1234567890123456]})  # a float written without "."
@example({"at": "10:45:55.46", "x": [1e-05, 3]})  # a clock reading, then a float
@example({"text": "done. 1.5 e+1", "n": [1234567890123456]})  # "." in text, a long integer
@example({"n": 1234567890123456, "s": "no dot"})  # neither "." nor an exponent
@example({"score": 1.0, "z": -0.0, "big": 9007199254740991.0, "x": [2.0, 0.5]})  # integral floats
@example({"over": 9007199254740992.0, "score": 1.0})  # integral, past the safe range
def test_model_fast_path_byte_equal_to_rfc8785(value: JsonValue) -> None:
    """A model whose dump holds floats, long integers or astral keys still encodes as rfc8785 does."""
    part = StructuredPart(schema_name="s", value=value)
    assert rfc8785.dumps(part.model_dump(mode="json")) == canonical_bytes(part)


def test_model_with_an_unsafe_integer_is_refused() -> None:
    """A model field holding an integer beyond ±(2**53-1) is refused, located, on the model path too."""
    with pytest.raises(CanonicalError, match="at /input_tokens:"):
        canonical_bytes(Usage(input_tokens=2**60))


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": [1, float("nan")]}, "/a/1"),
        ({"a": float("inf")}, "/a"),
        ({"big": 2**53}, "/big"),
        ([-(2**53)], "/0"),
        ({"s": "\ud800"}, "/s"),
        ({1: "x"}, "/"),
        ({"x/y": {1, 2}}, "/x~1y"),
        (b"bytes", "/"),
    ],
)
def test_values_without_canonical_form_are_refused(value: object, where: str) -> None:
    """NaN, infinities, unsafe integers, lone surrogates, non-string keys, non-JSON types are refused, located."""
    with pytest.raises(CanonicalError, match=f"at {where}:"):
        canonical_bytes(value)  # type: ignore[arg-type]  # values without a canonical form, on purpose


# Bounded on both sides: a half-open integer range makes hypothesis discard most draws
# (its filter_too_much health check then fails the test at random).
BEYOND = 2**70


@given(
    st.one_of(
        st.integers(min_value=SAFE + 1, max_value=BEYOND),
        st.integers(min_value=-BEYOND, max_value=-SAFE - 1),
    )
)
def test_unsafe_integers_refused_like_rfc8785(n: int) -> None:
    """Integers beyond ±(2**53-1) are refused, as the rfc8785 package refuses them."""
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps(n)
    with pytest.raises(CanonicalError):
        canonical_bytes({"n": n})


def test_cyclic_value_refused() -> None:
    """A list that contains itself is refused, not a crash."""
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(CanonicalError, match="contains itself"):
        canonical_bytes(cyclic)  # type: ignore[arg-type]  # a cyclic value, on purpose


@pytest.mark.parametrize(
    "data",
    [
        b'{"b":1,"a":2}',
        b'{"a": 1}',
        b"1.0",
        b"1E3",
        b'"\\u0041"',
        b'{"a":1,"a":1}',
        b"NaN",
        b"[1,",
        b"\xff",
        b"12345678901234567890",
    ],
)
def test_parse_refuses_non_canonical(data: bytes) -> None:
    """parse_canonical refuses bytes that are not canonical JSON."""
    with pytest.raises(CanonicalError):
        parse_canonical(data)


def test_parse_lenient_reads_any_json() -> None:
    """With strict=False, any JSON (without NaN or duplicate keys) is read."""
    expected = {"a": 1, "b": 1000.0}
    assert expected == parse_canonical(b'{"b": 1E3, "a": 1}', strict=False)


def test_parse_into_wrong_type_is_invalid_value() -> None:
    """Canonical JSON that is not the asked-for model raises InvalidValueError."""
    with pytest.raises(InvalidValueError, match="not a valid Message"):
        parse_canonical(b'{"role":"robot"}', Message)


def test_digest_is_sha256_of_canonical_bytes() -> None:
    """digest is the lowercase hex SHA-256 of the canonical bytes (pinned, checked against rfc8785)."""
    expected = "d12b33ccab94087b282bf6d5ad29fb1822d08033b084a447091a6f73fe273252"
    assert expected == digest({"b": [1.5, 1e21], "a": "é"})


GOLDEN_TRANSCRIPT = Transcript(
    messages=(Message.system("Be brief."), Message.user("Hello, wörld! 😀"))
)
# sha256 of rfc8785.dumps of the same dump: pinned so a change of encoding in any Python version fails.
GOLDEN_DIGEST = "5f42e2cb4b6ea342637ba875d830e3b08984fb568eb5fc9283f7d39dfd975aa5"


def test_digest_stable_across_hash_seeds_and_processes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Digests computed in fresh interpreters with other hash seeds equal the in-process ones."""
    script = (
        "from twinflow.vocab import Message, Transcript, digest\n"
        "t = Transcript(messages=(Message.system('Be brief.'), Message.user('Hello, wörld! 😀')))\n"
        "print(digest(t), digest({k: [k] for k in map(str, range(50))}))\n"
    )
    expected = f"{digest(GOLDEN_TRANSCRIPT)} {digest({k: [k] for k in map(str, range(50))})}"
    for seed in ("0", "1", "4242"):
        monkeypatch.setenv("PYTHONHASHSEED", seed)
        result = pytester.run(sys.executable, "-c", script)
        assert (0, [expected]) == (result.ret, result.outlines)
    golden = GOLDEN_DIGEST
    assert golden == digest(GOLDEN_TRANSCRIPT)
