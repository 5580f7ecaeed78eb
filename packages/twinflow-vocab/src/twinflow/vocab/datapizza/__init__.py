"""twinflow.vocab.datapizza: translation to and from datapizza-ai-core (extra `datapizza`).

Blocks, roles, tools and memory in both directions; `ToolResultBlock` is a datapizza
`FunctionCallResultBlock` that carries the error flag; `as_datapizza_tool` builds schema-only
tools. `import twinflow.vocab` never imports this module or datapizza.
"""

from twinflow.vocab.datapizza._blocks import (
    SchemaOnlyTool,
    StructuredContent,
    ToolResultBlock,
    as_datapizza_tool,
    from_datapizza_block,
    from_datapizza_memory,
    from_datapizza_role,
    from_datapizza_tool,
    from_datapizza_turn,
    to_datapizza_block,
    to_datapizza_memory,
    to_datapizza_role,
    to_datapizza_turn,
)

__all__ = [
    "SchemaOnlyTool",
    "StructuredContent",
    "ToolResultBlock",
    "as_datapizza_tool",
    "from_datapizza_block",
    "from_datapizza_memory",
    "from_datapizza_role",
    "from_datapizza_tool",
    "from_datapizza_turn",
    "to_datapizza_block",
    "to_datapizza_memory",
    "to_datapizza_role",
    "to_datapizza_turn",
]
