"""twinflow.trace (L00): verify, prove and checkpoint twinflow traces with the standard library.

The leaf an auditor installs to check a published run: the trace line format, RFC 8785
canonical JSON of plain values, streaming verification, the RFC 9162 Merkle tree, inclusion and
consistency proofs as C2SP tlog-proof files and tlog-witness request bodies, checkpoints (C2SP
tlog-checkpoint notes), repair, and what an auditor checks a signed run with: signed-note keys
and notes (`open_note`, `open_checkpoint`), witness cosignatures (`verify_cosignatures`) and
run attestations (`open_attestation`). Making keys, cosigning and attesting are the `twinflow`
command's (and `python -m twinflow.trace`'s), in private modules.

The root of every twinflow error lives in the lowest layer and is exported here, its one
public home (one ``except TwinflowError`` catches every package's). A failure is a ``reason``
tag on one of these classes, not a class of its own::

    TwinflowError                                 root of every twinflow error, in every package
    ├── UserError                                 a usage mistake (bad argument, key or limit)
    │   └── NotRegularFileError* (also OSError)   an input path that is a FIFO, device or socket
    ├── FileWriteError* (also OSError)            a file not written (`.filename`, `.reason`: write,
    │   │                                         link, busy, locked, exists)
    │   └── TargetExistsError* (also FileExistsError)  the name is taken: never written over
    ├── UnsafePathError* (also ValueError)        a path a received file names leaves its directory,
    │                                             or reaches a link or a non-file (`.directory`, `.path`)
    └── TraceError                                raised by twinflow.trace
        ├── CanonicalError                        no RFC 8785 form (`.reason`, `.pointer`, `.detail`)
        ├── TraceFormatError (also ValueError)    a proof, key, witness state or attestation file not in
        │                                         its form, or an event too large to write (`.reason`)
        ├── TraceCorruptError                     a trace that does not verify, read as events (`.report`)
        ├── InvalidProofError (also ValueError)   an inclusion / consistency proof fails
        └── SignatureError                        a signed note, key, checkpoint, cosignature or
                                                  attestation refused (`.reason`, `.problem`)

The classes marked * belong to the workspace's file plumbing and are not exported: catch them
as the built-in errors they also are (``OSError``, ``FileExistsError``, ``ValueError``) or as
``TwinflowError``. Every name is imported eagerly, and these import lines are the package's one list of its public
names. The workspace's plumbing (file writers, the secret screen, the YAML reader, the user-code
importer) lives in the private `twinflow._base`, shipped in this distribution.
"""

from twinflow._base._errors import TwinflowError as TwinflowError
from twinflow._base._errors import UserError as UserError
from twinflow.trace._attest import open_attestation as open_attestation
from twinflow.trace._canonical import canonical_bytes as canonical_bytes
from twinflow.trace._checkpoint import Checkpoint as Checkpoint
from twinflow.trace._checkpoint import ConsistencyProof as ConsistencyProof
from twinflow.trace._checkpoint import InclusionProof as InclusionProof
from twinflow.trace._errors import CanonicalError as CanonicalError
from twinflow.trace._errors import InvalidProofError as InvalidProofError
from twinflow.trace._errors import SignatureError as SignatureError
from twinflow.trace._errors import TraceCorruptError as TraceCorruptError
from twinflow.trace._errors import TraceError as TraceError
from twinflow.trace._errors import TraceFormatError as TraceFormatError
from twinflow.trace._format import Limits as Limits
from twinflow.trace._keys import SignerKey as SignerKey
from twinflow.trace._keys import VerifierKey as VerifierKey
from twinflow.trace._keys import parse_signer_key as parse_signer_key
from twinflow.trace._keys import parse_verifier_key as parse_verifier_key
from twinflow.trace._merkle import MerkleTree as MerkleTree
from twinflow.trace._note import open_checkpoint as open_checkpoint
from twinflow.trace._note import open_note as open_note
from twinflow.trace._note import parse_note as parse_note
from twinflow.trace._note import sign_note as sign_note
from twinflow.trace._sink import FileTraceSink as FileTraceSink
from twinflow.trace._sink import FsyncPolicy as FsyncPolicy
from twinflow.trace._sink import MemoryTraceSink as MemoryTraceSink
from twinflow.trace._sink import TraceSink as TraceSink
from twinflow.trace._verify import VerificationReport as VerificationReport
from twinflow.trace._verify import VerifiedEvent as VerifiedEvent
from twinflow.trace._verify import read_checkpoint as read_checkpoint
from twinflow.trace._verify import verify_trace as verify_trace
from twinflow.trace._verify import walk_trace as walk_trace
from twinflow.trace._witness import verify_cosignatures as verify_cosignatures
