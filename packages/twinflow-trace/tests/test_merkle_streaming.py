"""The frontier and the proof ranges agree with the in-memory tree; streaming proofs verify."""

from __future__ import annotations

import hashlib

import pytest

from twinflow.trace import (
    InvalidProofError,
    MerkleTree,
    TraceCorruptError,
    UserError,
    read_checkpoint,
    verify_trace,
)
from twinflow.trace._checkpoint import check_consistency, check_inclusion
from twinflow.trace._merkle import Frontier, consistency_ranges, inclusion_ranges
from twinflow.trace._testing import small_trace as trace
from twinflow.trace._verify import prove_consistency, prove_inclusion


def leaves(n: int) -> list[bytes]:
    """``n`` distinct leaf hashes."""
    return [hashlib.sha256(str(i).encode()).digest() for i in range(n)]


def tree_of(n: int) -> MerkleTree:
    """The in-memory tree over ``leaves(n)``."""
    tree = MerkleTree()
    for leaf in leaves(n):
        tree.append_hash(leaf)
    return tree


def range_root(start: int, end: int) -> bytes:
    """The tree hash of the leaves in [start, end)."""
    frontier = Frontier()
    for leaf in leaves(end)[start:end]:
        frontier.append_hash(leaf)
    return frontier.root()


def test_frontier_root_equals_the_tree_root() -> None:
    """For every size up to 70 the O(log n) frontier has the tree's root."""
    frontier = Frontier()
    tree = MerkleTree()
    assert tree.root() == frontier.root()
    for leaf in leaves(70):
        frontier.append_hash(leaf)
        tree.append_hash(leaf)
        assert tree.root() == frontier.root()


def test_inclusion_ranges_make_the_trees_proof() -> None:
    """The hashes of inclusion_ranges, in order, are MerkleTree.inclusion_proof."""
    for n in range(1, 24):
        tree = tree_of(n)
        for m in range(n):
            expected = tree.inclusion_proof(m)
            assert expected == tuple(range_root(a, b) for a, b in inclusion_ranges(m, n))


def test_consistency_ranges_make_the_trees_proof() -> None:
    """The hashes of consistency_ranges, in order, are MerkleTree.consistency_proof."""
    for n in range(1, 24):
        tree = tree_of(n)
        for m in range(n + 1):
            expected = tree.consistency_proof(m)
            assert expected == tuple(range_root(a, b) for a, b in consistency_ranges(m, n))


def test_streaming_proofs_verify_against_streaming_checkpoints() -> None:
    """prove_inclusion / prove_consistency over a trace give proofs that check."""
    data = trace(13)
    full = verify_trace(data).checkpoint
    for seq in range(13):
        proof, checkpoint = prove_inclusion(data, seq)
        assert full == checkpoint
        check_inclusion(proof, checkpoint)
    for size1 in range(14):
        consistency, old, new = prove_consistency(data, size1, 13)
        assert (read_checkpoint(data, size1), full) == (old, new)
        check_consistency(consistency, old, new)


def test_a_proof_for_another_event_fails() -> None:
    """An inclusion proof does not hold for a different event digest."""
    data = trace(9)
    proof, checkpoint = prove_inclusion(data, 3)
    other, _ = prove_inclusion(data, 4)
    forged = type(proof)(seq=3, size=9, event_digest=other.event_digest, path=proof.path)
    with pytest.raises(InvalidProofError):
        check_inclusion(forged, checkpoint)


def test_proofs_of_a_damaged_trace_raise_the_report() -> None:
    """A trace that does not verify yields no proof: TraceCorruptError with the problem."""
    data = trace(5).replace(b"event 2", b"event X")
    with pytest.raises(TraceCorruptError) as caught:
        prove_inclusion(data, 0)
    assert caught.value.report.problem is not None
    assert ("edited", 2) == (caught.value.report.problem.kind, caught.value.report.problem.seq)


def test_a_seq_or_size_outside_the_trace_is_a_usage_error() -> None:
    """Out-of-range requests are UserError, not IndexError."""
    data = trace(4)
    for call in (
        lambda: prove_inclusion(data, 4),
        lambda: prove_inclusion(data, 0, 9),
        lambda: prove_consistency(data, 5),
        lambda: read_checkpoint(data, 5),
    ):
        with pytest.raises(UserError):
            call()
