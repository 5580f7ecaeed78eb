"""twinflow.local_model: guaranteed structured output from Ollama and OpenAI-compatible servers.

L2, beside `twinflow.agent` and independent of it. The only third-party dependency is pydantic;
every request goes through the kernel's injected `Transport`.
"""

from twinflow.local_model._chat import (
    ChatMode,
    OllamaChatModel,
    OpenAICompatibleChatModel,
    action_instructions,
    action_schema,
)
from twinflow.local_model._errors import (
    LocalModelError,
    MalformedResponseError,
    UnenforcedSchemaError,
)
from twinflow.local_model._preflight import (
    Decoder,
    PreflightReport,
    SchemaFinding,
    SchemaRewrite,
    anchor_pattern,
    preflight,
)
from twinflow.local_model._structured import (
    LocalStructuredResult,
    OllamaStructuredOutput,
    OpenAICompatibleStructuredOutput,
)
from twinflow.local_model._wire import Dialect

__all__ = [
    "ChatMode",
    "Decoder",
    "Dialect",
    "LocalModelError",
    "LocalStructuredResult",
    "MalformedResponseError",
    "OllamaChatModel",
    "OllamaStructuredOutput",
    "OpenAICompatibleChatModel",
    "OpenAICompatibleStructuredOutput",
    "PreflightReport",
    "SchemaFinding",
    "SchemaRewrite",
    "UnenforcedSchemaError",
    "action_instructions",
    "action_schema",
    "anchor_pattern",
    "preflight",
]
