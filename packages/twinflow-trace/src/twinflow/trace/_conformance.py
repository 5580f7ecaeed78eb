"""Conformance vectors for the trace format, and the runner that holds any verifier to them.

The vectors ship in this package (``twinflow/trace/vectors``): ``vectors.json`` lists them, and
the files they name sit beside it. Each vector is::

    {"name": "trace/edited", "check": "trace", "args": ["trace/edited.jsonl"],
     "expect": {"ok": false, "problem": "edited", "seq": 2}}

A verifier is any command. The runner calls it once a vector, in the vectors directory, as
``VERIFIER CHECK ARGS...``, and it must print one JSON object on stdout equal to ``expect``:

- ``trace TRACE``: ``{"ok": true, "size": N, "root": HEX, "redacted": [SEQ...]}`` for a
  complete trace that verifies (redacted lines allowed), else ``{"ok": false, "problem":
  KIND, "seq": SEQ}`` with the first problem's kind (`twinflow.trace._verify` lists them);
- ``checkpoint NOTE VKEY TRACE``: ``{"ok": true, "size": N}`` when the C2SP checkpoint note is
  signed by the signed-note verifier key VKEY and names the trace's root at its size, else
  ``{"ok": false, "problem": "signature" | "checkpoint"}``;
- ``inclusion PROOF VKEY``: ``{"ok": true, "index": I}`` when the C2SP tlog-proof leads from the
  digest on its ``extra`` line to its checkpoint, signed by VKEY, else ``{"ok": false,
  "problem": "signature" | "proof"}``;
- ``attestation ENVELOPE VKEY CASE_TRACE PROOF``: ``{"ok": true, "key": KEY}`` when the DSSE
  envelope is signed by VKEY, its eval statement is well formed (its case roots lead to its
  case root) and the case trace is the case the proof places in it, else ``{"ok": false,
  "problem": "signature" | "malformed" | "mismatch"}``.

``python -P -m twinflow.trace vector CHECK ARGS...`` is this package's verifier under that
contract. ``twinflow conformance [--vectors DIR] [-- VERIFIER...]`` (the ``twinflow`` command:
this leaf starts no process) runs any verifier against them, by default this one; a vector
without an ``expect`` is refused before anything runs (docs/adr/0187-conformance-vectors.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from twinflow._base._errors import UserError
from twinflow._base._open import read_regular
from twinflow.trace._errors import InvalidProofError, SignatureError, TraceFormatError

__all__ = ["CHECKS", "VECTORS", "check_vector", "default_verifier", "load_vectors"]

VECTORS = Path(__file__).parent / "vectors"
"""The vectors this package ships."""
CHECKS = {"trace": 1, "checkpoint": 3, "inclusion": 2, "attestation": 4}
"""Each check and how many file arguments it takes."""
_MAX_MANIFEST = 1024 * 1024


def load_vectors(directory: Path) -> list[dict[str, Any]]:
    """The vectors listed in ``directory/vectors.json``, each with its check, args and expect.

    Raises:
        UserError: The manifest is missing or malformed, or a vector lacks its expected result.
    """
    where = directory / "vectors.json"
    try:
        items = json.loads(read_regular(where, _MAX_MANIFEST))
    except (OSError, ValueError) as exc:
        raise UserError(f"{where}: not a vector list ({exc})") from None
    if not isinstance(items, list) or not items:
        raise UserError(f"{where}: not a vector list (a JSON array of vectors)")
    names: set[str] = set()
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if type(name) is not str or name in names:
            raise UserError(f"{where}: vector {i} has no name, or a name another vector has")
        names.add(name)
        if not isinstance(item.get("expect"), dict):
            raise UserError(
                f"{where}: vector {name!r} has no expected result (its 'expect' object): a "
                "vector that expects nothing cannot fail"
            )
        check, args = item.get("check"), item.get("args")
        if check not in CHECKS or not isinstance(args, list) or len(args) != CHECKS[check]:
            raise UserError(f"{where}: vector {name!r}: check {check!r:.40} with wrong arguments")
        if not all(type(a) is str and ".." not in a and not a.startswith("/") for a in args):
            raise UserError(f"{where}: vector {name!r}: an argument leaves the vectors directory")
    return items


def check_vector(check: str, args: Sequence[str]) -> dict[str, Any]:
    """This package's verifier under the vector contract: what it says of one vector.

    Raises:
        UserError: An unknown check, or the wrong number of arguments.
    """
    if CHECKS.get(check) != len(args):
        raise UserError(f"vector {check!r:.40}: takes {CHECKS.get(check, '?')} file arguments")
    paths = [Path(a) for a in args]
    if check == "trace":
        return _trace(paths[0])
    if check == "checkpoint":
        return _checkpoint(*paths)
    if check == "inclusion":
        return _inclusion(*paths)
    return _attestation(*paths)


def _trace(path: Path) -> dict[str, Any]:
    from twinflow.trace._verify import verify_trace

    report = verify_trace(path, require_complete=True)
    if report.problem is not None:
        return {"ok": False, "problem": report.problem.kind, "seq": report.problem.seq}
    return {
        "ok": True,
        "size": report.events,
        "root": report.checkpoint.root,
        "redacted": list(report.redacted),
    }


def _checkpoint(note: Path, key: Path, trace: Path) -> dict[str, Any]:
    from twinflow.trace._published import read_published_checkpoint
    from twinflow.trace._verify import verify_trace

    try:
        published = read_published_checkpoint(
            read_regular(note, _MAX_MANIFEST), [read_regular(key, _MAX_MANIFEST)], where=str(note)
        )
    except SignatureError:
        return {"ok": False, "problem": "signature"}
    report = verify_trace(trace, checkpoint=published.checkpoint, require_complete=False)
    if report.problem is not None:
        return {"ok": False, "problem": "checkpoint"}
    return {"ok": True, "size": published.checkpoint.size}


def _inclusion(proof: Path, key: Path) -> dict[str, Any]:
    from twinflow.trace._tlog import check_proof_file

    try:
        checked = check_proof_file(
            read_regular(proof, _MAX_MANIFEST), [read_regular(key, _MAX_MANIFEST)], where=str(proof)
        )
    except SignatureError:
        return {"ok": False, "problem": "signature"}
    except InvalidProofError:
        return {"ok": False, "problem": "proof"}
    return {"ok": True, "index": checked.index}


def _attestation(envelope: Path, key: Path, trace: Path, proof: Path) -> dict[str, Any]:
    from twinflow.trace._attest import MAX_ENVELOPE_BYTES, open_attestation
    from twinflow.trace._evidence import check_case
    from twinflow.trace._keys import parse_verifier_key

    try:
        opened = open_attestation(
            read_regular(envelope, MAX_ENVELOPE_BYTES),
            [parse_verifier_key(read_regular(key, _MAX_MANIFEST))],
        )
    except TraceFormatError:
        return {"ok": False, "problem": "malformed"}
    except SignatureError:
        return {"ok": False, "problem": "signature"}
    try:
        case = check_case(
            opened.statement,
            read_regular(trace),
            read_regular(proof, _MAX_MANIFEST),
            where=str(proof),
        )
    except SignatureError:
        return {"ok": False, "problem": "mismatch"}
    return {"ok": True, "key": case}


def default_verifier() -> list[str]:
    """This package's verifier, as a command (``python -P -m twinflow.trace vector``)."""
    return [sys.executable, "-P", "-m", "twinflow.trace", "vector"]
