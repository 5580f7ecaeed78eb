"""Behavioural comparison of two traces: where did what the agent did change?

Two runs of the same agent never have the same bytes: every event carries a clock reading,
the run has a fresh id, tool calls get fresh ids, and the digests that cover those (the chain's
``prev``, ``prefix_digest``, ``transcript_digest``) differ with them. A byte comparison stops at
the first event. This module compares what the events *mean* instead:

- the envelope (``seq``, ``prev``, ``at``) is dropped; positions are reported, not compared;
- ``run_id`` is dropped; tool call ids are renamed ``call-1``, ``call-2``, ... in the order each
  trace first mentions them, so a result still has to answer the same call as before;
- every ``*_digest`` field is dropped (what they cover is compared directly: the messages, the
  configuration, the tools), and so are token ``usage`` and the server's ``model_name``, which
  say how the model was served, not what the agent did.

What remains is compared in order: the prompt and configuration, every message sent and
received, every policy decision with its reason, every tool call with its arguments and result,
every rejected and accepted output, and how the run ended. The two sequences are aligned
(`difflib.SequenceMatcher`), so an inserted tool call is one divergence, not a cascade, and
every divergence is reported with the step it happened in.

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


class BehaviourDivergence(FrozenValue):
    """One place where two traces' behaviour differs."""

    change: Literal["changed", "missing", "extra"]
    """``changed``: both traces have an event here and they differ; ``missing``: only A has it;
    ``extra``: only B has it."""
    step: int
    """The model step the event belongs to (0 before the first model request)."""
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
    calls = _CallIds()
    out: list[JsonValue] = []
    for event in events:
        body = event.get("body") if isinstance(event, dict) else None
        if isinstance(body, dict) and body.get("kind") == "run_started" and "parent" in body:
            # A fork's link to its parent says where the run came from, not what it did.
            body = {key: value for key, value in body.items() if key != "parent"}
        elif isinstance(body, dict) and body.get("kind") == "tool_returned" and "child" in body:
            # A sub-agent's link names its run's ids and root: the child's behaviour is
            # compared by descending into its trace (`twinflow diff`), not through them.
            body = {key: value for key, value in body.items() if key != "child"}
        out.append(_strip(body, calls))
    return out


def _steps(views: Sequence[JsonValue]) -> list[int]:
    steps, step = [], 0
    for view in views:
        if isinstance(view, dict) and isinstance(view.get("step"), int):
            step = int(str(view["step"]))
        steps.append(step)
    return steps


def _kind(view: JsonValue) -> str:
    kind = view.get("kind") if isinstance(view, dict) else None
    return kind if isinstance(kind, str) else "(not an event)"


# One encoder for every key: `json.dumps` with options builds a new encoder on each call.
_encode_key = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


def _key(view: JsonValue) -> str:
    return _encode_key(view)


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    return list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes())


def _changed(a: JsonValue, b: JsonValue, seq_a: int, seq_b: int, step: int) -> BehaviourDivergence:
    """Both traces have this event of the run, and it differs."""
    difference = diff(a, b)
    return BehaviourDivergence(
        change="changed",
        step=step,
        seq_a=seq_a,
        seq_b=seq_b,
        kind=_kind(a),
        pointer=None if difference is None else difference.pointer,
        a=a,
        b=b,
        detail=f"{_kind(a)}: {difference}",
    )


def _only(
    side: Literal["missing", "extra"], view: JsonValue, seq: int, step: int
) -> BehaviourDivergence:
    """Only A (``missing``) or only B (``extra``) has this event."""
    return BehaviourDivergence(
        change=side,
        step=step,
        seq_a=seq if side == "missing" else None,
        seq_b=seq if side == "extra" else None,
        kind=_kind(view),
        pointer=None,
        a=view if side == "missing" else None,
        b=view if side == "extra" else None,
        detail=f"{_kind(view)} only in {'A' if side == 'missing' else 'B'}",
    )


def compare_behaviour(
    a: Iterable[JsonValue], b: Iterable[JsonValue]
) -> tuple[BehaviourDivergence, ...]:
    """Every place, in order, where trace B's behaviour differs from trace A's.

    Args:
        a: Trace A's events as JSON values, in order, read once (A's all before B's).
        b: Trace B's events as JSON values, in order, read once.

    Returns:
        The divergences, in trace order; empty when the two runs behaved the same.
    """
    va, vb = behaviour_of(a), behaviour_of(b)
    steps_a, steps_b = _steps(va), _steps(vb)
    found: list[BehaviourDivergence] = []
    for tag, i1, i2, j1, j2 in _opcodes([_key(v) for v in va], [_key(v) for v in vb]):
        if tag == "equal":
            continue
        # Inside a block that differs, events of the same kind are the same step of the run
        # (a tool result that changed); the others were added or left out.
        kinds = _opcodes([_kind(v) for v in va[i1:i2]], [_kind(v) for v in vb[j1:j2]])
        for sub, k1, k2, l1, l2 in kinds:
            if sub == "equal":
                for offset in range(k2 - k1):
                    i, j = i1 + k1 + offset, j1 + l1 + offset
                    found.append(_changed(va[i], vb[j], i, j, steps_a[i]))
                continue
            found += [_only("missing", va[i], i, steps_a[i]) for i in range(i1 + k1, i1 + k2)]
            found += [_only("extra", vb[j], j, steps_b[j]) for j in range(j1 + l1, j1 + l2)]
    return tuple(found)
