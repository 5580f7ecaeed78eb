"""twinflow.vocab (L0): frozen conversation values, RFC 8785 canonical JSON and digests,
structural diff, and the model-facing protocols.

Wire translation lives in `twinflow.vocab.wire`; datapizza interop in `twinflow.vocab.datapizza`
(extra `datapizza`). Neither is imported here.
"""

from twinflow.vocab._canonical import canonical_bytes, digest, parse_canonical
from twinflow.vocab._diff import Difference, diff
from twinflow.vocab._errors import (
    CanonicalError,
    InvalidValueError,
    StructuredOutputError,
    TwinflowError,
    UserError,
    VocabError,
    WireFormatError,
)
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
from twinflow.vocab._values import (
    CallId,
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
    "Difference",
    "FinishReason",
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
    "ReasoningPart",
    "Role",
    "RunId",
    "StructuredOutputAdapter",
    "StructuredOutputError",
    "StructuredPart",
    "StructuredResult",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "ToolSpec",
    "Transcript",
    "TwinflowError",
    "Usage",
    "UserError",
    "VocabError",
    "WireFormatError",
    "canonical_bytes",
    "diff",
    "digest",
    "parse_canonical",
]
