"""twinflow.vocab.wire: pure translation between transcripts and provider wire formats.

OpenAI chat-completions messages, Ollama `/api/chat` messages (and request bodies), Anthropic
Messages; MCP content blocks to parts (`from_mcp_content`). Reading untrusted payloads raises only `WireFormatError`, whose `.path` is the JSON
pointer of the offending part. Every reader is bounded (`JsonLimits`: nesting depth 64 and
1 MiB texts and strings by default), so a hostile payload is a `WireFormatError` too.
"""

from twinflow.vocab.wire._anthropic import from_anthropic, to_anthropic, to_anthropic_tools
from twinflow.vocab.wire._mcp import from_mcp_content
from twinflow.vocab.wire._ollama import (
    from_ollama_messages,
    ollama_chat_request,
    to_ollama_messages,
    to_ollama_tools,
)
from twinflow.vocab.wire._openai import from_openai_messages, to_openai_messages, to_openai_tools
from twinflow.vocab.wire._reader import (
    DEFAULT_JSON_LIMITS,
    JsonLimits,
    check_json,
    read_json_text,
)

__all__ = [
    "DEFAULT_JSON_LIMITS",
    "JsonLimits",
    "check_json",
    "from_anthropic",
    "from_mcp_content",
    "from_ollama_messages",
    "from_openai_messages",
    "ollama_chat_request",
    "read_json_text",
    "to_anthropic",
    "to_anthropic_tools",
    "to_ollama_messages",
    "to_ollama_tools",
    "to_openai_messages",
    "to_openai_tools",
]
