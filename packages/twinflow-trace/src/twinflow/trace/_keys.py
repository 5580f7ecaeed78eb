"""Ed25519 keys in the text forms of the signed-note format, and base64 as C2SP writes it.

The formats are drawn in `twinflow.trace._note`. Verification runs on the standard library
alone (`twinflow.trace._ed25519`); signing, signer-key parsing and key derivation need the
``cryptography`` library (``twinflow-trace[signatures]``) and refuse with ``signing_unavailable``
without it.
"""

from __future__ import annotations

import binascii
import hashlib
from typing import TYPE_CHECKING, Literal

from twinflow.trace import _ed25519
from twinflow.trace._errors import SignatureError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SIGNATURES_EXTRA = "twinflow-trace[signatures]"
"""What to install to sign (the ``cryptography`` library)."""

_MAX_KEY_CHARS = 4096
_ED25519 = 0x01
_HEX = frozenset("0123456789abcdef")


KeyProblem = Literal[
    "too-large",
    "not-utf8",
    "bad-fields",
    "not-private",
    "bad-key-name",
    "bad-hash",
    "hash-mismatch",
    "bad-base64",
    "unknown-algorithm",
    "bad-key-length",
    "not-a-point",
]


def malformed_key(problem: KeyProblem, detail: str) -> SignatureError:
    """A verifier or signer key text is not in the signed-note key format."""
    return SignatureError(
        f"malformed key ({problem}): {detail}", reason="malformed_key", problem=problem
    )


def _signing_unavailable() -> SignatureError:
    return SignatureError(
        "signing and signer keys need the 'cryptography' library: "
        f"pip install '{SIGNATURES_EXTRA}' (verification works without it)",
        reason="signing_unavailable",
    )


def _valid_name(name: str) -> bool:
    # C2SP and Go's isValidName: non-empty, no Unicode space, no '+'. A name with a control
    # character below U+0020 could never appear in a note, so a key with one is refused too.
    # Nothing stricter: a note cosigned by an unknown key with an odd but valid name must open.
    # A lone surrogate has no UTF-8 form at all.
    return bool(name) and not any(
        c == "+" or c.isspace() or c < " " or "\ud800" <= c <= "\udfff" for c in name
    )


def _b64encode(raw: bytes) -> str:
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def _b64decode(text: str) -> bytes | None:
    """Decode canonical standard base64 (padded, alphabet only, zero trailing bits), else None."""
    if not text.isascii():
        return None
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error:
        return None
    # Strict mode still ignores set padding bits; re-encoding pins the one canonical form.
    return raw if _b64encode(raw) == text else None


class _Value:
    """A frozen value with slots: equality, hash and repr over its fields.

    Hand-written rather than a dataclass: importing ``dataclasses`` (and ``inspect`` with it)
    costs about 10 ms, a third of the trace leaf's import budget.
    """

    __slots__: tuple[str, ...] = ()
    _secret: tuple[str, ...] = ()

    def _set(self, **fields: object) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Value)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__slots__ if name not in self._secret
        )
        return f"{type(self).__name__}({fields})"


def _key_hash(name: str, encoded_key: bytes) -> int:
    return int.from_bytes(hashlib.sha256(name.encode() + b"\n" + encoded_key).digest()[:4], "big")


def _ed25519_backend() -> type[Ed25519PrivateKey]:
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    except ImportError as error:
        raise _signing_unavailable() from error
    return Ed25519PrivateKey


def _public_from_seed(seed: bytes) -> bytes:
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    except ImportError as error:
        raise _signing_unavailable() from error
    private = _ed25519_backend().from_private_bytes(seed)
    raw: bytes = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return raw


class VerifierKey(_Value):
    """An Ed25519 public key with its signed-note name and key hash."""

    __slots__ = ("key_hash", "name", "public_key")

    def __init__(self, name: str, key_hash: int, public_key: bytes) -> None:
        """Hold the fields as given; `parse_verifier_key` and `from_public_key` check them."""
        self._set(name=name, key_hash=key_hash, public_key=public_key)

    name: str
    """The key name (C2SP recommends a schema-less URL; a checkpoint's origin)."""
    key_hash: int
    """The 32-bit key hint: the first four bytes of SHA-256(name, newline, 0x01, public key)."""
    public_key: bytes
    """The 32-byte RFC 8032 public key."""

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> VerifierKey:
        """Build the verifier key named ``name`` for a raw 32-byte Ed25519 public key.

        Raises:
            SignatureError (``malformed_key``): The name or the key is invalid.
        """
        if not _valid_name(name):
            raise malformed_key("bad-key-name", f"{name!r} is empty or holds a space or '+'")
        if len(public_key) != 32:
            raise malformed_key(
                "bad-key-length", f"an Ed25519 public key is 32 bytes, not {len(public_key)}"
            )
        if not _ed25519.is_public_key(public_key):
            raise malformed_key("not-a-point", "the public key is not an Ed25519 curve point")
        return cls(name, _key_hash(name, bytes([_ED25519]) + public_key), public_key)

    @property
    def text(self) -> str:
        """The key in verifier-key text form: ``<name>+<hash>+<base64(0x01 || key)>``."""
        encoded = _b64encode(bytes([_ED25519]) + self.public_key)
        return f"{self.name}+{self.key_hash:08x}+{encoded}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` (64 bytes, no key hint) signs ``message`` under this key."""
        return _ed25519.verify(self.public_key, message, signature)


class SignerKey(_Value):
    """An Ed25519 private key (its 32-byte seed) with its signed-note name.

    The seed stays out of ``repr`` so a logged key does not leak. Build one with
    `generate_key` or `parse_signer_key`.
    """

    __slots__ = ("name", "seed", "verifier")

    _secret = ("seed",)

    def __init__(self, name: str, seed: bytes, verifier: VerifierKey) -> None:
        """Hold the fields as given; `parse_signer_key` and `generate_key` check them."""
        self._set(name=name, seed=seed, verifier=verifier)

    name: str
    """The key name, the same as its verifier key's."""
    seed: bytes
    """The 32-byte RFC 8032 private key seed. Secret."""
    verifier: VerifierKey
    """The matching verifier key (publish its `VerifierKey.text`)."""

    @property
    def key_hash(self) -> int:
        """The key hint, the same as the verifier key's."""
        return self.verifier.key_hash

    @property
    def text(self) -> str:
        """The key in signer-key text form: ``PRIVATE+KEY+<name>+<hash>+<base64(0x01||seed)>``."""
        encoded = _b64encode(bytes([_ED25519]) + self.seed)
        return f"PRIVATE+KEY+{self.name}+{self.key_hash:08x}+{encoded}"

    def sign(self, message: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``message`` (no key hint).

        Raises:
            SignatureError (``signing_unavailable``): The ``cryptography`` library is not installed.
        """
        signature: bytes = _ed25519_backend().from_private_bytes(self.seed).sign(message)
        return signature


def generate_key(name: str, seed: bytes) -> SignerKey:
    """Derive the signer key named ``name`` from a 32-byte random ``seed``.

    The seed is the caller's: this leaf reads no entropy itself (all nondeterminism enters
    through a twinflow.kernel port), so the composition root draws 32 random bytes and hands
    them here. The same seed and name always give the same key.

    Args:
        name: The key name (non-empty, no spaces, no '+'); use the checkpoints' origin.
        seed: 32 bytes from a cryptographically secure source.

    Returns:
        The signer key; ``.verifier`` is its public half.

    Raises:
        SignatureError (``malformed_key``): The name is invalid or the seed is not 32 bytes.
        SignatureError (``signing_unavailable``): The ``cryptography`` library is not installed.
    """
    if not _valid_name(name):
        raise malformed_key("bad-key-name", f"{name!r} is empty or holds a space or '+'")
    if len(seed) != 32:
        raise malformed_key("bad-key-length", f"an Ed25519 seed is 32 bytes, not {len(seed)}")
    return SignerKey(name, bytes(seed), VerifierKey.from_public_key(name, _public_from_seed(seed)))


def _key_text(text: str | bytes) -> str:
    if len(text) > _MAX_KEY_CHARS:
        raise malformed_key("too-large", f"{len(text)} characters; a key is far shorter")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise malformed_key("not-utf8", f"byte {error.start} is not UTF-8") from None
    else:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise malformed_key(
                "not-utf8", f"character {error.start} is a lone surrogate"
            ) from None
    # A key file ends with one newline; nothing else around the key is allowed.
    return text.removesuffix("\n")


def _key_fields(fields: list[str], algorithm: int = _ED25519) -> tuple[str, int, bytes]:
    """Check ``name``, ``hash`` and the base64 key data; return (name, hash, algorithm + key).

    ``algorithm`` is the one key type byte accepted: Ed25519 (0x01) for note signers, or a
    C2SP cosignature type (``twinflow.trace._witness``)."""
    name, hash_text, data = fields
    if not _valid_name(name):
        raise malformed_key("bad-key-name", f"{name!r} is empty or holds a space")
    if len(hash_text) != 8 or not set(hash_text) <= _HEX:
        raise malformed_key(
            "bad-hash", f"{hash_text!r} is not a key hash of eight lowercase hex digits"
        )
    raw = _b64decode(data)
    if raw is None or not raw:
        raise malformed_key("bad-base64", "the key data is not canonical standard base64")
    if raw[0] != algorithm:
        raise malformed_key(
            "unknown-algorithm",
            f"algorithm byte {raw[0]:#04x}; only {algorithm:#04x} is read here"
            + (" (Ed25519)" if algorithm == _ED25519 else ""),
        )
    if len(raw) != 33:
        raise malformed_key("bad-key-length", f"an Ed25519 key is 32 bytes, not {len(raw) - 1}")
    return name, int(hash_text, 16), raw


def parse_verifier_key(text: str | bytes) -> VerifierKey:
    """Read a verifier key in the signed-note text form ``<name>+<hash>+<base64>``.

    Args:
        text: The key, optionally followed by one newline (as in a key file).

    Returns:
        The key.

    Raises:
        SignatureError (``malformed_key``): The text is not a valid Ed25519 verifier key; ``problem`` says why
            (``hash-mismatch`` when the hash does not belong to the name and key).
    """
    text = _key_text(text)
    # The base64 key data may itself hold '+': split at the first two only, as Go's chop does.
    fields = text.split("+", 2)
    if text.startswith("PRIVATE+KEY+"):
        raise malformed_key(
            "bad-fields", "this is a signer (private) key; give the verifier key instead"
        )
    if len(fields) != 3:
        raise malformed_key(
            "bad-fields", f"expected <name>+<hash>+<key>, found {len(fields)} '+'-separated fields"
        )
    name, key_hash, raw = _key_fields(fields)
    if key_hash != _key_hash(name, raw):
        raise malformed_key(
            "hash-mismatch", f"key hash {key_hash:08x} does not belong to name {name!r} and key"
        )
    if not _ed25519.is_public_key(raw[1:]):
        raise malformed_key("not-a-point", "the public key is not an Ed25519 curve point")
    return VerifierKey(name, key_hash, raw[1:])


def parse_signer_key(text: str | bytes) -> SignerKey:
    """Read a signer key in the text form ``PRIVATE+KEY+<name>+<hash>+<base64>``.

    Args:
        text: The key, optionally followed by one newline (as in a key file).

    Returns:
        The key, with its verifier key derived from the seed.

    Raises:
        SignatureError (``malformed_key``): The text is not a valid Ed25519 signer key, or its hash does not
            match the public key derived from it (``hash-mismatch``).
        SignatureError (``signing_unavailable``): The ``cryptography`` library is not installed.
    """
    text = _key_text(text)
    fields = text.split("+", 4)
    if fields[:2] != ["PRIVATE", "KEY"]:
        raise malformed_key("not-private", "a signer key starts with 'PRIVATE+KEY+'")
    if len(fields) != 5:
        raise malformed_key(
            "bad-fields",
            f"expected PRIVATE+KEY+<name>+<hash>+<key>, found {len(fields)} '+'-separated fields",
        )
    name, key_hash, raw = _key_fields(fields[2:])
    verifier = VerifierKey.from_public_key(name, _public_from_seed(raw[1:]))
    if key_hash != verifier.key_hash:
        raise malformed_key(
            "hash-mismatch",
            f"key hash {key_hash:08x} does not belong to name {name!r} and this key's public half",
        )
    return SignerKey(name, raw[1:], verifier)
