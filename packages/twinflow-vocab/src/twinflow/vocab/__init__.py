"""twinflow.vocab (L0): frozen conversation values, RFC 8785 canonical JSON and digests,
structural diff, and the model-facing protocols.

The bounded wire readers live in `twinflow.vocab._wire`; datapizza interop in `twinflow.vocab.datapizza`
(extra `datapizza`). Neither is imported here.

Errors (the root, `UserError` and `CanonicalError` are `twinflow.trace`'s)::

    TwinflowError                      root of every twinflow error, in every package
    ├── UserError                      a usage mistake (bad argument, bad config; a bad max_attempts)
    ├── CanonicalError                 no RFC 8785 form, or bytes that are not canonical JSON
    │                                  (`value_bytes`, `parse_canonical`; `.pointer`, `.detail`)
    └── VocabError                     raised by twinflow.vocab
        ├── InvalidValueError          a value refused at construction (also a ValueError);
        │                              `FrozenValue` subclasses elsewhere raise their package's error
        ├── WireFormatError            a provider payload that does not match its wire format (`.path`)
        ├── PartNotCarriedError        a wire adapter cannot carry a part's kind, which declares no
        │                              fallback (`.adapter`, `.kind`; also a UserError)
        └── StructuredOutputError      no valid structured output after every attempt (`.attempts`)
"""

from twinflow.vocab._canonical import digest as digest
from twinflow.vocab._canonical import value_bytes as value_bytes
from twinflow.vocab._diff import Difference as Difference
from twinflow.vocab._diff import diff as diff
from twinflow.vocab._errors import InvalidValueError as InvalidValueError
from twinflow.vocab._errors import PartNotCarriedError as PartNotCarriedError
from twinflow.vocab._errors import StructuredOutputError as StructuredOutputError
from twinflow.vocab._errors import VocabError as VocabError
from twinflow.vocab._errors import WireFormatError as WireFormatError
from twinflow.vocab._protocols import Attempt as Attempt
from twinflow.vocab._protocols import ChatModel as ChatModel
from twinflow.vocab._protocols import ModelRequest as ModelRequest
from twinflow.vocab._protocols import ModelResponse as ModelResponse
from twinflow.vocab._protocols import ModelSettings as ModelSettings
from twinflow.vocab._protocols import OutputSchema as OutputSchema
from twinflow.vocab._protocols import Reask as Reask
from twinflow.vocab._protocols import StructuredOutputAdapter as StructuredOutputAdapter
from twinflow.vocab._protocols import StructuredResult as StructuredResult
from twinflow.vocab._protocols import Usage as Usage
from twinflow.vocab._stream import Chunk as Chunk
from twinflow.vocab._stream import FinishChunk as FinishChunk
from twinflow.vocab._stream import ReasoningDelta as ReasoningDelta
from twinflow.vocab._stream import StreamingChatModel as StreamingChatModel
from twinflow.vocab._stream import TextDelta as TextDelta
from twinflow.vocab._stream import ToolCallDelta as ToolCallDelta
from twinflow.vocab._stream import ToolCallEnd as ToolCallEnd
from twinflow.vocab._stream import ToolCallStart as ToolCallStart
from twinflow.vocab._stream import UsageChunk as UsageChunk
from twinflow.vocab._stream import assemble as assemble
from twinflow.vocab._values import CacheHintPart as CacheHintPart
from twinflow.vocab._values import CallId as CallId
from twinflow.vocab._values import EmbeddedResourcePart as EmbeddedResourcePart
from twinflow.vocab._values import ExtensionPart as ExtensionPart
from twinflow.vocab._values import FrozenValue as FrozenValue
from twinflow.vocab._values import GenericPart as GenericPart
from twinflow.vocab._values import JsonValue as JsonValue
from twinflow.vocab._values import MediaPart as MediaPart
from twinflow.vocab._values import Message as Message
from twinflow.vocab._values import Part as Part
from twinflow.vocab._values import PrefillPart as PrefillPart
from twinflow.vocab._values import ReasoningPart as ReasoningPart
from twinflow.vocab._values import ResourceLinkPart as ResourceLinkPart
from twinflow.vocab._values import RunId as RunId
from twinflow.vocab._values import StructuredPart as StructuredPart
from twinflow.vocab._values import TextPart as TextPart
from twinflow.vocab._values import ToolCallPart as ToolCallPart
from twinflow.vocab._values import ToolResultPart as ToolResultPart
from twinflow.vocab._values import ToolSpec as ToolSpec
from twinflow.vocab._values import Transcript as Transcript
