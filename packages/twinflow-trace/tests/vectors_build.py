"""Build the conformance vectors `twinflow.trace._conformance` ships, deterministically.

``python packages/twinflow-trace/tests/vectors_build.py DIR`` writes them into DIR; the
shipped copy is ``packages/twinflow-trace/src/twinflow/trace/vectors`` and a test holds it
equal to what this builds. Keys come from fixed seeds, Ed25519 signs deterministically, and
every time in an event is fixed, so the same code always writes the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from twinflow.trace import canonical_bytes
from twinflow.trace._attest import sign_attestation
from twinflow.trace._checkpoint import Checkpoint
from twinflow.trace._evidence import EVAL_PREDICATE_TYPE, cases_root, prove_case
from twinflow.trace._format import GENESIS, encode_line, encode_redacted
from twinflow.trace._keys import generate_key
from twinflow.trace._note import sign_note
from twinflow.trace._tlog import prove_tlog_inclusion

LAB = generate_key("example.org/lab", bytes(range(32)))
OTHER = generate_key("example.org/other", bytes(range(32, 64)))
AT = "2026-01-01T00:00:00+00:00"


def _events(bodies: list[dict[str, Any]]) -> list[tuple[dict[str, Any], bytes, str]]:
    """Chained events over ``bodies``: (event, line, digest) each."""
    out, prev = [], GENESIS
    for seq, body in enumerate(bodies):
        event = {"at": AT, "body": body, "prev": prev, "seq": seq}
        line, prev = encode_line(canonical_bytes(event))
        out.append((event, line, prev))
    return out


def _raw_line(event_bytes: bytes) -> bytes:
    """A line framing exactly ``event_bytes`` (any bytes) with their true digest."""
    return encode_line(event_bytes)[0]


BODIES: list[dict[str, Any]] = [
    {"kind": "run_started", "run_id": "r1", "config_digest": "c" * 64, "config": {"model": "M"}},
    {"kind": "model_requested", "step": 1, "messages": [{"role": "user", "content": "hi"}]},
    {"kind": "model_responded", "step": 1, "response": {"text": "hello", "model_name": "m"}},
    {"kind": "output_accepted", "value": "hello", "schema_name": None},
    {"kind": "run_finished", "steps": 1},
]
UNICODE: list[dict[str, Any]] = [
    {"kind": "run_started", "run_id": "r2", "config_digest": "d" * 64, "config": {"model": "M"}},
    {
        "kind": "note",
        "text": 'caf\u00e9 \U0001f600 \u2028 \x01\t"\\/',
        "numbers": [0, -1, 1.5, 1e-7, 1e21, 1.2345678901234568e17, 2**53 - 1, 0.1, 5e-324],
        "keys": {"\U0001f600": 1, "\ufb33": 2, "a": 3, "B": 4},
    },
    {"kind": "run_finished", "steps": 0},
]


def _swap(lines: list[bytes], i: int, j: int) -> list[bytes]:
    out = list(lines)
    out[i], out[j] = out[j], out[i]
    return out


def _edited_event(events: list[tuple[dict[str, Any], bytes, str]], seq: int) -> bytes:
    """Event ``seq`` with its text changed, digest recomputed (so the next prev breaks)."""
    event = json.loads(json.dumps(events[seq][0]))
    event["body"]["step"] = 9
    return encode_line(canonical_bytes(event))[0]


def _bad_bytes(seq_prev: str, body: bytes) -> bytes:
    """Event 1 of the base trace as raw ``body`` bytes inside a correct envelope's text."""
    return b'{"at":"%s","body":%s,"prev":"%s","seq":1}' % (AT.encode(), body, seq_prev.encode())


def traces() -> dict[str, tuple[bytes, dict[str, Any]]]:
    """Each trace vector's bytes and expected result."""
    base = _events(BODIES)
    lines = [line for _, line, _ in base]
    good = b"".join(lines)
    root = _root([d for _, _, d in base])
    p0 = base[0][2]
    out: dict[str, tuple[bytes, dict[str, Any]]] = {
        "good": (good, {"ok": True, "size": 5, "root": root, "redacted": []}),
        "good-redacted": (
            b"".join([*lines[:2], encode_redacted(base[2][2]), *lines[3:]]),
            {"ok": True, "size": 5, "root": root, "redacted": [2]},
        ),
    }
    uni = _events(UNICODE)
    out["good-unicode"] = (
        b"".join(line for _, line, _ in uni),
        {"ok": True, "size": 3, "root": _root([d for _, _, d in uni]), "redacted": []},
    )
    damaged = lines[2].replace(b'"step":1', b'"step":2')
    bad: dict[str, tuple[list[bytes], str, int]] = {
        "edited": ([*lines[:2], damaged, *lines[3:]], "edited", 2),
        "edited-rechained": ([*lines[:1], _edited_event(base, 1), *lines[2:]], "edited", 2),
        "reordered": (_swap(lines, 2, 3), "reordered", 2),
        "removed": ([*lines[:2], *lines[3:]], "removed", 2),
        "removed-tail": (lines[:4], "removed", 4),
        "inserted-copy": ([*lines[:3], lines[1], *lines[3:]], "inserted", 3),
        "truncated": ([*lines[:4], lines[4][:-1]], "truncated", 4),
        "key-order": (
            [lines[0], _raw_line(b'{"body":{"kind":"x"},"at":"%s","prev":"%s","seq":1}' % (AT.encode(), p0.encode())), *lines[2:]],
            "key_order",
            1,
        ),
        "whitespace": ([lines[0], _raw_line(_bad_bytes(p0, b'{"kind": "x"}')), *lines[2:]], "whitespace", 1),
        "number-form": ([lines[0], _raw_line(_bad_bytes(p0, b'{"kind":"x","n":1.0}')), *lines[2:]], "number_form", 1),
        "escape-form": ([lines[0], _raw_line(_bad_bytes(p0, b'{"kind":"\\u0078"}')), *lines[2:]], "escape_form", 1),
        "duplicate-key": ([lines[0], _raw_line(_bad_bytes(p0, b'{"kind":"x","kind":"y"}')), *lines[2:]], "duplicate_key", 1),
        "not-json": ([lines[0], _raw_line(_bad_bytes(p0, b'{"kind":"x",}')), *lines[2:]], "not_json", 1),
        "not-utf8": ([lines[0], _raw_line(_bad_bytes(p0, b'{"kind":"\xff"}')), *lines[2:]], "not_utf8", 1),
        "non-finite": ([lines[0], _raw_line(_bad_bytes(p0, b'{"kind":"x","n":NaN}')), *lines[2:]], "non_finite", 1),
        "not-event": ([lines[0], _raw_line(b'{"body":{"kind":"x"},"prev":"%s","seq":1}' % p0.encode()), *lines[2:]], "not_event", 1),
        "too-deep": ([lines[0], _raw_line(_bad_bytes(p0, b'{"kind":"x","d":' + b"[" * 70 + b"]" * 70 + b"}")), *lines[2:]], "too_deep", 1),
        "format": (
            [line for _, line, _ in _events([{**BODIES[0], "format": 2}, *BODIES[1:]])],
            "format",
            0,
        ),
    }  # fmt: skip
    for name, (found, problem, seq) in bad.items():
        out[name] = (b"".join(found), {"ok": False, "problem": problem, "seq": seq})
    return out


def _root(digests: list[str]) -> str:
    """RFC 9162 root over event digests, computed here by recursion (not the package's tree)."""

    def tree(hashes: list[bytes]) -> bytes:
        if len(hashes) == 1:
            return hashes[0]
        k = 1
        while k * 2 < len(hashes):
            k *= 2
        return hashlib.sha256(b"\x01" + tree(hashes[:k]) + tree(hashes[k:])).digest()

    return tree([hashlib.sha256(b"\x00" + bytes.fromhex(d)).digest() for d in digests]).hex()


def build(out: Path) -> None:
    """Write every vector and ``vectors.json`` into ``out`` (which must not hold them yet)."""
    vectors: list[dict[str, Any]] = []
    (out / "trace").mkdir(parents=True)
    found = traces()
    for name, (data, expect) in found.items():
        (out / "trace" / f"{name}.jsonl").write_bytes(data)
        vectors.append(
            {
                "name": f"trace/{name}",
                "check": "trace",
                "args": [f"trace/{name}.jsonl"],
                "expect": expect,
            }
        )
    (out / "keys").mkdir()
    (out / "keys" / "lab.pub").write_text(LAB.verifier.text + "\n")
    (out / "keys" / "other.pub").write_text(OTHER.verifier.text + "\n")
    good = found["good"][0]
    root = found["good"][1]["root"]
    (out / "checkpoint").mkdir()
    body = Checkpoint(5, root, GENESIS).note_body("example.org/lab")
    note = sign_note(body, [LAB])
    wrong = Checkpoint(5, "ab" * 32, GENESIS).note_body("example.org/lab")
    cps = {
        "good": (note, {"ok": True, "size": 5}),
        "other-signer": (sign_note(body, [OTHER]), {"ok": False, "problem": "signature"}),
        "wrong-root": (sign_note(wrong, [LAB]), {"ok": False, "problem": "checkpoint"}),
    }
    for name, (data, expect) in cps.items():
        (out / "checkpoint" / f"{name}.note").write_bytes(data)
        args = [f"checkpoint/{name}.note", "keys/lab.pub", "trace/good.jsonl"]
        vectors.append(
            {"name": f"checkpoint/{name}", "check": "checkpoint", "args": args, "expect": expect}
        )
    (out / "proof").mkdir()
    proof = prove_tlog_inclusion(good, 3, note).to_bytes()
    lines = proof.split(b"\n")
    flipped = base64.b64decode(lines[3])
    lines[3] = base64.b64encode(bytes([flipped[0] ^ 1]) + flipped[1:])
    proofs = {
        "good": (proof, {"ok": True, "index": 3}),
        "flipped-hash": (b"\n".join(lines), {"ok": False, "problem": "proof"}),
        "other-signer": (
            prove_tlog_inclusion(good, 3, sign_note(body, [OTHER])).to_bytes(),
            {"ok": False, "problem": "signature"},
        ),
    }
    for name, (data, expect) in proofs.items():
        (out / "proof" / f"{name}.tlog-proof").write_bytes(data)
        args = [f"proof/{name}.tlog-proof", "keys/lab.pub"]
        vectors.append(
            {"name": f"proof/{name}", "check": "inclusion", "args": args, "expect": expect}
        )
    _attestations(out, found, vectors)
    (out / "vectors.json").write_text(json.dumps(vectors, indent=1, sort_keys=True) + "\n")


def _attestations(
    out: Path, found: dict[str, tuple[bytes, dict[str, Any]]], vectors: list[dict[str, Any]]
) -> None:
    """An eval attestation over two case traces, a proof of each, and what is wrong with each
    bad one."""
    cases = [("a@1", "good"), ("b@1", "good-unicode")]
    roots = [bytes.fromhex(found[t][1]["root"]) for _, t in cases]
    results = [
        {"key": k, "status": "passed", "size": found[t][1]["size"], "rootHex": r.hex()}
        for (k, t), r in zip(cases, roots, strict=True)
    ]
    predicate: dict[str, Any] = {
        "assuranceLevel": "self_attested",
        "suite": {"name": "vectors", "digest": {"sha256": "e" * 64}},
        "sampleSize": 2,
        "spec": None,
        "model": None,
        "harness": {"name": "twinflow", "version": "vectors"},
        "preRegistration": None,
        "claims": [{"metric": "rate", "value": 1, "passed": None, "interval": None}],
        "cases": {"size": 2, "rootHex": cases_root(roots).hex(), "results": results},
    }
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "results.json", "digest": {"sha256": "f" * 64}}],
        "predicateType": EVAL_PREDICATE_TYPE,
        "predicate": predicate,
    }
    (out / "attestation").mkdir()
    good = sign_attestation(statement, [LAB])
    envelope = json.loads(good)
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[0] ^= 1
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    forged = canonical_bytes(envelope) + b"\n"
    lying = json.loads(json.dumps(statement))
    lying["predicate"]["cases"]["results"][0]["rootHex"] = "00" * 32
    files = {
        "eval": good,
        "forged-signature": forged,
        "wrong-case-root": sign_attestation(lying, [LAB]),
    }
    for name, data in files.items():
        (out / "attestation" / f"{name}.intoto.json").write_bytes(data)
    for i in range(2):
        (out / "attestation" / f"case{i}.tlog-proof").write_bytes(prove_case(roots, i))
    checks = {
        "good-case0": ("eval", "good", 0, {"ok": True, "key": "a@1"}),
        "good-case1": ("eval", "good-unicode", 1, {"ok": True, "key": "b@1"}),
        "forged-signature": ("forged-signature", "good", 0, {"ok": False, "problem": "signature"}),
        "wrong-case-root": ("wrong-case-root", "good", 0, {"ok": False, "problem": "malformed"}),
        "another-case-trace": ("eval", "good-unicode", 0, {"ok": False, "problem": "mismatch"}),
        "redacted-case": ("eval", "good-redacted", 0, {"ok": True, "key": "a@1"}),
    }
    for name, (envelope_name, trace, index, expect) in checks.items():
        args = [
            f"attestation/{envelope_name}.intoto.json",
            "keys/lab.pub",
            f"trace/{trace}.jsonl",
            f"attestation/case{index}.tlog-proof",
        ]
        vectors.append(
            {"name": f"attestation/{name}", "check": "attestation", "args": args, "expect": expect}
        )


if __name__ == "__main__":
    build(Path(sys.argv[1]))
