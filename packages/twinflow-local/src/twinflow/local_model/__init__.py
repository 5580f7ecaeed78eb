"""twinflow.local_model: guaranteed structured output from Ollama and OpenAI-compatible servers.

L2, beside `twinflow.agent` and independent of it. The only third-party dependency is pydantic;
every request goes through the kernel's injected `Transport`.

The errors are imported eagerly; every other name is resolved on first access (PEP 562), so
importing the package does not build pydantic models until a caller uses one of its names.
"""

# Only underscored names and the public ones may live here (tests/test_exports.py).
import typing as _typing
from importlib import import_module as _import_module

from twinflow.local_model._errors import (
    LocalModelError,
    MalformedResponseError,
    UncompilableSchemaError,
    UnenforcedSchemaError,
)

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

_LAZY = {
    **dict.fromkeys(
        ("ANTHROPIC_VERSION", "DEFAULT_ANTHROPIC_URL", "AnthropicChatModel"), "_anthropic"
    ),
    **dict.fromkeys(
        (
            "ChatMode",
            "OllamaChatModel",
            "OpenAICompatibleChatModel",
            "action_instructions",
            "action_schema",
        ),
        "_chat",
    ),
    **dict.fromkeys(
        (
            "Decoder",
            "GrammarCheck",
            "GrammarVerdict",
            "PreflightReport",
            "SchemaFinding",
            "SchemaRewrite",
            "SchemaSource",
            "anchor_pattern",
            "grammar_pattern",
            "preflight",
        ),
        "_preflight",
    ),
    "Dialect": "_wire",
    **dict.fromkeys(
        ("LocalStructuredResult", "OllamaStructuredOutput", "OpenAICompatibleStructuredOutput"),
        "_structured",
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
