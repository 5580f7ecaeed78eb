"""The output schema told to the model: the outline of each JSON Schema shape."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from twinflow.models._schema_text import INSTRUCTIONS, MAX_CHARS, outline, schema_text


class Card(BaseModel):
    kind: Literal["card"]
    last4: str = Field(pattern=r"^\d{4}$", description="The card's last digits.")


class Cash(BaseModel):
    kind: Literal["cash"]


class Payment(BaseModel):
    """A payment."""

    method: Annotated[Card | Cash, Field(discriminator="kind")]
    euros: float = Field(ge=0, le=1000)
    note: str | None = Field(default=None, max_length=20)


class Tree(BaseModel):
    name: str
    children: list[Tree] = Field(default_factory=list)


class Shapes(BaseModel):
    counts: dict[str, int]
    xy: tuple[int, int]
    rows: list[list[bool]] = Field(min_length=1)
    day: str = Field(json_schema_extra={"format": "date"})


def test_a_union_with_a_pattern_and_bounds_is_outlined_with_comments() -> None:
    """Branches joined by `or`, constants as JSON, notes after each field."""
    expected = "\n".join(
        [
            "// A payment.",
            "{",
            '  "method": {',
            '    "kind": "card",',
            '    "last4": string  // The card\'s last digits.; matching ^\\d{4}$',
            "  } or {",
            '    "kind": "cash"',
            "  },",
            '  "euros": number,  // 0 to 1000',
            '  "note": string or null  // optional; at most 20 characters',
            "}",
        ]
    )
    assert expected == outline(Payment.model_json_schema())


def test_a_recursive_model_is_named_once() -> None:
    """The recursive root is told by its name and defined after."""
    expected = "\n".join(
        [
            "Tree",
            "where Tree is {",
            '  "name": string,',
            '  "children": [Tree, ...]  // optional',
            "}",
        ]
    )
    assert expected == outline(Tree.model_json_schema())


def test_maps_tuples_nested_lists_and_formats() -> None:
    """A map, a tuple, a list of lists with a bound, and a date format."""
    expected = "\n".join(
        [
            "{",
            '  "counts": {string: integer, ...},',
            '  "xy": [integer, integer],  // exactly 2 items',
            '  "rows": [[boolean, ...], ...],  // at least 1 items',
            '  "day": string  // a date, YYYY-MM-DD',
            "}",
        ]
    )
    assert expected == outline(Shapes.model_json_schema())


def test_the_system_text_leads_with_the_instructions() -> None:
    """`schema_text` is the instructions, then the outline."""
    schema = Shapes.model_json_schema()
    assert f"{INSTRUCTIONS}\n{outline(schema)}" == schema_text(schema)


def test_a_schema_too_long_to_tell_is_not_told() -> None:
    """Past `MAX_CHARS` the outline is dropped; the grammar still constrains the reply."""
    fields = {f"field_{n:04}": {"type": "string"} for n in range(MAX_CHARS // 10)}
    assert (None, None) == (
        outline({"type": "object", "properties": fields}),
        schema_text({"type": "object", "properties": fields}),
    )


def test_a_schema_too_deep_to_tell_is_not_told() -> None:
    """Nesting past the depth limit gives no outline, not a RecursionError."""
    schema: dict[str, object] = {"type": "integer"}
    for _ in range(2000):
        schema = {"type": "object", "properties": {"a": schema}}
    assert None is outline(schema)  # type: ignore[arg-type]  # a deep dict of JSON values


def test_a_schema_that_expands_without_end_is_not_told() -> None:
    """Ten fields of a type of ten fields, eleven levels down, stop at the node budget."""
    defs: dict[str, object] = {"L0": {"type": "integer"}}
    for level in range(1, 12):
        fields = {f"f{n}": {"$ref": f"#/$defs/L{level - 1}"} for n in range(10)}
        defs[f"L{level}"] = {"type": "object", "properties": fields}
    schema = {"$defs": defs, "$ref": "#/$defs/L11"}
    assert None is outline(schema)  # type: ignore[arg-type]  # a dict of JSON values


def test_unknown_and_odd_nodes_read_as_any_value() -> None:
    """A missing `$ref`, a bare `true` schema and an untyped node are `any value`."""
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/Missing"}, "b": True, "c": {}},
        "required": ["a", "b", "c"],
    }
    expected = '{\n  "a": any value,\n  "b": any value,\n  "c": any value\n}'
    assert expected == outline(schema)  # type: ignore[arg-type]  # `True` is a JSON Schema
