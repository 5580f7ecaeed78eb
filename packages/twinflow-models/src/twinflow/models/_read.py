"""vocab's bounded wire readers (`WireReader`) under the short names the wire mappings use."""

from __future__ import annotations

from twinflow.vocab._wire import WireReader

Path = tuple[str | int, ...]
"""Where a value sits in a payload: its keys and indices, outermost first."""

fail = WireReader.fail
obj = WireReader.obj
arr = WireReader.arr
string = WireReader.string
boolean = WireReader.boolean
field = WireReader.field
optional = WireReader.optional
json_object = WireReader.json_object
build = WireReader.build
append = WireReader.append
structured_text = WireReader.structured_text
