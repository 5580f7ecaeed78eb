"""twinflow.trace.attest: run attestations, in-toto Statements v1 in DSSE envelopes (Ed25519).

The public home of the attestation API (`twinflow.trace._attest` holds the code; its docstring
draws the format). Verification runs on the standard library alone; signing needs the
``signatures`` extra (``twinflow-trace[signatures]``), as for signed notes.
"""

from twinflow.trace._attest import (
    MAX_ENVELOPE_BYTES,
    OUTPUT_SUBJECT,
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    AttestationError,
    AttestationMismatchError,
    MalformedAttestationError,
    RunFacts,
    VerifiedAttestation,
    check_statement,
    key_id,
    open_attestation,
    pae,
    run_facts,
    sign_attestation,
    statement,
)

__all__ = [
    "MAX_ENVELOPE_BYTES",
    "OUTPUT_SUBJECT",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "AttestationError",
    "AttestationMismatchError",
    "MalformedAttestationError",
    "RunFacts",
    "VerifiedAttestation",
    "check_statement",
    "key_id",
    "open_attestation",
    "pae",
    "run_facts",
    "sign_attestation",
    "statement",
]
