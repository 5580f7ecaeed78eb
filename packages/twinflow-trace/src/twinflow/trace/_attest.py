"""Run attestations: an in-toto Statement v1 about a trace, in a DSSE envelope signed with Ed25519.

An attestation says "this output came from this run" in the format supply-chain tools already
check (in-toto, sigstore): a DSSE envelope (https://github.com/secure-systems-lab/dsse)::

    {"payload": base64(statement), "payloadType": "application/vnd.in-toto+json",
     "signatures": [{"keyid": "<name>+<hash>", "sig": base64(Ed25519(PAE(type, payload)))}]}

where ``PAE(type, body) = "DSSEv1" SP len(type) SP type SP len(body) SP body`` and the statement
is an in-toto Statement v1 (https://in-toto.io/Statement/v1) whose subjects are the trace file
(its sha256) and the accepted output (the sha256 of its RFC 8785 canonical JSON), and whose
predicate (`PREDICATE_TYPE`) names the checkpoint (origin, size, root), the run's config digest,
the model's identity, the spec's digest and the tool modules that ran.

The keys are the signed-note keys `twinflow keygen` makes (``twinflow.trace._note``); a
signature's ``keyid`` is the verifier key's ``<name>+<hash>``. Verification is the standard
library alone (`twinflow.trace._ed25519`); signing needs ``twinflow-trace[signatures]``.

Readers are bounded and strict: an envelope over `MAX_ENVELOPE_BYTES`, a carriage return, a
JSON member that is missing, unknown or repeated, base64 that is not canonical, a repeated
``keyid``: each is `TraceFormatError` (``attestation``) (one line, nothing verified). A known key whose
signature fails, too few known signers, or a statement that does not match the trace or the
checkpoint it is checked against is `SignatureError` (``attestation_mismatch``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from twinflow.trace import _evidence
from twinflow.trace._canonical import canonical_bytes, parse_json
from twinflow.trace._errors import CanonicalError
from twinflow.trace._format import Limits
from twinflow.trace._keys import SignerKey, VerifierKey, _b64decode, _b64encode
from twinflow.trace._merkle import Frontier, leaf_hash
from twinflow.trace._shape import _hex64, _malformed, _mismatch, _object, _text
from twinflow.trace._verify import walk_trace

PAYLOAD_TYPE = "application/vnd.in-toto+json"
"""The DSSE payload type of an in-toto statement."""
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
"""The statement's ``_type``."""
PREDICATE_TYPE = "https://twinflow.dev/attestation/run/v1"
"""The predicate type of a twinflow run (docs/adr/0116-run-attestations-in-dsse.md)."""
MAX_ENVELOPE_BYTES = 1024 * 1024
"""Largest envelope read: a run's statement is a few KiB."""
OUTPUT_SUBJECT = "output"
"""The subject name of the accepted output."""

_MAX_DEPTH = 16
_MAX_SIGNATURES = 16
_MAX_KEYID = 512


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: the bytes a signature signs."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def key_id(key: VerifierKey) -> str:
    """A key's DSSE ``keyid``: its signed-note ``<name>+<hash>``."""
    return f"{key.name}+{key.key_hash:08x}"


class RunFacts:
    """What a trace says about its run, computed from its bytes by one verifying walk."""

    __slots__ = (
        "adapter",
        "config_digest",
        "output_digest",
        "output_schema",
        "output_seq",
        "root",
        "run_id",
        "served",
        "sha256",
        "size",
    )

    def __init__(self, **fields: Any) -> None:
        """Hold the fields as given (`run_facts` computes them)."""
        for name in self.__slots__:
            setattr(self, name, fields[name])

    sha256: str
    """The trace file's sha256 (hex)."""
    size: int
    """Events in the trace (the checkpoint's size)."""
    root: bytes
    """The RFC 9162 Merkle root of its events."""
    run_id: str
    """The ``run_started`` event's run id."""
    config_digest: str
    """The ``run_started`` event's config digest."""
    adapter: str
    """The model adapter's type name (the recorded config's ``model``)."""
    served: tuple[str, ...]
    """The model names the server reported, in order of first appearance."""
    output_seq: int | None
    """The seq of the ``output_accepted`` event, or None if the run accepted no output."""
    output_schema: str | None
    """Its schema name (None for text)."""
    output_digest: str | None
    """The sha256 of its value's canonical JSON (hex)."""


def run_facts(data: bytes, *, limits: Limits | None = None) -> RunFacts:
    """Verify a trace (its bytes) and collect what an attestation states about it.

    Raises:
        TraceCorruptError: The trace does not verify, or is not complete.
        TraceFormatError (``attestation``): The trace does not start with a ``run_started`` event.
    """
    frontier = Frontier()
    started: dict[str, Any] | None = None
    served: dict[str, None] = {}
    output: tuple[int, str | None, str] | None = None
    for event in walk_trace(data, limits=limits, require_complete=True):
        frontier.append_hash(leaf_hash(bytes.fromhex(event.digest)))
        body = event.value["body"]
        kind = body.get("kind")
        if event.seq == 0:
            if kind != "run_started":
                raise _malformed(
                    f"the trace's first event is {kind!r:.40}, not run_started: not a run"
                )
            started = body
        elif kind == "model_responded":
            # The leaf checks the line format, not the agent's event schema: read defensively.
            response = body.get("response")
            name = response.get("model_name") if isinstance(response, dict) else None
            if type(name) is str and name:
                served.setdefault(name, None)
        elif kind == "output_accepted":
            schema = body.get("schema_name")
            digest = hashlib.sha256(canonical_bytes(body.get("value"))).hexdigest()
            output = (event.seq, schema if type(schema) is str else None, digest)
    assert started is not None  # a complete trace has at least one event, checked first above
    config = started.get("config")
    return RunFacts(
        sha256=hashlib.sha256(data).hexdigest(),
        size=frontier.size,
        root=frontier.root(),
        run_id=_text(started.get("run_id"), "run_started.run_id"),
        config_digest=_text(started.get("config_digest"), "run_started.config_digest"),
        adapter=_text(config.get("model") if isinstance(config, dict) else None, "config.model"),
        served=tuple(served),
        output_seq=None if output is None else output[0],
        output_schema=None if output is None else output[1],
        output_digest=None if output is None else output[2],
    )


def statement(
    facts: RunFacts,
    *,
    trace_name: str,
    origin: str,
    spec: dict[str, Any] | None,
    model: dict[str, Any],
    tools: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The in-toto statement about a run.

    Args:
        facts: What the trace says (`run_facts`).
        trace_name: The trace file's name (its subject's ``name``).
        origin: The log origin its checkpoint is published under.
        spec: ``{"name", "sha256"}`` of the spec it ran from, or None.
        model: The model's identity beyond what the trace records (``kind``, ``name``).
        tools: ``{"module", "origin", "sha256"}`` of each tool and output module that ran.
    """
    subjects = [{"name": trace_name, "digest": {"sha256": facts.sha256}}]
    if facts.output_digest is not None:
        subjects.append({"name": OUTPUT_SUBJECT, "digest": {"sha256": facts.output_digest}})
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "checkpoint": {"origin": origin, "size": facts.size, "root_hex": facts.root.hex()},
            "run": {"run_id": facts.run_id, "config_digest": facts.config_digest},
            "output": None
            if facts.output_seq is None
            else {"seq": facts.output_seq, "schema_name": facts.output_schema},
            "model": {"adapter": facts.adapter, "served": list(facts.served), **model},
            "spec": spec,
            "tools": list(tools),
        },
    }


def sign_attestation(statement: dict[str, Any], signers: Sequence[SignerKey]) -> bytes:
    """The DSSE envelope of ``statement`` signed by each of ``signers`` (canonical JSON + newline).

    Raises:
        SignatureError (``signing_unavailable``): The ``cryptography`` library is not installed.
        ValueError: No signer was given.
    """
    if not signers:
        raise ValueError("an attestation needs at least one signer key")
    payload = canonical_bytes(statement)
    message = pae(PAYLOAD_TYPE, payload)
    signatures = [
        {"keyid": key_id(s.verifier), "sig": _b64encode(s.sign(message))} for s in signers
    ]
    envelope = {
        "payload": _b64encode(payload),
        "payloadType": PAYLOAD_TYPE,
        "signatures": signatures,
    }
    return canonical_bytes(envelope) + b"\n"


class VerifiedAttestation:
    """An envelope whose signatures by the known keys verified, and its statement."""

    __slots__ = ("signed_by", "statement")

    def __init__(self, statement: dict[str, Any], signed_by: tuple[VerifierKey, ...]) -> None:
        """Hold the fields as given."""
        self.statement = statement
        self.signed_by = signed_by

    statement: dict[str, Any]
    """The in-toto statement (its shape checked)."""
    signed_by: tuple[VerifierKey, ...]
    """The known keys that signed it."""


def _json(data: bytes, where: str) -> Any:
    try:
        return parse_json(data, max_depth=_MAX_DEPTH)
    except CanonicalError as exc:
        raise _malformed(f"{where} is not JSON ({exc.reason})") from None


def _check_shape(value: object) -> dict[str, Any]:
    """Refuse a statement that is not a twinflow run statement (nothing semantic yet)."""
    st = _object(value, "the statement", {"_type", "subject", "predicateType", "predicate"})
    if st["_type"] != STATEMENT_TYPE:
        raise _malformed(f"the statement's _type is not {STATEMENT_TYPE}")
    known = (PREDICATE_TYPE, _evidence.EVAL_PREDICATE_TYPE, _evidence.REPRODUCTION_PREDICATE_TYPE)
    if st["predicateType"] not in known:
        raise _malformed(
            f"the predicate type {str(st['predicateType'])[:80]!r} is not one of {list(known)}"
        )
    subjects = st["subject"]
    if not isinstance(subjects, list) or not 1 <= len(subjects) <= 4:
        raise _malformed("the statement names one to four subjects")
    names = []
    for i, subject in enumerate(subjects):
        item = _object(subject, f"subject[{i}]", {"name", "digest"})
        names.append(_text(item["name"], f"subject[{i}].name"))
        digest = _object(item["digest"], f"subject[{i}].digest", {"sha256"})
        _hex64(digest["sha256"], f"subject[{i}].digest.sha256")
    if len(set(names)) != len(names):
        raise _malformed("two subjects have the same name")
    if st["predicateType"] == _evidence.EVAL_PREDICATE_TYPE:
        _evidence.check_eval_predicate(st["predicate"])
        return st
    if st["predicateType"] == _evidence.REPRODUCTION_PREDICATE_TYPE:
        _evidence.check_reproduction_predicate(st["predicate"])
        return st
    if len(subjects) > 2:
        raise _malformed("a run statement names one or two subjects")
    predicate = _object(
        st["predicate"], "the predicate", {"checkpoint", "run", "output", "model", "spec", "tools"}
    )
    checkpoint = _object(
        predicate["checkpoint"], "predicate.checkpoint", {"origin", "size", "root_hex"}
    )
    _text(checkpoint["origin"], "predicate.checkpoint.origin")
    if type(checkpoint["size"]) is not int or checkpoint["size"] < 1:
        raise _malformed("predicate.checkpoint.size must be a positive integer")
    _hex64(checkpoint["root_hex"], "predicate.checkpoint.root_hex")
    run = _object(predicate["run"], "predicate.run", {"run_id", "config_digest"})
    _text(run["run_id"], "predicate.run.run_id")
    _text(run["config_digest"], "predicate.run.config_digest")
    if not isinstance(predicate["model"], dict) or not isinstance(predicate["tools"], list):
        raise _malformed("predicate.model is an object and predicate.tools a list")
    has_output = OUTPUT_SUBJECT in names
    if predicate["output"] is not None:
        output = _object(predicate["output"], "predicate.output", {"seq", "schema_name"})
        if type(output["seq"]) is not int or output["seq"] < 0:
            raise _malformed("predicate.output.seq must be an integer >= 0")
    if has_output != (predicate["output"] is not None):
        raise _malformed("the output subject and predicate.output must be present together")
    return st


def open_attestation(
    data: bytes, keys: Iterable[VerifierKey], *, required: int | None = None
) -> VerifiedAttestation:
    """Parse a DSSE envelope and verify its signatures against the known keys.

    A signature whose ``keyid`` names no known key is ignored (it may be another signer's); one
    that names a known key must verify. Every known key must have signed unless ``required``
    says how many must.

    Raises:
        TraceFormatError (``attestation``): The bytes are not an envelope of a twinflow run statement.
        SignatureError (``attestation_mismatch``): A known key's signature fails, or too few known keys signed.
    """
    ring = {key_id(k): k for k in keys}
    need = len(ring) if required is None else required
    if need < 1:
        raise ValueError("at least one known key must sign an attestation")
    if len(data) > MAX_ENVELOPE_BYTES:
        raise _malformed(
            f"{len(data)} bytes, over the limit of {MAX_ENVELOPE_BYTES}: not an attestation"
        )
    if b"\r" in data:
        raise _malformed("a carriage return: the envelope was converted (CRLF)")
    envelope = _object(
        _json(data, "the envelope"), "the envelope", {"payload", "payloadType", "signatures"}
    )
    if envelope["payloadType"] != PAYLOAD_TYPE:
        raise _malformed(f"payloadType {str(envelope['payloadType'])[:80]!r} is not {PAYLOAD_TYPE}")
    payload = _b64decode(_text(envelope["payload"], "payload"))
    if payload is None:
        raise _malformed("the payload is not canonical standard base64")
    signatures = envelope["signatures"]
    if not isinstance(signatures, list) or not 1 <= len(signatures) <= _MAX_SIGNATURES:
        raise _malformed(f"signatures must be a list of 1 to {_MAX_SIGNATURES}")
    return _verified(payload, signatures, ring, need)


def _verified(
    payload: bytes, signatures: list[Any], ring: dict[str, VerifierKey], need: int
) -> VerifiedAttestation:
    """The statement, once ``need`` of the known keys in ``ring`` signed the envelope."""
    message = pae(PAYLOAD_TYPE, payload)
    seen: set[str] = set()
    verified: dict[str, VerifierKey] = {}
    for i, item in enumerate(signatures):
        signature = _object(item, f"signatures[{i}]", {"keyid", "sig"})
        keyid = _text(signature["keyid"], f"signatures[{i}].keyid")
        if not keyid or len(keyid) > _MAX_KEYID:
            raise _malformed(f"signatures[{i}].keyid is empty or too long")
        if keyid in seen:
            raise _malformed(f"two signatures name keyid {keyid[:80]!r}")
        seen.add(keyid)
        raw = _b64decode(_text(signature["sig"], f"signatures[{i}].sig"))
        if raw is None:
            raise _malformed(f"signatures[{i}].sig is not canonical standard base64")
        key = ring.get(keyid)
        if key is None:
            continue
        if len(raw) != 64 or not key.verify(message, raw):
            raise _mismatch(
                f"the signature by {keyid} does not verify: the statement was altered after "
                "signing, or the signature was forged"
            )
        verified[keyid] = key
    if len(verified) < need:
        found = ", ".join(repr(k[:80]) for k in sorted(seen)[:5])
        raise _mismatch(
            f"signed by {len(verified)} of the {need} key(s) required (keyids found: {found}); "
            "pass the verifier key of its signer"
        )
    return VerifiedAttestation(
        _check_shape(_json(payload, "the payload")), tuple(verified.values())
    )


def check_statement(
    statement: dict[str, Any],
    *,
    facts: RunFacts | None = None,
    checkpoint: tuple[str | None, int, bytes] | None = None,
) -> None:
    """Check a verified statement against the trace it is about and its published checkpoint.

    Args:
        statement: `VerifiedAttestation.statement`.
        facts: `run_facts` of the trace file the reader has.
        checkpoint: ``(origin, size, root)`` of the published checkpoint note.

    Raises:
        SignatureError (``attestation_mismatch``): A subject or predicate field disagrees; the message names it.
    """
    if statement["predicateType"] != PREDICATE_TYPE:
        raise _mismatch(
            f"this is not a run attestation ({str(statement['predicateType'])[:80]}): check an "
            "eval's with `twinflow eval attest RUN_DIR --check`, or `twinflow-trace attest-check`"
        )
    predicate = statement["predicate"]
    stated = predicate["checkpoint"]
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}

    def differ(source: str, what: str, stated_value: object, actual: object) -> None:
        if stated_value != actual:
            raise _mismatch(
                f"the attestation states {what} {str(stated_value)[:80]}, the {source} has "
                f"{str(actual)[:80]}"
            )

    if facts is not None:
        trace_subjects = [v for n, v in subjects.items() if n != OUTPUT_SUBJECT]
        differ("trace file", "the trace file's sha256", trace_subjects, [facts.sha256])
        differ("trace", "output digest", subjects.get(OUTPUT_SUBJECT), facts.output_digest)
        differ("trace", "size", stated["size"], facts.size)
        differ("trace", "root (hex)", stated["root_hex"], facts.root.hex())
        differ("trace", "run id", predicate["run"]["run_id"], facts.run_id)
        differ("trace", "config digest", predicate["run"]["config_digest"], facts.config_digest)
        output = predicate["output"]
        differ(
            "trace", "output seq", None if output is None else output.get("seq"), facts.output_seq
        )
        differ("trace", "model adapter", predicate["model"].get("adapter"), facts.adapter)
        differ("trace", "served model names", predicate["model"].get("served"), list(facts.served))
    if checkpoint is not None:
        origin, size, root = checkpoint
        if origin is not None:
            differ("checkpoint", "origin", stated["origin"], origin)
        differ("checkpoint", "size", stated["size"], size)
        differ("checkpoint", "root (hex)", stated["root_hex"], root.hex())
