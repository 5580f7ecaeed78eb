"""twinflow.vocab (L0): frozen conversation values, RFC 8785 canonical JSON and digests,
structural diff, and the model-facing protocols.

Wire translation lives in `twinflow.vocab.wire`; datapizza interop in `twinflow.vocab.datapizza`
(extra `datapizza`). Neither is imported here.

Errors (the root is `twinflow.trace`'s, re-exported here)::

    TwinflowError                      root of every twinflow error, in every package
    ├── UserError                      a usage mistake (bad argument, bad config; a bad max_attempts)
    └── VocabError                     raised by twinflow.vocab
        ├── InvalidValueError          a value refused at construction (also a ValueError);
        │                              `FrozenValue` subclasses elsewhere raise their package's error
        ├── CanonicalError             no RFC 8785 form, or bytes that are not canonical JSON
        │                              (also twinflow.trace.CanonicalError; `.pointer`, `.detail`)
        ├── WireFormatError            a provider payload that does not match its wire format (`.path`)
        └── StructuredOutputError      no valid structured output after every attempt (`.attempts`)

The errors are imported eagerly (they need no pydantic). Every other name is resolved on first
access (PEP 562), so `import twinflow.vocab` does not build pydantic's model machinery and the
value classes until a caller uses one of them.
"""

# Only underscored names and the public ones may live here (tests/gates/test_exported_members.py).
import typing as _typing

from twinflow.trace import lazy_exports as _lazy_exports
from twinflow.vocab._errors import (
    CanonicalError,
    InvalidValueError,
    StructuredOutputError,
    TwinflowError,
    UserError,
    VocabError,
    WireFormatError,
)

if _typing.TYPE_CHECKING:
    from twinflow.vocab._canonical import canonical_bytes, digest, parse_canonical
    from twinflow.vocab._diff import Difference, diff
    from twinflow.vocab._envelope import EnvelopeKind, envelope
    from twinflow.vocab._protocols import (
        Attempt,
        ChatModel,
        FinishReason,
        ModelRequest,
        ModelResponse,
        ModelSettings,
        OutputSchema,
        Reask,
        StructuredOutputAdapter,
        StructuredResult,
        Usage,
    )
    from twinflow.vocab._reask import (
        SentRequest,
        check_max_attempts,
        parametrized,
        reask_message,
        validate_with_reask,
        validation_error_text,
    )
    from twinflow.vocab._stream import (
        Chunk,
        ChunkAssembler,
        FinishChunk,
        ReasoningDelta,
        StreamingChatModel,
        TextDelta,
        ToolCallDelta,
        ToolCallEnd,
        ToolCallStart,
        UsageChunk,
        assemble,
        response_chunks,
    )
    from twinflow.vocab._suggest import did_you_mean
    from twinflow.vocab._values import (
        CallId,
        FrozenValue,
        JsonValue,
        MediaPart,
        Message,
        Part,
        ReasoningPart,
        Role,
        RunId,
        StructuredPart,
        TextPart,
        ToolCallPart,
        ToolResultPart,
        ToolSpec,
        Transcript,
    )

__all__ = [
    "Attempt",
    "CallId",
    "CanonicalError",
    "ChatModel",
    "Chunk",
    "ChunkAssembler",
    "Difference",
    "EnvelopeKind",
    "FinishChunk",
    "FinishReason",
    "FrozenValue",
    "InvalidValueError",
    "JsonValue",
    "MediaPart",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputSchema",
    "Part",
    "Reask",
    "ReasoningDelta",
    "ReasoningPart",
    "Role",
    "RunId",
    "SentRequest",
    "StreamingChatModel",
    "StructuredOutputAdapter",
    "StructuredOutputError",
    "StructuredPart",
    "StructuredResult",
    "TextDelta",
    "TextPart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallPart",
    "ToolCallStart",
    "ToolResultPart",
    "ToolSpec",
    "Transcript",
    "TwinflowError",
    "Usage",
    "UsageChunk",
    "UserError",
    "VocabError",
    "WireFormatError",
    "assemble",
    "canonical_bytes",
    "check_max_attempts",
    "did_you_mean",
    "diff",
    "digest",
    "envelope",
    "parametrized",
    "parse_canonical",
    "reask_message",
    "response_chunks",
    "validate_with_reask",
    "validation_error_text",
]

__getattr__, __dir__ = _lazy_exports(
    globals(),
    {
        "_canonical": ("canonical_bytes", "digest", "parse_canonical"),
        "_diff": ("diff", "Difference"),
        "_envelope": ("envelope", "EnvelopeKind"),
        "_protocols": (
            "Attempt",
            "ChatModel",
            "FinishReason",
            "ModelRequest",
            "ModelResponse",
            "ModelSettings",
            "OutputSchema",
            "Reask",
            "StructuredOutputAdapter",
            "StructuredResult",
            "Usage",
        ),
        "_reask": (
            "check_max_attempts",
            "parametrized",
            "reask_message",
            "SentRequest",
            "validate_with_reask",
            "validation_error_text",
        ),
        "_stream": (
            "assemble",
            "Chunk",
            "ChunkAssembler",
            "FinishChunk",
            "ReasoningDelta",
            "response_chunks",
            "StreamingChatModel",
            "TextDelta",
            "ToolCallDelta",
            "ToolCallEnd",
            "ToolCallStart",
            "UsageChunk",
        ),
        "_suggest": ("did_you_mean",),
        "_values": (
            "CallId",
            "FrozenValue",
            "JsonValue",
            "MediaPart",
            "Message",
            "Part",
            "ReasoningPart",
            "Role",
            "RunId",
            "StructuredPart",
            "TextPart",
            "ToolCallPart",
            "ToolResultPart",
            "ToolSpec",
            "Transcript",
        ),
    },
)
