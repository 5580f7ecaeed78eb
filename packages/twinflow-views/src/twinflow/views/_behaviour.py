"""Behavioural comparison of two traces: where did what the agent did change?

Two runs of the same agent never have the same bytes: every event carries a clock reading,
the run has a fresh id, tool calls get fresh ids, and the digests that cover those (the chain's
``prev``, ``prefix_digest``, ``transcript_digest``) differ with them. A byte comparison stops at
the first event. This module compares what the events *mean* instead:

- the envelope (``seq``, ``prev``, ``at``) is dropped; positions are reported, not compared;
- ``run_id`` is dropped (and replaced by ``RUN`` in a failure's message, which names it); tool
  call ids are renamed ``call-1``, ``call-2``, ... in the order each
  trace first mentions them, so a result still has to answer the same call as before;
- every ``*_digest`` field is dropped (what they cover is compared directly: the messages, the
  configuration, the tools), and so are token ``usage`` and the server's ``model_name``, which
  say how the model was served, not what the agent did.

What is not behaviour stays out as well: where the run ran (``run_started.environment``: the
imported distributions, the server's URL; `twinflow diff --config` shows it), the settings each
request repeats from the configuration, a fork's link to its parent, and the marks a resume
leaves (``run_resumed``, and the failure it went on past): a resumed run behaves as one that
never stopped.

What remains is compared turn by turn and step by step: the prompt and configuration, every
message sent and received, every policy decision with its reason, every tool call with its
arguments and result, every rejected and accepted output, and how each turn ended. The events
of the same step (the k-th step of the same user turn) are aligned
(`difflib.SequenceMatcher`), so an inserted tool call is one divergence, not a cascade, a step
one run took and the other did not is reported alone, and later steps keep their own numbers.
Two runs one of which is a fork of the other differ in configuration only from the fork on:
that change is reported once, at the step the fork began, as its cause.

It works on events as plain JSON values (a verified trace's event bytes, parsed), so it needs
nothing of the trace format beyond the event kinds.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import JsonValue

from twinflow.vocab import FrozenValue, diff

__all__ = ["BehaviourDivergence", "behaviour_of", "compare_behaviour"]

# Keys that hold what differs between any two runs, never what the agent did.
_DROPPED_KEYS = frozenset({"run_id", "usage", "model_name"})
# Keys of a body kind that are not behaviour: where the run ran, and the settings every
# request repeats from the configuration (compared once, in ``run_started``).
_DROPPED_OF_KIND = {
    "run_started": frozenset({"parent", "environment"}),
    "model_requested": frozenset({"settings"}),
    # A sub-agent's link names its run's ids and root: the child's behaviour is compared by
    # descending into its trace (`twinflow diff`), not through them.
    "tool_returned": frozenset({"child"}),
}


class BehaviourDivergence(FrozenValue):
    """One place where two traces' behaviour differs."""

    change: Literal["changed", "missing", "extra"]
    """``changed``: both traces have an event here and they differ; ``missing``: only A has it;
    ``extra``: only B has it."""
    step: int
    """The model step the event belongs to (0 before the first model request): A's number, or
    B's for ``extra``; for a fork's configuration change, the step the fork began."""
    seq_a: int | None
    """The event's sequence number in trace A (None for ``extra``)."""
    seq_b: int | None
    """The event's sequence number in trace B (None for ``missing``)."""
    kind: str
    """The event kind (A's, for a change of kind ``kind_a -> kind_b``)."""
    pointer: str | None
    """For ``changed``: RFC 6901 pointer into the event's behaviour where they first differ."""
    a: JsonValue
    """The event's behaviour in A (None for ``extra``)."""
    b: JsonValue
    """The event's behaviour in B (None for ``missing``)."""
    detail: str
    """One line saying what differs."""
    turn: int = 1
    """The user turn the event belongs to (1 for the prompt the run started with)."""


class _CallIds:
    """Renames one trace's tool call ids in order of first mention."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def __call__(self, call_id: JsonValue) -> JsonValue:
        if not isinstance(call_id, str):
            return call_id
        name = self._names.get(call_id)
        if name is None:
            name = self._names[call_id] = f"call-{len(self._names) + 1}"
        return name


# Values `_strip` returns as they are, tested by exact type before anything else: it is called
# for every value of every event, and most are these.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _strip(value: JsonValue, calls: _CallIds) -> JsonValue:
    if isinstance(value, list):
        return [item if type(item) in _SCALARS else _strip(item, calls) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, JsonValue] = {}
    is_call = value.get("kind") == "tool_call"
    for key, item in value.items():
        if key in _DROPPED_KEYS or key.endswith("_digest"):
            continue
        if key == "call_id" or (is_call and key == "id"):
            out[key] = calls(item)
        elif type(item) in _SCALARS:
            out[key] = item
        else:
            out[key] = _strip(item, calls)
    return out


def behaviour_of(events: Iterable[JsonValue]) -> list[JsonValue]:
    """Each event's behaviour: its body without what differs between any two runs.

    Args:
        events: One trace's events as JSON values (``{"seq", "prev", "at", "body"}``), in order,
            read once (an iterator that parses each when read keeps none of them).

    Returns:
        One JSON value per event (see the module docstring for what is dropped and renamed).
    """
    return _views(events)[0]


def _views(events: Iterable[JsonValue]) -> tuple[list[JsonValue], int | None]:
    """`behaviour_of` the events, and the step a fork began at (None: not a fork)."""
    calls = _CallIds()
    out: list[JsonValue] = []
    forked: int | None = None
    for event in events:
        body = event.get("body") if isinstance(event, dict) else None
        kind = body.get("kind") if isinstance(body, dict) else None
        dropped = _DROPPED_OF_KIND.get(kind) if isinstance(kind, str) else None
        if isinstance(body, dict) and dropped is not None:
            parent = body.get("parent")
            if body.get("kind") == "run_started" and isinstance(parent, dict):
                step = parent.get("step")
                forked = step if isinstance(step, int) else None
            body = {key: value for key, value in body.items() if key not in dropped}
        body = _without_run_id(body)
        out.append(_strip(body, calls))
    return out, forked


def _without_run_id(body: JsonValue) -> JsonValue:
    """A failure's message without the run id it names (``run RUN_ID: ...``): the id is
    dropped everywhere else, and two runs failing alike fail with the same words."""
    if not isinstance(body, dict) or body.get("kind") != "run_failed":
        return body
    run_id, message = body.get("run_id"), body.get("message")
    if not isinstance(run_id, str) or not run_id or not isinstance(message, str):
        return body
    return {**body, "message": message.replace(run_id, "RUN")}


_TURN_ENDS = frozenset({"output_accepted", "run_finished", "run_failed"})
_END = 1 << 62  # after every step of a turn


def _places(views: Sequence[JsonValue]) -> list[tuple[tuple[int, int], int] | None]:
    """Each event's place in the run: ((turn, k), step), where k counts the steps of the turn
    (0 before its first request); None for a resume's marks, which are not behaviour."""
    places: list[tuple[tuple[int, int], int] | None] = []
    turn, k, step = 1, 0, 0
    for index, view in enumerate(views):
        kind = _kind(view)
        if kind == "run_resumed" or (
            kind == "run_failed"
            and index + 1 < len(views)
            and _kind(views[index + 1]) == "run_resumed"
        ):
            places.append(None)
            continue
        if kind in _TURN_ENDS:
            # How the turn ended is compared with how the other's ended, whatever step each
            # ended at (one run taking a step more is then that step, not a shifted ending).
            places.append(((turn, _END), step))
            continue
        if kind == "user_turn":
            turn, k = turn + 1, 0
        elif isinstance(view, dict) and isinstance(view.get("step"), int):
            number = int(str(view["step"]))
            if number != step:
                k, step = k + 1, number
        places.append(((turn, k), step))
    return places


def _kind(view: JsonValue) -> str:
    kind = view.get("kind") if isinstance(view, dict) else None
    return kind if isinstance(kind, str) else "(not an event)"


# One encoder for every key: `json.dumps` with options builds a new encoder on each call.
_encode_key = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


def _key(view: JsonValue) -> str:
    return _encode_key(view)


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    return list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes())


def _changed(
    a: JsonValue, b: JsonValue, seq_a: int, seq_b: int, place: tuple[tuple[int, int], int]
) -> BehaviourDivergence:
    """Both traces have this event of the run, and it differs."""
    difference = diff(a, b)
    return BehaviourDivergence(
        change="changed",
        turn=place[0][0],
        step=place[1],
        seq_a=seq_a,
        seq_b=seq_b,
        kind=_kind(a),
        pointer=None if difference is None else difference.pointer,
        a=a,
        b=b,
        detail=f"{_kind(a)}: {difference}",
    )


def _only(
    side: Literal["missing", "extra"],
    view: JsonValue,
    seq: int,
    place: tuple[tuple[int, int], int],
) -> BehaviourDivergence:
    """Only A (``missing``) or only B (``extra``) has this event."""
    return BehaviourDivergence(
        change=side,
        turn=place[0][0],
        step=place[1],
        seq_a=seq if side == "missing" else None,
        seq_b=seq if side == "extra" else None,
        kind=_kind(view),
        pointer=None,
        a=view if side == "missing" else None,
        b=view if side == "extra" else None,
        detail=f"{_kind(view)} only in {'A' if side == 'missing' else 'B'}",
    )


def _by_place(
    views: Sequence[JsonValue],
) -> dict[tuple[int, int], list[tuple[int, tuple[tuple[int, int], int]]]]:
    """The events of each place, as (seq, place), in order; a resume's marks left out."""
    groups: dict[tuple[int, int], list[tuple[int, tuple[tuple[int, int], int]]]] = {}
    for seq, place in enumerate(_places(views)):
        if place is not None:
            groups.setdefault(place[0], []).append((seq, place))
    return groups


def _block(
    va: Sequence[JsonValue],
    vb: Sequence[JsonValue],
    a: list[tuple[int, tuple[tuple[int, int], int]]],
    b: list[tuple[int, tuple[tuple[int, int], int]]],
) -> list[BehaviourDivergence]:
    """Where the events of one step differ: aligned, so an inserted call is one divergence."""
    found: list[BehaviourDivergence] = []
    ka, kb = [_key(va[seq]) for seq, _ in a], [_key(vb[seq]) for seq, _ in b]
    for tag, i1, i2, j1, j2 in _opcodes(ka, kb):
        if tag == "equal":
            continue
        # Inside a block that differs, events of the same kind are the same event of the step
        # (a tool result that changed); the others were added or left out.
        kinds = _opcodes(
            [_kind(va[seq]) for seq, _ in a[i1:i2]], [_kind(vb[seq]) for seq, _ in b[j1:j2]]
        )
        for sub, k1, k2, l1, l2 in kinds:
            if sub == "equal":
                for offset in range(k2 - k1):
                    (i, place), (j, _) = a[i1 + k1 + offset], b[j1 + l1 + offset]
                    found.append(_changed(va[i], vb[j], i, j, place))
                continue
            found += [_only("missing", va[i], i, p) for i, p in a[i1 + k1 : i1 + k2]]
            found += [_only("extra", vb[j], j, p) for j, p in b[j1 + l1 : j1 + l2]]
    return found


def compare_behaviour(
    a: Iterable[JsonValue], b: Iterable[JsonValue]
) -> tuple[BehaviourDivergence, ...]:
    """Every place, in order, where trace B's behaviour differs from trace A's.

    Args:
        a: Trace A's events as JSON values, in order, read once (A's all before B's).
        b: Trace B's events as JSON values, in order, read once.

    Returns:
        The divergences, turn by turn and step by step; empty when the two runs behaved the
        same.
    """
    (va, fork_a), (vb, fork_b) = _views(a), _views(b)
    ga, gb = _by_place(va), _by_place(vb)
    found: list[BehaviourDivergence] = []
    for place in sorted(ga.keys() | gb.keys()):
        found += _block(va, vb, ga.get(place, []), gb.get(place, []))
    forked = fork_b if fork_b is not None else fork_a
    if forked is None:
        return tuple(found)
    # One run is a fork of the other: a configuration that differs is the fork's doing, named
    # once, at the step the fork began, before what differs there.
    causes = [d for d in found if d.kind == "run_started" and d.change == "changed"]
    rest = [d for d in found if d not in causes]
    named = [
        d.model_copy(
            update={"step": forked, "detail": f"the fork changed the configuration: {d.detail}"}
        )
        for d in causes
    ]
    at = next((i for i, d in enumerate(rest) if d.step >= forked), len(rest))
    return (*rest[:at], *named, *rest[at:])
