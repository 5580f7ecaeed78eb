"""twinflow.vocab.datapizza: translation to and from datapizza-ai-core (extra `datapizza`).

A transcript to a datapizza `Memory` and back, and a twinflow tool as a schema-only datapizza
tool; the block, role and turn translations they are built from stay in `_blocks` (a tool
result travels as `ToolResultBlock`, a datapizza `FunctionCallResultBlock` that carries the
error flag). `import twinflow.vocab` never imports this module or datapizza.
"""

from twinflow.vocab.datapizza._blocks import as_datapizza_tool as as_datapizza_tool
from twinflow.vocab.datapizza._blocks import from_datapizza_memory as from_datapizza_memory
from twinflow.vocab.datapizza._blocks import to_datapizza_memory as to_datapizza_memory
