"""`verify_tree` and proof chains on hand-made traces: each hostile link fails, naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from twinflow.trace import InvalidProofError, read_checkpoint
from twinflow.trace._testing import events_of, rechain, small_trace
from twinflow.trace._tree import check_chain, make_chain, verify_tree


def run(run_id: str, children: list[dict[str, object]] | None = None) -> bytes:
    """A complete trace of run ``run_id`` whose ``tool_returned`` events link ``children``."""
    events = events_of(small_trace(3))
    events[0]["body"] = {"kind": "run_started", "run_id": run_id}
    linked = [
        {
            "at": "2026-01-01T00:00:01Z",
            "body": {
                "kind": "tool_returned",
                "child": child,
                "result": {"name": "helper", "content": "ok"},
            },
        }
        for child in children or []
    ]
    return rechain([events[0], *linked, *events[1:]])


def link(path: Path, run_id: str, name: str | None = None) -> dict[str, object]:
    """The link a parent records to the child trace at ``path``."""
    checkpoint = read_checkpoint(path)
    return {"run_id": run_id, "trace": name or path.name, "size": checkpoint.size,
            "root": checkpoint.root}  # fmt: skip


def tree(tmp_path: Path, name: str | None = None) -> Path:
    """A parent linking one child (``p.c.jsonl``), the link naming ``name`` if given."""
    (tmp_path / "p.c.jsonl").write_bytes(run("c"))
    parent = tmp_path / "p.jsonl"
    parent.write_bytes(run("p", [link(tmp_path / "p.c.jsonl", "c", name)]))
    return parent


def test_a_tree_verifies_with_each_run_once(tmp_path: Path) -> None:
    """Parent and child each verify; the report lists both, the child one level down."""
    report = verify_tree(tree(tmp_path))
    assert (None, [0, 1]) == (report.problem, [n.depth for n in report.nodes])


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../p.c.jsonl", "the link names a path"),
        ("/etc/passwd", "the link names a path"),
        ("sub/p.c.jsonl", "the link names a path"),
        ("gone.jsonl", "the child trace is missing"),
    ],
)
def test_a_link_that_leaves_the_directory_or_names_nothing_fails(
    tmp_path: Path, name: str, message: str
) -> None:
    """A link naming a path, or a file that is not there, fails naming the link."""
    report = verify_tree(tree(tmp_path, name))
    assert (True, True) == (report.problem is not None, message in (report.problem or ""))


def test_a_child_that_is_a_link_fails(tmp_path: Path) -> None:
    """A symbolic link planted where the child trace should be is refused, not followed."""
    parent = tree(tmp_path)
    (tmp_path / "real.jsonl").write_bytes((tmp_path / "p.c.jsonl").read_bytes())
    (tmp_path / "p.c.jsonl").unlink()
    os.symlink(tmp_path / "real.jsonl", tmp_path / "p.c.jsonl")
    assert "is a symbolic link" in (verify_tree(parent).problem or "")


def test_two_links_to_one_file_fail(tmp_path: Path) -> None:
    """One child file cannot stand for two calls."""
    (tmp_path / "p.c.jsonl").write_bytes(run("c"))
    child = link(tmp_path / "p.c.jsonl", "c")
    parent = tmp_path / "p.jsonl"
    parent.write_bytes(run("p", [child, child]))
    assert "is already the child trace of p.jsonl#1" in (verify_tree(parent).problem or "")


def test_a_child_of_another_run_fails(tmp_path: Path) -> None:
    """Another run's trace in the child's place is refused as edited, naming both roots."""
    parent = tree(tmp_path)
    (tmp_path / "p.c.jsonl").write_bytes(run("someone-else"))
    assert "the child trace was edited" in (verify_tree(parent).problem or "")


def test_a_chain_checks_in_the_leaf_and_a_forged_link_does_not(tmp_path: Path) -> None:
    """The chain from an unsigned parent checkpoint holds; its link event edited, it does not."""
    parent = tree(tmp_path)
    note = read_checkpoint(parent).note_body("example.org/lab").encode()
    chain = make_chain(parent, ["p.c.jsonl"], 2, note)
    assert check_chain(chain, [], where="c").startswith("ok: event 2 ")
    forged = chain.replace(b'"run_id":"c"', b'"run_id":"x"')
    with pytest.raises(InvalidProofError):
        check_chain(forged, [], where="c")
