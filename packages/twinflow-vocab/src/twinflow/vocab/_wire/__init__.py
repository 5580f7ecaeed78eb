"""twinflow.vocab._wire: the bounded readers of untrusted JSON, and MCP content to parts.

Reading untrusted payloads raises only `WireFormatError`, whose `.path` is the JSON pointer of
the offending part. Every reader is bounded (`JsonLimits`: nesting depth 64 and 1 MiB texts and
strings by default), so a hostile payload is a `WireFormatError` too. The providers' wire
mappings (OpenAI chat completions, Ollama `/api/chat`, Anthropic Messages) live beside their
clients in `twinflow.models`, written with `WireReader`.
"""

from twinflow.vocab._wire._mcp import from_mcp_content as from_mcp_content
from twinflow.vocab._wire._reader import DEFAULT_JSON_LIMITS as DEFAULT_JSON_LIMITS
from twinflow.vocab._wire._reader import JsonLimits as JsonLimits
from twinflow.vocab._wire._reader import WireReader as WireReader
from twinflow.vocab._wire._reader import check_json as check_json
from twinflow.vocab._wire._reader import read_json_text as read_json_text
