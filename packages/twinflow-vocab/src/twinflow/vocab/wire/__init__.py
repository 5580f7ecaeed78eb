"""twinflow.vocab.wire: pure translation between transcripts and provider wire formats.

OpenAI chat-completions messages, Ollama `/api/chat` messages (and request bodies), Anthropic
Messages; MCP content blocks to parts (`from_mcp_content`). Reading untrusted payloads raises only `WireFormatError`, whose `.path` is the JSON
pointer of the offending part. Every reader is bounded (`JsonLimits`: nesting depth 64 and
1 MiB texts and strings by default), so a hostile payload is a `WireFormatError` too.
"""

from twinflow.vocab.wire._anthropic import from_anthropic as from_anthropic
from twinflow.vocab.wire._anthropic import to_anthropic as to_anthropic
from twinflow.vocab.wire._anthropic import to_anthropic_tools as to_anthropic_tools
from twinflow.vocab.wire._mcp import from_mcp_content as from_mcp_content
from twinflow.vocab.wire._ollama import from_ollama_messages as from_ollama_messages
from twinflow.vocab.wire._ollama import ollama_chat_request as ollama_chat_request
from twinflow.vocab.wire._ollama import to_ollama_messages as to_ollama_messages
from twinflow.vocab.wire._ollama import to_ollama_tools as to_ollama_tools
from twinflow.vocab.wire._openai import from_openai_messages as from_openai_messages
from twinflow.vocab.wire._openai import to_openai_messages as to_openai_messages
from twinflow.vocab.wire._openai import to_openai_tools as to_openai_tools
from twinflow.vocab.wire._reader import DEFAULT_JSON_LIMITS as DEFAULT_JSON_LIMITS
from twinflow.vocab.wire._reader import JsonLimits as JsonLimits
from twinflow.vocab.wire._reader import check_json as check_json
from twinflow.vocab.wire._reader import read_json_text as read_json_text
