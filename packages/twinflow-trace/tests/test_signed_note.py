"""C2SP signed notes, Ed25519 keys and tlog-checkpoint bodies: formats, refusals, cosigners."""

from __future__ import annotations

import base64
import hashlib
import sys
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracekit import refused

from twinflow.trace import TraceError, _ed25519
from twinflow.trace._keys import VerifierKey, generate_key, parse_signer_key, parse_verifier_key
from twinflow.trace._note import (
    DEFAULT_MAX_NOTE_BYTES,
    CheckpointBody,
    Note,
    NoteSignature,
    open_checkpoint,
    open_note,
    parse_checkpoint_body,
    parse_note,
    sign_checkpoint_note,
    sign_note,
)

# RFC 8032, section 7.1, tests 1-3: (secret seed, public key, message, signature).
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]

# The example in golang.org/x/mod/sumdb/note's package documentation (note.go).
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_SIG = "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
GO_COSIG = "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"
GO_NOTE = (GO_TEXT + "\n" + GO_SIG).encode()

LOG = generate_key("example.com/log", bytes(range(32)))
WITNESS = generate_key("example.com/witness", bytes(range(1, 33)))
STRANGER = generate_key("example.com/stranger", bytes(range(2, 34)))
ROOT = hashlib.sha256(b"root").digest()
BODY = CheckpointBody("example.com/log", 3, ROOT)


def _signed_by_log() -> bytes:
    return sign_checkpoint_note(BODY, [LOG])


# --- Ed25519 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_rfc8032_vectors_verify(seed: str, public: str, message: str, signature: str) -> None:
    """The pure-Python verifier accepts RFC 8032's test vectors and refuses them with a bit flipped."""
    pub, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    assert True is _ed25519.verify(pub, msg, sig)
    for index in (0, 31, 32, 63):
        flipped = bytearray(sig)
        flipped[index] ^= 0x01
        assert False is _ed25519.verify(pub, msg, bytes(flipped))
    assert False is _ed25519.verify(pub, msg + b"x", sig)


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_signing_reproduces_rfc8032_signatures(
    seed: str, public: str, message: str, signature: str
) -> None:
    """A key generated from an RFC 8032 seed has its public key and signs its exact signature."""
    key = generate_key("rfc8032", bytes.fromhex(seed))
    assert bytes.fromhex(public) == key.verifier.public_key
    assert bytes.fromhex(signature) == key.sign(bytes.fromhex(message))


def test_signature_with_s_not_reduced_is_refused() -> None:
    """A signature whose S is not below the group order (a malleated copy) does not verify."""
    _, public, message, signature = (bytes.fromhex(part) for part in RFC8032[1])
    order = 2**252 + 27742317777372353535851937790883648493
    s = int.from_bytes(signature[32:], "little") + order
    malleated = signature[:32] + s.to_bytes(32, "little")
    assert False is _ed25519.verify(public, message, malleated)


def test_non_canonical_and_off_curve_points_are_refused() -> None:
    """A public key or R that encodes y >= p, or no curve point, makes verification fail."""
    _, public, message, signature = (bytes.fromhex(part) for part in RFC8032[0])
    p = 2**255 - 19
    non_canonical = (p + 1).to_bytes(32, "little")  # y = 1 + p: the identity, encoded badly
    assert False is _ed25519.is_public_key(non_canonical)
    assert False is _ed25519.verify(non_canonical, message, signature)
    assert False is _ed25519.verify(public, message, non_canonical + signature[32:])
    off_curve = (2).to_bytes(32, "little")  # y = 2 has no x on the curve
    assert False is _ed25519.is_public_key(off_curve)
    assert False is _ed25519.verify(public, message, signature[:63])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.binary(min_size=32, max_size=32),
    message=st.binary(max_size=200),
    flip=st.one_of(st.none(), st.integers(min_value=0, max_value=64 * 8 - 1)),
)
def test_verifier_agrees_with_cryptography(seed: bytes, message: bytes, flip: int | None) -> None:
    """On random keys, messages and one-bit signature mutations, the verifier agrees with OpenSSL."""
    private = Ed25519PrivateKey.from_private_bytes(seed)
    public = private.public_key()
    signature = bytearray(private.sign(message))
    if flip is not None:
        signature[flip // 8] ^= 1 << (flip % 8)
    try:
        public.verify(bytes(signature), message)
        expected = True
    except Exception:
        expected = False
    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert expected == _ed25519.verify(raw, message, bytes(signature))


# --- keys ------------------------------------------------------------------------------------


def test_go_documentation_keys_read_and_match() -> None:
    """The signer and verifier keys of Go's note documentation read back as one key pair."""
    signer = parse_signer_key(GO_SKEY)
    verifier = parse_verifier_key(GO_VKEY)
    assert verifier == signer.verifier
    assert 0xC74F20A3 == verifier.key_hash
    assert GO_SKEY == signer.text
    assert GO_VKEY == verifier.text


def test_generated_keys_round_trip_through_text() -> None:
    """A generated key's signer and verifier texts read back to the same keys."""
    assert LOG == parse_signer_key(LOG.text)
    assert LOG.verifier == parse_verifier_key(LOG.verifier.text)
    assert LOG.verifier == parse_verifier_key((LOG.verifier.text + "\n").encode())
    assert LOG == parse_signer_key(LOG.text + "\n")


def test_key_generation_is_deterministic_in_the_seed() -> None:
    """The same seed and name give the same key; another seed gives another key."""
    assert LOG == generate_key("example.com/log", bytes(range(32)))
    assert LOG.verifier.public_key != WITNESS.verifier.public_key


def test_signer_key_repr_hides_the_seed() -> None:
    """Printing a signer key shows its name and public half, never the secret seed."""
    text = repr(LOG)
    assert LOG.seed.hex() not in text
    assert base64.b64encode(bytes([1]) + LOG.seed).decode() not in text
    assert "seed" not in text


def _verifier_text(name: str, raw: bytes, key_hash: int | None = None) -> str:
    if key_hash is None:
        key_hash = int.from_bytes(hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4], "big")
    return f"{name}+{key_hash:08x}+{base64.b64encode(raw).decode()}"


PUB = LOG.verifier.public_key


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            _verifier_text("n", b"\x01" + PUB, 0x12345678), "hash-mismatch", id="wrong-hint"
        ),
        pytest.param(_verifier_text("n", b"\x01" + PUB[:31]), "bad-key-length", id="short-key"),
        pytest.param(_verifier_text("n", b"\x01" + PUB + b"\0"), "bad-key-length", id="long-key"),
        pytest.param(_verifier_text("n", b"\x02" + PUB), "unknown-algorithm", id="algorithm"),
        pytest.param(_verifier_text("n", b""), "bad-base64", id="empty-key"),
        pytest.param(
            _verifier_text("n", b"\x01" + (2).to_bytes(32, "little")), "not-a-point", id="off-curve"
        ),
        pytest.param(
            "n+0000000g+" + base64.b64encode(b"\x01" + PUB).decode(), "bad-hash", id="hex"
        ),
        pytest.param(_verifier_text("n", b"\x01" + PUB).upper(), "bad-hash", id="uppercase-hash"),
        pytest.param("n+1234567+AQ==", "bad-hash", id="seven-digit-hash"),
        pytest.param(_verifier_text("n", b"\x01" + PUB)[:-1], "bad-base64", id="unpadded"),
        pytest.param(_verifier_text("n", b"\x01" + PUB) + " ", "bad-base64", id="trailing-space"),
        pytest.param(_verifier_text("n", b"\x01" + PUB) + "\n\n", "bad-base64", id="two-newlines"),
        pytest.param(_verifier_text("n", b"\x01" + PUB) + "+x", "bad-base64", id="trailing-field"),
        pytest.param("n+12345678", "bad-fields", id="two-fields"),
        pytest.param(_verifier_text("a b", b"\x01" + PUB), "bad-key-name", id="space-in-name"),
        pytest.param(
            _verifier_text("a\u3000b", b"\x01" + PUB), "bad-key-name", id="ideographic-space"
        ),
        pytest.param(_verifier_text("", b"\x01" + PUB), "bad-key-name", id="empty-name"),
        pytest.param(LOG.text, "bad-fields", id="signer-key-given"),
        pytest.param("x" * 5000, "too-large", id="huge"),
        pytest.param(b"n+12345678+\xff\xfe", "not-utf8", id="not-utf8"),
        pytest.param("a\udc80b+12345678+AQ==", "not-utf8", id="lone-surrogate"),
    ],
)
def test_malformed_verifier_keys_are_refused(text: str | bytes, problem: str) -> None:
    """Each malformed verifier key is refused as a malformed key naming its own problem."""
    with refused("malformed_key") as error:
        parse_verifier_key(text)
    assert problem == error.value.problem


def test_non_canonical_base64_trailing_bits_are_refused() -> None:
    """Key data whose unused trailing base64 bits are set is refused, though it decodes."""
    text = LOG.verifier.text
    last = text[
        -2
    ]  # 33 bytes encode as 44 characters with one '=': the last letter has 2 spare bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    sibling = alphabet[alphabet.index(last) ^ 1]
    with refused("malformed_key") as error:
        parse_verifier_key(text[:-2] + sibling + "=")
    assert "bad-base64" == error.value.problem


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(GO_VKEY, "not-private", id="verifier-key-given"),
        pytest.param("PRIVATE+KEY+n+12345678", "bad-fields", id="four-fields"),
        pytest.param(
            "PRIVATE+KEY+n+00000000+" + base64.b64encode(b"\x01" + bytes(32)).decode(),
            "hash-mismatch",
            id="wrong-hint",
        ),
        pytest.param(
            "PRIVATE+KEY+n+00000000+" + base64.b64encode(b"\x01" + bytes(31)).decode(),
            "bad-key-length",
            id="short-seed",
        ),
        pytest.param(
            GO_SKEY.replace("PeterNeumann", "PeterNeumann2"), "hash-mismatch", id="renamed"
        ),
    ],
)
def test_malformed_signer_keys_are_refused(text: str, problem: str) -> None:
    """Each malformed signer key is refused as a malformed key naming its own problem."""
    with refused("malformed_key") as error:
        parse_signer_key(text)
    assert problem == error.value.problem


def test_generate_key_refuses_bad_names_and_seeds() -> None:
    """Key generation refuses a name with '+' or a space and a seed that is not 32 bytes."""
    with refused("malformed_key") as name_error:
        generate_key("a+b", bytes(32))
    assert "bad-key-name" == name_error.value.problem
    with refused("malformed_key") as surrogate_error:
        generate_key("a\ud800", bytes(32))
    assert "bad-key-name" == surrogate_error.value.problem
    with refused("malformed_key") as seed_error:
        generate_key("ab", bytes(31))
    assert "bad-key-length" == seed_error.value.problem


# --- notes -----------------------------------------------------------------------------------


def test_go_documentation_note_opens_and_signing_reproduces_it() -> None:
    """Go's documented note verifies, and signing its text with its key gives the same bytes."""
    verifier = parse_verifier_key(GO_VKEY)
    opened = open_note(GO_NOTE, [verifier])
    assert GO_TEXT == opened.text
    assert (verifier,) == opened.verified_by
    assert GO_NOTE == sign_note(GO_TEXT, [parse_signer_key(GO_SKEY)])


def test_unknown_cosignature_is_ignored_and_reported() -> None:
    """A signature by a key the caller does not know is ignored, listed as unverified."""
    note = (GO_TEXT + "\n" + GO_SIG + GO_COSIG).encode()
    opened = open_note(note, [parse_verifier_key(GO_VKEY)])
    assert ("EnochRoot",) == tuple(s.name for s in opened.unverified)
    assert GO_COSIG.rstrip("\n") == opened.unverified[0].line


def test_note_round_trip_keeps_text_with_blank_lines() -> None:
    """A text holding blank lines signs and opens back to itself (the last blank line splits)."""
    text = "first\n\nsecond\n\n— not a signature\n"
    opened = open_note(sign_note(text, [LOG]), [LOG.verifier])
    assert text == opened.text


def test_tampered_text_is_refused() -> None:
    """Changing one character of the signed text makes the known key's signature fail."""
    note = _signed_by_log().replace(b"\n3\n", b"\n4\n")
    with refused("invalid_signature") as error:
        open_note(note, [LOG.verifier])
    assert f"key {LOG.verifier.name}+{LOG.verifier.key_hash:08x} does not verify" in str(
        error.value
    )


def test_tampered_signature_is_refused() -> None:
    """A signature line from a known key whose bytes were altered fails the whole note."""
    note = parse_note(_signed_by_log())
    good = note.signatures[0]
    bad = NoteSignature(
        good.name, good.key_hash, bytes([good.signature[0] ^ 1]) + good.signature[1:]
    )
    forged = (note.text + "\n" + bad.line + "\n").encode()
    with refused("invalid_signature"):
        open_note(forged, [LOG.verifier])


def test_wrong_key_hint_is_an_unknown_key() -> None:
    """A signature naming a known key with another hint is ignored, so the note is unverified."""
    note = parse_note(_signed_by_log())
    good = note.signatures[0]
    other = NoteSignature(good.name, good.key_hash ^ 1, good.signature)
    data = (note.text + "\n" + other.line + "\n").encode()
    with refused("unverified") as error:
        open_note(data, [LOG.verifier])
    assert "signed by 0 known key(s), 1 required" in str(error.value)


def test_same_hint_other_name_is_an_unknown_key() -> None:
    """A signature with a known key's hint but another name is ignored, as C2SP requires."""
    note = parse_note(_signed_by_log())
    good = note.signatures[0]
    other = NoteSignature("example.com/other", good.key_hash, good.signature)
    with refused("unverified"):
        open_note((note.text + "\n" + other.line + "\n").encode(), [LOG.verifier])


def test_note_without_known_signer_is_refused() -> None:
    """A note signed only by keys the caller does not know fails, naming what was found."""
    with refused("unverified") as error:
        open_note(_signed_by_log(), [WITNESS.verifier])
    assert "example.com/log+" in str(error.value)
    with refused("unverified"):
        open_note(_signed_by_log(), [])


def test_cosigners_report_which_known_keys_signed() -> None:
    """With a log key and witnesses, the result names every known key that signed, in order."""
    cosigned = sign_note(parse_note(_signed_by_log()), [WITNESS])
    both = open_note(cosigned, [WITNESS.verifier, LOG.verifier, STRANGER.verifier], required=2)
    assert (LOG.verifier, WITNESS.verifier) == both.verified_by
    assert () == both.unverified
    only_log = open_note(cosigned, [LOG.verifier])
    assert (LOG.verifier,) == only_log.verified_by
    assert ("example.com/witness",) == tuple(s.name for s in only_log.unverified)


def test_required_cosigners_missing_is_refused() -> None:
    """Requiring two known signers when one signed is refused as unverified."""
    with refused("unverified") as error:
        open_note(_signed_by_log(), [LOG.verifier, WITNESS.verifier], required=2)
    assert "signed by 1 known key(s), 2 required" in str(error.value)


def test_one_bad_cosignature_fails_the_note() -> None:
    """A valid log signature does not save a note whose known witness signature is bad."""
    note = parse_note(sign_note(BODY.text, [LOG, WITNESS]))
    log_sig, witness_sig = note.signatures
    bad = NoteSignature(witness_sig.name, witness_sig.key_hash, log_sig.signature)
    data = (note.text + "\n" + log_sig.line + "\n" + bad.line + "\n").encode()
    with refused("invalid_signature") as error:
        open_note(data, [LOG.verifier, WITNESS.verifier])
    assert f"key {WITNESS.verifier.name}+{WITNESS.verifier.key_hash:08x} does not" in str(
        error.value
    )


def test_resigning_replaces_the_signers_own_line() -> None:
    """Cosigning with a key that already signed replaces its line instead of adding one."""
    twice = sign_note(parse_note(_signed_by_log()), [LOG])
    assert 1 == len(parse_note(twice).signatures)
    assert _signed_by_log() == twice


def test_duplicate_signature_lines_count_once() -> None:
    """A signature line repeated verbatim is read once."""
    data = _signed_by_log()
    line = data[data.rindex(b"\n\n") + 2 :]
    assert 1 == len(parse_note(data + line).signatures)


def test_ambiguous_known_keys_are_refused() -> None:
    """Two different known keys with one name and hash cannot both be trusted."""
    twin = VerifierKey(LOG.verifier.name, LOG.verifier.key_hash, WITNESS.verifier.public_key)
    with refused("ambiguous_key"):
        open_note(_signed_by_log(), [LOG.verifier, twin])
    assert (LOG.verifier,) == open_note(_signed_by_log(), [LOG.verifier, LOG.verifier]).verified_by


SIG_LINE = _signed_by_log().split(b"\n\n")[-1]
TEXT = BODY.text.encode()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(TEXT + SIG_LINE, "no-signature-block", id="missing-blank-line"),
        pytest.param(TEXT + b"\n", "no-signature-block", id="no-signatures"),
        pytest.param(TEXT + b"\n" + SIG_LINE[:-1], "no-final-newline", id="no-final-newline"),
        pytest.param(TEXT + b"\n" + SIG_LINE + b"junk", "no-final-newline", id="trailing-data"),
        pytest.param(TEXT + b"\n" + SIG_LINE + b"junk\n", "bad-signature-line", id="trailing-line"),
        pytest.param(TEXT + b"\n" + SIG_LINE + b"\n", "no-signature-block", id="trailing-blank"),
        pytest.param(TEXT + b"\n" + b"- " + SIG_LINE[4:], "bad-signature-line", id="hyphen"),
        pytest.param(
            TEXT + b"\n" + SIG_LINE.replace(b" ", b"", 1), "bad-signature-line", id="no-space"
        ),
        pytest.param(
            TEXT + b"\n" + SIG_LINE.replace(b"log ", b"log", 1), "bad-key-name", id="no-separator"
        ),
        pytest.param(
            TEXT + b"\n" + SIG_LINE.replace(b"example.com/log", b"a+b"), "bad-key-name", id="plus"
        ),
        pytest.param(
            TEXT + b"\n" + SIG_LINE.replace(b"example.com/log", b"a\xc2\xa0b"),
            "bad-key-name",
            id="nbsp",
        ),
        pytest.param(TEXT + b"\n" + SIG_LINE.replace(b"=\n", b"\n"), "bad-base64", id="unpadded"),
        pytest.param(
            TEXT + b"\n" + SIG_LINE.replace(b"=\n", b"=\x20\n"), "bad-base64", id="trailing-space"
        ),
        pytest.param(
            TEXT + b"\n" + SIG_LINE[:20] + b"*" + SIG_LINE[21:], "bad-base64", id="bad-char"
        ),
        pytest.param(TEXT + b"\n\xe2\x80\x94 n AAAAAA==\n", "short-signature", id="four-bytes"),
        pytest.param(TEXT + b"\n\xe2\x80\x94 n \n", "short-signature", id="empty-signature"),
        pytest.param(
            TEXT + b"\n" + SIG_LINE * 101, "too-many-signatures", id="too-many-signatures"
        ),
        pytest.param(b"x" * (DEFAULT_MAX_NOTE_BYTES + 1), "too-large", id="huge"),
        pytest.param(b"\xff" + TEXT + b"\n" + SIG_LINE, "not-utf8", id="not-utf8"),
        pytest.param(b"\xed\xa0\x80\n\n" + SIG_LINE, "not-utf8", id="surrogate"),
        pytest.param(b"\xc0\xae\n\n" + SIG_LINE, "not-utf8", id="overlong"),
        pytest.param(
            TEXT.replace(b"\n", b"\r\n") + b"\n" + SIG_LINE, "control-character", id="crlf"
        ),
        pytest.param(b"a\tb\n\n" + SIG_LINE, "control-character", id="tab"),
        pytest.param(b"a\x00b\n\n" + SIG_LINE, "control-character", id="nul"),
    ],
)
def test_malformed_notes_are_refused(data: bytes, problem: str) -> None:
    """Each malformed note is refused as a malformed note naming its own problem, before any crypto."""
    with refused("malformed_note") as error:
        open_note(data, [LOG.verifier])
    assert problem == error.value.problem


def test_limits_are_configurable() -> None:
    """A smaller byte or signature limit refuses a note the defaults accept."""
    data = sign_note(BODY.text, [LOG, WITNESS])
    assert 2 == len(open_note(data, [LOG.verifier, WITNESS.verifier]).verified_by)
    with refused("malformed_note") as size:
        open_note(data, [LOG.verifier], max_bytes=len(data) - 1)
    assert "too-large" == size.value.problem
    with refused("malformed_note") as count:
        open_note(data, [LOG.verifier], max_signatures=1)
    assert "too-many-signatures" == count.value.problem


def test_sixteen_signatures_are_accepted() -> None:
    """C2SP requires accepting at least 16 signatures; the default reads them all."""
    data = _signed_by_log() + b"".join(
        f"— w{i} {base64.b64encode(bytes(68)).decode()}\n".encode() for i in range(15)
    )
    opened = open_note(data, [LOG.verifier])
    assert 15 == len(opened.unverified)


def test_signing_refuses_texts_no_reader_could_open() -> None:
    """Signing a text without a final newline, with a control character or a lone surrogate fails."""
    for text, problem in [
        ("no newline", "no-final-newline"),
        ("tab\there\n", "control-character"),
        ("\udc80\n", "not-utf8"),
        ("x" * DEFAULT_MAX_NOTE_BYTES + "\n", "too-large"),
    ]:
        with refused("malformed_note") as error:
            sign_note(text, [LOG])
        assert problem == error.value.problem


def test_errors_share_the_trace_root() -> None:
    """Every refusal is one SignatureError under the trace root, told apart by its reason."""
    with refused("malformed_key") as caught:
        parse_verifier_key("not a key")
    assert (True, "bad-fields") == (isinstance(caught.value, TraceError), caught.value.problem)


# --- without the signatures extra ------------------------------------------------------------


def _without_cryptography(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "cryptography" or name.startswith("cryptography."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "cryptography", None)


def test_verification_needs_no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """With cryptography unimportable, verifier keys parse and checkpoints verify."""
    data = _signed_by_log()
    text = LOG.verifier.text
    _without_cryptography(monkeypatch)
    with pytest.raises(ImportError):
        __import__("cryptography.hazmat.primitives.asymmetric.ed25519")
    opened = open_checkpoint(data, [parse_verifier_key(text)])
    assert BODY == opened.body


def test_signing_without_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """With cryptography unimportable, signing and signer keys raise an error naming the extra."""
    _without_cryptography(monkeypatch)
    for attempt in (
        lambda: sign_checkpoint_note(BODY, [LOG]),
        lambda: parse_signer_key(LOG.text),
        lambda: generate_key("n", bytes(32)),
    ):
        with refused("signing_unavailable") as error:
            attempt()
        assert "twinflow-trace[signatures]" in str(error.value)


# --- checkpoints -----------------------------------------------------------------------------


def test_checkpoint_text_matches_the_c2sp_example() -> None:
    """A body renders exactly as C2SP's tlog-checkpoint example text."""
    body = CheckpointBody(
        "example.com/behind-the-sofa",
        20852163,
        base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="),
    )
    expected = (
        "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )
    assert expected == body.text
    assert body == parse_checkpoint_body(expected)


def test_checkpoint_round_trip_with_extensions() -> None:
    """A signed checkpoint with extension lines opens to the same body and names its signer."""
    body = CheckpointBody("example.com/log", 0, bytes(32), ("head abc", "— x"))
    opened = open_checkpoint(
        sign_checkpoint_note(body, [LOG]), [LOG.verifier], origin="example.com/log"
    )
    assert body == opened.body
    assert (LOG.verifier,) == opened.verified_by


def test_checkpoint_for_another_origin_is_refused() -> None:
    """A valid checkpoint for another log fails when the caller names the expected origin."""
    with refused("origin_mismatch"):
        open_checkpoint(_signed_by_log(), [LOG.verifier], origin="example.com/other")


ROOT_B64 = base64.b64encode(ROOT).decode()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(f"o\n3\n{ROOT_B64}", "no-final-newline", id="no-final-newline"),
        pytest.param("o\n3\n", "too-few-lines", id="two-lines"),
        pytest.param(f"\n3\n{ROOT_B64}\n", "empty-origin", id="empty-origin"),
        pytest.param(f"o\n03\n{ROOT_B64}\n", "bad-size", id="leading-zero"),
        pytest.param(f"o\n-3\n{ROOT_B64}\n", "bad-size", id="negative"),
        pytest.param(f"o\n+3\n{ROOT_B64}\n", "bad-size", id="plus"),
        pytest.param(f"o\n\n{ROOT_B64}\n", "bad-size", id="empty-size"),
        pytest.param(f"o\n\u0663\n{ROOT_B64}\n", "bad-size", id="arabic-digit"),
        pytest.param(f"o\n3 \n{ROOT_B64}\n", "bad-size", id="space"),
        pytest.param(f"o\n{2**63}\n{ROOT_B64}\n", "bad-size", id="over-int64"),
        pytest.param(f"o\n{'9' * 5000}\n{ROOT_B64}\n", "bad-size", id="huge-size"),
        pytest.param(f"o\n3\n{ROOT_B64[:-1]}\n", "bad-root-hash", id="unpadded-root"),
        pytest.param(
            f"o\n3\n{base64.b64encode(ROOT[:31]).decode()}\n", "bad-root-hash", id="short"
        ),
        pytest.param(f"o\n3\n{ROOT.hex()}\n", "bad-root-hash", id="hex-root"),
        pytest.param(f"o\n3\n{ROOT_B64}\n\n", "empty-extension", id="empty-extension"),
        pytest.param(f"o\n3\n{ROOT_B64}\next\n\nmore\n", "empty-extension", id="blank-inside"),
    ],
)
def test_malformed_checkpoint_bodies_are_refused(text: str, problem: str) -> None:
    """Each malformed checkpoint body is refused as a malformed checkpoint naming its problem."""
    with refused("malformed_checkpoint") as error:
        parse_checkpoint_body(text)
    assert problem == error.value.problem


def test_checkpoint_body_construction_is_checked() -> None:
    """A body that would not read back as itself cannot be built."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"origin": ""}, "empty-origin"),
        ({"origin": "a\nb"}, "bad-line"),
        ({"size": -1}, "bad-size"),
        ({"size": 2**63}, "bad-size"),
        ({"root_hash": bytes(31)}, "bad-root-hash"),
        ({"extensions": ("",)}, "empty-extension"),
        ({"extensions": ("a\nb",)}, "bad-line"),
    ]
    for kwargs, problem in cases:
        fields: dict[str, Any] = {"origin": "o", "size": 1, "root_hash": ROOT, "extensions": ()}
        with refused("malformed_checkpoint") as error:
            CheckpointBody(**(fields | kwargs))
        assert problem == error.value.problem


def test_signed_non_checkpoint_note_is_refused_as_checkpoint() -> None:
    """A validly signed note whose text is not a checkpoint body is refused as a malformed checkpoint."""
    with refused("malformed_checkpoint"):
        open_checkpoint(sign_note("hello\n", [LOG]), [LOG.verifier])


def test_parse_note_keeps_order_and_fields() -> None:
    """parse_note returns the text and each line's name, hint and signature bytes."""
    note = parse_note(sign_note(BODY.text, [LOG, WITNESS]))
    assert BODY.text == note.text
    assert [("example.com/log", LOG.key_hash), ("example.com/witness", WITNESS.key_hash)] == [
        (s.name, s.key_hash) for s in note.signatures
    ]
    assert isinstance(note, Note)
    assert 64 == len(note.signatures[0].signature)


def test_values_are_frozen_and_compare_by_fields() -> None:
    """Keys, notes and bodies refuse assignment, equal by fields, and hash alike when equal."""
    with pytest.raises(AttributeError):
        LOG.verifier.name = "other"
    with pytest.raises(AttributeError):
        del BODY.size
    twin = parse_verifier_key(LOG.verifier.text)
    assert (True, hash(LOG.verifier)) == (twin == LOG.verifier, hash(twin))
    assert LOG.verifier != WITNESS.verifier
    assert BODY != BODY.text
    assert CheckpointBody("example.com/log", 3, ROOT, ()) == BODY


def test_unverified_error_quotes_and_caps_names_from_the_note() -> None:
    """Names read from a hostile note are quoted and at most five are listed in the message."""
    lines = "".join(f"— evil\x9b{i} {base64.b64encode(bytes(68)).decode()}\n" for i in range(8))
    with refused("unverified") as error:
        open_note((BODY.text + "\n" + lines).encode(), [LOG.verifier])
    message = str(error.value)
    assert "\x9b" not in message
    assert "'evil\\x9b0+00000000'" in message
    assert "and 3 more" in message


def test_signing_refuses_invalid_signature_names() -> None:
    """Cosigning a hand-built note whose signature has an invalid name fails before signing."""
    bad = Note(BODY.text, (NoteSignature("a b", 1, bytes(64)),))
    with refused("malformed_note") as error:
        sign_note(bad, [LOG])
    assert "bad-key-name" == error.value.problem


def test_second_signature_by_a_known_key_must_verify_too() -> None:
    """A second, different line for a known key is verified too; a bad one fails the note."""
    data = _signed_by_log()
    good = parse_note(data).signatures[0]
    other = NoteSignature(good.name, good.key_hash, bytes(64))
    with refused("invalid_signature"):
        open_note(data + (other.line + "\n").encode(), [LOG.verifier])
