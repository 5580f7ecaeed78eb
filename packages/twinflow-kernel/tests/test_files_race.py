"""The trace leaf's one writer of new files under threads: racing writers get one winner.

Threads are the kernel's to start (the trace leaf's own tests use none), so this race lives here.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from twinflow._base._errors import TargetExistsError
from twinflow._base._files import write_new


def test_racing_writers_get_one_winner_each_complete(tmp_path: Path) -> None:
    """Of many threads creating one name at once, exactly one wins and its content is whole."""
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def claim(n: int) -> None:
        barrier.wait()
        try:
            write_new(tmp_path / "slot", str(n).encode() * 1000, durable=False)
            outcomes.append(f"won {n}")
        except TargetExistsError:
            outcomes.append("lost")

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o.startswith("won")]
    assert 1 == len(winners)
    n = winners[0].split()[1]
    assert n.encode() * 1000 == (tmp_path / "slot").read_bytes()
    assert ["slot"] == os.listdir(tmp_path)
