"""twinflow.local_model: guaranteed structured output from Ollama and OpenAI-compatible servers.

L2, beside `twinflow.agent` and independent of it. The only third-party dependency is pydantic;
every request goes through the kernel's injected `Transport`.

The errors are imported eagerly; every other name is resolved on first access (PEP 562), so
importing the package does not build pydantic models until a caller uses one of its names.

Errors::

    TwinflowError (twinflow.vocab)
    ├── UserError (twinflow.vocab)         also a bad max_attempts (vocab's one check)
    │   ├── UnenforcedSchemaError          strict pre-flight: the decoder would not enforce part of the schema
    │   └── UncompilableSchemaError        the server could not compile the schema's grammar (never sent)
    ├── LocalModelError                    raised by twinflow.local_model
    │   ├── UnenforcedSchemaError          (also a UserError, above)
    │   ├── UncompilableSchemaError        (also a UserError, above)
    │   └── MalformedResponseError         the server answered 2xx with a body that is not its wire format
    ├── VocabError (twinflow.vocab)
    │   └── StructuredOutputError          no answer validated in max_attempts (`.attempts`)
    └── KernelError (twinflow.kernel)
        └── TransportError                 ConnectError, TransportTimeout, HTTPStatusError, ...:
                                           the kernel's, propagated unchanged, never retried or wrapped
"""

# Only underscored names and the public ones may live here (tests/gates/test_exported_members.py).
import typing as _typing

from twinflow.local_model._errors import (
    LocalModelError,
    MalformedResponseError,
    UncompilableSchemaError,
    UnenforcedSchemaError,
)
from twinflow.trace import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from twinflow.local_model._anthropic import (
        ANTHROPIC_VERSION,
        DEFAULT_ANTHROPIC_URL,
        AnthropicChatModel,
    )
    from twinflow.local_model._chat import (
        ChatMode,
        OllamaChatModel,
        OpenAICompatibleChatModel,
        action_instructions,
        action_schema,
    )
    from twinflow.local_model._preflight import (
        Decoder,
        GrammarCheck,
        GrammarVerdict,
        PreflightReport,
        SchemaFinding,
        SchemaRewrite,
        SchemaSource,
        anchor_pattern,
        grammar_pattern,
        preflight,
    )
    from twinflow.local_model._structured import (
        LocalStructuredResult,
        OllamaStructuredOutput,
        OpenAICompatibleStructuredOutput,
    )
    from twinflow.local_model._wire import Dialect

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_ANTHROPIC_URL",
    "AnthropicChatModel",
    "ChatMode",
    "Decoder",
    "Dialect",
    "GrammarCheck",
    "GrammarVerdict",
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
    "SchemaSource",
    "UncompilableSchemaError",
    "UnenforcedSchemaError",
    "action_instructions",
    "action_schema",
    "anchor_pattern",
    "grammar_pattern",
    "preflight",
]

__getattr__, __dir__ = _lazy_exports(
    globals(),
    {
        "_anthropic": ("ANTHROPIC_VERSION", "AnthropicChatModel", "DEFAULT_ANTHROPIC_URL"),
        "_chat": (
            "action_instructions",
            "action_schema",
            "ChatMode",
            "OllamaChatModel",
            "OpenAICompatibleChatModel",
        ),
        "_preflight": (
            "anchor_pattern",
            "Decoder",
            "grammar_pattern",
            "GrammarCheck",
            "GrammarVerdict",
            "preflight",
            "PreflightReport",
            "SchemaFinding",
            "SchemaRewrite",
            "SchemaSource",
        ),
        "_structured": (
            "LocalStructuredResult",
            "OllamaStructuredOutput",
            "OpenAICompatibleStructuredOutput",
        ),
        "_wire": ("Dialect",),
    },
)
