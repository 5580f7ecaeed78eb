"""The trace: line format, hash chain, checkpoints, proofs, tamper detection, durability, repair."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinflow._base import _untrusted
from twinflow._base._errors import TargetExistsError
from twinflow._base._untrusted import REDACTED, register_secret
from twinflow.agent import (
    Agent,
    AgentConfigError,
    FunctionModel,
    ModelRequested,
    ModelResponded,
    PolicyDecided,
    RunFinished,
    RunStarted,
    ToolCalled,
    ToolReturned,
    Trace,
    TraceEvent,
    verify_agent_trace,
)
from twinflow.agent._chain import MessageChain
from twinflow.agent._events import AgentConfig, EventBody, PolicyRecord
from twinflow.agent._trace import TraceWriter, encode_event
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import (
    Checkpoint,
    FileTraceSink,
    FsyncPolicy,
    InvalidProofError,
    Limits,
    MemoryTraceSink,
    TraceCorruptError,
    TraceFormatError,
)
from twinflow.trace._checkpoint import check_consistency, check_inclusion
from twinflow.trace._format import DEFAULT_MAX_LINE_BYTES, GENESIS
from twinflow.trace._repair import repair_trace
from twinflow.vocab import (
    CallId,
    Message,
    ModelResponse,
    ModelSettings,
    RunId,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
    Usage,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes

START = datetime(2026, 1, 1, tzinfo=UTC)


def config() -> AgentConfig:
    """A small agent configuration record."""
    return AgentConfig(
        model="FunctionModel",
        system_prompt=None,
        tools=(),
        policy=PolicyRecord(
            allow=("add",),
            tool_budgets={},
            run_budget=None,
            approval=None,
            max_output_chars=100,
            include_traceback=False,
        ),
        output_schema=None,
        max_steps=3,
        usage_limits={},
        settings=ModelSettings(),
    )


def write_sample(writer: TraceWriter) -> None:
    """Write a six-event run: start, request, response with a call, decision, call, result, finish."""
    cfg = config()
    call = ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 1, "b": 2})
    at = (START + timedelta(seconds=i) for i in range(100))
    writer.append(
        next(at),
        RunStarted(run_id=RunId("r1"), config_digest=digest(cfg), config=cfg, prompt="add 1 and 2"),
    )
    writer.append(
        next(at),
        ModelRequested(
            step=1,
            purpose="step",
            prefix_length=0,
            prefix_digest=MessageChain().hexdigest,
            new_messages=(Message.user("add 1 and 2"),),
            tools_digest=digest([]),
            output_schema_digest=None,
            settings=ModelSettings(),
        ),
    )
    writer.append(
        next(at),
        ModelResponded(
            step=1,
            response=ModelResponse(message=Message(role="assistant", parts=(call,))),
        ),
    )
    writer.append(
        next(at),
        PolicyDecided(
            call_id=CallId("c1"), tool="add", decision="allow", by="policy", reason="allowed"
        ),
    )
    writer.append(
        next(at), ToolCalled(call_id=CallId("c1"), tool="add", arguments={"a": 1, "b": 2})
    )
    writer.append(
        next(at),
        ToolReturned(result=ToolResultPart(call_id=CallId("c1"), name="add", content="3")),
    )
    writer.end_step()
    writer.append(
        next(at),
        RunFinished(
            run_id=RunId("r1"), steps=1, usage=Usage(), transcript_digest=digest(Transcript())
        ),
    )
    writer.end_step()


def sample() -> bytes:
    """The sample trace's bytes."""
    sink = MemoryTraceSink()
    write_sample(TraceWriter(sink))
    return sink.data


class _Remembering(TraceWriter):
    """A writer that remembers what it was asked to append."""

    def __init__(self, sink: MemoryTraceSink) -> None:
        super().__init__(sink)
        self.appended: list[tuple[datetime, EventBody]] = []

    def append(self, at: datetime, body: EventBody) -> str:
        self.appended.append((at, body))
        return super().append(at, body)


@pytest.mark.parametrize(
    "at",
    [
        START,
        START + timedelta(microseconds=1),
        START + timedelta(milliseconds=1500),
        datetime(2026, 3, 29, 1, 30, 5, 120000, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(-timedelta(hours=3))),
        datetime(2026, 1, 1, tzinfo=timezone(timedelta(seconds=3661))),
        datetime(1, 1, 1, tzinfo=UTC),
    ],
)
def test_spliced_lines_are_the_whole_event_encoding(at: datetime) -> None:
    """Each line the writer splices around its body's bytes is the whole `TraceEvent`'s
    encoding, for clock readings with offsets, fractions and odd years."""
    sink = MemoryTraceSink()
    writer = _Remembering(sink)
    write_sample(writer)
    writer.append(at, ToolCalled(call_id=CallId("c2"), tool="add", arguments={"x": 0.5}))
    writer.append(at, ToolCalled(call_id=CallId("c3"), tool="add", arguments={"n": 2**53 - 1}))
    prev, expected = GENESIS, []
    for seq, (when, body) in enumerate(writer.appended):
        line, prev = encode_event(TraceEvent(seq=seq, prev=prev, at=when, body=body))
        expected.append(line)
    assert b"".join(expected) == sink.data


def test_a_naive_clock_reading_is_refused_as_before() -> None:
    """A clock reading without a timezone is an `AgentConfigError` naming the event, and
    nothing is written."""
    sink = MemoryTraceSink()
    with pytest.raises(AgentConfigError, match="invalid TraceEvent"):
        TraceWriter(sink).append(
            datetime(2026, 1, 1),  # naive on purpose
            ToolCalled(call_id=CallId("c1"), tool="add", arguments={}),
        )
    assert b"" == sink.data


def test_an_event_longer_than_a_reader_accepts_is_not_written() -> None:
    """A line past the readers' limit is `EventTooLargeError`; nothing of it is written."""
    sink = MemoryTraceSink()
    writer = TraceWriter(sink)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    writer.append(at, ToolCalled(call_id=CallId("c1"), tool="add", arguments={}))
    before = sink.data
    huge = ToolCalled(
        call_id=CallId("c2"), tool="add", arguments={"x": "a" * DEFAULT_MAX_LINE_BYTES}
    )
    with pytest.raises(TraceFormatError, match="a trace reader accepts") as caught:
        writer.append(at, huge)
    assert "tool_called event of" in str(caught.value)
    assert (before, 1) == (sink.data, writer.size)


def test_sample_trace_verifies() -> None:
    """A trace written by the writer verifies, and its checkpoint matches the writer's."""
    sink = MemoryTraceSink()
    writer = TraceWriter(sink)
    write_sample(writer)
    report = verify_agent_trace(sink.data)
    expected = (True, 7, None)
    assert expected == (report.ok, report.events, report.problem)
    assert writer.checkpoint() == report.checkpoint


def test_event_digest_is_the_vocab_digest_and_chains() -> None:
    """Each line's digest is vocab's digest of the event, and prev links to the event before."""
    trace = Trace.load(sample())
    prevs = [GENESIS, *trace.digests[:-1]]
    assert [digest(e) for e in trace.events] == list(trace.digests)
    assert prevs == [e.prev for e in trace.events]
    assert list(range(7)) == [e.seq for e in trace.events]


def test_loaded_events_read_as_a_sequence_typed_from_their_bytes() -> None:
    """`Trace.events` is a sequence whose items are the events the verifier typed, by any access."""
    trace = Trace.load(sample())
    events = list(trace.events)
    assert 7 == len(trace.events) == len(events) == trace.size
    assert [e.seq for e in events] == [trace.events[i].seq for i in range(7)]
    assert events[-1] == trace.events[-1] == trace.events[6]
    assert tuple(events[2:5]) == trace.events[2:5]
    assert events[::-2] == list(trace.events[::-2])
    assert list(trace.encoded) == [trace.encoded[i] for i in range(7)]
    assert trace.digests[-7] == trace.digests[0] != trace.digests[1]
    for index in (7, -8):
        with pytest.raises(IndexError):
            trace.events[index]
        with pytest.raises(IndexError):
            trace.digests[index]


def test_events_read_back_are_the_values_that_verified_and_encode_to_their_bytes() -> None:
    """Each event read from a loaded trace is the value the verifier typed: it re-encodes to
    its verified bytes, for numbers only a double denotes (``1e16`` is written
    ``10000000000000000``, which a plain parse reads as an int with no canonical form) and
    for nesting deeper than the default limit that the trace was loaded with."""
    nested: object = "bottom"
    for _ in range(80):
        nested = [nested]
    sink = MemoryTraceSink()
    writer = TraceWriter(sink)
    writer.append(
        START,
        ToolCalled(
            call_id=CallId("c1"), tool="add", arguments={"big": 1e16, "half": 2.5, "deep": nested}
        ),
    )
    writer.append(
        START,
        PolicyDecided(call_id=CallId("c1"), tool="add", decision="deny", by="policy", reason="no"),
    )
    trace = Trace.load(sink.data, limits=Limits(max_depth=100))
    for event, encoded in zip(trace.events, trace.encoded, strict=True):
        assert canonical_bytes(event) == encoded
    assert isinstance(trace.events[0].body.arguments["big"], float)


def test_a_loaded_trace_holds_less_than_three_times_its_file() -> None:
    """`Trace.load` keeps the verified bytes and digests, not a typed value per event (ADR 0075).

    Measured with tracemalloc (allocation sizes, not time): the typed events alone took four
    times the file.
    """
    sink = MemoryTraceSink()
    writer = TraceWriter(sink)
    at = START
    for i in range(2000):
        call = CallId(f"call_{i:06d}")
        writer.append(
            at, PolicyDecided(call_id=call, tool="add", decision="allow", by="policy", reason="ok")
        )
        writer.append(at, ToolCalled(call_id=call, tool="add", arguments={"a": i, "b": 2}))
        at += timedelta(milliseconds=1)
    data = sink.data
    Trace.load(data)  # pydantic's and the leaf's first-use caches, outside the measure
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        trace = Trace.load(data)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert trace.size == 4000
    assert held <= 3 * len(data), f"{held / len(data):.2f}x the file"


def test_every_single_byte_flip_is_detected() -> None:
    """Flipping any bit pattern of any byte of the sample trace fails verification."""
    data = sample()
    missed = []
    for mask in (0x01, 0x20, 0x80):
        for i in range(len(data)):
            tampered = data[:i] + bytes([data[i] ^ mask]) + data[i + 1 :]
            if verify_agent_trace(tampered).ok:
                missed.append((i, mask))
    assert not missed, f"undetected flips: {missed[:10]}"


def test_every_line_deletion_is_detected_as_removed() -> None:
    """Deleting any one line is reported as a removal at that line's sequence number."""
    lines = sample().splitlines(keepends=True)
    found = []
    for i in range(len(lines)):
        report = verify_agent_trace(b"".join(lines[:i] + lines[i + 1 :]))
        assert report.problem is not None
        found.append((report.problem.kind, report.problem.seq))
    assert [("removed", i) for i in range(len(lines))] == found


def test_every_line_swap_is_detected_as_reordered() -> None:
    """Swapping any two lines is reported as a reordering at the first of them."""
    lines = sample().splitlines(keepends=True)
    found, expected = [], []
    for i in range(len(lines)):
        for j in range(i + 1, len(lines)):
            swapped = list(lines)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            report = verify_agent_trace(b"".join(swapped))
            assert report.problem is not None
            found.append((report.problem.kind, report.problem.seq))
            expected.append(("reordered", i))
    assert expected == found


def test_every_cut_point_is_detected() -> None:
    """Cutting the file anywhere fails: mid-line as truncated, at a line end as removed."""
    data = sample()
    found, expected = [], []
    for cut in range(len(data)):
        report = verify_agent_trace(data[:cut])
        assert report.problem is not None
        found.append(report.problem.kind)
        expected.append("removed" if cut == 0 or data[cut - 1] == ord("\n") else "truncated")
    assert expected == found


def test_truncated_last_line_keeps_earlier_events_verified() -> None:
    """A crash mid-line is reported as truncated, with every complete event still verified."""
    data = sample()
    report = verify_agent_trace(data[:-10])
    assert report.problem is not None
    expected = ("truncated", 6, 6)
    assert expected == (report.problem.kind, report.problem.seq, report.events)


def test_duplicated_line_is_detected_as_inserted() -> None:
    """Re-inserting a copy of an earlier line is reported as an insertion of that event."""
    lines = sample().splitlines(keepends=True)
    report = verify_agent_trace(b"".join([*lines[:4], lines[1], *lines[4:]]))
    assert report.problem is not None
    expected = ("inserted", 4)
    assert expected == (report.problem.kind, report.problem.seq)
    assert "copy of seq 1" in report.problem.message


def test_foreign_event_with_valid_digest_is_detected() -> None:
    """A well-formed event spliced in before the real one is reported as an insertion."""
    real = sample().splitlines(keepends=True)
    forged_sink = MemoryTraceSink()
    forged = TraceWriter(forged_sink)
    forged.append(
        START, RunStarted(run_id=RunId("evil"), config_digest="x", config=config(), prompt="p")
    )
    report = verify_agent_trace(b"".join([forged_sink.lines[0], *real]))
    assert report.problem is not None
    expected = ("inserted", 0)
    assert expected == (report.problem.kind, report.problem.seq)
    assert "both claim seq 0" in report.problem.message


def test_rewritten_trace_fails_against_its_checkpoint() -> None:
    """A trace rebuilt from scratch (new chain) passes alone but fails the published checkpoint."""
    checkpoint = Trace.load(sample()).checkpoint()
    sink = MemoryTraceSink()
    writer = TraceWriter(sink)
    writer.append(
        START, RunStarted(run_id=RunId("r2"), config_digest="x", config=config(), prompt="p")
    )
    writer.append(
        START,
        RunFinished(run_id=RunId("r2"), steps=0, usage=Usage(), transcript_digest="d"),
    )
    for _ in range(5):
        writer.append(
            START,
            RunFinished(run_id=RunId("r2"), steps=0, usage=Usage(), transcript_digest="d"),
        )
    assert verify_agent_trace(sink.data).ok
    report = verify_agent_trace(sink.data, checkpoint=checkpoint)
    assert report.problem is not None
    expected = "checkpoint"
    assert expected == report.problem.kind


def test_checkpoint_of_a_prefix_matches_a_longer_trace() -> None:
    """A prefix's checkpoint matches only with the tail accepted; a bigger one reports removal."""
    trace = Trace.load(sample())
    assert verify_agent_trace(sample(), checkpoint=trace.checkpoint(3), allow_tail=True).ok
    uncovered = verify_agent_trace(sample(), checkpoint=trace.checkpoint(3)).problem
    assert uncovered is not None and "covers events 0-2 of 7" in uncovered.message
    bigger = Checkpoint(size=9, root=trace.checkpoint().root, head=trace.digests[-1])
    problem = verify_agent_trace(sample(), checkpoint=bigger).problem
    assert problem is not None
    expected = "removed"
    assert expected == problem.kind


def test_inclusion_and_consistency_proofs_of_a_trace() -> None:
    """Every event is provably included; every prefix is provably extended by the whole."""
    trace = Trace.load(sample())
    whole = trace.checkpoint()
    for seq in range(trace.size):
        check_inclusion(trace.inclusion_proof(seq), whole)
    for size in range(trace.size + 1):
        check_consistency(trace.consistency_proof(size), trace.checkpoint(size), whole)
    bad = dataclasses.replace(trace.inclusion_proof(2), event_digest=trace.digests[3])
    with pytest.raises(InvalidProofError):
        check_inclusion(bad, whole)
    with pytest.raises(InvalidProofError):
        check_consistency(trace.consistency_proof(3), trace.checkpoint(4), whole)


def test_load_refuses_a_bad_trace_with_its_report() -> None:
    """Trace.load raises TraceCorruptError carrying the report naming the problem."""
    data = bytearray(sample())
    data[100] ^= 1
    with pytest.raises(TraceCorruptError) as info:
        Trace.load(bytes(data))
    assert info.value.report.problem is not None
    expected = "edited"
    assert expected == info.value.report.problem.kind


def test_repair_moves_the_partial_line_aside(tmp_path: Path) -> None:
    """Repair moves the partial last line to a side file, deleting nothing, and the rest verifies."""
    data = sample()
    path = tmp_path / "trace.jsonl"
    path.write_bytes(data[:-10])
    result = repair_trace(path)
    assert result.moved_to is not None
    moved = Path(result.moved_to).read_bytes()
    assert data[:-10] == path.read_bytes() + moved
    assert verify_agent_trace(path, require_complete=False).ok
    expected = (None, 0)
    assert expected == dataclasses.astuple(repair_trace(path))


def test_file_sink_refuses_an_existing_file(tmp_path: Path) -> None:
    """The file sink never writes over an existing trace."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    with pytest.raises(TargetExistsError, match="already exists"):
        FileTraceSink(path)


def test_file_sink_writes_a_verifiable_trace(tmp_path: Path) -> None:
    """Events written through the file sink with per-event fsync verify from disk."""
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(FileTraceSink(path), fsync="event")
    write_sample(writer)
    writer.close()
    assert verify_agent_trace(path).ok


@pytest.mark.parametrize(
    ("policy", "flushes", "durable"), [("event", 7, 7), ("step", 2, 2), ("none", 2, 0)]
)
def test_fsync_policy(policy: str, flushes: int, durable: int) -> None:
    """Durable flushes happen per event, per step, or never, as the policy says."""
    sink = MemoryTraceSink()
    write_sample(TraceWriter(sink, fsync=policy))
    assert (flushes, durable) == (sink.flushes, sink.durable_flushes)


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count ``os.fsync`` calls from here on (each call still syncs); returns the tally list."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


@pytest.mark.parametrize(("policy", "fsyncs"), [("event", 7), ("step", 2), ("none", 0)])
def test_a_file_trace_pays_exactly_the_fsyncs_its_policy_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy, fsyncs: int
) -> None:
    """Writing and closing a file trace syncs per event, per step, or never: close adds none."""
    calls = count_fsyncs(monkeypatch)
    writer = TraceWriter(FileTraceSink(tmp_path / "t.jsonl"), fsync=policy)
    write_sample(writer)
    writer.close()
    assert (fsyncs, True) == (len(calls), verify_agent_trace(tmp_path / "t.jsonl").ok)


@pytest.mark.parametrize(("policy", "durable"), [("event", 1), ("step", 1), ("none", 0)])
def test_closing_the_writer_syncs_lines_written_after_the_last_step(
    policy: FsyncPolicy, durable: int
) -> None:
    """An event written outside a step is made durable at close, unless the policy is none."""
    sink = MemoryTraceSink()
    writer = TraceWriter(sink, fsync=policy)
    writer.append(
        START, RunStarted(run_id=RunId("r1"), config_digest="0" * 64, config=config(), prompt="p")
    )
    writer.close()
    assert durable == sink.durable_flushes


def test_an_agent_run_under_fsync_none_never_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole agent run with ``fsync="none"``, closed through its ``with`` block, pays no fsync."""
    calls = count_fsyncs(monkeypatch)
    model = FunctionModel(lambda request: Message(role="assistant", parts=(TextPart(text="hi"),)))
    trace = FileTraceSink(tmp_path / "t.jsonl")
    with Agent(
        model, clock=SteppingClock(START), ids=CountingIds(), trace=trace, fsync="none"
    ) as agent:
        agent.run("hello")
    assert (0, True) == (len(calls), verify_agent_trace(tmp_path / "t.jsonl").ok)


def test_message_chain_is_incremental() -> None:
    """Folding messages in batches gives the same digest as one at a time."""
    messages = (Message.user("a"), Message(role="assistant", parts=(TextPart(text="b"),)))
    one, two = MessageChain(), MessageChain()
    one.update(messages)
    two.update(messages[:1])
    two.update(messages[1:])
    assert (one.hexdigest, 2) == (two.hexdigest, two.length)
    assert MessageChain().hexdigest != one.hexdigest


OPS = ["flip", "delete", "duplicate", "swap", "cut", "space", "dupkey", "retype"]


def _reforge(line: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    """Edit a line's event bytes and recompute its digest (what a forger does)."""
    event = edit(line[len(b'{"digest":"') + 64 + len(b'","event":') : -2])
    digest = hashlib.sha256(event).hexdigest().encode()
    return b'{"digest":"' + digest + b'","event":' + event + b"}\n"


def _mutate(data: bytes, op: str, i: int, j: int) -> bytes:
    lines = data.splitlines(keepends=True)
    a, b = i % len(lines), j % len(lines)
    if op == "flip":
        k = i % len(data)
        return data[:k] + bytes([data[k] ^ (1 + j % 255)]) + data[k + 1 :]
    if op == "delete":
        del lines[a]
    elif op == "duplicate":
        lines.insert(b, lines[a])
    elif op == "swap":
        lines[a], lines[b] = lines[b], lines[a]
    elif op == "cut":
        return data[: i % len(data)]
    elif op == "space":
        lines[a] = _reforge(lines[a], lambda e: e.replace(b",", b", ", 1))
    elif op == "dupkey":
        lines[a] = _reforge(lines[a], lambda e: e.replace(b'"kind":', b'"kind":"x","kind":', 1))
    else:  # a body field of the wrong type: canonical JSON, a known kind, not a valid event
        lines[a] = _reforge(
            lines[a],
            lambda e: e.replace(b'"run_id":"', b'"run_id":7,"x":"', 1).replace(
                b'"step":1', b'"step":"1"', 1
            ),
        )
    return b"".join(lines)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(OPS), st.integers(0, 100_000), st.integers(0, 100_000))
def test_verify_trace_and_trace_load_agree_on_mutated_traces(op: str, i: int, j: int) -> None:
    """For every mutated trace, verify_agent_trace's report is the one Trace.load raises (or it loads)."""
    data = _mutate(sample(), op, i, j)
    report = verify_agent_trace(data, require_complete=False)
    try:
        loaded = Trace.load(data)
    except TraceCorruptError as exc:
        assert report == exc.report
    else:
        assert (True, loaded.size, loaded.checkpoint()) == (
            report.ok,
            report.events,
            report.checkpoint,
        )


def test_a_secret_escaped_in_an_event_is_written_as_the_marker() -> None:
    """A registered secret holding a quote is escaped in the event's bytes: the writer still
    finds it and writes the marker in its place."""
    secret = 'pw"q-in-a-tool-result-31c7'
    register_secret(secret)
    writer = TraceWriter(MemoryTraceSink())
    result = ToolResultPart(call_id=CallId("c1"), name="add", content=f"the key is {secret}.")
    writer.append(START, ToolReturned(result=result, error_type=None))
    data = writer.sink.data if isinstance(writer.sink, MemoryTraceSink) else b""
    assert REDACTED.encode() in data
    assert b'pw\\"q-in-a-tool-result' not in data
    assert Trace.load(data).size == 1


def test_a_short_secret_inside_a_digest_leaves_the_chain_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A secret short enough to turn up in a digest's hex sends an event through the scrub,
    which replaces secrets in its body only: ``prev`` stays the digest, and the trace is the
    same bytes and verifies."""
    plain = TraceWriter(MemoryTraceSink())
    write_sample(plain)
    assert isinstance(plain.sink, MemoryTraceSink)
    data = plain.sink.data
    loaded = Trace.load(data)
    bodies = b"".join(canonical_bytes(event.body) for event in loaded.events)
    first = loaded.digests[0]  # the second event's prev
    secret = next(first[i : i + 4] for i in range(61) if first[i : i + 4].encode() not in bodies)
    # A registry of its own: a four-letter secret would scrub other tests' text.
    # Every part of the registry, so nothing of it outlives the test (a short secret is kept
    # in `_short`, and the patterns are rebuilt from all three sets).
    monkeypatch.setattr(_untrusted, "_forms", set())
    monkeypatch.setattr(_untrusted, "_exact", set())
    monkeypatch.setattr(_untrusted, "_short", set())
    monkeypatch.setattr(_untrusted, "_installed", _untrusted._installed)
    monkeypatch.setattr(_untrusted, "_pattern", _untrusted._pattern)
    monkeypatch.setattr(_untrusted, "_names_pattern", _untrusted._names_pattern)
    monkeypatch.setattr(_untrusted, "_bytes_pattern", _untrusted._bytes_pattern)
    register_secret(secret)
    writer = TraceWriter(MemoryTraceSink())
    write_sample(writer)
    assert isinstance(writer.sink, MemoryTraceSink)
    assert data == writer.sink.data
    assert list(Trace.load(writer.sink.data).digests) == list(loaded.digests)
