"""twinflow.agent: the agent loop, deny-by-default tool policy, the tamper-evident trace."""

from twinflow.agent._errors import (
    AgentConfigError,
    AgentError,
    InvalidProofError,
    MaxStepsExceeded,
    OutputValidationFailed,
    RunError,
    SignatureError,
    TraceCorruptError,
    TraceError,
    TraceExistsError,
    UsageLimitExceeded,
)
from twinflow.agent._merkle import (
    EMPTY_ROOT,
    MerkleTree,
    leaf_hash,
    node_hash,
    root_from_inclusion_proof,
    verify_consistency,
    verify_inclusion,
)

__all__ = [
    "EMPTY_ROOT",
    "AgentConfigError",
    "AgentError",
    "InvalidProofError",
    "MaxStepsExceeded",
    "MerkleTree",
    "OutputValidationFailed",
    "RunError",
    "SignatureError",
    "TraceCorruptError",
    "TraceError",
    "TraceExistsError",
    "UsageLimitExceeded",
    "leaf_hash",
    "node_hash",
    "root_from_inclusion_proof",
    "verify_consistency",
    "verify_inclusion",
]
