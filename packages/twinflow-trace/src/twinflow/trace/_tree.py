"""A run and its sub-agent runs: each child's trace linked from its parent's, checked as a tree.

A parent's ``tool_returned`` event that ran a sub-agent holds a ``child`` link (docs/adr/0191):
the child run's ``run_id``, its trace file's name (``trace``) in the parent's directory, and the
``size`` and Merkle ``root`` of that trace when the child returned. Because the link is inside an
event of the parent, the parent's root (and any checkpoint of it) covers the child's root, and
through it every event of the child.

`verify_tree` checks, from a parent trace down, for every link: the name is a plain file name
beside the parent (no directory part, not a link); the file verifies on its own (format, digests,
chain, completeness); it holds exactly ``size`` events whose root is ``root``; its run is
``run_id``; no two links name one file; and the descendants' links, the same way, at most
`MAX_TREE_DEPTH` levels down. The first failure names the link (``parent.jsonl#5 ->
parent.helper.jsonl``) and what is wrong: missing, edited (its root differs), grown or cut,
another child's trace (its root is another link's), or not verifying at all.

A conversation's ``user_turn`` written by a simulated user (an eval case's) holds a
``simulator`` link of the same shape: the simulator's one trace, linked from every turn it
wrote at the size it had then. Each such link vouches for a prefix of that trace (the
simulator's closing reply, that the conversation is over, comes after the case's last event),
so the file is walked once and every link's ``root`` must be its root at that ``size``.

A proof chain (`make_chain`, `check_chain`) proves one event of a child from the parent's
checkpoint: the link event's inclusion proof in the parent, its bytes, and the event's
inclusion proof in the child at the link's size (a simulated user's: the first that holds it).
Standard library only: this is what an auditor reads.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinflow._base._errors import UserError
from twinflow.trace._canonical import canonical_bytes
from twinflow.trace._checkpoint import Checkpoint
from twinflow.trace._errors import InvalidProofError, TraceCorruptError
from twinflow.trace._format import Limits
from twinflow.trace._verify import walk_trace
from twinflow.trace._walk import _Walk as _Pass

if TYPE_CHECKING:
    from twinflow.trace._published import PublishedCheckpoint

__all__ = ["MAX_TREE_DEPTH", "ChildLink", "TreeNode", "TreeReport", "child_links", "verify_tree"]

MAX_TREE_DEPTH = 4
"""Deepest nesting of sub-agent runs a tree may hold (the agent refuses to nest deeper)."""
MAX_TREE_NODES = 10_000
"""Most runs one tree may hold: a received tree is hostile input, so its walk is bounded."""


@dataclasses.dataclass(frozen=True, slots=True)
class ChildLink:
    """A parent event's link to a child run."""

    seq: int
    """The parent's ``tool_returned`` event holding the link."""
    tool: str
    """The sub-agent tool's name."""
    run_id: str
    """The child run's id."""
    trace: str
    """The child's trace file name, in the parent's directory."""
    size: int
    """Events of the child the link vouches for."""
    root: str
    """The child trace's Merkle root at ``size`` (hex)."""
    prefix: bool = False
    """A simulated user's link (``user_turn.simulator``): it vouches for the trace's first
    ``size`` events, and the trace may go on past them."""


@dataclasses.dataclass(frozen=True, slots=True)
class TreeNode:
    """One run of a verified tree."""

    depth: int
    """0 for the top run, 1 for its children, ..."""
    path: Path
    """The run's trace file."""
    checkpoint: Checkpoint
    """The run's trace checkpoint (of all its events)."""
    link: ChildLink | None
    """The parent's link to this run (None for the top run)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TreeReport:
    """What `verify_tree` found: the runs that verified, in depth-first order, and the first
    problem (None when every run and link holds)."""

    nodes: tuple[TreeNode, ...]
    """Runs that verified, parents before their children."""
    problem: str | None
    """The first failure, naming the link; None when the tree verifies."""

    @property
    def ok(self) -> bool:
        """Whether every run and link verified."""
        return self.problem is None


def _link(seq: int, body: dict[str, Any]) -> ChildLink | None:
    """The child link of a ``tool_returned`` body (or a ``user_turn``'s simulated user), or
    None when it has none (any other kind of event links no run).

    Raises:
        ValueError: A ``child`` member that is not a well-formed link.
    """
    if body.get("kind") not in ("tool_returned", "user_turn"):
        return None
    simulated = body.get("kind") == "user_turn"
    child = body.get("simulator" if simulated else "child")
    if child is None:
        return None
    result = body.get("result")
    tool = "user" if simulated else result.get("name") if isinstance(result, dict) else None
    fields = (
        isinstance(child, dict)
        and set(child) - {"counted"} == {"run_id", "trace", "size", "root"}
        and isinstance(child["run_id"], str)
        and isinstance(child["trace"], str | None)
        and isinstance(child["size"], int)
        and not isinstance(child["size"], bool)
        and isinstance(child["root"], str)
        and isinstance(tool, str)
    )
    if not fields:
        raise ValueError(f"event {seq}: its child link is not a run id, trace, size and root")
    if child["trace"] is None:
        raise ValueError(
            f"event {seq}: its child run {child['run_id']} was kept in memory (no trace file)"
        )
    assert isinstance(tool, str)  # checked with the fields
    return ChildLink(
        seq, tool, child["run_id"], child["trace"], child["size"], child["root"], simulated
    )


def child_links(
    source: str | os.PathLike[str] | bytes, *, limits: Limits | None = None
) -> tuple[tuple[ChildLink, ...], Checkpoint, str | None]:
    """The child links of a trace, its checkpoint and its run id (``run_started``'s).

    Raises:
        TraceCorruptError: The trace does not verify.
        ValueError: A link is malformed or names no file.
    """
    links: list[ChildLink] = []
    run_id: str | None = None
    walk = walk_trace(source, limits=limits, require_complete=True)
    while True:
        try:
            event = next(walk)
        except StopIteration as end:
            checkpoint: Checkpoint = end.value
            break
        body = event.value["body"] if isinstance(event.value, dict) else None
        if not isinstance(body, dict):
            continue
        if event.seq == 0 and isinstance(body.get("run_id"), str):
            run_id = body["run_id"]
        link = _link(event.seq, body)
        if link is not None:
            links.append(link)
    return tuple(links), checkpoint, run_id


def _plain_name(name: str) -> bool:
    """A file name with no directory part: the child's trace stays beside its parent's."""
    return (
        bool(name)
        and name not in (".", "..")
        and "/" not in name
        and "\\" not in name
        and "\x00" not in name
        and not os.path.isabs(name)
    )


class _Walk:
    """The depth-first walk of a tree; each step returns the first problem, or None."""

    def __init__(self, limits: Limits | None) -> None:
        self.limits = limits
        self.nodes: list[TreeNode] = []
        self.claimed: dict[Path, str] = {}
        self.roots: dict[str, str] = {}
        self.earlier: dict[ChildLink, tuple[ChildLink, ...]] = {}
        """A simulated user's earlier links to the trace its last link names."""

    def run(self, path: Path, depth: int, link: ChildLink | None, label: str) -> str | None:
        if len(self.nodes) >= MAX_TREE_NODES:
            return f"{label}: the tree holds more than {MAX_TREE_NODES} runs"
        try:
            links, checkpoint, run_id = child_links(path, limits=self.limits)
        except (TraceCorruptError, ValueError) as exc:
            return f"{label}: {exc}"
        except OSError as exc:
            return f"{label}: cannot read {path.name}: {exc.strerror or exc}"
        if link is not None and link.prefix:
            problem = self._check_prefixes(path, self.earlier.pop(link, ()), link, run_id, label)
        elif link is not None:
            problem = self._check_link(link, checkpoint, run_id, label)
        else:
            problem = None
        if problem:
            return problem
        self.nodes.append(TreeNode(depth, path, checkpoint, link))
        if links and depth >= MAX_TREE_DEPTH:
            return f"{label}: sub-agent runs nest deeper than {MAX_TREE_DEPTH} levels"
        for child in links:
            self.roots.setdefault(child.root, f"{path.name}#{child.seq}")
        # A simulated user's trace is walked once, from its last link; the earlier links
        # name prefixes of it.
        last: dict[str, ChildLink] = {}
        for child in links:
            if child.prefix:
                earlier = last.get(child.trace)
                if earlier is not None:
                    self.earlier[child] = (*self.earlier.pop(earlier, ()), earlier)
                last[child.trace] = child
        for child in links:
            if child.prefix and last[child.trace] is not child:
                continue
            if problem := self.run_child(path, child, depth + 1):
                return problem
        return None

    def _check_prefixes(
        self,
        path: Path,
        earlier: tuple[ChildLink, ...],
        link: ChildLink,
        run_id: str | None,
        label: str,
    ) -> str | None:
        """Each simulated user's link names a prefix of its trace, by size and root."""
        walk = _Pass(path, self.limits or Limits(), None, {lk.size for lk in (*earlier, link)})
        for _ in walk:
            pass
        for each in (*earlier, link):
            root = walk.roots.get(each.size)
            where = f"{label.split('#')[0]}#{each.seq} -> {each.trace}"
            if run_id != each.run_id:
                return f"{where}: the trace is run {run_id}, the link names {each.run_id}"
            if root is None:
                return (
                    f"{where}: the simulated user's trace holds {walk.frontier.size} events; "
                    f"the link vouches for {each.size} (it was cut or replaced)"
                )
            if root.hex() != each.root:
                return (
                    f"{where}: the simulated user's trace was edited: its root at "
                    f"{each.size} events is {root.hex()}, the link records {each.root}"
                )
        return None

    def run_child(self, parent: Path, link: ChildLink, depth: int) -> str | None:
        label = f"{parent.name}#{link.seq} -> {link.trace}"
        if not _plain_name(link.trace):
            return f"{label}: the link names a path, not a file beside {parent.name}"
        path = parent.parent / link.trace
        if path.is_symlink():
            return f"{label}: {link.trace} is a symbolic link; a child trace is a file"
        if not path.exists():
            return f"{label}: the child trace is missing (no {link.trace} beside {parent.name})"
        key = path.resolve()
        if key in self.claimed:
            return f"{label}: {link.trace} is already the child trace of {self.claimed[key]}"
        self.claimed[key] = f"{parent.name}#{link.seq}"
        return self.run(path, depth, link, label)

    def _check_link(
        self, link: ChildLink, checkpoint: Checkpoint, run_id: str | None, label: str
    ) -> str | None:
        if checkpoint.root == link.root and checkpoint.size == link.size:
            if run_id != link.run_id:
                return f"{label}: the trace is run {run_id}, the link names {link.run_id}"
            return None
        other = self.roots.get(checkpoint.root)
        if other is not None and other != label.split(" -> ")[0]:
            return f"{label}: the file is another child's trace (the one {other} links)"
        if checkpoint.size != link.size:
            return (
                f"{label}: the child trace holds {checkpoint.size} events; the link vouches for "
                f"{link.size} (it was cut, grown or replaced)"
            )
        return (
            f"{label}: the child trace was edited: its root is {checkpoint.root}, the link "
            f"records {link.root}"
        )


def verify_tree(path: str | os.PathLike[str], *, limits: Limits | None = None) -> TreeReport:
    """Verify a trace and every descendant its sub-agent links name, and the links.

    Args:
        path: The top run's trace file (its children's files are beside it).
        limits: Line-size and nesting limits, for every trace of the tree.

    Returns:
        The report: the runs verified, and the first problem naming its link.
    """
    top = Path(path)
    walk = _Walk(limits)
    problem = walk.run(top, 0, None, top.name)
    return TreeReport(tuple(walk.nodes), problem)


def linked_files(
    top: str | os.PathLike[str], *, max_bytes: int, limits: Limits | None = None
) -> dict[str, bytes]:
    """The bytes of every trace file ``top``'s links name (and theirs), by file name, for a
    page that verifies them itself: plain names beside ``top`` that are regular files, not
    links, at most `MAX_TREE_DEPTH` levels down and ``max_bytes`` in all. A trace that does
    not verify is included as it is, and its own links are not followed."""
    found: dict[str, bytes] = {}
    total = 0
    queue: list[tuple[Path, int]] = [(Path(top), 0)]
    while queue:
        path, depth = queue.pop(0)
        try:
            links, _, _ = child_links(path, limits=limits)
        except (TraceCorruptError, ValueError, OSError):
            continue
        for link in links:
            child = path.parent / link.trace
            if link.trace in found or depth >= MAX_TREE_DEPTH or not _plain_name(link.trace):
                continue
            if child.is_symlink() or not child.is_file():
                continue
            size = child.stat().st_size
            if total + size > max_bytes:
                continue
            found[link.trace] = child.read_bytes()
            total += size
            queue.append((child, depth + 1))
    return found


def iter_links(report: TreeReport) -> Iterator[tuple[int, str]]:
    """Each run of a verified tree as (depth, one-line description), for printing."""
    for node in report.nodes:
        where = node.path.name
        if node.link is None:
            yield node.depth, f"{where}: {node.checkpoint.size} events, root {node.checkpoint.root}"
        else:
            yield (
                node.depth,
                f"{node.link.tool} (event {node.link.seq}) -> {where}: run {node.link.run_id}, "
                f"{node.checkpoint.size} events, root {node.checkpoint.root}",
            )


def link_event(source: str | os.PathLike[str] | bytes, seq: int) -> tuple[bytes, ChildLink]:
    """The canonical bytes of a parent's event ``seq`` and the child link it holds.

    Raises:
        TraceCorruptError: The trace does not verify.
        UserError: Event ``seq`` holds no link with a trace file (a sub-agent's or a
            simulated user's).
    """
    for event in walk_trace(source):
        if event.seq != seq:
            continue
        body = event.value["body"] if isinstance(event.value, dict) else None
        try:
            link = _link(seq, body) if isinstance(body, dict) else None
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if link is None:
            break
        return event.event, link
    raise UserError(f"event {seq} links no run: a sub-agent's result or a simulated turn does")


def link_of_event(event: bytes) -> ChildLink:
    """The child link inside a parent's event, given as its canonical bytes.

    Raises:
        InvalidProofError: The bytes are not a canonical event holding a link.
    """
    try:
        value = json.loads(event)
        if canonical_bytes(value) != event:
            raise ValueError("not canonical JSON")
        link = _link(value["seq"], value["body"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidProofError(f"the link event is not one that links a run: {exc}") from None
    if link is None:
        raise InvalidProofError("the link event links no run (it has no child or simulator)")
    return link


CHAIN_HEADER = "twinflow proof chain v1"
"""The first line of a proof chain file."""
_CHILD_ORIGIN = "twinflow.invalid/child"
"""The origin of a child's checkpoint inside a chain: it is vouched for by its link, not signed."""
_MAX_CHAIN_LEVELS = MAX_TREE_DEPTH
_MAX_SECTION = 2 * 1024 * 1024


def _section(name: str, data: bytes) -> bytes:
    return f"{name} {len(data)}\n".encode("ascii") + data + b"\n"


def make_chain(
    parent: str | os.PathLike[str],
    children: list[str],
    seq: int,
    checkpoint: bytes,
    *,
    limits: Limits | None = None,
) -> bytes:
    """A proof chain: event ``seq`` of the run reached through ``children`` (trace file names,
    each linked from the one before) is in the parent trace at ``checkpoint``'s size.

    Args:
        parent: The top run's trace file.
        children: The descendant traces' file names, top down (each beside its parent): a
            sub-agent's, or a simulated user's (linked from each turn it wrote).
        seq: The event of the last child to prove.
        checkpoint: The parent's checkpoint note (signed or not), as `prove_tlog_inclusion` takes.
        limits: Line-size and nesting limits.

    Raises:
        UserError: A name is not linked from the trace before it, or there is none; no link
            holds the event (a simulated user's closing reply).
        TraceCorruptError, InvalidProofError: As `prove_tlog_inclusion`.
    """
    from twinflow.trace._tlog import prove_tlog_inclusion

    if not children or len(children) > _MAX_CHAIN_LEVELS:
        raise UserError(f"a proof chain goes 1 to {_MAX_CHAIN_LEVELS} sub-agent runs down")
    out = [f"{CHAIN_HEADER}\n".encode("ascii")]
    here, note = Path(parent), checkpoint
    for level, name in enumerate(children, 1):
        links, _, _ = child_links(here, limits=limits)
        found = [link for link in links if link.trace == name]
        if not found or not _plain_name(name):
            named = ", ".join(sorted({link.trace for link in links})) or "none"
            raise UserError(f"{here.name} links no child trace {name!r} (it links: {named})")
        link = found[0]
        if level == len(children):
            # A simulated user's trace is linked from each turn it wrote, each link vouching
            # for a prefix: the event is proved through the first that holds it.
            link = next((lk for lk in found if lk.size > seq), found[-1])
            if seq >= link.size:
                raise UserError(
                    f"event {seq} of {name} comes after the last event its links vouch for "
                    f"({link.size - 1}): no event of {here.name} holds it"
                )
        event, _ = link_event(here, link.seq)
        proof = prove_tlog_inclusion(here, link.seq, note, limits=limits)
        out += [_section("link-proof", proof.to_bytes()), _section("link-event", event)]
        here = here.parent / name
        note = (
            Checkpoint(size=link.size, root=link.root, head="0" * 64)
            .note_body(_CHILD_ORIGIN)
            .encode()
        )
    proof = prove_tlog_inclusion(here, seq, note, limits=limits)
    out.append(_section("event-proof", proof.to_bytes()))
    return b"".join(out)


def _sections(data: bytes, where: str) -> list[tuple[str, bytes]]:
    """The chain file's sections, in order (bounded: a received file is hostile input)."""
    from twinflow.trace._errors import TraceFormatError

    header = f"{CHAIN_HEADER}\n".encode("ascii")
    if not data.startswith(header):
        raise TraceFormatError(f"{where}: line 1 is not {CHAIN_HEADER!r}: not a proof chain")
    at, sections = len(header), []
    while at < len(data):
        end = data.find(b"\n", at, at + 64)
        parts = data[at:end].decode("ascii", "replace").split(" ") if end > 0 else []
        if len(parts) != 2 or parts[0] not in ("link-proof", "link-event", "event-proof"):
            raise TraceFormatError(f"{where}: byte {at}: not a section line ('NAME LENGTH')")
        if not parts[1].isdigit() or int(parts[1]) > _MAX_SECTION:
            raise TraceFormatError(f"{where}: byte {at}: a section's length is not a number")
        start = end + 1
        stop = start + int(parts[1])
        if data[stop : stop + 1] != b"\n":
            raise TraceFormatError(f"{where}: the {parts[0]} section at byte {at} is cut")
        sections.append((parts[0], data[start:stop]))
        at = stop + 1
        if len(sections) > 2 * _MAX_CHAIN_LEVELS + 1:
            raise TraceFormatError(f"{where}: more sections than a chain of {_MAX_CHAIN_LEVELS}")
    names = [name for name, _ in sections]
    levels = (len(names) - 1) // 2
    if levels < 1 or names != ["link-proof", "link-event"] * levels + ["event-proof"]:
        raise TraceFormatError(
            f"{where}: a chain is link-proof, link-event (per level), then event-proof"
        )
    return sections


def check_chain(
    data: bytes,
    keys: list[bytes],
    *,
    where: str,
    origin: str | None = None,
    digest: bytes | None = None,
) -> str:
    """Check a proof chain: the first link event is in the parent's (signed) checkpoint, each
    child's checkpoint is the one its link records, and the event is in the last child.

    Args:
        data: The chain file's bytes.
        keys: The verifier keys that must have signed the parent's checkpoint.
        where: The file's name, for messages.
        origin: The log the parent's checkpoint must be for (default: the first key's name).
        digest: The proved event's 32-byte digest (default: the last proof's extra line).

    Returns:
        One line saying what was shown.

    Raises:
        TraceFormatError: Not a proof chain (exit 2).
        SignatureError: The parent's checkpoint signature does not verify (exit 1).
        InvalidProofError: A proof or a link does not hold (exit 1).
    """
    from twinflow.trace._tlog import check_tlog_proof, parse_tlog_proof

    sections = _sections(data, where)
    link: ChildLink | None = None
    top = None
    runs = []
    for index in range(0, len(sections) - 1, 2):
        level = f"{where} (level {index // 2})"
        published, link = _check_level(
            sections[index][1], sections[index + 1][1], link, keys, origin, level
        )
        top = top or published
        runs.append(f"{link.tool} -> run {link.run_id}")
    proof = parse_tlog_proof(sections[-1][1], where=f"{where} (event)")
    if digest is None:
        if proof.extra is None or len(proof.extra) != 32:
            raise InvalidProofError(f"{where}: give the event's digest: the proof carries none")
        digest = proof.extra
    child = check_tlog_proof(proof, digest, [], where=f"{where} (event)")
    _joins(link, child.checkpoint, f"{where} (event)")
    assert top is not None  # at least one level: `_sections` says so
    signed = f"signed by {', '.join(top.signed_by)}" if top.signed_by else "UNSIGNED"
    return (
        f"ok: event {proof.index} (digest (hex) {digest.hex()}) of {' / '.join(runs)} is vouched "
        f"for by the parent's checkpoint at size {top.checkpoint.size}, root (hex) "
        f"{top.checkpoint.root} ({signed})"
    )


def _check_level(
    proof_bytes: bytes,
    event: bytes,
    link: ChildLink | None,
    keys: list[bytes],
    origin: str | None,
    level: str,
) -> tuple[PublishedCheckpoint, ChildLink]:
    """Check one level of a chain: its link event is in the checkpoint the previous link
    records (the first: in the parent's signed one); that checkpoint and the event's link."""
    import hashlib

    from twinflow.trace._tlog import check_tlog_proof, parse_tlog_proof

    proof = parse_tlog_proof(proof_bytes, where=level)
    published = check_tlog_proof(
        proof,
        hashlib.sha256(event).digest(),
        keys if link is None else [],
        where=level,
        origin=origin if link is None else None,
    )
    _joins(link, published.checkpoint, level)
    child = link_of_event(event)
    if child.seq != proof.index:
        raise InvalidProofError(
            f"{level}: the link event is event {child.seq}, the proof's {proof.index}"
        )
    return published, child


def _joins(link: ChildLink | None, checkpoint: Checkpoint, where: str) -> None:
    """A child's checkpoint in a chain is the one its parent's link records."""
    if link is not None and (checkpoint.size, checkpoint.root) != (link.size, link.root):
        raise InvalidProofError(
            f"{where}: the child's checkpoint (size {checkpoint.size}, root (hex) "
            f"{checkpoint.root}) is not the one its link records (size {link.size}, root "
            f"(hex) {link.root})"
        )
