"""twinflow.trace (L00): verify, prove and checkpoint twinflow traces with the standard library.

The leaf an auditor installs to check a published run: the trace line format, RFC 8785
canonical JSON of plain values, streaming verification, the RFC 9162 Merkle tree, inclusion and
consistency proofs, checkpoints (as C2SP tlog-checkpoint bodies), and repair.

The errors are imported eagerly (they import nothing). Every other name is resolved on first
access (PEP 562), as in `twinflow.vocab`: `import twinflow.trace` costs an auditor's tool, or a
package that only catches `TwinflowError`, next to nothing, and a caller of `verify_trace`
loads what verification needs, not the signature, repair and writer modules.
"""

# Only underscored names and the public ones may live here (tests/test_exported_members.py).
from importlib import import_module as _import_module

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
    "leaf_hash",
    "load_proof",
    "node_hash",
    "parse_json",
    "prove_consistency",
    "prove_inclusion",
    "read_checkpoint",
    "repair_trace",
    "root_from_inclusion_proof",
    "sign_checkpoint",
    "verify_checkpoint_signature",
    "verify_consistency",
    "verify_inclusion",
    "verify_trace",
    "walk_trace",
]

_LAZY = {
    **dict.fromkeys(
        (
            "DEFAULT_MAX_DEPTH",
            "MAX_SAFE_INTEGER",
            "canonical_bytes",
            "canonical_dump_bytes",
            "es_number",
            "json_kind",
            "json_pointer",
            "parse_json",
        ),
        "_canonical",
    ),
    **dict.fromkeys(
        (
            "Checkpoint",
            "ConsistencyProof",
            "InclusionProof",
            "check_consistency",
            "check_inclusion",
            "load_proof",
            "sign_checkpoint",
            "verify_checkpoint_signature",
        ),
        "_checkpoint",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_MAX_LINE_BYTES",
            "EVENT_KINDS",
            "GENESIS",
            "TERMINAL_KINDS",
            "Limits",
            "encode_line",
        ),
        "_format",
    ),
    **dict.fromkeys(
        (
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
        "_merkle",
    ),
    **dict.fromkeys(
        (
            "RepairResult",
            "repair_trace",
        ),
        "_repair",
    ),
    **dict.fromkeys(
        (
            "FileTraceSink",
            "FsyncPolicy",
            "MemoryTraceSink",
            "TraceSink",
        ),
        "_sink",
    ),
    **dict.fromkeys(
        (
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
        "_verify",
    ),
}


def __getattr__(name: str) -> object:
    """Import the private module that defines `name` on first access, then cache the name."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's attributes, the not yet resolved public names included."""
    return sorted({*globals(), *__all__})
