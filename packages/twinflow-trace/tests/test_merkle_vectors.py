"""RFC 9162 Merkle tree: the transparency-dev / RFC 6962 reference vectors and proof checks."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinflow.trace import InvalidProofError, MerkleTree
from twinflow.trace._merkle import leaf_hash, verify_consistency, verify_inclusion


def h(text: str) -> bytes:
    """Decode a hex string."""
    return bytes.fromhex(text)


# transparency-dev/merkle testonly/constants.go: LeafInputs() and RootHashes().
LEAVES = [
    h(""),
    h("00"),
    h("10"),
    h("2021"),
    h("3031"),
    h("40414243"),
    h("5051525354555657"),
    h("606162636465666768696a6b6c6d6e6f"),
]
ROOTS = [
    h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
]
# transparency-dev/merkle proof/verify_test.go: inclusionProofs (leaf is 1-based there).
INCLUSION = [
    (
        0,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        5,
        8,
        [
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (2, 3, [h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
    (
        1,
        5,
        [
            h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (0, 1, []),
]
# transparency-dev/merkle proof/verify_test.go: consistencyProofs.
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        6,
        8,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (
        2,
        5,
        [
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (
        6,
        7,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
]
SOME_HASH = h("abacaba000000000000000000000000000000000000000000060061e00123456")


def full_tree() -> MerkleTree:
    """The tree of all eight reference leaves."""
    tree = MerkleTree()
    for leaf in LEAVES:
        tree.append(leaf)
    return tree


def test_empty_root_is_sha256_of_nothing() -> None:
    """The empty tree's root is sha256 of the empty string."""
    assert hashlib.sha256(b"").digest() == MerkleTree().root()


@pytest.mark.parametrize("size", range(9))
def test_roots_match_reference_vectors(size: int) -> None:
    """Trees of 0..8 reference leaves have the published roots, appended or asked for by size."""
    tree = MerkleTree()
    for leaf in LEAVES[:size]:
        tree.append(leaf)
    assert ROOTS[size] == tree.root()
    assert ROOTS[size] == full_tree().root(size)


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_inclusion_proofs_match_reference_vectors(
    index: int, size: int, proof: list[bytes]
) -> None:
    """Generated inclusion proofs equal the published ones, and they verify."""
    assert tuple(proof) == full_tree().inclusion_proof(index, size)
    verify_inclusion(leaf_hash(LEAVES[index]), index, size, proof, ROOTS[size])


@pytest.mark.parametrize(("size1", "size2", "proof"), CONSISTENCY)
def test_consistency_proofs_match_reference_vectors(
    size1: int, size2: int, proof: list[bytes]
) -> None:
    """Generated consistency proofs equal the published ones, and they verify."""
    assert tuple(proof) == full_tree().consistency_proof(size1, size2)
    verify_consistency(size1, size2, proof, ROOTS[size1], ROOTS[size2])


def corrupt_inclusion(
    index: int, size: int, proof: list[bytes], root: bytes, leaf: bytes
) -> list[tuple[str, int, int, list[bytes], bytes, bytes]]:
    """The invalid probes transparency-dev derives from a valid inclusion proof."""
    probes = [
        ("index - 1", index - 1, size, proof, root, leaf),
        ("index + 1", index + 1, size, proof, root, leaf),
        ("index ^ 2", index ^ 2, size, proof, root, leaf),
        ("size * 2", index, size * 2, proof, root, leaf),
        ("size // 2", index, size // 2, proof, root, leaf),
        ("wrong leaf", index, size, proof, root, b"WrongLeaf"),
        ("empty root", index, size, proof, ROOTS[0], leaf),
        ("random root", index, size, proof, SOME_HASH, leaf),
        ("trailing garbage", index, size, [*proof, b""], root, leaf),
        ("trailing root", index, size, [*proof, root], root, leaf),
        ("preceding garbage", index, size, [b"", *proof], root, leaf),
        ("preceding root", index, size, [root, *proof], root, leaf),
    ]
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([flipped[i][0] ^ 8]) + flipped[i][1:]
        probes.append((f"flipped proof[{i}]", index, size, flipped, root, leaf))
    if proof:
        probes.append(("removed component", index, size, proof[:-1], root, leaf))
    if len(proof) > 1:
        probes.append(
            ("inserted component", index, size, [proof[0], SOME_HASH, *proof[1:]], root, leaf)
        )
    return probes


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_corrupted_inclusion_proofs_fail(index: int, size: int, proof: list[bytes]) -> None:
    """Every mutation of a valid inclusion proof (index, size, leaf, root, path) is refused."""
    accepted = []
    for desc, i, n, p, root, leaf in corrupt_inclusion(
        index, size, proof, ROOTS[size], leaf_hash(LEAVES[index])
    ):
        try:
            verify_inclusion(leaf, i, n, p, root)
        except InvalidProofError:
            continue
        accepted.append(desc)
    assert not accepted, f"accepted invalid proofs: {accepted}"


@pytest.mark.parametrize(("size1", "size2", "proof"), [c for c in CONSISTENCY if c[2]])
def test_corrupted_consistency_proofs_fail(size1: int, size2: int, proof: list[bytes]) -> None:
    """Every mutation of a valid consistency proof (sizes, roots, path) is refused."""
    root1, root2 = ROOTS[size1], ROOTS[size2]
    probes = [
        ("size1 - 1", size1 - 1, size2, proof, root1, root2),
        ("size1 + 1", size1 + 1, size2, proof, root1, root2),
        ("size1 ^ 2", size1 ^ 2, size2, proof, root1, root2),
        ("size2 * 2", size1, size2 * 2, proof, root1, root2),
        ("size2 // 2", size1, size2 // 2, proof, root1, root2),
        ("wrong root1", size1, size2, proof, b"WrongRoot", root2),
        ("wrong root2", size1, size2, proof, root1, b"WrongRoot"),
        ("swapped roots", size1, size2, proof, root2, root1),
        ("empty proof", size1, size2, [], root1, root2),
        ("trailing garbage", size1, size2, [*proof, b""], root1, root2),
        ("trailing root1", size1, size2, [*proof, root1], root1, root2),
        ("trailing root2", size1, size2, [*proof, root2], root1, root2),
        ("preceding garbage", size1, size2, [b"", *proof], root1, root2),
        ("preceding root1", size1, size2, [root1, *proof], root1, root2),
        ("preceding root2", size1, size2, [root2, *proof], root1, root2),
        ("preceding proof[0]", size1, size2, [proof[0], *proof], root1, root2),
        ("truncated proof", size1, size2, proof[:-1], root1, root2),
    ]
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([flipped[i][0] ^ 16]) + flipped[i][1:]
        probes.append((f"flipped proof[{i}]", size1, size2, flipped, root1, root2))
    accepted = []
    for desc, s1, s2, p, r1, r2 in probes:
        try:
            verify_consistency(s1, s2, p, r1, r2)
        except InvalidProofError:
            continue
        accepted.append(desc)
    assert not accepted, f"accepted invalid proofs: {accepted}"


@pytest.mark.parametrize(
    ("size1", "size2", "root1", "root2", "proof", "valid"),
    [
        (0, 0, b"1" * 32, b"2" * 32, [], False),
        (1, 1, b"1" * 32, b"2" * 32, [], False),
        (0, 0, b"1" * 32, b"1" * 32, [], True),
        (0, 1, b"1" * 32, b"2" * 32, [], True),
        (1, 1, b"2" * 32, b"2" * 32, [], True),
        (1, 0, b"1" * 32, b"2" * 32, [], False),
        (2, 1, b"1" * 32, b"2" * 32, [], False),
        (1, 2, b"1" * 32, b"2" * 32, [], False),
        (0, 0, ROOTS[0], ROOTS[0], [ROOTS[0]], False),
        (0, 1, ROOTS[0], ROOTS[0], [ROOTS[0]], False),
        (1, 1, ROOTS[0], ROOTS[0], [ROOTS[0]], False),
    ],
)
def test_trivial_consistency_cases(
    size1: int, size2: int, root1: bytes, root2: bytes, proof: list[bytes], valid: bool
) -> None:
    """Equal sizes, empty first trees and backwards sizes follow transparency-dev's rules."""
    try:
        verify_consistency(size1, size2, proof, root1, root2)
    except InvalidProofError:
        accepted = False
    else:
        accepted = True
    assert valid == accepted


@given(st.integers(min_value=1, max_value=70), st.data())
def test_every_generated_proof_verifies(size: int, data: st.DataObject) -> None:
    """For any size, generated inclusion and consistency proofs verify against the roots."""
    tree = MerkleTree()
    for i in range(size):
        tree.append(i.to_bytes(4, "big"))
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    verify_inclusion(
        tree.leaf_hash_at(index), index, size, tree.inclusion_proof(index), tree.root()
    )
    size1 = data.draw(st.integers(min_value=0, max_value=size))
    verify_consistency(size1, size, tree.consistency_proof(size1), tree.root(size1), tree.root())


def test_size_out_of_range_is_refused() -> None:
    """Asking for a root or proof beyond the tree is a ValueError naming the bounds."""
    with pytest.raises(ValueError, match=r"outside 0\.\.8"):
        full_tree().root(9)
    with pytest.raises(ValueError, match="leaf index 8"):
        full_tree().inclusion_proof(8)
