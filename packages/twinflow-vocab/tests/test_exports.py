"""The public surface of twinflow.vocab is exactly what docs/architecture.md names."""

import types

import twinflow.vocab

EXPECTED = {
    "Attempt", "CallId", "CanonicalError", "ChatModel", "Difference", "FinishReason",
    "InvalidValueError", "JsonValue", "MediaPart", "Message", "ModelRequest", "ModelResponse",
    "ModelSettings", "OutputSchema", "Part", "ReasoningPart", "Reask", "Role", "RunId",
    "StructuredOutputAdapter", "StructuredOutputError", "StructuredPart", "StructuredResult",
    "TextPart", "ToolCallPart", "ToolResultPart", "ToolSpec", "Transcript", "TwinflowError", "Usage",
    "UserError", "VocabError", "WireFormatError", "canonical_bytes", "diff", "digest",
    "parse_canonical",
}  # fmt: skip


def test_all_is_the_public_names() -> None:
    """__all__ lists exactly the documented public names."""
    expected = EXPECTED
    assert expected == set(twinflow.vocab.__all__)


def test_all_names_resolve() -> None:
    """Every name in __all__ is importable from the package."""
    missing = [n for n in twinflow.vocab.__all__ if not hasattr(twinflow.vocab, n)]
    expected = []
    assert expected == missing


def test_public_namespace_has_nothing_else() -> None:
    """No public attribute leaks into the package namespace beyond __all__ (subpackages aside)."""
    public = {
        n
        for n, v in vars(twinflow.vocab).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert set(twinflow.vocab.__all__) == public
