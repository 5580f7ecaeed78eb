"""Translation between twinflow values and datapizza-ai-core blocks, roles, tools and memory.

Only this module imports datapizza (the `datapizza` extra). Every translation is pure and goes
both ways; what datapizza cannot express (for instance a PIL image as media) is refused with
`InvalidValueError` rather than approximated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from datapizza.memory import Memory, Turn  # type: ignore[import-untyped]  # datapizza ships no py.typed
from datapizza.tools import Tool  # type: ignore[import-untyped]  # datapizza ships no py.typed
from datapizza.type import (  # type: ignore[import-untyped]  # datapizza ships no py.typed
    ROLE,
    FunctionCallBlock,
    FunctionCallResultBlock,
    Media,
    MediaBlock,
    StructuredBlock,
    TextBlock,
    ThoughtBlock,
)
from pydantic import BaseModel, ConfigDict, JsonValue

from twinflow.trace import UserError
from twinflow.vocab._errors import InvalidValueError, PartNotCarriedError
from twinflow.vocab._parts import carried_parts
from twinflow.vocab._values import (
    CallId,
    ExtensionPart,
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    Role,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
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


class ToolResultBlock(FunctionCallResultBlock):  # type: ignore[misc]  # datapizza base class is untyped (Any)
    """A datapizza function result that also says whether the call failed.

    A `FunctionCallResultBlock` in every respect (clients and memory accept it), plus `is_error`,
    which `to_dict` writes and `from_datapizza_block` reads back.
    """

    def __init__(
        self,
        id: str,
        tool: Tool,
        result: str,
        is_error: bool = False,
        type: str = "function_call_result",
    ) -> None:
        """Create the block.

        Args:
            id: The call id this result answers.
            tool: The tool that was called.
            result: The result, or the error description when `is_error`.
            is_error: True when the call failed or was refused.
            type: datapizza's block type tag.
        """
        super().__init__(id=id, tool=tool, result=result, type=type)
        self.is_error = is_error

    def to_dict(self) -> dict[str, Any]:
        """The datapizza dict form, with `is_error` added."""
        data: dict[str, Any] = super().to_dict()
        data["is_error"] = self.is_error
        return data

    def __eq__(self, other: object) -> bool:
        """Equal when id, tool name, result and error flag are."""
        return isinstance(other, ToolResultBlock) and (
            self.id,
            self.tool.name,
            self.result,
            self.is_error,
        ) == (other.id, other.tool.name, other.result, other.is_error)

    def __hash__(self) -> int:
        """datapizza hashes result blocks by id."""
        return int(super().__hash__())

    def __repr__(self) -> str:
        """Readable form."""
        return f"ToolResultBlock(id={self.id!r}, tool={self.tool.name!r}, result={self.result!r}, is_error={self.is_error})"


class SchemaOnlyTool(Tool):  # type: ignore[misc]  # datapizza base class is untyped (Any)
    """A datapizza `Tool` carrying only a schema: the model may see it, nobody may call it.

    twinflow's runner executes tools under its policy; a datapizza agent calling this tool
    directly would bypass that, so calling it raises `UserError`.
    """

    def __call__(self, *args: object, **kwargs: object) -> Any:
        """Refuse: this tool has no function attached."""
        raise UserError(
            f"tool {self.name!r} is schema-only: twinflow's runner executes tools under policy; "
            "run it through twinflow.agent, not by calling the datapizza Tool"
        )

    def __get__(self, instance: object, owner: object = None) -> SchemaOnlyTool:
        """Stay schema-only when looked up on an instance."""
        return self


class StructuredContent(BaseModel):
    """A structured value whose model class is not at hand: its schema name and JSON value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_name: str
    """Name of the schema the value satisfies."""
    value: JsonValue
    """The value, as JSON."""


_ROLES: dict[Role, Any] = {
    "system": ROLE.SYSTEM,
    "user": ROLE.USER,
    "assistant": ROLE.ASSISTANT,
    "tool": ROLE.TOOL,
}
_ROLE_BACK: dict[Any, Role] = {v: k for k, v in _ROLES.items()}


def to_datapizza_role(role: Role) -> Any:
    """Our role as datapizza's `ROLE` member."""
    return _ROLES[role]


def from_datapizza_role(role: Any) -> Role:
    """datapizza's `ROLE` member as our role.

    Raises:
        InvalidValueError: `role` is not a datapizza `ROLE`.
    """
    try:
        return _ROLE_BACK[role]
    except (KeyError, TypeError):
        raise InvalidValueError(f"{role!r} is not a datapizza ROLE member") from None


def as_datapizza_tool(spec: ToolSpec) -> SchemaOnlyTool:
    """Build a schema-only datapizza `Tool` from a tool spec (no function; calling it raises).

    Keys of `parameters` other than `properties` and `required` (such as `$defs`) have no
    place in datapizza's `Tool` and are not carried.
    """
    properties = spec.parameters.get("properties", {})
    required = spec.parameters.get("required", [])
    return SchemaOnlyTool(
        func=None,
        name=spec.name,
        description=spec.description,
        properties=dict(properties) if isinstance(properties, dict) else {},
        required=list(required) if isinstance(required, list) else [],
    )


def from_datapizza_tool(tool: Any) -> ToolSpec:
    """The spec of a datapizza `Tool` (its name, description and arguments schema)."""
    schema = tool.schema
    parameters: dict[str, JsonValue] = {
        "type": "object",
        "properties": dict(schema["parameters"]["properties"] or {}),
    }
    if schema["parameters"]["required"]:
        parameters["required"] = list(schema["parameters"]["required"])
    return ToolSpec(name=tool.name, description=tool.description or "", parameters=parameters)


def _tool_for(name: str, tools: Mapping[str, ToolSpec]) -> SchemaOnlyTool:
    spec = tools.get(name)
    return as_datapizza_tool(spec if spec is not None else ToolSpec(name=name))


_MEDIA_KINDS = {"image": "image", "video": "video", "audio": "audio"}


def _to_media(part: MediaPart) -> Any:
    top, _, sub = part.media_type.partition("/")
    if part.media_type == "application/pdf":
        kind = "pdf"
    elif top in _MEDIA_KINDS:
        kind = _MEDIA_KINDS[top]
    else:
        raise InvalidValueError(
            f"datapizza media holds images, video, audio or PDF; {part.media_type!r} has no datapizza form"
        )
    uri = part.uri
    if uri.startswith("data:"):
        header, comma, data = uri[5:].partition(",")
        if (
            not comma
            or not header.endswith(";base64")
            or header[: -len(";base64")] != part.media_type
        ):
            raise InvalidValueError(
                f"a data: URI must be 'data:{part.media_type};base64,<data>' to become datapizza base64 media"
            )
        return Media(extension=sub, media_type=kind, source_type="base64", source=data)
    if uri.startswith("file://"):
        return Media(
            extension=sub, media_type=kind, source_type="path", source=uri[len("file://") :]
        )
    return Media(extension=sub, media_type=kind, source_type="url", source=uri)


def _from_media(media: Any) -> MediaPart:
    kind, ext = media.media_type, media.extension
    if kind == "pdf":
        media_type = "application/pdf"
    elif kind in _MEDIA_KINDS and ext:
        media_type = f"{kind}/{ext}"
    else:
        raise InvalidValueError(
            f"datapizza media of type {kind!r} with extension {ext!r} has no media type"
        )
    if media.source_type == "base64":
        uri = f"data:{media_type};base64,{media.source}"
    elif media.source_type == "path":
        uri = f"file://{media.source}"
    elif media.source_type == "url":
        uri = str(media.source)
    else:
        raise InvalidValueError(
            f"datapizza media with source_type {media.source_type!r} cannot be referenced by URI; "
            "save it and pass a path, URL or base64 data"
        )
    return MediaPart(media_type=media_type, uri=uri)


def to_datapizza_block(
    part: Part,
    *,
    tools: Mapping[str, ToolSpec] | None = None,
    models: Mapping[str, type[BaseModel]] | None = None,
) -> Any:
    """Translate one part to a datapizza block.

    Args:
        part: The part.
        tools: Specs by name, to give call and result blocks their tool's schema; a tool not
            found gets a schema-only tool with no arguments.
        models: Model classes by schema name; a structured value whose schema name is found
            becomes an instance of that class, otherwise a `StructuredContent`.

    Raises:
        InvalidValueError: The part has no datapizza form (media datapizza cannot hold), or a
            structured value does not validate as its model class.
        PartNotCarriedError: A part of an extension kind whose fallback is no text (a
            prefill, a cache hint: `to_datapizza_turn` leaves a cache hint out).
    """
    tools = tools or {}
    if isinstance(part, ExtensionPart):
        text = part.fallback()
        if not text:
            raise PartNotCarriedError("datapizza", part.kind)
        return TextBlock(content=text)
    if isinstance(part, TextPart):
        return TextBlock(content=part.text)
    if isinstance(part, ReasoningPart):
        return ThoughtBlock(content=part.text)
    if isinstance(part, ToolCallPart):
        return FunctionCallBlock(
            id=part.id,
            arguments=dict(part.arguments),
            name=part.name,
            tool=_tool_for(part.name, tools),
        )
    if isinstance(part, ToolResultPart):
        return ToolResultBlock(
            id=part.call_id,
            tool=_tool_for(part.name, tools),
            result=part.content,
            is_error=part.is_error,
        )
    if isinstance(part, StructuredPart):
        model = (models or {}).get(part.schema_name)
        if model is None:
            return StructuredBlock(
                content=StructuredContent(schema_name=part.schema_name, value=part.value)
            )
        try:
            return StructuredBlock(content=model.model_validate(part.value))
        except ValueError as exc:
            raise InvalidValueError(
                f"structured value is not a valid {part.schema_name}: {exc}"
            ) from None
    return MediaBlock(media=_to_media(part))


def from_datapizza_block(block: Any) -> Part:
    """Translate one datapizza block to a part.

    A plain `FunctionCallResultBlock` becomes a successful result; a `ToolResultBlock` keeps its
    error flag. A structured block's schema name is its model's class name (or the name carried
    by `StructuredContent`).

    Raises:
        InvalidValueError: The block is not one of datapizza's conversation blocks, or its
            content has no twinflow form.
    """
    if isinstance(block, TextBlock):
        return TextPart(text=block.content)
    if isinstance(block, ThoughtBlock):
        return ReasoningPart(text=block.content)
    if isinstance(block, FunctionCallBlock):
        return ToolCallPart(id=CallId(block.id), name=block.name, arguments=dict(block.arguments))
    if isinstance(block, FunctionCallResultBlock):
        return ToolResultPart(
            call_id=CallId(block.id),
            name=block.tool.name,
            content=block.result if isinstance(block.result, str) else str(block.result),
            is_error=bool(getattr(block, "is_error", False)),
        )
    if isinstance(block, StructuredBlock):
        content = block.content
        if isinstance(content, StructuredContent):
            return StructuredPart(schema_name=content.schema_name, value=content.value)
        if isinstance(content, BaseModel):
            return StructuredPart(
                schema_name=type(content).__name__, value=content.model_dump(mode="json")
            )
        raise InvalidValueError(
            f"datapizza structured block holds {type(content).__name__}, not a pydantic model"
        )
    if isinstance(block, MediaBlock):
        return _from_media(block.media)
    raise InvalidValueError(f"{type(block).__name__} is not a datapizza conversation block")


def to_datapizza_turn(
    message: Message,
    *,
    tools: Mapping[str, ToolSpec] | None = None,
    models: Mapping[str, type[BaseModel]] | None = None,
) -> Any:
    """Translate a message to a datapizza `Turn` (see `to_datapizza_block` for the options).

    Parts of extension kinds become their kind's fallback text (a cache hint is left out).

    Raises:
        PartNotCarriedError: A part of an extension kind that declares no fallback.
    """
    parts = carried_parts(message.parts, "datapizza")
    blocks = [to_datapizza_block(p, tools=tools, models=models) for p in parts]
    return Turn(blocks, to_datapizza_role(message.role))


def from_datapizza_turn(turn: Any) -> Message:
    """Translate a datapizza `Turn` to a message.

    Raises:
        InvalidValueError: A block has no twinflow form, or the blocks do not fit the role.
    """
    return Message(
        role=from_datapizza_role(turn.role),
        parts=tuple(from_datapizza_block(b) for b in turn.blocks),
    )


def to_datapizza_memory(
    transcript: Transcript,
    *,
    tools: Iterable[ToolSpec] = (),
    models: Mapping[str, type[BaseModel]] | None = None,
) -> Any:
    """Translate a transcript to a datapizza `Memory`, one turn per message."""
    by_name = {t.name: t for t in tools}
    memory = Memory()
    for message in transcript.messages:
        turn = to_datapizza_turn(message, tools=by_name, models=models)
        memory.add_turn(turn.blocks, turn.role)
    return memory


def from_datapizza_memory(memory: Any) -> Transcript:
    """Translate a datapizza `Memory` to a transcript.

    Raises:
        InvalidValueError: A block has no twinflow form, or a tool result answers no earlier call.
    """
    return Transcript(messages=tuple(from_datapizza_turn(turn) for turn in memory))
