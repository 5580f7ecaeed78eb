"""twinflow.agent's public names are exactly the curated list."""

import twinflow.agent

PUBLIC = {
    "RecordedFailure",
    "RecordedResults",
    "ReplayDivergenceError",
    "ReplayMode",
    "ReplayPorts",
    "ReplayResult",
    "replay",
    "Agent",
    "RunResult",
    "UsageLimits",
    "BehaviourDivergence",
    "behaviour_of",
    "compare_behaviour",
    "render_trace_page",
    "FunctionModel",
    "Approval",
    "ApprovalHook",
    "Approve",
    "Deny",
    "Modify",
    "Observer",
    "Steering",
    "SteeringReceived",
    "Policy",
    "PydanticStructuredOutput",
    "Tool",
    "EMPTY_ROOT",
    "GENESIS",
    "TERMINAL_KINDS",
    "AgentConfig",
    "AgentConfigError",
    "AgentError",
    "Checkpoint",
    "ConsistencyProof",
    "EventBody",
    "FileTraceSink",
    "FsyncPolicy",
    "InclusionProof",
    "InvalidProofError",
    "MaxStepsExceeded",
    "MemoryTraceSink",
    "MerkleTree",
    "MessageChain",
    "ModelRequested",
    "ModelResponded",
    "OutputAccepted",
    "OutputRejected",
    "OutputValidationFailed",
    "InvalidModelReply",
    "PolicyDecided",
    "PolicyRecord",
    "Problem",
    "ProblemKind",
    "RepairResult",
    "RunError",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "SignatureError",
    "ToolCalled",
    "ToolReturned",
    "Trace",
    "TraceCorruptError",
    "TraceError",
    "TraceEvent",
    "TraceExistsError",
    "TraceWriteError",
    "TraceSink",
    "TraceWriter",
    "UsageLimitExceeded",
    "VerificationReport",
    "check_consistency",
    "check_inclusion",
    "encode_line",
    "leaf_hash",
    "node_hash",
    "repair_trace",
    "root_from_inclusion_proof",
    "sign_checkpoint",
    "verify_checkpoint_signature",
    "verify_consistency",
    "verify_inclusion",
    "verify_trace",
}


def test_all_lists_the_public_names() -> None:
    """__all__ equals the public names and each one resolves."""
    assert sorted(PUBLIC) == sorted(twinflow.agent.__all__)
    assert all(hasattr(twinflow.agent, name) for name in twinflow.agent.__all__)


def test_errors_share_the_twinflow_root() -> None:
    """Every agent error derives from TwinflowError; config mistakes are UserErrors."""
    from twinflow.vocab import TwinflowError, UserError

    assert issubclass(twinflow.agent.AgentError, TwinflowError)
    assert issubclass(twinflow.agent.AgentConfigError, UserError)
