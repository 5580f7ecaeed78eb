"""twinflow.trace (L00): verify, prove and checkpoint twinflow traces with the standard library.

The leaf an auditor installs to check a published run: the trace line format, RFC 8785
canonical JSON of plain values, streaming verification, the RFC 9162 Merkle tree, inclusion and
consistency proofs, checkpoints (as C2SP tlog-checkpoint bodies), and repair.

The root of every twinflow error lives here, at the lowest layer (one ``except TwinflowError``
catches every package's); this package's own tree::

    TwinflowError                                  root of every twinflow error, in every package
    ├── UserError                                  a usage mistake (bad argument, key or limit)
    └── TraceError                                 raised by twinflow.trace
        ├── CanonicalError                         no RFC 8785 form (`.reason`, `.pointer`, `.detail`)
        ├── TraceFormatError (also ValueError)     a proof, checkpoint or key file not in its form
        ├── TraceExistsError (also FileExistsError)  refusing to write over (or through) a path
        ├── TraceWriteError                        a trace or repair side file not written (`.path`)
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

from twinflow.trace._errors import (
    CanonicalError,
    InvalidProofError,
    SignatureError,
    TraceCorruptError,
    TraceError,
    TraceExistsError,
    TraceFormatError,
    TraceWriteError,
    TwinflowError,
    UserError,
)
from twinflow.trace._lazy import lazy_exports

# `typing` would be most of this package's import time: mypy reads any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from twinflow.trace._canonical import (
        DEFAULT_MAX_DEPTH,
        MAX_SAFE_INTEGER,
        canonical_bytes,
        canonical_dump_bytes,
        es_number,
        json_kind,
        json_pointer,
        parse_json,
    )
    from twinflow.trace._checkpoint import (
        Checkpoint,
        ConsistencyProof,
        InclusionProof,
        check_consistency,
        check_inclusion,
        load_proof,
        sign_checkpoint,
        verify_checkpoint_signature,
    )
    from twinflow.trace._format import (
        DEFAULT_MAX_LINE_BYTES,
        EVENT_KINDS,
        GENESIS,
        TERMINAL_KINDS,
        Limits,
        encode_line,
    )
    from twinflow.trace._merkle import (
        EMPTY_ROOT,
        Frontier,
        MerkleTree,
        consistency_ranges,
        inclusion_ranges,
        leaf_hash,
        node_hash,
        root_from_inclusion_proof,
        verify_consistency,
        verify_inclusion,
    )
    from twinflow.trace._published import PublishedCheckpoint, read_published_checkpoint
    from twinflow.trace._repair import RepairResult, repair_trace
    from twinflow.trace._sink import FileTraceSink, FsyncPolicy, MemoryTraceSink, TraceSink
    from twinflow.trace._verify import (
        Problem,
        ProblemKind,
        Source,
        VerificationReport,
        VerifiedEvent,
        prove_consistency,
        prove_inclusion,
        read_checkpoint,
        verify_trace,
        walk_trace,
    )
del TYPE_CHECKING

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_LINE_BYTES",
    "EMPTY_ROOT",
    "EVENT_KINDS",
    "GENESIS",
    "MAX_SAFE_INTEGER",
    "TERMINAL_KINDS",
    "CanonicalError",
    "Checkpoint",
    "ConsistencyProof",
    "FileTraceSink",
    "Frontier",
    "FsyncPolicy",
    "InclusionProof",
    "InvalidProofError",
    "Limits",
    "MemoryTraceSink",
    "MerkleTree",
    "Problem",
    "ProblemKind",
    "PublishedCheckpoint",
    "RepairResult",
    "SignatureError",
    "Source",
    "TraceCorruptError",
    "TraceError",
    "TraceExistsError",
    "TraceFormatError",
    "TraceSink",
    "TraceWriteError",
    "TwinflowError",
    "UserError",
    "VerificationReport",
    "VerifiedEvent",
    "canonical_bytes",
    "canonical_dump_bytes",
    "check_consistency",
    "check_inclusion",
    "consistency_ranges",
    "encode_line",
    "es_number",
    "inclusion_ranges",
    "json_kind",
    "json_pointer",
    "lazy_exports",
    "leaf_hash",
    "load_proof",
    "node_hash",
    "parse_json",
    "prove_consistency",
    "prove_inclusion",
    "read_checkpoint",
    "read_published_checkpoint",
    "repair_trace",
    "root_from_inclusion_proof",
    "sign_checkpoint",
    "verify_checkpoint_signature",
    "verify_consistency",
    "verify_inclusion",
    "verify_trace",
    "walk_trace",
]

__getattr__, __dir__ = lazy_exports(
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
            "load_proof",
            "sign_checkpoint",
            "verify_checkpoint_signature",
        ),
        "_format": (
            "DEFAULT_MAX_LINE_BYTES",
            "EVENT_KINDS",
            "GENESIS",
            "TERMINAL_KINDS",
            "Limits",
            "encode_line",
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
        "_published": ("PublishedCheckpoint", "read_published_checkpoint"),
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
