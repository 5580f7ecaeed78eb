"""The public surface of twinflow.vocab is exactly what docs/architecture.md names."""

import sys
import types

import pytest

import twinflow.vocab

# pytester runs a fresh interpreter: the import-cost test needs one with nothing imported yet.
pytest_plugins = ["pytester"]

EXPECTED = {
    "Attempt", "CallId", "CanonicalError", "ChatModel", "Difference", "FinishReason",
    "InvalidValueError", "JsonValue", "MediaPart", "Message", "ModelRequest", "ModelResponse",
    "ModelSettings", "OutputSchema", "Part", "ReasoningPart", "Reask", "Role", "RunId",
    "StructuredOutputAdapter", "StructuredOutputError", "StructuredPart", "StructuredResult",
    "TextPart", "ToolCallPart", "ToolResultPart", "ToolSpec", "Transcript", "TwinflowError", "Usage",
    "UserError", "VocabError", "WireFormatError", "canonical_bytes", "did_you_mean", "diff", "digest",
    "parse_canonical", "Chunk", "ChunkAssembler", "EnvelopeKind", "FinishChunk", "ReasoningDelta",
    "StreamingChatModel", "TextDelta", "ToolCallDelta", "ToolCallEnd", "ToolCallStart", "UsageChunk",
    "assemble", "envelope", "response_chunks",
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
    """No public attribute is bound beyond __all__ (subpackages aside), resolved names included."""
    for name in twinflow.vocab.__all__:
        getattr(twinflow.vocab, name)
    public = {
        n
        for n, v in vars(twinflow.vocab).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert set(twinflow.vocab.__all__) == public


def test_dir_lists_the_lazy_names() -> None:
    """dir() lists every public name, also those not resolved yet, and no other public name."""
    listed = {n for n in dir(twinflow.vocab) if not n.startswith("_")}
    assert set(twinflow.vocab.__all__) == listed - {"wire", "datapizza"}


def test_an_unknown_name_is_an_attribute_error() -> None:
    """The lazy `__getattr__` refuses names outside __all__ as a module would."""
    with pytest.raises(AttributeError, match="no attribute 'Conversation'"):
        _ = twinflow.vocab.Conversation


def test_importing_the_package_builds_no_model(pytester: pytest.Pytester) -> None:
    """`import twinflow.vocab` in a fresh interpreter loads neither pydantic nor the value modules."""
    script = (
        "import sys, twinflow.vocab\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'twinflow.vocab.'))))\n"
        "twinflow.vocab.Message\n"
        "print('pydantic.main' in sys.modules)\n"
    )
    result = pytester.run(sys.executable, "-c", script)
    assert (0, ["['twinflow.vocab._errors']", "True"]) == (result.ret, result.outlines)
