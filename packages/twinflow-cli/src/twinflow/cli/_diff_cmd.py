"""``twinflow diff A B``'s behavioural mode: where B's behaviour differs from A's."""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from twinflow.agent._events import Environment
from twinflow.cli._output import EXIT_OK, CheckFailed, Output
from twinflow.cli._show import MAX_DETAIL, _clean
from twinflow.cli._traces import walk_typed
from twinflow.views._behaviour import BehaviourDivergence, compare_behaviour
from twinflow.vocab import diff

__all__ = ["behaviour_diff"]


# A verified event's JSON object is what `json.loads` makes of its bytes, but for an integer
# literal of 16 or more digits, which the leaf's parse reads as the double it denotes (ADR 0131:
# the divergences print such a number as `json.loads` reads it). In canonical JSON a number
# follows ':', ',' or '[': mapping those to ':', each digit to '0' and dropping '-' turns such a
# literal into ':' and sixteen '0's. A string can hold the pattern too: a false alarm only costs
# a second parse of that event.
_DIGITS = bytes.maketrans(b"0123456789,[", b"0000000000::")
_LONG_NUMBER = b":" + b"0" * 16


def _keeping_start(events: Iterator[Any], into: list[dict[str, Any]]) -> Iterator[Any]:
    """``events``, the first one's body (a run's ``run_started``) kept in ``into``."""
    for event in events:
        if not into:
            body = event.get("body") if isinstance(event, dict) else None
            into.append(body if isinstance(body, dict) else {})
        yield event


def _setup_lines(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Where two runs' configuration and environment differ, one line each."""
    lines = []
    difference = diff(a.get("config"), b.get("config"))
    if difference is not None:
        lines.append(f"configuration: {difference}")
    environments = [a.get("environment"), b.get("environment")]
    if all(isinstance(e, dict) for e in environments):
        try:
            ea, eb = (Environment.model_validate(e) for e in environments)
        except ValidationError as exc:
            lines.append(f"environment: not readable ({str(exc).splitlines()[0]})")
        else:
            lines += [f"environment: {line}" for line in ea.differences(eb)]
    elif environments[0] != environments[1]:
        lines.append("environment: recorded in one run only")
    return lines


def _event_values(path: Path, count: list[int]) -> Iterator[Any]:
    """Each verified event of a trace as JSON, streaming (only the behaviour views are kept,
    not the events); appends how many there were to ``count`` once they are all read.

    Each value is the object the walk parsed and typed (ADR 0149), not a second parse of the
    event's bytes, but where it may hold a number the two parses read otherwise."""
    read = 0
    for item in walk_typed(path, values=True):
        read += 1
        if _LONG_NUMBER in item.event.translate(_DIGITS, b"-"):
            yield json.loads(item.event)
        else:
            yield item.value
    count.append(read)


def _child_divergences(a: Path, b: Path, depth: int) -> list[BehaviourDivergence]:
    """Where the sub-agent runs of A and B differ, each pair taken in call order (a child only
    one side has is one divergence); each detail names the pair of child traces."""
    from twinflow.trace._tree import MAX_TREE_DEPTH, child_links

    if depth > MAX_TREE_DEPTH:
        return []
    links_a, _, _ = child_links(a)
    links_b, _, _ = child_links(b)
    found: list[BehaviourDivergence] = []
    for link_a, link_b in itertools.zip_longest(links_a, links_b):
        if link_a is None or link_b is None:
            only = link_a or link_b
            assert only is not None
            side = "A" if link_b is None else "B"
            found.append(
                BehaviourDivergence(
                    change="missing" if side == "A" else "extra",
                    step=0,
                    seq_a=None if link_a is None else link_a.seq,
                    seq_b=None if link_b is None else link_b.seq,
                    kind="sub_agent",
                    pointer=None,
                    a=None if link_a is None else link_a.trace,
                    b=None if link_b is None else link_b.trace,
                    detail=f"sub-agent {only.tool}: only {side} ran it ({only.trace})",
                )
            )
            continue
        child_a = a.parent / link_a.trace
        child_b = b.parent / link_b.trace
        count: list[int] = []
        inner = compare_behaviour(_event_values(child_a, count), _event_values(child_b, count))
        where = f"in sub-agent {link_a.tool} ({link_a.trace} / {link_b.trace}): "
        found += [d.model_copy(update={"detail": where + d.detail}) for d in inner]
        found += _child_divergences(child_a, child_b, depth + 1)
    return found


def behaviour_diff(args: argparse.Namespace, out: Output) -> int:
    """``twinflow diff A B``: every place, in order, where B's behaviour differs from A's."""
    count: list[int] = []
    started: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    divergences = [
        *compare_behaviour(
            _keeping_start(_event_values(args.a, count), started[0]),
            _keeping_start(_event_values(args.b, count), started[1]),
        ),
        *_child_divergences(args.a, args.b, 1),
    ]
    extra: dict[str, Any] = {}
    if args.config:
        setup = _setup_lines(*(s[0] if s else {} for s in started))
        extra["setup"] = setup
        for line in setup or ["configuration and environment: the same"]:
            out.line(f"setup  {_clean(line, MAX_DETAIL)}")
    if not divergences:
        out.document({"ok": True, "same": True, "events": count[0], **extra})
        out.line(
            f"same behaviour: {count[0]} events (timestamps, run and call ids and the digests "
            "that cover them are not compared; --exact compares bytes)"
        )
        return EXIT_OK
    for d in divergences:
        where = f"seq {'-' if d.seq_a is None else d.seq_a}/{'-' if d.seq_b is None else d.seq_b}"
        turn = f"turn {d.turn} " if d.turn > 1 else ""
        out.line(f"{turn}step {d.step}  {where}  {d.change:<8} {_clean(d.detail, MAX_DETAIL)}")
    payload = {"same": False, "divergences": [d.model_dump() for d in divergences], **extra}
    first = divergences[0]
    raise CheckFailed(
        f"behaviour differs in {len(divergences)} place(s); first at step {first.step}: "
        f"{_clean(first.detail, MAX_DETAIL)}",
        payload,
    )
