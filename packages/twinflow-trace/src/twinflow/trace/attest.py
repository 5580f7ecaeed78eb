"""Run attestations: an in-toto statement about a run, in a DSSE envelope signed with Ed25519.

The code and the format live in `twinflow.trace._attest`. Verification runs on the standard
library alone; signing needs the ``signatures`` extra (``twinflow-trace[signatures]``). A
malformed envelope is a `twinflow.trace.TraceFormatError` (``attestation``); one that does not
match is a `twinflow.trace.SignatureError` (``attestation_mismatch``).
"""

from twinflow.trace._attest import MAX_ENVELOPE_BYTES as MAX_ENVELOPE_BYTES
from twinflow.trace._attest import check_statement as check_statement
from twinflow.trace._attest import key_id as key_id
from twinflow.trace._attest import open_attestation as open_attestation
from twinflow.trace._attest import run_facts as run_facts
from twinflow.trace._attest import sign_attestation as sign_attestation
from twinflow.trace._attest import statement as statement
