"""Strict, streaming verification: each failure is its own problem kind at its seq."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from json import loads as json_loads
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracekit import lines_of

from twinflow.trace import (
    CanonicalError,
    Checkpoint,
    Limits,
    TraceCorruptError,
    UserError,
    VerificationReport,
    canonical_bytes,
    verify_trace,
    walk_trace,
)
from twinflow.trace._canonical import parse_json
from twinflow.trace._format import FORMAT_VERSION, GENESIS, encode_line, encode_redacted
from twinflow.trace._testing import events_of, rechain
from twinflow.trace._testing import framed as forged_line
from twinflow.trace._testing import small_events as events
from twinflow.trace._testing import small_trace as trace


def with_line_1(event_bytes: bytes) -> bytes:
    """A 5-event trace whose line 2 (seq 1) is replaced by a forged line over these bytes."""
    lines = lines_of(events(5))
    lines[1] = forged_line(event_bytes)
    return b"".join(lines)


def seq1() -> bytes:
    """The canonical bytes of the real seq 1 event."""
    return canonical_bytes(events(5)[1])


PREV = events(5)[1]["prev"]
AT = b'"at":"2026-01-01T00:00:01Z"'

CASES: dict[str, bytes] = {
    "duplicate_key": b"{"
    + AT
    + b',"body":{"decision":"deny","decision":"allow","kind":"policy_decided"},"prev":"'
    + PREV.encode()
    + b'","seq":1}',
    "non_finite": b"{"
    + AT
    + b',"body":{"kind":"tool_called","x":NaN},"prev":"'
    + PREV.encode()
    + b'","seq":1}',
    "number_form": b"{"
    + AT
    + b',"body":{"kind":"tool_called","x":1.0},"prev":"'
    + PREV.encode()
    + b'","seq":1}',
    "escape_form": b"{"
    + AT
    + b',"body":{"kind":"tool_called","x":"\\u0041"},"prev":"'
    + PREV.encode()
    + b'","seq":1}',
    "whitespace": b"{"
    + AT
    + b', "body":{"kind":"tool_called"},"prev":"'
    + PREV.encode()
    + b'","seq":1}',
    "key_order": b'{"body":{"kind":"tool_called"},'
    + AT
    + b',"prev":"'
    + PREV.encode()
    + b'","seq":1}',
    "too_deep": b"{"
    + AT
    + b',"body":{"kind":"tool_called","x":'
    + b"[" * 100
    + b"]" * 100
    + b'},"prev":"'
    + PREV.encode()
    + b'","seq":1}',
    "not_utf8": b"{"
    + AT
    + b',"body":{"kind":"tool_called","x":"\xff"},"prev":"'
    + PREV.encode()
    + b'","seq":1}',
    "not_json": b"{" + AT + b',"body":{"kind":},"prev":"' + PREV.encode() + b'","seq":1}',
    "not_event": b'{"decision":"allow"}',
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_format_failure_is_its_own_kind_at_its_seq(kind: str) -> None:
    """A forged line (digest recomputed) that is not strict canonical JSON is named by kind at seq 1."""
    report = verify_trace(with_line_1(CASES[kind]))
    assert report.problem is not None
    assert (kind, 1, 2, 1) == (
        report.problem.kind,
        report.problem.seq,
        report.problem.line,
        report.events,
    )


@pytest.mark.parametrize(
    "value",
    [
        b"9007199254740993",
        b"-9007199254740993",
        b"[9007199254740993]",
        b"[1,-90071992547409930]",
        b'{"a":[0,9007199254740993]}',
    ],
)
def test_a_big_integer_is_a_number_form_problem(value: bytes) -> None:
    """An integer beyond 2**53-1 has no exact double: its line is refused as number_form."""
    event = seq1().replace(b'"n":1', b'"n":' + value)
    report = verify_trace(with_line_1(event))
    assert report.problem is not None
    assert ("number_form", 1) == (report.problem.kind, report.problem.seq)


@pytest.mark.parametrize(
    "value",
    [
        b'"id,12345678901234567890"',
        b'"[-12345678901234567890"',
        b"9007199254740991",
        b"-9007199254740991",
        '"😀 and \ue000"'.encode(),
        b"1e+21",
        b"5e-324",
    ],
)
def test_a_line_the_fast_screens_send_aside_still_verifies(value: bytes) -> None:
    """Long digit runs in strings, the largest safe integers, astral characters and floats
    the C encoder prints differently are canonical: the strict path accepts what the screens
    sent it."""
    event = seq1().replace(b'"n":1', b'"n":' + value)
    lines = lines_of(events(5))
    lines[1] = forged_line(event)
    assert canonical_bytes(json_loads(event)) == event
    # The forged line verifies; the chain breaks only at seq 2, whose prev names the original.
    report = verify_trace(b"".join(lines), require_complete=False)
    assert report.problem is not None
    assert ("edited", 2, 2) == (report.problem.kind, report.problem.seq, report.events)


def test_parse_json_refuses_a_big_top_level_integer_as_not_canonical() -> None:
    """A document that is only an integer beyond 2**53-1 reads as a double, printed otherwise."""
    with pytest.raises(CanonicalError) as caught:
        parse_json(b"9007199254740993", canonical=True)
    assert "number_form" == caught.value.reason
    assert 2**53 - 1 == parse_json(b"9007199254740991", canonical=True)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"n":1}', "kind None"),
        (b"[]", "kind None"),
        (b'{"kind":["tool_called"]}', "kind ['tool_called']"),
        (b'{"kind":{"a":1}}', "kind {'a': 1}"),
    ],
)
def test_a_body_without_a_string_kind_is_not_an_event(body: bytes, reason: str) -> None:
    """A body without a string kind is not_event, with the kind found named (an unhashable kind
    too: it once escaped as a TypeError from the set lookup)."""
    event = b"{" + AT + b',"body":' + body + b',"prev":"' + PREV.encode() + b'","seq":1}'
    report = verify_trace(with_line_1(event))
    assert report.problem is not None
    assert ("not_event", 1) == (report.problem.kind, report.problem.seq)
    assert reason in report.problem.message


def test_a_non_integer_seq_is_not_an_event() -> None:
    """seq must be an integer (a string "1" or a boolean is not)."""
    event = b"{" + AT + b',"body":{"kind":"tool_called"},"prev":"' + PREV.encode() + b'","seq":"1"}'
    report = verify_trace(with_line_1(event))
    assert report.problem is not None
    assert ("not_event", 1) == (report.problem.kind, report.problem.seq)


def test_a_valid_trace_verifies_with_its_checkpoint() -> None:
    """A hand-built trace verifies; its report's checkpoint covers all its events."""
    report = verify_trace(trace(7))
    assert (True, 7, None) == (report.ok, report.events, report.problem)


def test_a_line_above_the_limit_is_too_long_and_never_buffered() -> None:
    """A line longer than max_line_bytes is too_long at its seq (the reader stops at the limit)."""
    lines = lines_of(events(3))
    data = lines[0] + b'{"digest":"' + b"a" * 64 + b'","event":{"x":"' + b"y" * 5000 + b'"}}\n'
    report = verify_trace(data, limits=Limits(max_line_bytes=1000))
    assert report.problem is not None
    assert ("too_long", 1) == (report.problem.kind, report.problem.seq)


def test_the_depth_limit_is_configurable() -> None:
    """A nesting the default allows is too_deep under a smaller max_depth."""
    event = seq1().replace(b'"args":{"a":[1,2.5]}', b'"args":' + b"[" * 10 + b"]" * 10)
    data = with_line_1(event)
    default = verify_trace(data).problem  # line 2 passes; the chain breaks at seq 2 after it
    assert default is not None
    assert ("edited", 2) == (default.kind, default.seq)
    report = verify_trace(data, limits=Limits(max_depth=8))
    assert report.problem is not None
    assert ("too_deep", 1) == (report.problem.kind, report.problem.seq)


def test_limits_below_a_trace_line_are_a_usage_error() -> None:
    """Limits that cannot hold any trace line are refused when built."""
    with pytest.raises(UserError):
        Limits(max_line_bytes=10)
    with pytest.raises(UserError):
        Limits(max_depth=1)


def test_a_torn_last_line_is_truncated_and_the_rest_verifies() -> None:
    """A last line without newline is truncated at its seq; the events before it count."""
    data = trace(5)[:-20]
    report = verify_trace(data, require_complete=False)
    assert report.problem is not None
    assert ("truncated", 4, 4) == (report.problem.kind, report.problem.seq, report.events)


def test_a_rewritten_prefix_is_named_at_the_checkpoints_last_seq() -> None:
    """A checkpoint mismatch names the last event the checkpoint covers, not seq 0."""
    published = verify_trace(trace(6)).checkpoint
    small = dataclasses.replace(published, size=4, root=hashlib.sha256(b"x").hexdigest())
    problem = verify_trace(trace(6), checkpoint=small).problem
    assert problem is not None
    assert ("checkpoint", 3) == (problem.kind, problem.seq)


def test_verify_reads_a_file_path(tmp_path: Path) -> None:
    """A path is read line by line with the same result as its bytes."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace(9))
    assert verify_trace(trace(9)) == verify_trace(path)


def report_of_walk(data: bytes) -> VerificationReport:
    """What walk_trace says of the data, as a report."""
    try:
        count = sum(1 for _ in walk_trace(data, require_complete=True))
    except TraceCorruptError as exc:
        return exc.report
    return VerificationReport(
        ok=True, events=count, checkpoint=verify_trace(data).checkpoint, problem=None
    )


MUTATIONS = st.sampled_from(
    ["flip", "delete", "duplicate", "swap", "cut", "space", "dupkey", "reorder_keys"]
)


def mutate(data: bytes, op: str, i: int, j: int) -> bytes:
    """One hostile edit of a trace (digest recomputed for the format edits)."""
    lines = data.splitlines(keepends=True)
    n = len(lines)
    a, b = i % n, j % n
    if op == "flip":
        k = i % len(data)
        return data[:k] + bytes([data[k] ^ (1 + j % 255)]) + data[k + 1 :]
    if op == "delete":
        return b"".join(lines[:a] + lines[a + 1 :])
    if op == "duplicate":
        return b"".join([*lines[: b + 1], lines[a], *lines[b + 1 :]])
    if op == "swap":
        lines[a], lines[b] = lines[b], lines[a]
        return b"".join(lines)
    if op == "cut":
        return data[: i % len(data)]
    event = lines[a][len(b'{"digest":"') + 64 + len(b'","event":') : -2]
    if op == "space":
        event = event.replace(b",", b", ", 1)
    elif op == "dupkey":
        event = event.replace(b'{"kind":', b'{"kind":"run_failed","kind":', 1)
    else:
        event = event.replace(b'"at"', b'"zz"', 1).replace(b"{", b'{"at":"x",', 1)
    lines[a] = forged_line(event)
    return b"".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(MUTATIONS, st.integers(0, 10_000), st.integers(0, 10_000))
def test_verify_and_walk_agree_on_mutated_traces(op: str, i: int, j: int) -> None:
    """verify_trace and walk_trace (what Trace.load reads through) give the same report."""
    data = mutate(trace(6), op, i, j)
    assert verify_trace(data) == report_of_walk(data)


def test_the_good_prefix_checkpoint_is_reported() -> None:
    """On a problem, the report's checkpoint covers the events before it."""
    lines = lines_of(events(5))
    lines[3] = lines[3].replace(b"event 3", b"event X")
    report = verify_trace(b"".join(lines))
    expected = verify_trace(b"".join(lines_of(events(5))[:3]), require_complete=False).checkpoint
    assert (3, expected) == (report.events, report.checkpoint)
    assert isinstance(report.checkpoint, Checkpoint)


def test_walk_trace_returns_the_checkpoint_of_what_it_yielded() -> None:
    """walk_trace's value (for ``yield from``) is the checkpoint verify_trace reports."""

    def reader() -> Any:
        checkpoint = yield from walk_trace(trace(7))
        return checkpoint

    walked = reader()
    seqs = []
    while True:
        try:
            seqs.append(next(walked).seq)
        except StopIteration as end:
            returned = end.value
            break
    assert (list(range(7)), verify_trace(trace(7)).checkpoint) == (seqs, returned)


def test_a_line_of_escaped_quotes_is_scanned_once() -> None:
    """A bracket-heavy event of unterminated escaped quotes is too_deep, not a quadratic scan."""
    event = b"[" * 100 + b'"' + b'\\"' * 200_000
    report = verify_trace(with_line_1(event))
    assert report.problem is not None
    assert ("too_deep", 1) == (report.problem.kind, report.problem.seq)


def test_note_body_is_the_c2sp_checkpoint_text() -> None:
    """origin, decimal size and base64 root, one per line, then extension lines."""
    checkpoint = Checkpoint(size=3, root="00" * 31 + "ff", head="11" * 32)
    expected = "example.org/lab\n3\n" + "A" * 40 + "AP8=\nx-ext\n"
    assert expected == checkpoint.note_body("example.org/lab", ["x-ext"])
    with pytest.raises(UserError):
        checkpoint.note_body("two\nlines")


def test_note_body_matches_the_signed_note_modules_checkpoint_text() -> None:
    """The seam: Checkpoint.note_body is exactly the text _note.CheckpointBody signs."""
    from twinflow.trace import _note

    checkpoint = verify_trace(trace(7)).checkpoint
    body = _note.CheckpointBody("example.org/lab", 7, bytes.fromhex(checkpoint.root), ("ext",))
    assert body.text == checkpoint.note_body("example.org/lab", ["ext"])


def rechained(n: int, k: int, mutate: Callable[[bytes], bytes]) -> bytes:
    """A trace of ``n`` events whose event ``k`` is stored as ``mutate`` makes it, the chain
    recomputed over the mutated bytes, so the format is the only thing wrong."""
    lines = []
    prev = GENESIS
    for seq, item in enumerate(events(n)):
        data = canonical_bytes({**item, "prev": prev})
        if seq == k:
            data = mutate(data)
        lines.append(forged_line(data))
        prev = hashlib.sha256(data).hexdigest()
    return b"".join(lines)


MUTATIONS: dict[str, Callable[[bytes], bytes]] = {
    "whitespace": lambda data: data.replace(b',"body"', b', "body"', 1),
    "duplicate_key": lambda data: data.replace(b'"n":', b'"n":0,"n":', 1),
    "escape_form": lambda data: data.replace(b'"text":"event', b'"text":"\\u0065vent', 1),
    "number_form": lambda data: data.replace(b"2.5", b"2.50", 1),
    "key_order": lambda data: data.replace(b'"a":[1,2.5]', b'"a":[1,2.5],"A":0', 1),
}


@pytest.mark.parametrize("k", [0, 1, 62, 63, 64, 65, 130, 199])
@pytest.mark.parametrize("kind", sorted(MUTATIONS))
def test_the_first_non_canonical_line_is_named_wherever_it_falls(kind: str, k: int) -> None:
    """Verification checks lines in batches: a non-canonical line at any place in a batch (or
    across batches) is named at its own seq, and the good prefix before it is counted."""
    report = verify_trace(rechained(200, k, MUTATIONS[kind]))
    assert report.problem is not None
    assert (kind, k, k) == (report.problem.kind, report.problem.seq, report.events)
    assert [e.seq for e in walk_trace(rechained(200, k, lambda data: data))] == list(range(200))


@pytest.mark.parametrize("k", [0, 63, 64, 130])
def test_check_refusing_an_event_in_a_batch_stops_there(k: int) -> None:
    """An event ``check`` refuses is not_event at its seq; walk_trace yielded exactly those before."""

    def check(value: dict[str, Any]) -> object:
        if value["seq"] == k:
            raise ValueError("refused")
        return value["seq"]

    seen: list[object] = []
    with pytest.raises(TraceCorruptError) as caught:
        seen.extend(e.value for e in walk_trace(trace(200), check=check))
    assert list(range(k)) == seen
    problem = caught.value.report.problem
    assert problem is not None
    assert ("not_event", k) == (problem.kind, problem.seq)


def _redacted(data: bytes, *seqs: int) -> bytes:
    """``data`` with the events at ``seqs`` replaced by their digest lines."""
    lines = data.splitlines(keepends=True)
    return b"".join(
        encode_redacted(line[11:75].decode()) if n in seqs else line for n, line in enumerate(lines)
    )


def test_a_redacted_event_keeps_the_chain_and_the_root() -> None:
    """Digest-only lines verify, are listed, and leave the Merkle root as it was."""
    data = trace(6)
    report = verify_trace(_redacted(data, 0, 2))
    expected = (True, (0, 2), verify_trace(data).checkpoint.root)
    assert expected == (report.ok, report.redacted, report.checkpoint.root)
    assert "seqs 0, 2 are redacted (digest only)" == report.redaction()


@pytest.mark.parametrize(
    ("edit", "kind", "seq"),
    [
        (lambda line: line.replace(b"true", b"false"), "edited", 2),
        (
            lambda line: (
                line.upper()
                .replace(b"DIGEST", b"digest")
                .replace(b"REDACTED", b"redacted")
                .replace(b"TRUE", b"true")
            ),
            "edited",
            2,
        ),
        (lambda line: line.replace(b'":true', b'": true'), "edited", 2),
        (lambda line: line[:11] + b"0" * 64 + line[75:], "edited", 3),
    ],
)
def test_a_line_that_only_looks_redacted_is_refused(
    edit: Callable[[bytes], bytes], kind: str, seq: int
) -> None:
    """Another case, spacing or value is not a redacted line; a made-up digest breaks the chain."""
    lines = _redacted(trace(6), 2).splitlines(keepends=True)
    lines[2] = edit(lines[2])
    problem = verify_trace(b"".join(lines)).problem
    assert problem is not None
    assert (kind, seq) == (problem.kind, problem.seq)


def test_readers_that_need_the_events_refuse_a_redacted_one_by_name() -> None:
    """walk_trace stops with a `redacted` problem unless it is allowed to yield digest-only events."""
    data = _redacted(trace(4), 1)
    with pytest.raises(TraceCorruptError, match="redacted at seq 1"):
        list(walk_trace(data))
    events = list(walk_trace(data, allow_redacted=True))
    assert (b"", None) == (events[1].event, events[1].value)


def test_a_line_framed_with_its_known_digest_is_the_hashed_framing() -> None:
    """`encode_line` with the digest a verified event carries frames the same line, unhashed."""
    event = canonical_bytes({"at": "2026-01-01T00:00:00Z", "body": {"kind": "run_started"}})
    line, hexdigest = encode_line(event)
    assert (line, hexdigest) == encode_line(event, hexdigest)
    assert hashlib.sha256(event).hexdigest() == hexdigest
    # The digest given is the caller's word (it verified it): it is framed as it is.
    assert (line.replace(hexdigest.encode(), GENESIS.encode()), GENESIS) == encode_line(
        event, GENESIS
    )


def _with_user_turn() -> bytes:
    """A complete trace with a ``user_turn`` event (a kind this package does not know) at seq 2."""
    found = events(5)
    return rechain(
        [
            *found[:2],
            {"at": found[2]["at"], "body": {"kind": "user_turn", "text": "hi"}},
            *found[2:],
        ]
    )


def test_an_event_of_an_unknown_kind_in_a_valid_chain_verifies() -> None:
    """The chain, digests, canonical form and tree hold for any kind: a newer writer's verifies."""
    report = verify_trace(_with_user_turn())
    assert (True, 6) == (report.ok, report.events)


def test_a_tampered_event_of_an_unknown_kind_is_refused() -> None:
    """Editing the unknown-kind event's bytes breaks its digest, as for any event."""
    data = _with_user_turn().replace(b'"text":"hi"', b'"text":"ho"')
    report = verify_trace(data)
    assert report.problem is not None
    assert ("edited", 2) == (report.problem.kind, report.problem.seq)


def test_a_rechained_unknown_kind_is_still_held_by_the_checkpoint() -> None:
    """A forger who rewrites an unknown-kind event and its chain is caught by the checkpoint."""
    original = verify_trace(_with_user_turn()).checkpoint
    forged = events_of(_with_user_turn())
    forged[2] = {**forged[2], "body": {"kind": "user_turn", "text": "ho"}}
    report = verify_trace(rechain(forged), checkpoint=original)
    assert report.problem is not None
    assert "checkpoint" == report.problem.kind


def _started_in(version: object) -> bytes:
    """A complete 5-event trace whose run_started names ``version`` as its format."""
    found = events(5)
    body = {**found[0]["body"], "format": version}  # type: ignore[dict-item]
    return rechain([{**found[0], "body": body}, *found[1:]])


@pytest.mark.parametrize("data", [trace(5), _started_in(1)], ids=["absent", "1"])
def test_a_trace_of_a_known_format_verifies(data: bytes) -> None:
    """No format (read as 1) or format 1: the trace verifies."""
    report = verify_trace(data)
    assert (True, 5) == (report.ok, report.events)


def test_a_newer_format_is_refused_saying_what_to_do() -> None:
    """A format newer than FORMAT_VERSION is refused at seq 0 with the upgrade to make."""
    report = verify_trace(_started_in(FORMAT_VERSION + 1))
    assert report.problem is not None
    assert ("format", 0, True) == (
        report.problem.kind,
        report.problem.seq,
        f"written in format {FORMAT_VERSION + 1}; this verifier knows formats up to "
        f"{FORMAT_VERSION}: upgrade twinflow-trace" in report.problem.message,
    )


@pytest.mark.parametrize("version", ["2", 0, -1, 1.5])
def test_a_format_that_is_not_a_positive_integer_is_refused(version: object) -> None:
    """A format that is not a positive integer is refused, naming what was found."""
    report = verify_trace(_started_in(version))
    assert report.problem is not None
    assert ("format", 0) == (report.problem.kind, report.problem.seq)
