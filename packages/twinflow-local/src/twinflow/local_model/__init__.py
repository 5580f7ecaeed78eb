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
        └── TransportError                 connect, timeout, status, ... (its `.reason`):
                                           the kernel's, propagated unchanged, never retried or wrapped
"""

# Only underscored names and the public ones may live here (tests/gates/test_exported_members.py).
import typing as _typing

from twinflow.local_model._errors import LocalModelError as LocalModelError
from twinflow.local_model._errors import MalformedResponseError as MalformedResponseError
from twinflow.local_model._errors import UncompilableSchemaError as UncompilableSchemaError
from twinflow.local_model._errors import UnenforcedSchemaError as UnenforcedSchemaError
from twinflow.trace import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from twinflow.local_model._anthropic import ANTHROPIC_VERSION as ANTHROPIC_VERSION
    from twinflow.local_model._anthropic import DEFAULT_ANTHROPIC_URL as DEFAULT_ANTHROPIC_URL
    from twinflow.local_model._anthropic import AnthropicChatModel as AnthropicChatModel
    from twinflow.local_model._chat import ChatMode as ChatMode
    from twinflow.local_model._chat import OllamaChatModel as OllamaChatModel
    from twinflow.local_model._chat import OpenAICompatibleChatModel as OpenAICompatibleChatModel
    from twinflow.local_model._chat import action_instructions as action_instructions
    from twinflow.local_model._chat import action_schema as action_schema
    from twinflow.local_model._preflight import Decoder as Decoder
    from twinflow.local_model._preflight import GrammarCheck as GrammarCheck
    from twinflow.local_model._preflight import GrammarVerdict as GrammarVerdict
    from twinflow.local_model._preflight import PreflightReport as PreflightReport
    from twinflow.local_model._preflight import SchemaFinding as SchemaFinding
    from twinflow.local_model._preflight import SchemaRewrite as SchemaRewrite
    from twinflow.local_model._preflight import SchemaSource as SchemaSource
    from twinflow.local_model._preflight import anchor_pattern as anchor_pattern
    from twinflow.local_model._preflight import grammar_pattern as grammar_pattern
    from twinflow.local_model._preflight import preflight as preflight
    from twinflow.local_model._structured import LocalStructuredResult as LocalStructuredResult
    from twinflow.local_model._structured import OllamaStructuredOutput as OllamaStructuredOutput
    from twinflow.local_model._structured import (
        OpenAICompatibleStructuredOutput as OpenAICompatibleStructuredOutput,
    )
    from twinflow.local_model._wire import Dialect as Dialect


__getattr__, __dir__, __all__ = _lazy_exports(
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
