"""The one door for untrusted text: secrets scrubbed in every form, terminal controls escaped."""

from __future__ import annotations

import base64
import io
import json
import urllib.parse
from pathlib import Path

import pytest

from twinflow._base._files import write_new
from twinflow._base._untrusted import (
    REDACTED,
    for_terminal,
    holds_secret,
    register_secret,
    scrub,
    scrub_value,
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
