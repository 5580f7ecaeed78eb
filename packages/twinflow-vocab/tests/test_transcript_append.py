"""Appending to a transcript shares its line's log: O(new messages), and the same value in every way."""

import copy
import pickle
import sys

import pytest

from twinflow.kernel import ThreadExecutor
from twinflow.vocab import (
    CallId,
    Message,
    ModelRequest,
    ModelSettings,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
    diff,
)
from twinflow.vocab import value_bytes as canonical_bytes


def _step(n: int) -> tuple[Message, Message]:
    call = ToolCallPart(id=CallId(f"c{n}"), name="add", arguments={"a": n})
    result = ToolResultPart(call_id=CallId(f"c{n}"), name="add", content=str(n))
    return Message(role="assistant", parts=(call,)), Message(role="tool", parts=(result,))


def _messages(steps: int) -> tuple[Message, ...]:
    out: list[Message] = [Message.user("go")]
    for n in range(steps):
        out.extend(_step(n))
    return tuple(out)


def _appended(steps: int) -> Transcript:
    t = Transcript(messages=(Message.user("go"),))
    for n in range(steps):
        t = t.append(*_step(n))
    return t


def _views(t: Transcript) -> tuple[object, ...]:
    """Every way a reader sees a transcript, taken before `.messages` is read."""
    return (
        len(t),
        t.messages_from(1),
        t.model_dump(mode="json"),
        t.model_dump_json(),
        canonical_bytes(t),
        canonical_bytes(ModelRequest(transcript=t)),
        ModelRequest.model_construct(transcript=t).model_dump(mode="json"),
        list(Transcript(messages=())),  # a plain one, for the iteration shape
        repr(t),
        t.messages,
    )


def test_an_appended_transcript_reads_as_the_one_built_at_once() -> None:
    """Length, slices, dumps, canonical bytes, nesting, repr and messages equal the eager value."""
    expected = _views(Transcript(messages=_messages(5)))
    assert expected == _views(_appended(5))


def test_equality_and_hash_do_not_depend_on_how_a_transcript_was_built() -> None:
    """An appended transcript equals, and hashes like, the one validated at once; both ways round."""
    text = (Message.user("a"), Message.assistant("b"), Message.user("c"))
    built = Transcript(messages=text)
    appended = Transcript().append(text[0]).append(*text[1:])
    fresh = Transcript().append(*text)
    assert (True, True, True) == (appended == built, built == fresh, hash(built) == hash(fresh))
    assert appended != Transcript(messages=text[:2])


def test_an_older_transcript_keeps_its_messages_when_its_line_grows_or_branches() -> None:
    """Appending to the newest and then to an older transcript leaves each with its own messages."""
    root = Transcript(messages=(Message.user("q"),))
    newer = root.append(Message.assistant("one"))
    newest = newer.append(Message.user("two"))
    branch = newer.append(Message.user("other"))
    expected = (["q"], ["q", "one"], ["q", "one", "two"], ["q", "one", "other"])
    assert expected == tuple([m.text for m in t.messages] for t in (root, newer, newest, branch))


def test_an_unread_appended_transcript_pickles_and_copies_as_its_value() -> None:
    """Pickle, copy and deepcopy of an appended transcript give equal values, not a shared view."""
    t = _appended(3)
    copies = (pickle.loads(pickle.dumps(t)), copy.copy(t), copy.deepcopy(_appended(3)))
    assert [t, t, t] == list(copies)
    assert [7, 7, 7] == [len(c) for c in copies]


def test_diff_sees_the_messages_of_an_appended_transcript() -> None:
    """The structural diff of two appended transcripts names the message that differs."""
    a = Transcript().append(Message.user("x"))
    b = Transcript().append(Message.user("y"))
    same = diff(a, Transcript(messages=(Message.user("x"),)))
    assert (True, True) == (diff(a, b) is not None, same is None)


@pytest.mark.parametrize("start", [0, 1, 3, 7, 100, -2])
def test_messages_from_is_the_slice(start: int) -> None:
    """`messages_from(start)` equals ``messages[start:]``, read or not."""
    expected = _messages(3)[start:]
    assert (expected, expected) == (
        _appended(3).messages_from(start),
        _appended(3).messages[start:],
    )


def test_appending_does_not_copy_the_earlier_messages() -> None:
    """Keeping every transcript of a 200-append line holds each earlier message about once, not 200 times."""
    first = Message.user("first")
    before = sys.getrefcount(first)
    kept = [Transcript(messages=(first,))]
    for n in range(200):
        kept.append(kept[-1].append(Message.assistant(str(n))))
    held = sys.getrefcount(first) - before
    # The eager tuple copy would hold `first` once per transcript (201 times).
    assert held < 10, f"the first message is referenced {held} times by 201 transcripts"
    assert "first" == kept[-1].messages[0].text


def test_threads_appending_to_one_transcript_each_get_their_own_line() -> None:
    """Threads appending to the same newest transcript never see each other's messages."""
    # A tiny switch interval makes the threads interleave inside append, where the race would be.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    base = Transcript(messages=(Message.user("q"),))

    def worker(n: int) -> list[str]:
        t = base
        for i in range(100):
            t = t.append(Message.assistant(f"{n}-{i}"))
        return [m.text for m in t.messages]

    try:
        results = dict(ThreadExecutor().map_bounded(worker, range(8), 8))
    finally:
        sys.setswitchinterval(old)
    expected = {n: ["q", *(f"{n}-{i}" for i in range(100))] for n in range(8)}
    assert expected == results


def test_a_bad_append_leaves_the_line_as_it_was() -> None:
    """A tool result for no earlier call is refused, and the transcript still appends cleanly."""
    t = Transcript(messages=(Message.user("q"),))
    orphan = Message(
        role="tool", parts=(ToolResultPart(call_id=CallId("zz"), name="f", content=""),)
    )
    with pytest.raises(ValueError, match="no earlier tool call"):
        t.append(Message.assistant("fine"), orphan)
    expected = ["q", "ok"]
    assert expected == [
        m.text for m in t.append(Message(role="assistant", parts=(TextPart(text="ok"),))).messages
    ]


def test_an_appended_transcript_is_what_construct_builds() -> None:
    """An appended transcript's pydantic state is what `model_construct` gives, messages aside."""
    appended = _appended(2)
    built = Transcript.model_construct(messages=())
    del built.__dict__["messages"]
    expected = (
        built.__dict__,
        built.__pydantic_fields_set__,
        built.__pydantic_extra__,
        sorted(built.__pydantic_private__ or {}),
    )
    actual = (
        appended.__dict__,
        appended.__pydantic_fields_set__,
        appended.__pydantic_extra__,
        sorted(appended.__pydantic_private__ or {}),
    )
    assert expected == actual
    assert Transcript(messages=_messages(2)) == appended
    assert Transcript(messages=_messages(2)).model_dump() == appended.model_dump()


def test_a_request_of_valid_values_is_what_construct_builds() -> None:
    """`ModelRequest.of_valid` builds the value and pydantic state `model_construct` does."""
    transcript = _appended(2)
    tools = (ToolSpec(name="add"),)
    settings = ModelSettings(temperature=0.5)
    built = ModelRequest.model_construct(
        transcript=transcript, tools=tools, output_schema=None, settings=settings
    )
    fast = ModelRequest.of_valid(transcript, tools, None, settings)
    expected = (built.__dict__, built.__pydantic_fields_set__, built.__pydantic_extra__)
    assert expected == (fast.__dict__, fast.__pydantic_fields_set__, fast.__pydantic_extra__)
    assert built.__pydantic_private__ == fast.__pydantic_private__
    assert ModelRequest(transcript=transcript, tools=tools, settings=settings) == fast
