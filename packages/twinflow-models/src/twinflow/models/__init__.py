"""twinflow.models: guaranteed structured output from Ollama and OpenAI-compatible servers.

L2, beside `twinflow.agent` and independent of it. The only third-party dependency is pydantic;
every request goes through the kernel's injected `Transport`.

The errors are imported eagerly; every other name is resolved on first access (PEP 562), so
importing the package does not build pydantic models until a caller uses one of its names.

Errors::

    TwinflowError (twinflow.vocab)
    ├── UserError (twinflow.vocab)         also a bad max_attempts (vocab's one check)
    │   ├── UnenforcedSchemaError          strict pre-flight: the decoder would not enforce part of the schema
    │   └── UncompilableSchemaError        the server could not compile the schema's grammar (never sent)
    ├── LocalModelError                    raised by twinflow.models
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

from twinflow.models._errors import LocalModelError as LocalModelError
from twinflow.models._errors import MalformedResponseError as MalformedResponseError
from twinflow.models._errors import UncompilableSchemaError as UncompilableSchemaError
from twinflow.models._errors import UnenforcedSchemaError as UnenforcedSchemaError
from twinflow.trace import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from twinflow.models._anthropic import ANTHROPIC_VERSION as ANTHROPIC_VERSION
    from twinflow.models._anthropic import DEFAULT_ANTHROPIC_URL as DEFAULT_ANTHROPIC_URL
    from twinflow.models._anthropic import AnthropicChatModel as AnthropicChatModel
    from twinflow.models._chat import ChatMode as ChatMode
    from twinflow.models._chat import OllamaChatModel as OllamaChatModel
    from twinflow.models._chat import OpenAICompatibleChatModel as OpenAICompatibleChatModel
    from twinflow.models._chat import action_instructions as action_instructions
    from twinflow.models._chat import action_schema as action_schema
    from twinflow.models._preflight import Decoder as Decoder
    from twinflow.models._preflight import GrammarCheck as GrammarCheck
    from twinflow.models._preflight import GrammarVerdict as GrammarVerdict
    from twinflow.models._preflight import PreflightReport as PreflightReport
    from twinflow.models._preflight import SchemaFinding as SchemaFinding
    from twinflow.models._preflight import SchemaRewrite as SchemaRewrite
    from twinflow.models._preflight import SchemaSource as SchemaSource
    from twinflow.models._preflight import anchor_pattern as anchor_pattern
    from twinflow.models._preflight import grammar_pattern as grammar_pattern
    from twinflow.models._preflight import preflight as preflight
    from twinflow.models._structured import LocalStructuredResult as LocalStructuredResult
    from twinflow.models._structured import OllamaStructuredOutput as OllamaStructuredOutput
    from twinflow.models._structured import (
        OpenAICompatibleStructuredOutput as OpenAICompatibleStructuredOutput,
    )
    from twinflow.models._wire import Dialect as Dialect


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
