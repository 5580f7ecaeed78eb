"""Structured-action mode: one union schema per step (call a tool, or answer), and its reader.

Every reply is constrained to the union and read into a tool call or a final answer, so the
loop runs on any server that constrains decoding, with or without native tool calling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from twinflow.models._errors import InputRefused
from twinflow.trace import CanonicalError, UserError
from twinflow.vocab import Message, ModelRequest, OutputSchema, ToolSpec, WireFormatError
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._wire import DEFAULT_JSON_LIMITS, JsonLimits, read_json_text


def _merge_defs(
    target: dict[str, JsonValue], schema: Mapping[str, JsonValue], where: str
) -> dict[str, JsonValue]:
    """Move `$defs` of a nested schema to the root, where its `#/$defs/...` references point."""
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    if isinstance(defs, dict):
        for name, definition in defs.items():
            if name in target and target[name] != definition:
                raise UserError(
                    f"{where} defines $defs/{name} differently from another tool or the output "
                    "schema; rename one of the definitions"
                )
            target[name] = definition
    return inner


def action_schema(
    tools: Sequence[ToolSpec], output_schema: OutputSchema | None
) -> dict[str, JsonValue]:
    """The union schema of one structured-action step.

    One branch per tool, `{"action": "call_tool", "tool": <name>, "arguments": <its schema>}`,
    and one final branch, `{"action": "final", "answer": <string>}` or, with an output schema,
    `{"action": "final", "output": <that schema>}`. Nested `$defs` are hoisted to the root.

    Args:
        tools: The tools offered at this step.
        output_schema: The schema of the final answer, if it is structured.

    Returns:
        A JSON Schema with an `anyOf` of the branches.
    """
    defs: dict[str, JsonValue] = {}
    branches: list[JsonValue] = []
    for tool in tools:
        arguments = _merge_defs(defs, tool.parameters, f"tool {tool.name!r}")
        branches.append(
            {
                "type": "object",
                "properties": {
                    "action": {"const": "call_tool"},
                    "tool": {"const": tool.name},
                    "arguments": arguments,
                },
                "required": ["action", "tool", "arguments"],
                "additionalProperties": False,
            }
        )
    if output_schema is None:
        final: dict[str, JsonValue] = {
            "properties": {"action": {"const": "final"}, "answer": {"type": "string"}},
            "required": ["action", "answer"],
        }
    else:
        output = _merge_defs(
            defs, output_schema.json_schema, f"output schema {output_schema.name!r}"
        )
        final = {
            "properties": {"action": {"const": "final"}, "output": output},
            "required": ["action", "output"],
        }
    branches.append({"type": "object", **final, "additionalProperties": False})
    schema: dict[str, JsonValue] = {"anyOf": branches}
    if defs:
        schema["$defs"] = defs
    return schema


def action_instructions(tools: Sequence[ToolSpec], output_schema: OutputSchema | None) -> str:
    """The system text that explains the structured-action protocol to the model."""
    final_field = "answer" if output_schema is None else "output"
    lines = [
        "Reply with exactly one JSON object.",
        'To call a tool: {"action": "call_tool", "tool": <tool name>, "arguments": {...}}.',
        f'To give the final answer: {{"action": "final", "{final_field}": ...}}.',
    ]
    if tools:
        lines.append("Tools:")
        lines.extend(f"- {tool.name}: {tool.description}" for tool in tools)
    return "\n".join(lines)


def non_canonical(value: object, where: str) -> str | None:
    """Where a parsed JSON value holds a number with no canonical form (RFC 8785), if anywhere.

    A decoder can emit `1e400` (read as infinity), an integer past 2**53-1, or Python's `NaN`
    and `Infinity`; twinflow's values refuse them, so such a reply is a validation failure to
    re-ask, like any other, rather than an error escaping the request. Whether a number has
    that form is the canonical encoder's to say (one bound for the workspace).
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            canonical_bytes(value)
        except CanonicalError:
            return (
                f"{where}: {value} is not a JSON number twinflow keeps: numbers must be finite, "
                "integers within +-(2**53-1)"
            )
        return None
    if isinstance(value, dict):
        items: Sequence[tuple[object, object]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return None
    for key, item in items:
        found = non_canonical(item, f"{where}/{key}")
        if found is not None:
            return found
    return None


def parse_action(
    emission: str,
    tools: Sequence[ToolSpec],
    output_schema: OutputSchema | None,
    limits: JsonLimits = DEFAULT_JSON_LIMITS,
) -> dict[str, JsonValue]:
    try:
        value = read_json_text(emission, (), limits, what="the reply")
    except WireFormatError as exc:
        # Not JSON, too long, too deep: a malformed emission, re-asked like any other.
        raise InputRefused(f"(root): {exc}") from None
    if not isinstance(value, dict):
        raise InputRefused("(root): expected a JSON object")
    action = value.get("action")
    if action == "call_tool":
        names = [t.name for t in tools]
        if value.get("tool") not in names:
            raise InputRefused(f"tool: must be one of {names}, got {value.get('tool')!r}")
        if not isinstance(value.get("arguments"), dict):
            raise InputRefused("arguments: expected a JSON object")
        problem = non_canonical(value["arguments"], "arguments")
        if problem is not None:
            raise InputRefused(problem)
        return value
    if action == "final":
        key = "answer" if output_schema is None else "output"
        if key not in value:
            raise InputRefused(f"{key}: missing")
        if output_schema is None and not isinstance(value[key], str):
            raise InputRefused("answer: expected a string")
        problem = non_canonical(value[key], key)
        if problem is not None:
            raise InputRefused(problem)
        return value
    raise InputRefused(f"action: expected 'call_tool' or 'final', got {action!r}")


def with_instructions(request: ModelRequest) -> list[Message]:
    """The conversation with the structured-action protocol explained in its system message."""
    instructions = action_instructions(request.tools, request.output_schema)
    messages = list(request.transcript.messages)
    if messages and messages[0].role == "system":
        messages[0] = Message.system(f"{instructions}\n\n{messages[0].text}")
    else:
        messages.insert(0, Message.system(instructions))
    return messages
