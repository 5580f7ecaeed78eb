"""The public names of twinflow.local_model."""

import twinflow.local_model


def test_all_lists_exactly_the_public_names() -> None:
    """`__all__` is the public API: every name is importable and none is missing."""
    expected = sorted(
        [
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
    )
    assert expected == sorted(twinflow.local_model.__all__)
    public = sorted(n for n in vars(twinflow.local_model) if not n.startswith("_"))
    assert expected == public
