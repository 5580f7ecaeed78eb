"""The public names of twinflow.local_model."""

import types

import pytest

import twinflow.local_model


def test_all_lists_exactly_the_public_names() -> None:
    """`__all__` is the public API: every name is importable and none is missing."""
    expected = sorted(
        [
            "ANTHROPIC_VERSION",
            "AnthropicChatModel",
            "ChatMode",
            "DEFAULT_ANTHROPIC_URL",
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
    )
    assert expected == sorted(twinflow.local_model.__all__)
    listed = sorted(n for n in dir(twinflow.local_model) if not n.startswith("_"))
    assert expected == listed


def test_lazy_names_resolve_and_nothing_else_leaks() -> None:
    """Every name in `__all__` resolves (on first access) and no other public name is bound."""
    missing = [n for n in twinflow.local_model.__all__ if not hasattr(twinflow.local_model, n)]
    assert [] == missing
    bound = {
        n
        for n, v in vars(twinflow.local_model).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert set() == bound - set(twinflow.local_model.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    """The lazy `__getattr__` refuses names outside `__all__` as a module would."""
    with pytest.raises(AttributeError, match="no attribute 'OllamaClient'"):
        _ = twinflow.local_model.OllamaClient
