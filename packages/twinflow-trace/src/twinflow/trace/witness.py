"""twinflow.trace.witness: C2SP tlog-cosignature/v1 cosignatures, a witness, a cosigning policy.

The public home of the witness API (`twinflow.trace._witness` holds the code; its docstring
draws the formats and the error tree). Checking cosignatures runs on the standard library
alone; cosigning needs the ``signatures`` extra (``twinflow-trace[signatures]``).
"""

from twinflow.trace._witness import (
    COSIGNATURE_V1,
    DEFAULT_CLOCK_SKEW,
    MAX_STATE_BYTES,
    Cosignature,
    CosignatureError,
    CosignerKey,
    MalformedWitnessStateError,
    WitnessError,
    WitnessRefusedError,
    add_checkpoint,
    cosign,
    cosignature_message,
    hold_state,
    parse_cosigner_key,
    read_state,
    verify_cosignatures,
)

__all__ = [
    "COSIGNATURE_V1",
    "DEFAULT_CLOCK_SKEW",
    "MAX_STATE_BYTES",
    "Cosignature",
    "CosignatureError",
    "CosignerKey",
    "MalformedWitnessStateError",
    "WitnessError",
    "WitnessRefusedError",
    "add_checkpoint",
    "cosign",
    "cosignature_message",
    "hold_state",
    "parse_cosigner_key",
    "read_state",
    "verify_cosignatures",
]
