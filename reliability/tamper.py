"""Tamper campaign: every single-byte change, line deletion, line swap and line insertion of
traces of several shapes is detected by `verify_trace`, naming the right sequence number.

The right sequence number is the first line at which the tampered file differs from the
original, line by line (a copy of an event inserted next to itself can only be noticed one
line later: the two files are the same either way). The expected kind, by the rules in
`twinflow.agent._verify`'s docstring: `edited` for a changed byte (`truncated` when the byte
changed is the last newline), `removed` for a deleted line, `reordered` for a swap; for an
insertion `inserted`, or `reordered` when the copy of a later event is put ahead of it (the
line holds a later event and the expected one follows), or `edited` when a foreign event
carrying the right sequence number is appended (its chain link breaks), or `removed` when a
foreign event with a later sequence number is appended (from the file alone, indistinguishable
from a trace whose event at that number was deleted). The sequence number is always checked.

    .venv/bin/python reliability/tamper.py --short | --full
"""

from __future__ import annotations

import sys
from collections import Counter

from _common import Figures, parse_mode, trace_shapes

from twinflow.agent import verify_agent_trace


def first_difference(original: list[bytes], tampered: list[bytes]) -> int:
    """The index of the first line that differs (or is missing) in ``tampered``."""
    for index, line in enumerate(original):
        if index >= len(tampered) or tampered[index] != line:
            return index
    return len(original)


def lines_of(data: bytes) -> list[bytes]:
    """The lines, newline kept, a partial last line included."""
    return data.splitlines(keepends=True)


def main(argv: list[str] | None = None) -> int:
    """Run the campaign and print the figures."""
    args = parse_mode(__doc__ or "", argv)
    full = args.mode == "full"
    figures = Figures("tamper", args.mode)
    shapes = trace_shapes()
    foreign = {name: lines_of(data) for name, data in shapes.items()}
    tried: Counter[str] = Counter()
    detected: Counter[str] = Counter()
    right_seq: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    # A byte changed by one flipped bit and by a flipped case bit and high bit (full mode).
    masks = (0x01, 0x20, 0x80) if full else (0x01,)

    def check(what: str, shape: str, original: list[bytes], tampered: bytes, kind: str) -> None:
        tried[what] += 1
        report = verify_agent_trace(tampered)
        if report.ok or report.problem is None:
            figures.fail(f"{shape}: {what} not detected")
            return
        detected[what] += 1
        expected = first_difference(original, lines_of(tampered))
        problem = report.problem
        kinds[f"{what}->{problem.kind}"] += 1
        # Two events that both chain to the same predecessor and claim the same seq: from the
        # file alone either may be the genuine one, and the verifier names the first of them.
        ambiguous = "both claim" in problem.message and problem.seq == expected - 1
        if (expected == problem.seq or ambiguous) and problem.kind in kind.split("|"):
            right_seq[what] += 1
        else:
            figures.fail(f"{shape}: {what}: expected {kind} at seq {expected}, got {problem}")

    for shape, data in shapes.items():
        original = lines_of(data)
        n = len(original)
        for position in range(len(data)):
            for mask in masks:
                changed = bytearray(data)
                changed[position] ^= mask
                check("byte change", shape, original, bytes(changed), "edited|truncated")
        for i in range(n):
            check(
                "line deletion",
                shape,
                original,
                b"".join(original[:i] + original[i + 1 :]),
                "removed",
            )
        for i in range(n):
            for j in range(i + 1, n if full else min(n, i + 2)):
                swapped = list(original)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                check("line swap", shape, original, b"".join(swapped), "reordered")
        donors = [line for other, lines in foreign.items() if other != shape for line in lines]
        for i in range(n + 1):
            copies = original if full else original[max(0, i - 2) : i + 2]
            extra = donors if full else donors[i : i + 1]
            for line in [*copies, *extra]:
                inserted = b"".join([*original[:i], line, *original[i:]])
                check(
                    "line insertion", shape, original, inserted, "inserted|reordered|edited|removed"
                )

    for what in ("byte change", "line deletion", "line swap", "line insertion"):
        key = what.replace(" ", "_")
        figures.values[f"{key}_tried"] = tried[what]
        figures.values[f"{key}_detected"] = detected[what]
        figures.values[f"{key}_right_seq"] = right_seq[what]
    figures.values["shapes"] = ",".join(shapes)
    figures.values["problem_kinds"] = dict(sorted(kinds.items()))
    return figures.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
