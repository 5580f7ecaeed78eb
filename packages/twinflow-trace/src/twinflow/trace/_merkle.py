"""An append-only RFC 9162 Merkle tree with inclusion and consistency proofs.

Hashing follows RFC 9162 section 2.1.1 (the same as RFC 6962): a leaf hash is
``sha256(0x00 || leaf)``, an interior node is ``sha256(0x01 || left || right)`` and the
empty tree hashes to ``sha256(b"")``.

`MerkleTree` keeps every complete, aligned subtree hash (hash ``i`` of level ``h`` covers
leaves ``i * 2**h`` to ``(i + 1) * 2**h``), so an append costs one leaf hash plus, amortised,
one node hash, a root costs O(log n), and a proof costs O(log n) node look-ups. A level is one
`bytearray` of 32-byte hashes: about 64 bytes per leaf in all, where a list of `bytes` objects
took about 150.

`Frontier` is the streaming form: it keeps only the roots of the O(log n) complete subtrees
that make up the tree so far (a "compact range"), so a verifier's memory does not grow with the
trace. `inclusion_ranges` and `consistency_ranges` name the subtrees a proof is made of, so a
single streaming pass with one `Frontier` per range builds the proof in O(log n) memory too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from twinflow.trace._errors import InvalidProofError

__all__ = [
    "EMPTY_ROOT",
    "Frontier",
    "MerkleTree",
    "leaf_hash",
    "node_hash",
    "root_from_inclusion_proof",
    "verify_consistency",
    "verify_inclusion",
]

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
"""The digest method of a sha256 object, for C-level maps."""
_HASH_SIZE = 32

EMPTY_ROOT = hashlib.sha256(b"").digest()
"""The root of the empty tree: sha256 of the empty string."""


def leaf_hash(leaf: bytes) -> bytes:
    """Hash one leaf input as RFC 9162 prescribes (``sha256(0x00 || leaf)``).

    Args:
        leaf: The leaf input bytes.

    Returns:
        The 32-byte leaf hash.
    """
    return hashlib.sha256(_LEAF_PREFIX + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Hash two child hashes into their parent (``sha256(0x01 || left || right)``).

    Args:
        left: The left child hash.
        right: The right child hash.

    Returns:
        The 32-byte parent hash.
    """
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _largest_power_of_two_below(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (``n`` >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


class MerkleTree:
    """An append-only Merkle tree over leaf hashes.

    The tree stores hashes, not leaf inputs: append the leaf input with
    :meth:`append` or an already computed leaf hash with :meth:`append_hash`.
    """

    __slots__ = ("_levels",)

    def __init__(self) -> None:
        """Create an empty tree."""
        self._levels: list[bytearray] = [bytearray()]

    @property
    def size(self) -> int:
        """The number of leaves."""
        return len(self._levels[0]) // _HASH_SIZE

    def append(self, leaf: bytes) -> bytes:
        """Append one leaf input.

        Args:
            leaf: The leaf input bytes (hashed with :func:`leaf_hash`).

        Returns:
            The leaf hash that was appended.
        """
        hashed = leaf_hash(leaf)
        self.append_hash(hashed)
        return hashed

    def append_hash(self, hashed: bytes) -> None:
        """Append one leaf hash, completing every subtree it closes.

        Args:
            hashed: A 32-byte leaf hash.

        Raises:
            ValueError: ``hashed`` is not 32 bytes long.
        """
        if len(hashed) != _HASH_SIZE:
            raise ValueError(f"a leaf hash is {_HASH_SIZE} bytes, not {len(hashed)}")
        levels = self._levels
        levels[0] += hashed
        height = 0
        # A subtree at this height is complete when its level holds an even count.
        while len(levels[height]) % (2 * _HASH_SIZE) == 0:
            row = levels[height]
            parent = hashlib.sha256(_NODE_PREFIX + row[-2 * _HASH_SIZE :]).digest()
            height += 1
            if height == len(levels):
                levels.append(bytearray())
            levels[height] += parent

    def leaf_hash_at(self, index: int) -> bytes:
        """The leaf hash at ``index``.

        Args:
            index: A leaf index, ``0 <= index < size``.

        Returns:
            The stored 32-byte leaf hash.

        Raises:
            IndexError: ``index`` is not a leaf of the tree.
        """
        if not 0 <= index < self.size:
            raise IndexError(f"leaf index {index} is outside a tree of {self.size} leaves")
        return self._hash_at(0, index)

    def root(self, size: int | None = None) -> bytes:
        """The root of the tree of the first ``size`` leaves (default: all of them).

        Args:
            size: A tree size not above the current size.

        Returns:
            The 32-byte root hash.

        Raises:
            ValueError: If ``size`` is negative or above the current size.
        """
        n = self.size if size is None else size
        self._check_size(n)
        if n == 0:
            return EMPTY_ROOT
        return self._subtree(0, n)

    def inclusion_proof(self, index: int, size: int | None = None) -> tuple[bytes, ...]:
        """The RFC 9162 inclusion proof (audit path) for one leaf.

        Args:
            index: The leaf index.
            size: The tree size the proof is for (default: the current size).

        Returns:
            The proof's node hashes, from the leaf's sibling upwards.

        Raises:
            ValueError: If ``index`` is not a leaf of a tree of ``size`` leaves.
        """
        n = self.size if size is None else size
        self._check_size(n)
        if not 0 <= index < n:
            raise ValueError(f"leaf index {index} is outside a tree of {n} leaves")
        proof: list[bytes] = []
        self._path(index, 0, n, proof)
        return tuple(proof)

    def consistency_proof(self, size1: int, size2: int | None = None) -> tuple[bytes, ...]:
        """The RFC 9162 consistency proof that the tree of ``size2`` extends ``size1``.

        Args:
            size1: The earlier tree size.
            size2: The later tree size (default: the current size).

        Returns:
            The proof's node hashes (empty when ``size1`` is 0 or equals ``size2``).

        Raises:
            ValueError: If the sizes are not ``0 <= size1 <= size2 <= size``.
        """
        n = self.size if size2 is None else size2
        self._check_size(n)
        if not 0 <= size1 <= n:
            raise ValueError(f"size1 {size1} must be between 0 and size2 {n}")
        if size1 in (0, n):
            return ()
        proof: list[bytes] = []
        self._subproof(size1, 0, n, True, proof)
        return tuple(proof)

    def _check_size(self, n: int) -> None:
        if not 0 <= n <= self.size:
            raise ValueError(f"tree size {n} is outside 0..{self.size}")

    def _hash_at(self, height: int, index: int) -> bytes:
        offset = index * _HASH_SIZE
        return bytes(self._levels[height][offset : offset + _HASH_SIZE])

    def _subtree(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]) for ``end > start``, using stored complete subtrees."""
        n = end - start
        if n & (n - 1) == 0 and start % n == 0:
            return self._hash_at(n.bit_length() - 1, start // n)
        k = _largest_power_of_two_below(n)
        return node_hash(self._subtree(start, start + k), self._subtree(start + k, end))

    def _path(self, index: int, start: int, end: int, out: list[bytes]) -> None:
        """PATH(index, D[start:end]) of RFC 6962 section 2.1.1, appended to ``out``."""
        n = end - start
        if n == 1:
            return
        k = _largest_power_of_two_below(n)
        if index < k:
            self._path(index, start, start + k, out)
            out.append(self._subtree(start + k, end))
        else:
            self._path(index - k, start + k, end, out)
            out.append(self._subtree(start, start + k))

    def _subproof(self, m: int, start: int, end: int, complete: bool, out: list[bytes]) -> None:
        """SUBPROOF(m, D[start:end], complete) of RFC 6962 section 2.1.2."""
        n = end - start
        if m == n:
            if not complete:
                out.append(self._subtree(start, end))
            return
        k = _largest_power_of_two_below(n)
        if m <= k:
            self._subproof(m, start, start + k, complete, out)
            out.append(self._subtree(start + k, end))
        else:
            self._subproof(m - k, start + k, end, False, out)
            out.append(self._subtree(start, start + k))


class Frontier:
    """The roots of the complete subtrees of an append-only tree: O(log n) hashes.

    Appending a leaf hash merges equal-height roots, exactly as `MerkleTree.append_hash` closes
    subtrees, so ``root()`` equals ``MerkleTree.root()`` over the same leaves.
    """

    __slots__ = ("_roots", "size")

    def __init__(self) -> None:
        """Start empty."""
        self._roots: list[bytes] = []
        self.size = 0
        """Leaves appended."""

    def append_hash(self, hashed: bytes) -> None:
        """Append one 32-byte leaf hash."""
        roots = self._roots
        roots.append(hashed)
        n = self.size
        # Each trailing 1 bit of the old size is a complete subtree the new leaf closes.
        while n & 1:
            right = roots.pop()
            roots[-1] = hashlib.sha256(_NODE_PREFIX + roots[-1] + right).digest()
            n >>= 1
        self.size += 1

    def root(self) -> bytes:
        """The Merkle tree hash of the leaves so far (`EMPTY_ROOT` when there are none)."""
        if not self._roots:
            return EMPTY_ROOT
        roots = self._roots
        r = roots[-1]
        for left in reversed(roots[:-1]):
            r = node_hash(left, r)
        return r


def _split(n: int) -> int:
    return _largest_power_of_two_below(n)


def inclusion_ranges(index: int, size: int) -> tuple[tuple[int, int], ...]:
    """The leaf ranges whose tree hashes make up the inclusion proof of ``index`` in ``size``.

    Args:
        index: The leaf index.
        size: The tree size.

    Returns:
        ``(start, end)`` ranges in proof order (from the leaf's sibling upwards).

    Raises:
        ValueError: ``index`` is not a leaf of a tree of ``size`` leaves.
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is outside a tree of {size} leaves")
    out: list[tuple[int, int]] = []
    start, end, m = 0, size, index
    while end - start > 1:
        k = _split(end - start)
        if m < k:
            out.append((start + k, end))
            end = start + k
        else:
            out.append((start, start + k))
            start, m = start + k, m - k
    return tuple(reversed(out))


def consistency_ranges(size1: int, size2: int) -> tuple[tuple[int, int], ...]:
    """The leaf ranges whose tree hashes make up the consistency proof from ``size1`` to ``size2``.

    Args:
        size1: The earlier size.
        size2: The later size.

    Returns:
        ``(start, end)`` ranges in proof order (RFC 9162 2.1.4.1); empty for the trivial cases.

    Raises:
        ValueError: The sizes are not ``0 <= size1 <= size2``.
    """
    if not 0 <= size1 <= size2:
        raise ValueError(f"size1 {size1} must be between 0 and size2 {size2}")
    if size1 in (0, size2):
        return ()
    out: list[tuple[int, int]] = []
    start, end, m, complete = 0, size2, size1, True
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            out.append((start + k, end))
            end = start + k
        else:
            out.append((start, start + k))
            start, m, complete = start + k, m - k, False
    if not complete:
        out.append((start, end))
    return tuple(reversed(out))


def _check_hash(name: str, value: bytes) -> None:
    if len(value) != _HASH_SIZE:
        raise InvalidProofError(f"{name} is {len(value)} bytes, a sha256 hash is {_HASH_SIZE}")


def root_from_inclusion_proof(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """Recompute the root an inclusion proof leads to (RFC 9162 section 2.1.3.2).

    Args:
        leaf: The leaf hash (not the leaf input).
        index: The leaf index.
        size: The tree size the proof is for.
        proof: The proof's node hashes.

    Returns:
        The root hash the proof implies.

    Raises:
        InvalidProofError: If the proof has the wrong shape for ``index`` and ``size``.
    """
    if not 0 <= index < size:
        raise InvalidProofError(f"leaf index {index} is outside a tree of {size} leaves")
    _check_hash("leaf hash", leaf)
    fn, sn = index, size - 1
    r = leaf
    for position, p in enumerate(proof):
        _check_hash(f"proof[{position}]", p)
        if sn == 0:
            raise InvalidProofError(f"proof is too long: {len(proof)} hashes")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise InvalidProofError(f"proof is too short: {len(proof)} hashes")
    return r


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    Args:
        leaf: The leaf hash (not the leaf input).
        index: The leaf index.
        size: The tree size.
        proof: The inclusion proof.
        root: The expected root hash.

    Raises:
        InvalidProofError: If the proof does not lead to ``root``.
    """
    _check_hash("root", root)
    computed = root_from_inclusion_proof(leaf, index, size, proof)
    if computed != root:
        raise InvalidProofError(
            f"inclusion proof for leaf {index} of {size} leads to root {computed.hex()}, "
            f"expected {root.hex()}"
        )


def _trivially_consistent(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> bool:
    """True for the cases that need no proof (equal trees, an empty first tree) once checked;
    False when the proof must be walked."""
    if not 0 <= size1 <= size2:
        raise InvalidProofError(f"size1 {size1} must be between 0 and size2 {size2}")
    if size1 == size2:
        if proof:
            raise InvalidProofError("equal sizes need an empty consistency proof")
        if root1 != root2:
            raise InvalidProofError("equal sizes with different roots")
        return True
    if size1 == 0:
        if proof:
            raise InvalidProofError("an empty first tree needs an empty consistency proof")
        return True
    return False


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Check that the tree (``size2``, ``root2``) extends (``size1``, ``root1``).

    RFC 9162 section 2.1.4.2, with the trivial cases: equal sizes need equal roots and
    an empty proof; an empty first tree is extended by every tree, with an empty proof.

    Args:
        size1: The earlier tree size.
        size2: The later tree size.
        proof: The consistency proof.
        root1: The earlier root hash.
        root2: The later root hash.

    Raises:
        InvalidProofError: If the proof does not show the extension.
    """
    if _trivially_consistent(size1, size2, proof, root1, root2):
        return
    if not proof:
        raise InvalidProofError("consistency proof is empty")
    _check_hash("root1", root1)
    _check_hash("root2", root2)
    for position, c in enumerate(proof):
        _check_hash(f"proof[{position}]", c)
    path = list(proof)
    if size1 & (size1 - 1) == 0:
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise InvalidProofError(f"consistency proof is too long: {len(proof)} hashes")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise InvalidProofError(f"consistency proof is too short: {len(proof)} hashes")
    if fr != root1:
        raise InvalidProofError(
            f"consistency proof leads to root1 {fr.hex()}, expected {root1.hex()}"
        )
    if sr != root2:
        raise InvalidProofError(
            f"consistency proof leads to root2 {sr.hex()}, expected {root2.hex()}"
        )
