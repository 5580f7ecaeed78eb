"""The one door for untrusted text: secrets scrubbed in every form, terminal controls escaped."""

from __future__ import annotations

import base64
import io
import json
import urllib.parse
from pathlib import Path

import pytest

import twinflow._base._untrusted as untrusted
from twinflow._base._files import write_new
from twinflow._base._untrusted import (
    REDACTED,
    credential_shape,
    for_terminal,
    holds_secret,
    register_secret,
    scrub,
    scrub_bytes,
    scrub_value,
    unfinished_secret,
)
from twinflow.trace import canonical_bytes
from twinflow.vocab import JsonValue

KEY = "sk-untrusted-test-4d2c9e71b0aa"
register_secret(KEY)


@pytest.mark.parametrize("prefix", [b"", b"u:", b"user:", b"Bearer ", b"ab", b'{"k":"'])
@pytest.mark.parametrize("suffix", [b"", b"x", b'"}', b"!!"])
def test_the_key_base64_encoded_after_any_prefix_is_scrubbed(prefix: bytes, suffix: bytes) -> None:
    """base64 of user:key, Bearer key or a JSON blob holding the key: found at every alignment."""
    encoded = base64.b64encode(prefix + KEY.encode() + suffix).decode()
    for form in (encoded, encoded.replace("+", "-").replace("/", "_")):
        assert (True, False) == (REDACTED in scrub(form), KEY in scrub(form))


@pytest.mark.parametrize(
    "text",
    [
        f"bad key {KEY}",
        f"key={urllib.parse.quote(KEY, safe='')}",
        f"{KEY}{KEY}",
        f"Authorization: Basic {base64.b64encode(f'me:{KEY}'.encode()).decode()}",
    ],
)
def test_the_key_and_its_common_encodings_are_replaced(text: str) -> None:
    """The exact key, url-encoded and base64 of user:key all become the marker."""
    assert (True, True) == (holds_secret(text), REDACTED in scrub(text))
    assert not holds_secret(scrub(text))


def test_text_without_a_secret_is_unchanged() -> None:
    """Scrubbing leaves ordinary text (and a near miss of the key) as it was."""
    text = "sk-untrusted-test and the weather is fine"
    assert text == scrub(text)


def test_scrub_value_reaches_every_string_of_a_json_value() -> None:
    """Strings in lists and objects, and object keys, are scrubbed; numbers are kept."""
    value: JsonValue = {KEY: [1, {"m": f"echo {KEY}"}], "n": 2.5}
    expected = {REDACTED: [1, {"m": f"echo {REDACTED}"}], "n": 2.5}
    assert expected == scrub_value(value)


def test_files_written_through_the_kernel_never_hold_the_key(tmp_path: Path) -> None:
    """write_new scrubs what it writes: the last door of every artefact."""
    target = tmp_path / "results.json"
    write_new(target, f'{{"error": "bad key {KEY}"}}'.encode())
    assert f'{{"error": "bad key {REDACTED}"}}' == target.read_text()


@pytest.mark.parametrize(
    ("hostile", "shown"),
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # OSC: set the window title
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen, cursor home
        ("\x1b]52;c;cm0gLXJmIH4=\x07", "\\x1b]52;c;cm0gLXJmIH4=\\x07"),  # OSC 52: the clipboard
        ("ok\rFAIL", "ok\\rFAIL"),  # overwrite the line
        ("\x9b31m", "\\x9b31m"),  # C1 CSI
        ("\x7f\x00\x08", "\\x7f\\x00\\x08"),  # DEL, NUL, backspace
        ("abc\u202edcba", "abc\\u202edcba"),  # right-to-left override
        ("x\u2066y\u2069", "x\\u2066y\\u2069"),  # isolates
        ("a\u200bb", "a\\u200bb"),  # zero-width space
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
        ("line one\nline\ttwo", "line one\nline\ttwo"),  # newline and tab pass
        ("naïve café 東京 🙂", "naïve café 東京 🙂"),  # printable text passes
    ],
)
def test_terminal_controls_are_shown_as_escapes(hostile: str, shown: str) -> None:
    """Each control, format character or lone surrogate becomes a visible escape."""
    assert shown == for_terminal(hostile)


def test_terminal_text_always_encodes_and_is_scrubbed() -> None:
    """What for_terminal returns writes to a strict UTF-8 stream, the key replaced."""
    written = io.BytesIO()
    stream = io.TextIOWrapper(written, encoding="utf-8", errors="strict")
    stream.write(for_terminal(f"\udcff {KEY} \ud83d"))
    stream.flush()
    assert f"\\udcff {REDACTED} \\ud83d" == written.getvalue().decode()


@pytest.mark.parametrize(
    "secret",
    [
        'pw"quoted-4be1',
        "pw\\backslash-9c0d",
        "pw\ttab\x01ctl-77aa",
        'a"b\\c\nd-e3f0',
        "pw-été-5a1c",
    ],
)
def test_a_secret_escaped_inside_encoded_json_is_found_and_scrubbed(secret: str) -> None:
    """A secret holding a quote, a backslash or a control character is escaped inside a JSON
    string: the byte screen of encoded JSON (a trace line) finds that form too, and the value's
    scrub replaces it."""
    register_secret(secret)
    value: JsonValue = {"content": f"x{secret}y", "n": 1}
    encoded = canonical_bytes(value)
    if secret.isascii():
        assert secret.encode() not in encoded  # only its escaped form is in the bytes
    assert holds_secret(encoded)
    assert {"content": f"x{REDACTED}y", "n": 1} == scrub_value(value)
    assert not holds_secret(canonical_bytes(scrub_value(value)))
    # And as the standard library writes JSON by default (non-ASCII escaped too).
    assert holds_secret(json.dumps(value).encode())


@pytest.mark.parametrize("form", [KEY.upper(), KEY.lower(), KEY.swapcase(), KEY.title()])
def test_every_case_variant_of_the_key_is_scrubbed(form: str) -> None:
    """A server that upper-cases, lower-cases or mixes the key's case still leaks nothing."""
    assert f"echo {REDACTED}!" == scrub(f"echo {form}!")
    assert f"echo {REDACTED}!".encode() == scrub_bytes(f"echo {form}!".encode())


@pytest.mark.parametrize("joint", ["\n", "\r\n", " ", "\\n"])
def test_a_key_cut_by_the_separator_a_reader_joins_with_is_scrubbed(joint: str) -> None:
    """Two blocks joined by a line break (raw or JSON-escaped) or a space: found whole."""
    assert f"a {REDACTED} b" == scrub(f"a {KEY[:10]}{joint}{KEY[10:]} b")


def test_a_key_split_across_parts_a_reader_joins_is_cut_from_each_part() -> None:
    """Text parts a reader concatenates (`Message.text`) and a list of strings: each part
    holding a piece of the key has that piece replaced; other parts are left alone."""
    parts: JsonValue = [
        {"kind": "text", "text": f"one {KEY[:6]}"},
        {"kind": "text", "text": KEY[6:20]},
        {"kind": "text", "text": f"{KEY[20:]} two"},
        {"kind": "image", "data": "AAAA"},
    ]
    expected = [
        {"kind": "text", "text": f"one {REDACTED}"},
        {"kind": "text", "text": REDACTED},
        {"kind": "text", "text": f"{REDACTED} two"},
        {"kind": "image", "data": "AAAA"},
    ]
    assert expected == scrub_value(parts)
    assert ["a", REDACTED, f"{REDACTED}b"] == scrub_value(["a", KEY[:9], f"{KEY[9:]}b"])


SHORT = "q7"


@pytest.fixture
def short_key() -> None:
    """``q7`` registered for one test (the root conftest unregisters it after): registered at
    import, it would scrub every later test's ``"key": "q7@1"`` in the same process."""
    register_secret(SHORT)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Bearer q7", f"Bearer {REDACTED}"),
        ("Authorization: bearer Q7", f"Authorization: bearer {REDACTED}"),
        ("?api_key=q7&x=1", f"?api_key={REDACTED}&x=1"),
        ('{"token": "q7"}', f'{{"token": "{REDACTED}"}}'),
        ("invalid key: q7", f"invalid key: {REDACTED}"),
        ("q7", "q7"),
        ("the q7 step", "the q7 step"),
        ("q7q7 aq7 q7b", "q7q7 aq7 q7b"),
        ("Bearer q7b", "Bearer q7b"),
        ('{"key": "q7@1"}', '{"key": "q7@1"}'),
        ("api_key=q7:8080", "api_key=q7:8080"),
        ('{"key": "q7\\n"}', f'{{"key": "{REDACTED}\\n"}}'),
        ("<b>token q7</b>", f"<b>token {REDACTED}</b>"),
    ],
)
@pytest.mark.usefixtures("short_key")
def test_a_short_key_is_scrubbed_only_after_a_credential_word(text: str, expected: str) -> None:
    """A key shorter than eight characters is replaced where a credential word introduces it,
    never inside other text or as a word of its own."""
    assert expected == scrub(text)
    assert (expected != text) == holds_secret(text)


@pytest.mark.usefixtures("short_key")
def test_a_short_key_never_touches_a_field_name() -> None:
    """Field names stay whatever short key is registered; a credential value is replaced."""
    value: JsonValue = {"q7": {"Bearer q7": "Bearer q7", "max_tokens": 1}}
    assert {"q7": {"Bearer q7": f"Bearer {REDACTED}", "max_tokens": 1}} == scrub_value(value)


@pytest.mark.parametrize(
    ("piece", "held"),
    [
        (f"hello {KEY.upper()[:12]}", 12),
        (f"hello {KEY[:9]}\n", 10),
        (f"hello {KEY[:4]}\n{KEY[4:9]}", 10),
        ("hello world", 0),
    ],
)
def test_a_streamed_piece_ending_in_the_start_of_the_key_is_held(
    piece: str, held: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The printer holds back the end of a piece that begins the key, in another case or cut
    by a line break, and nothing of a piece that cannot begin it."""
    # With only this key registered: the registry is the process's, and a key another test
    # registered may begin with the piece's last letter.
    monkeypatch.setattr(untrusted, "_pattern", untrusted._pattern)
    monkeypatch.setattr(untrusted, "_names_pattern", untrusted._names_pattern)
    monkeypatch.setattr(untrusted, "_bytes_pattern", untrusted._bytes_pattern)
    monkeypatch.setattr(untrusted, "_installed", untrusted._installed)
    monkeypatch.setattr(untrusted, "_forms", set())
    monkeypatch.setattr(untrusted, "_exact", set())
    monkeypatch.setattr(untrusted, "_short", set())
    register_secret(KEY)
    assert held == unfinished_secret(piece)


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        ("postgres://app:s3cret@db:5432/app", "a URL with user:password@"),
        ("redis://:s3cret@cache:6379/0", "a URL with user:password@"),
        ("sk-ant-api03-abcdefghijklmnop", "a token with a well-known prefix"),
        ("ghp_0123456789abcdefghijklmnop", "a token with a well-known prefix"),
        ("xoxp-1234-5678-abcdefghijkl", "a token with a well-known prefix"),
        ("glpat-abcdefghij0123456789", "a token with a well-known prefix"),
        ("AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
        ("Bearer abcdefgh.ijk", "an Authorization value"),
        ("-----BEGIN EC PRIVATE KEY-----\nMHcC", "a PEM block"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "a JSON web token"),
        (f"prefix {KEY.upper()}", "a key this process read"),
    ],
)
def test_credential_shape_names_what_a_value_holds(value: str, shape: str) -> None:
    """A credential by its shape, whatever the variable holding it is called."""
    assert shape == credential_shape(value)


@pytest.mark.parametrize(
    "value",
    [
        "/usr/local/bin:/usr/bin",
        "en_US.UTF-8",
        "http://127.0.0.1:8080/v1",
        "https://user@example.org/repo.git",
        "info",
        "q7",
        "sk",
        "skeleton-key-holder",
        "task-0123",
        "x",
    ],
)
def test_ordinary_values_have_no_credential_shape(value: str) -> None:
    """Paths, locales, URLs without a password, log levels and short words pass."""
    assert credential_shape(value) is None
