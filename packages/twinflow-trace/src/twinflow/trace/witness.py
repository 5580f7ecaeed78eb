"""Witness cosignatures (C2SP cosignature/v1) and the tlog-witness cosigning step.

The code and the formats live in `twinflow.trace._witness`. Checking cosignatures runs on the
standard library alone; cosigning needs the ``signatures`` extra (``twinflow-trace[signatures]``).
A refusal is a `twinflow.trace.SignatureError` (``witness_refused``, ``cosignature``); a damaged
state file a `twinflow.trace.TraceFormatError` (``witness_state``).
"""

from twinflow.trace._witness import Cosignature as Cosignature
from twinflow.trace._witness import CosignerKey as CosignerKey
from twinflow.trace._witness import add_checkpoint as add_checkpoint
from twinflow.trace._witness import cosign as cosign
from twinflow.trace._witness import hold_state as hold_state
from twinflow.trace._witness import parse_cosigner_key as parse_cosigner_key
from twinflow.trace._witness import verify_cosignatures as verify_cosignatures
