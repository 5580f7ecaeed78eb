"""twinflow.trace (L00): verify, prove and checkpoint twinflow traces with the standard library.

The leaf an auditor installs to check a published run: the trace line format, RFC 8785
canonical JSON of plain values, streaming verification, the RFC 9162 Merkle tree, inclusion and
consistency proofs as C2SP tlog-proof files and tlog-witness request bodies, checkpoints (C2SP
tlog-checkpoint notes), and repair.

The root of every twinflow error lives here, at the lowest layer (one ``except TwinflowError``
catches every package's); this package's own tree::

    TwinflowError                                  root of every twinflow error, in every package
    ├── UserError                                  a usage mistake (bad argument, key or limit)
    │   └── NotRegularFileError (also OSError)     an input path that is a FIFO, device or socket
    └── TraceError                                 raised by twinflow.trace
        ├── CanonicalError                         no RFC 8785 form (`.reason`, `.pointer`, `.detail`)
        ├── TraceFormatError (also ValueError)     a proof, checkpoint or key file not in its form
        ├── EventTooLargeError (also ValueError)   an event whose line readers would refuse: not written
        ├── FileWriteError (also OSError)          a file not written: disk full, no permission (`.filename`)
        │   ├── PlantedLinkError                   the target or its directory is a symbolic link: refused
        │   ├── DirectoryBusyError                 another process holds the directory's writer lock
        │   └── TargetExistsError (also FileExistsError)  the name is taken: never written over
        ├── TraceLockedError (also UserError)      another process is writing the trace: nothing written
        ├── UnsafePathError (also ValueError)      a path a received file names leaves its directory,
        │                                          or reaches a link or a non-file (`.directory`, `.path`)
        ├── TraceCorruptError                      a trace that does not verify, read as events (`.report`)
        ├── SignatureError                         a checkpoint signature missing, empty-keyed or wrong
        ├── InvalidProofError (also ValueError)    an inclusion / consistency proof fails
        └── NoteError                              a signed note, key or checkpoint refused (`python -m twinflow.trace`)
            ├── MalformedNoteError, MalformedKeyError, AmbiguousKeyError,
            │   MalformedCheckpointError (each also ValueError)
            ├── InvalidSignatureError, UnverifiedNoteError, OriginMismatchError
            └── SigningUnavailableError (also ImportError)  the ``signatures`` extra is missing

The errors are imported eagerly (they import nothing). Every other name is resolved on first
access (PEP 562), as in `twinflow.vocab`: `import twinflow.trace` costs an auditor's tool, or a
package that only catches `TwinflowError`, next to nothing, and a caller of `verify_trace`
loads what verification needs, not the signature, repair and writer modules.
"""

from twinflow._base._errors import DirectoryBusyError as DirectoryBusyError
from twinflow._base._errors import FileWriteError as FileWriteError
from twinflow._base._errors import NotRegularFileError as NotRegularFileError
from twinflow._base._errors import PlantedLinkError as PlantedLinkError
from twinflow._base._errors import TargetExistsError as TargetExistsError
from twinflow._base._errors import TwinflowError as TwinflowError
from twinflow._base._errors import UnsafePathError as UnsafePathError
from twinflow._base._errors import UserError as UserError
from twinflow._base._lazy import lazy_exports as _lazy_exports
from twinflow.trace._errors import CanonicalError as CanonicalError
from twinflow.trace._errors import EventTooLargeError as EventTooLargeError
from twinflow.trace._errors import InvalidProofError as InvalidProofError
from twinflow.trace._errors import SignatureError as SignatureError
from twinflow.trace._errors import TraceCorruptError as TraceCorruptError
from twinflow.trace._errors import TraceError as TraceError
from twinflow.trace._errors import TraceFormatError as TraceFormatError
from twinflow.trace._errors import TraceLockedError as TraceLockedError

# `typing` would be most of this package's import time: mypy reads any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from twinflow.trace._canonical import DEFAULT_MAX_DEPTH as DEFAULT_MAX_DEPTH
    from twinflow.trace._canonical import MAX_SAFE_INTEGER as MAX_SAFE_INTEGER
    from twinflow.trace._canonical import canonical_bytes as canonical_bytes
    from twinflow.trace._canonical import canonical_dump_bytes as canonical_dump_bytes
    from twinflow.trace._canonical import es_number as es_number
    from twinflow.trace._canonical import json_kind as json_kind
    from twinflow.trace._canonical import json_pointer as json_pointer
    from twinflow.trace._canonical import parse_json as parse_json
    from twinflow.trace._checkpoint import Checkpoint as Checkpoint
    from twinflow.trace._checkpoint import ConsistencyProof as ConsistencyProof
    from twinflow.trace._checkpoint import InclusionProof as InclusionProof
    from twinflow.trace._checkpoint import check_consistency as check_consistency
    from twinflow.trace._checkpoint import check_inclusion as check_inclusion
    from twinflow.trace._format import DEFAULT_MAX_LINE_BYTES as DEFAULT_MAX_LINE_BYTES
    from twinflow.trace._format import EVENT_KINDS as EVENT_KINDS
    from twinflow.trace._format import GENESIS as GENESIS
    from twinflow.trace._format import LINE_PREFIX as LINE_PREFIX
    from twinflow.trace._format import TERMINAL_KINDS as TERMINAL_KINDS
    from twinflow.trace._format import Limits as Limits
    from twinflow.trace._format import encode_line as encode_line
    from twinflow.trace._format import encode_redacted as encode_redacted
    from twinflow.trace._merkle import EMPTY_ROOT as EMPTY_ROOT
    from twinflow.trace._merkle import Frontier as Frontier
    from twinflow.trace._merkle import MerkleTree as MerkleTree
    from twinflow.trace._merkle import consistency_ranges as consistency_ranges
    from twinflow.trace._merkle import inclusion_ranges as inclusion_ranges
    from twinflow.trace._merkle import leaf_hash as leaf_hash
    from twinflow.trace._merkle import node_hash as node_hash
    from twinflow.trace._merkle import root_from_inclusion_proof as root_from_inclusion_proof
    from twinflow.trace._merkle import verify_consistency as verify_consistency
    from twinflow.trace._merkle import verify_inclusion as verify_inclusion
    from twinflow.trace._published import REMAKE_CHECKPOINT as REMAKE_CHECKPOINT
    from twinflow.trace._published import PublishedCheckpoint as PublishedCheckpoint
    from twinflow.trace._published import read_published_checkpoint as read_published_checkpoint
    from twinflow.trace._published import unverified_checkpoint_body as unverified_checkpoint_body
    from twinflow.trace._repair import RepairResult as RepairResult
    from twinflow.trace._repair import repair_trace as repair_trace
    from twinflow.trace._sink import FileTraceSink as FileTraceSink
    from twinflow.trace._sink import FsyncPolicy as FsyncPolicy
    from twinflow.trace._sink import MemoryTraceSink as MemoryTraceSink
    from twinflow.trace._sink import TraceSink as TraceSink
    from twinflow.trace._tlog import MAX_PROOF_BYTES as MAX_PROOF_BYTES
    from twinflow.trace._tlog import MAX_PROOF_HASHES as MAX_PROOF_HASHES
    from twinflow.trace._tlog import TLOG_PROOF_HEADER as TLOG_PROOF_HEADER
    from twinflow.trace._tlog import ProofCheck as ProofCheck
    from twinflow.trace._tlog import TlogConsistency as TlogConsistency
    from twinflow.trace._tlog import TlogProof as TlogProof
    from twinflow.trace._tlog import check_proof_file as check_proof_file
    from twinflow.trace._tlog import check_tlog_consistency as check_tlog_consistency
    from twinflow.trace._tlog import check_tlog_proof as check_tlog_proof
    from twinflow.trace._tlog import event_file_digest as event_file_digest
    from twinflow.trace._tlog import parse_tlog_consistency as parse_tlog_consistency
    from twinflow.trace._tlog import parse_tlog_proof as parse_tlog_proof
    from twinflow.trace._tlog import prove_tlog_consistency as prove_tlog_consistency
    from twinflow.trace._tlog import prove_tlog_inclusion as prove_tlog_inclusion
    from twinflow.trace._verify import Problem as Problem
    from twinflow.trace._verify import ProblemKind as ProblemKind
    from twinflow.trace._verify import Source as Source
    from twinflow.trace._verify import VerificationReport as VerificationReport
    from twinflow.trace._verify import VerifiedEvent as VerifiedEvent
    from twinflow.trace._verify import prove_consistency as prove_consistency
    from twinflow.trace._verify import prove_inclusion as prove_inclusion
    from twinflow.trace._verify import read_checkpoint as read_checkpoint
    from twinflow.trace._verify import verify_trace as verify_trace
    from twinflow.trace._verify import walk_trace as walk_trace
del TYPE_CHECKING  # not an export


__getattr__, __dir__, __all__ = _lazy_exports(
    globals(),
    {
        "_canonical": (
            "DEFAULT_MAX_DEPTH",
            "MAX_SAFE_INTEGER",
            "canonical_bytes",
            "canonical_dump_bytes",
            "es_number",
            "json_kind",
            "json_pointer",
            "parse_json",
        ),
        "_checkpoint": (
            "Checkpoint",
            "ConsistencyProof",
            "InclusionProof",
            "check_consistency",
            "check_inclusion",
        ),
        "_format": (
            "DEFAULT_MAX_LINE_BYTES",
            "EVENT_KINDS",
            "GENESIS",
            "LINE_PREFIX",
            "TERMINAL_KINDS",
            "Limits",
            "encode_line",
            "encode_redacted",
        ),
        "_merkle": (
            "EMPTY_ROOT",
            "Frontier",
            "MerkleTree",
            "consistency_ranges",
            "inclusion_ranges",
            "leaf_hash",
            "node_hash",
            "root_from_inclusion_proof",
            "verify_consistency",
            "verify_inclusion",
        ),
        "_published": (
            "REMAKE_CHECKPOINT",
            "PublishedCheckpoint",
            "read_published_checkpoint",
            "unverified_checkpoint_body",
        ),
        "_tlog": (
            "MAX_PROOF_BYTES",
            "MAX_PROOF_HASHES",
            "TLOG_PROOF_HEADER",
            "ProofCheck",
            "TlogConsistency",
            "TlogProof",
            "check_proof_file",
            "check_tlog_consistency",
            "check_tlog_proof",
            "event_file_digest",
            "parse_tlog_consistency",
            "parse_tlog_proof",
            "prove_tlog_consistency",
            "prove_tlog_inclusion",
        ),
        "_repair": (
            "RepairResult",
            "repair_trace",
        ),
        "_sink": (
            "FileTraceSink",
            "FsyncPolicy",
            "MemoryTraceSink",
            "TraceSink",
        ),
        "_verify": (
            "Problem",
            "ProblemKind",
            "Source",
            "VerificationReport",
            "VerifiedEvent",
            "prove_consistency",
            "prove_inclusion",
            "read_checkpoint",
            "verify_trace",
            "walk_trace",
        ),
    },
)
