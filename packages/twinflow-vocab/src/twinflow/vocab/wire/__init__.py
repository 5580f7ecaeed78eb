"""twinflow.vocab.wire: pure translation between transcripts and provider wire formats.

OpenAI chat-completions messages, Ollama `/api/chat` messages (and request bodies), Anthropic
Messages. Reading untrusted payloads raises only `WireFormatError`, whose `.path` is the JSON
pointer of the offending part.
"""

from twinflow.vocab.wire._anthropic import from_anthropic, to_anthropic, to_anthropic_tools
from twinflow.vocab.wire._ollama import (
    from_ollama_messages,
    ollama_chat_request,
    to_ollama_messages,
    to_ollama_tools,
)
from twinflow.vocab.wire._openai import from_openai_messages, to_openai_messages, to_openai_tools

__all__ = [
    "from_anthropic",
    "from_ollama_messages",
    "from_openai_messages",
    "ollama_chat_request",
    "to_anthropic",
    "to_anthropic_tools",
    "to_ollama_messages",
    "to_ollama_tools",
    "to_openai_messages",
    "to_openai_tools",
]
