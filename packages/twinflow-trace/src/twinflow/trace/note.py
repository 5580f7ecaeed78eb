"""Signed notes and checkpoints: C2SP signed-note Ed25519 keys and tlog-checkpoint bodies.

The code and the format live in `twinflow.trace._note`; these are the names the `twinflow`
command and a plan's signer call. Verification runs on the standard library alone; signing and
key derivation need the ``signatures`` extra (``twinflow-trace[signatures]``). Every refusal is
a `twinflow.trace.SignatureError` whose ``reason`` says what was refused.
"""

from twinflow.trace._keys import SignerKey as SignerKey
from twinflow.trace._keys import VerifierKey as VerifierKey
from twinflow.trace._keys import generate_key as generate_key
from twinflow.trace._keys import parse_signer_key as parse_signer_key
from twinflow.trace._keys import parse_verifier_key as parse_verifier_key
from twinflow.trace._note import CheckpointBody as CheckpointBody
from twinflow.trace._note import open_checkpoint as open_checkpoint
from twinflow.trace._note import open_note as open_note
from twinflow.trace._note import parse_checkpoint_body as parse_checkpoint_body
from twinflow.trace._note import parse_note as parse_note
from twinflow.trace._note import sign_checkpoint_note as sign_checkpoint_note
from twinflow.trace._note import sign_note as sign_note
