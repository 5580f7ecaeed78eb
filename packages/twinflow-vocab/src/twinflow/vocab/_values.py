"""Frozen value types for a conversation: parts, messages, transcripts, tool specs.

All are frozen pydantic models with a `kind` tag where they form a union. Construction validates
and refuses bad values with `InvalidValueError` (a `ValueError`), naming the field and the rule.
Container fields that hold JSON (`arguments`, `value`, `parameters`) are plain dicts and lists
for pydantic's sake: treat them as read-only, the digest of a value assumes nobody mutates them.
"""

from __future__ import annotations

import contextvars
import math
import re
from collections.abc import Callable
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Literal,
    NewType,
    Self,
    get_args,
)

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    InstanceOf,
    JsonValue,
    PrivateAttr,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from twinflow._base._json import MAX_SAFE_INTEGER, json_pointer
from twinflow.vocab._errors import InvalidValueError

_constructing: contextvars.ContextVar[int] = contextvars.ContextVar("_constructing", default=0)
"""How many value constructors are running in this context: only the outermost translates."""

__all__ = [
    "CacheHintPart",
    "CallId",
    "EmbeddedResourcePart",
    "ExtensionPart",
    "FrozenValue",
    "GenericPart",
    "JsonValue",
    "MediaPart",
    "Message",
    "Part",
    "PrefillPart",
    "ReasoningPart",
    "ResourceLinkPart",
    "Role",
    "RunId",
    "StructuredPart",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "ToolSpec",
    "Transcript",
]

CallId = NewType("CallId", str)
"""Identifies one tool call; the matching tool result carries the same id."""

RunId = NewType("RunId", str)
"""Identifies one agent run."""

Role = Literal["system", "user", "assistant", "tool"]
"""Who a message is from: tool results travel in `tool` messages."""


def check_json(value: object, path: tuple[str | int, ...] = ()) -> None:
    """Refuse JSON that has no canonical form: NaN, infinities, integers beyond ±(2**53-1).

    Raises:
        ValueError: Naming the JSON pointer of the offending value.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} at {json_pointer(path) or '/'} is not a JSON number")
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise ValueError(
                f"integer at {json_pointer(path) or '/'} is outside ±(2**53-1), the range a JSON "
                "number holds exactly; send it as a string"
            )
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"string at {json_pointer(path) or '/'} holds a lone surrogate"
            ) from None
    elif isinstance(value, dict):
        for k, v in value.items():
            check_json(k, (*path, k))
            check_json(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_json(v, (*path, i))


def _non_empty(value: str, what: str) -> str:
    if not value or value.isspace():
        raise ValueError(f"{what} must not be empty")
    return value


class FrozenValue(BaseModel):
    """Base of every twinflow value: frozen, no extra fields, a typed error on bad input.

    The error is `InvalidValueError` here; a package whose values should raise its own error
    (a `TwinflowError` subclass: `AgentConfigError`, `EvalValueError`, ...) subclasses this
    base once with ``_invalid_error`` set, so no bare pydantic ``ValidationError`` leaves a
    constructor (ADR 0074). ``model_validate`` still raises pydantic's error: its callers read
    untrusted files and say where the problem is themselves.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    _invalid_error: ClassVar[Callable[[str], Exception]] = InvalidValueError
    """Called with the message to make the error a bad construction raises."""

    def __init__(self, /, **data: Any) -> None:
        """Validate `data` into the value.

        Raises:
            InvalidValueError: A field is missing, of the wrong type, or breaks a rule; the
                message names it.
        """
        outermost = _constructing.get() == 0
        token = _constructing.set(_constructing.get() + 1)
        try:
            super().__init__(**data)
        except ValidationError as exc:
            if not outermost:
                # A nested value, built while pydantic validates the outer one: pydantic
                # reports its error once, at its place in the outer value's path (ADR 0008).
                raise
            raise type(self)._invalid_error(f"invalid {type(self).__name__}: {exc}") from None
        except UnicodeEncodeError as exc:
            # pydantic-core cannot read a dict key holding a lone surrogate (a value's string is
            # refused by the rule that names its path); it raises this instead.
            raise type(self)._invalid_error(
                f"invalid {type(self).__name__}: a key holds a lone surrogate "
                f"({exc.object[exc.start : exc.end]!a}); keys must be valid Unicode text"
            ) from None
        finally:
            _constructing.reset(token)

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        """pydantic's `model_validate`: its error stays pydantic's, with the whole path."""
        token = _constructing.set(_constructing.get() + 1)
        try:
            return super().model_validate(obj, **kwargs)
        finally:
            _constructing.reset(token)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        """pydantic's `model_validate_json`: its error stays pydantic's, with the whole path."""
        token = _constructing.set(_constructing.get() + 1)
        try:
            return super().model_validate_json(json_data, **kwargs)
        finally:
            _constructing.reset(token)


class TextPart(FrozenValue):
    """Plain text."""

    kind: Literal["text"] = "text"
    """Union tag."""
    text: str
    """The text."""


class ReasoningPart(FrozenValue):
    """Model reasoning ("thinking") shown alongside, not as, the answer."""

    kind: Literal["reasoning"] = "reasoning"
    """Union tag."""
    text: str
    """The reasoning text."""


class ToolCallPart(FrozenValue):
    """A model's request to call a tool."""

    kind: Literal["tool_call"] = "tool_call"
    """Union tag."""
    id: CallId
    """Call id; the result of this call carries the same id."""
    name: str
    """Name of the tool to call."""
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    """Arguments object, JSON only."""

    @field_validator("id", "name")
    @classmethod
    def _not_empty(cls, value: str, info: Any) -> str:
        return _non_empty(value, f"tool call {info.field_name}")

    @field_validator("arguments")
    @classmethod
    def _json_arguments(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        check_json(value, ("arguments",))
        return value


class ToolResultPart(FrozenValue):
    """The result of a tool call, or the error it produced."""

    kind: Literal["tool_result"] = "tool_result"
    """Union tag."""
    call_id: CallId
    """Id of the tool call this answers."""
    name: str
    """Name of the tool that was called."""
    content: str
    """The result (or error description) as text."""
    is_error: bool = False
    """True when the call failed or was refused; `content` then says why."""
    parts: tuple[Part, ...] = Field(default=(), exclude_if=lambda value: not value)
    """The result's content blocks in order, when it has more than text (an MCP tool's image
    or resource link); `content` then holds its text blocks. Empty (and left out of the
    encoding, so a text result keeps its bytes) for a result that is text only."""

    @field_validator("call_id", "name")
    @classmethod
    def _not_empty(cls, value: str, info: Any) -> str:
        return _non_empty(value, f"tool result {info.field_name}")

    @field_validator("parts")
    @classmethod
    def _content_kinds(cls, value: tuple[Any, ...]) -> tuple[Any, ...]:
        for i, part in enumerate(value):
            if part.kind in _NOT_IN_RESULTS:
                raise ValueError(f"parts[{i}]: a tool result's content holds no {part.kind} part")
        return value


class StructuredPart(FrozenValue):
    """A structured (schema-validated) output."""

    kind: Literal["structured"] = "structured"
    """Union tag."""
    schema_name: str
    """Name of the schema the value was validated against."""
    value: JsonValue
    """The value, as JSON."""

    @field_validator("value")
    @classmethod
    def _json_value(cls, value: JsonValue) -> JsonValue:
        check_json(value, ("value",))
        return value


class MediaPart(FrozenValue):
    """A reference to media (an image, audio, a document) by URI; `data:` URIs inline it."""

    kind: Literal["media"] = "media"
    """Union tag."""
    media_type: str
    """IANA media type, such as `image/png`."""
    uri: str
    """Where the media is: `https:`, `file:` or a `data:` URI."""

    @field_validator("media_type")
    @classmethod
    def _type_subtype(cls, value: str) -> str:
        top, slash, sub = value.partition("/")
        if not (top and slash and sub) or any(c.isspace() for c in value):
            raise ValueError(f"media_type {value!r} is not of the form type/subtype")
        return value

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        return _non_empty(value, "media uri")

    def fallback(self) -> str:
        """What a wire that cannot carry the media where it stands (inside a tool result) sends:
        ``[image/png: 1234 bytes]`` for inline data, ``[image/png: <uri>]`` for a reference."""
        if self.uri.startswith("data:"):
            head, _, data = self.uri.partition(",")
            size = len(data)
            if head.endswith(";base64"):
                size = size * 3 // 4 - data.endswith("=") - data.endswith("==")
            return f"[{self.media_type}: {size} bytes]"
        return f"[{self.media_type}: {self.uri}]"

    @model_validator(mode="after")
    def _data_uri_agrees(self) -> Self:
        if self.uri.startswith("data:"):
            declared = self.uri[5:].split(",", 1)[0].split(";", 1)[0]
            if declared != self.media_type:
                raise ValueError(
                    f"data: URI declares {declared!r} but media_type is {self.media_type!r}"
                )
        return self


_CORE = (TextPart, ReasoningPart, ToolCallPart, ToolResultPart, StructuredPart, MediaPart)
CORE_PART_KINDS: frozenset[str] = frozenset(c.model_fields["kind"].default for c in _CORE)
"""The kinds of the core parts (``text``, ``tool_call``, ...): no extension may take one."""


KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")
"""What an extension kind's name looks like: ``citation``, ``acme.citation`` (at most 64)."""
MAX_KIND_LENGTH = 64


def _check_kind_name(kind: object) -> str:
    if not isinstance(kind, str) or len(kind) > MAX_KIND_LENGTH or not KIND_PATTERN.fullmatch(kind):
        shown = kind if not isinstance(kind, str) or len(kind) <= 80 else kind[:80] + "..."
        raise ValueError(
            f"part kind {shown!r} is not a name of the form 'citation' or 'acme.citation' "
            f"(lowercase letters, digits, '_', dotted; at most {MAX_KIND_LENGTH} characters)"
        )
    return kind


class ExtensionPart(FrozenValue):
    """Base of the part kinds defined outside the core union: by a plugin, or by vocab itself.

    A plugin subclasses it with ``kind: Literal["its_name"] = "its_name"`` and its own fields
    (JSON only), and names the class where the run is built (``Agent(part_kinds=...)``, the
    spec's ``part_kinds:``); nothing is registered at import. A part of a kind the reader does
    not know is read as a `GenericPart` holding the same fields, so it encodes to the same
    bytes. A wire adapter that does not carry the kind uses `fallback`, or refuses the part.
    """

    kind: str
    """Union tag: the kind's name (``citation``, ``acme.citation``); never a core kind."""

    @model_validator(mode="after")
    def _a_subclass(self) -> Self:
        # The base names no kind of its own: a part is of a subclass (a plugin's, vocab's, or
        # GenericPart), so no part can claim a core kind it does not have the fields of.
        if type(self) is ExtensionPart:
            raise ValueError("ExtensionPart is a base: subclass it with a kind, or use GenericPart")
        return self

    def fallback(self) -> str | None:
        """What stands for this part on a wire that cannot carry its kind.

        Returns:
            Text sent in the part's place (``""`` drops the part), or None (the default):
            such a wire refuses the part (`PartNotCarriedError` naming the adapter and kind).
        """
        return None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__name__ == "GenericPart":
            return
        # A kind is named once, on the class, as a Literal default: the class is the kind.
        default = cls.model_fields["kind"].default
        literal = get_args(cls.model_fields["kind"].annotation)
        if not isinstance(default, str) or literal != (default,):
            raise TypeError(
                f"{cls.__qualname__}: an extension part declares its kind as "
                'kind: Literal["name"] = "name"'
            )
        _check_kind_name(default)
        if default in CORE_PART_KINDS:
            raise TypeError(f"{cls.__qualname__}: kind {default!r} is a core part kind")


class GenericPart(ExtensionPart):
    """A part of a kind this reader does not know, kept as read: its kind and its fields.

    Encodes to the same canonical bytes it was read from, so traces holding kinds defined by a
    plugin verify, load, show, diff and replay without the plugin. Its fields are JSON values.
    """

    model_config = ConfigDict(extra="allow")

    # pydantic validates extra fields against this annotation: JSON values only.
    __pydantic_extra__: dict[str, JsonValue] = Field(init=False)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        _check_kind_name(value)
        if value in CORE_PART_KINDS or value in _SHIPPED:
            raise ValueError(f"kind {value!r} is not an extension kind")
        return value

    @model_validator(mode="after")
    def _json_fields(self) -> Self:
        extra = self.__pydantic_extra__ or {}
        check_json(extra)
        return self

    @property
    def fields(self) -> dict[str, JsonValue]:
        """The part's fields other than ``kind``, as read."""
        return dict(self.__pydantic_extra__ or {})


class ResourceLinkPart(ExtensionPart):
    """A link to a resource the reader may fetch (an MCP ``resource_link``); not its content."""

    kind: Literal["resource_link"] = "resource_link"
    """Union tag."""
    uri: str
    """Where the resource is."""
    name: str
    """The resource's name."""
    title: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """A human-readable title, if given."""
    description: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """What the resource is, if given."""
    media_type: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """Its media type, if known."""

    @field_validator("uri", "name")
    @classmethod
    def _not_empty(cls, value: str, info: Any) -> str:
        return _non_empty(value, f"resource link {info.field_name}")

    def fallback(self) -> str:
        """The link as text: ``[resource name: uri]``."""
        return f"[resource {self.name}: {self.uri}]"


class EmbeddedResourcePart(ExtensionPart):
    """A resource's content carried inline (an MCP embedded ``resource``): text or base64 bytes."""

    kind: Literal["embedded_resource"] = "embedded_resource"
    """Union tag."""
    uri: str
    """The resource's URI."""
    media_type: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """Its media type, if known."""
    text: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """Its content, if it is text."""
    blob: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """Its content base64-encoded, if it is bytes."""

    @model_validator(mode="after")
    def _one_content(self) -> Self:
        _non_empty(self.uri, "embedded resource uri")
        if (self.text is None) == (self.blob is None):
            raise ValueError("an embedded resource holds exactly one of text and blob")
        return self

    def fallback(self) -> str | None:
        """Text content as text (headed by its URI); bytes have no text form: refused."""
        return None if self.text is None else f"[resource {self.uri}]\n{self.text}"


class CacheHintPart(ExtensionPart):
    """A prompt-cache breakpoint: everything up to the part before it may be cached.

    Anthropic's adapter carries it as ``cache_control`` on the preceding block; every other
    wire drops it (a hint changes cost, never meaning).
    """

    kind: Literal["cache_hint"] = "cache_hint"
    """Union tag."""
    ttl: Literal["5m", "1h"] | None = Field(default=None, exclude_if=lambda value: value is None)
    """How long the cache entry lives, where the provider lets one choose (default: its own)."""

    def fallback(self) -> str:
        """Dropped: ``""``."""
        return ""


class PrefillPart(ExtensionPart):
    """The start of the assistant's reply, written for it: the model continues from here.

    Belongs in a final assistant message of a request. Anthropic's adapter carries it as that
    message's text; a wire without prefill refuses it rather than send a finished turn.
    """

    kind: Literal["prefill"] = "prefill"
    """Union tag."""
    text: str
    """The reply's opening text."""


_SHIPPED_CLASSES = (ResourceLinkPart, EmbeddedResourcePart, CacheHintPart, PrefillPart)
_SHIPPED: dict[str, type[ExtensionPart]] = {
    c.model_fields["kind"].default: c for c in _SHIPPED_CLASSES
}


def _part_tag(value: Any) -> str | None:
    """The union member a part validates as: its kind for a core or shipped kind, ``plugin``
    for an instance of another extension class (kept as is), ``generic`` for the rest."""
    if isinstance(value, dict):
        kind = value.get("kind")
    elif isinstance(value, ExtensionPart) and not isinstance(value, _SHIPPED_CLASSES):
        return "generic" if isinstance(value, GenericPart) else "plugin"
    else:
        kind = getattr(value, "kind", None)
    if isinstance(kind, str) and (kind in CORE_PART_KINDS or kind in _SHIPPED):
        return kind
    return "generic" if isinstance(value, dict) else None


Part = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ReasoningPart, Tag("reasoning")]
    | Annotated[ToolCallPart, Tag("tool_call")]
    | Annotated[ToolResultPart, Tag("tool_result")]
    | Annotated[StructuredPart, Tag("structured")]
    | Annotated[MediaPart, Tag("media")]
    | Annotated[ResourceLinkPart, Tag("resource_link")]
    | Annotated[EmbeddedResourcePart, Tag("embedded_resource")]
    | Annotated[CacheHintPart, Tag("cache_hint")]
    | Annotated[PrefillPart, Tag("prefill")]
    | Annotated[GenericPart, Tag("generic")]
    | Annotated[SerializeAsAny[InstanceOf[ExtensionPart]], Tag("plugin")],
    Discriminator(
        _part_tag,
        custom_error_type="part_kind",
        custom_error_message="a part is an object with a string 'kind'",
    ),
]
"""Any part of a message, tagged by `kind`: a core kind, one vocab ships (resource links,
embedded resources, cache hints, prefill), a plugin's `ExtensionPart` instance, or a
`GenericPart` for a kind this reader does not know."""

_NOT_IN_RESULTS = frozenset({"reasoning", "tool_call", "tool_result", "structured", "prefill"})
"""Kinds a tool result's `parts` refuses: they are the conversation's, not a tool's content."""
ToolResultPart.model_rebuild()


class Message(FrozenValue):
    """One message: a role and its parts, in order.

    Tool calls appear only in assistant messages; tool results only in tool messages, which
    hold nothing else.
    """

    role: Role
    """Who the message is from."""
    parts: tuple[Part, ...] = ()
    """The content, in order."""

    @model_validator(mode="after")
    def _parts_fit_role(self) -> Self:
        for i, part in enumerate(self.parts):
            if isinstance(part, ToolCallPart) and self.role != "assistant":
                raise ValueError(
                    f"parts[{i}]: a tool call belongs in an assistant message, not {self.role}"
                )
            if self.role == "tool" and not isinstance(part, ToolResultPart):
                raise ValueError(
                    f"parts[{i}]: a tool message holds only tool results, not {part.kind}"
                )
            if isinstance(part, ToolResultPart) and self.role != "tool":
                raise ValueError(
                    f"parts[{i}]: a tool result belongs in a tool message, not {self.role}"
                )
        return self

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message with one text part."""
        return cls(role="system", parts=(TextPart(text=text),))

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message with one text part."""
        return cls(role="user", parts=(TextPart(text=text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message with one text part."""
        return cls(role="assistant", parts=(TextPart(text=text),))

    @property
    def text(self) -> str:
        """The text parts, concatenated in order (reasoning excluded)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool call parts, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool result parts, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolResultPart))


class _CallIndex:
    """One line of transcripts: the messages of its newest transcript and their tool call ids.

    ``log`` holds the messages, ``calls`` maps id -> (tool name, position of the calling
    message). Derived from the messages, so it never decides equality. Appending to the newest
    transcript of a line extends both in place and shares them (O(new messages), not
    O(transcript)); an older transcript reads only the entries before its own length.
    ``claims`` gives each position to one extender: of two threads appending to the same newest
    transcript, the one whose ``dict.setdefault`` (atomic) lands first extends, the other copies.
    """

    __slots__ = ("calls", "claims", "log")

    def __init__(self, calls: dict[str, tuple[str, int]], log: list[Message]) -> None:
        self.calls = calls
        self.log = log
        self.claims: dict[int, object] = {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CallIndex)

    def __hash__(self) -> int:
        return 0


def _index_calls(
    index: _CallIndex, messages: tuple[Message, ...], offset: int
) -> dict[str, tuple[str, int]]:
    """Check the results in ``messages`` (from position ``offset``) against earlier calls.

    Returns:
        The calls ``messages`` make, by id; ``index`` is read (entries before ``offset``), not
        changed.
    """
    known = index.calls
    new: dict[str, tuple[str, int]] = {}
    for m_index, message in enumerate(messages, start=offset):
        for p_index, part in enumerate(message.parts):
            if isinstance(part, ToolCallPart):
                new[part.id] = (part.name, m_index)
            elif isinstance(part, ToolResultPart):
                entry = new.get(part.call_id)
                if entry is None:
                    entry = known.get(part.call_id)
                    if entry is not None and entry[1] >= offset:
                        entry = None
                where = f"messages[{m_index}].parts[{p_index}]"
                if entry is None:
                    raise InvalidValueError(
                        f"{where}: tool result for call id {part.call_id!r}, but no earlier tool "
                        "call has that id; append the assistant message with the call first"
                    )
                if entry[0] != part.name:
                    raise InvalidValueError(
                        f"{where}: tool result names tool {part.name!r}, but call "
                        f"{part.call_id!r} was to {entry[0]!r}"
                    )
    return new


class Transcript(FrozenValue):
    """An ordered, immutable conversation. A tool result must answer an earlier tool call."""

    # (Not in the docstring, which is the JSON schema's description.) `append` costs O(new
    # messages) whatever the length: the new transcript shares its line's message log and builds
    # its ``messages`` tuple only when something reads it (a dump, an equality, ``.messages``);
    # docs/adr/0009.

    messages: tuple[Message, ...] = ()
    """The messages, oldest first."""

    _index: _CallIndex = PrivateAttr(default_factory=lambda: _CallIndex({}, []))
    _size: int = PrivateAttr(default=0)

    @model_validator(mode="after")
    def _results_answer_calls(self) -> Self:
        try:
            calls = _index_calls(_CallIndex({}, []), self.messages, 0)
        except InvalidValueError as exc:
            raise ValueError(str(exc)) from None
        self._index = _CallIndex(calls, list(self.messages))
        return self

    def append(self, *messages: Message) -> Transcript:
        """Return a new transcript with `messages` added at the end.

        Only the new messages are checked, and the new transcript shares the message log and
        call index of the one appended to, so appending costs nothing per earlier message.

        Raises:
            InvalidValueError: A new message is not a `Message`, or holds a tool result for no
                earlier call.
        """
        for i, message in enumerate(messages):
            if not isinstance(message, Message):
                raise InvalidValueError(
                    f"append() takes Message values; argument {i} is {type(message).__name__}"
                )
        length = len(self)
        index = self._index
        calls = _index_calls(index, messages, length)
        token = object()
        if (
            len(index.log) == length
            and not any(k in index.calls for k in calls)
            and index.claims.setdefault(length, token) is token
        ):
            # The newest transcript of its line, no call id reused, and this position claimed
            # by us alone: extend the line in place.
            index.calls.update(calls)
            index.log.extend(messages)
        else:
            # dict() copies in one step, safe while another thread extends the line.
            kept = {k: v for k, v in dict(index.calls).items() if v[1] < length}
            kept.update(calls)
            index = _CallIndex(kept, [*self.messages, *messages])
        # The messages are valid already: built without validation, and without its
        # ``messages`` entry (the tuple is built from the log on first read, `_materialise`).
        new = Transcript.model_construct(_fields_set={"messages"})
        del new.__dict__["messages"]
        new._index = index
        new._size = length + len(messages)
        return new

    def messages_from(self, start: int) -> tuple[Message, ...]:
        """The messages from position `start` on, as ``messages[start:]``, without building
        the whole tuple.

        Args:
            start: A position, as in a slice.
        """
        built = self.__dict__.get("messages")
        if built is not None:
            return built[start:]  # type: ignore[no-any-return]  # __dict__ holds Any; "messages" is a tuple of Message
        size = self._size
        begin, end, _ = slice(start, size).indices(size)
        return tuple(self._index.log[begin:end])

    def _materialise(self) -> tuple[Message, ...]:
        built: tuple[Message, ...] | None = self.__dict__.get("messages")
        if built is None:
            built = tuple(self._index.log[: self._size])
            self.__dict__["messages"] = built
        return built

    if not TYPE_CHECKING:
        # Reached only for names not in __dict__: ``messages`` of an appended transcript not
        # read yet, and pydantic's private attributes (its own __getattr__ serves those).
        def __getattr__(self, name: str) -> Any:
            if name == "messages":
                return self._materialise()
            return super().__getattr__(name)

    # No return annotation: pydantic would make it the serialization schema (`Any` gives `{}`).
    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]  # unannotated on purpose (above)
        # pydantic-core reads __dict__ directly: build the tuple before it looks.
        self._materialise()
        return handler(self)

    def __eq__(self, other: object) -> bool:
        """Equal to another transcript with equal messages."""
        if isinstance(other, Transcript):
            return type(other) is type(self) and self._materialise() == other._materialise()
        return NotImplemented if not isinstance(other, BaseModel) else False

    def __hash__(self) -> int:
        """The hash of the messages (as pydantic's frozen-model hash)."""
        return hash(self._materialise())

    def __iter__(self) -> Any:
        """Field name and value pairs, as pydantic gives them."""
        self._materialise()
        return super().__iter__()

    def __repr_args__(self) -> Any:
        self._materialise()
        return super().__repr_args__()

    def __getstate__(self) -> dict[Any, Any]:
        """Pickle the built tuple, not a view of a shared log."""
        self._materialise()
        return super().__getstate__()

    def __len__(self) -> int:
        """Number of messages."""
        built = self.__dict__.get("messages")
        return self._size if built is None else len(built)


def _empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


class ToolSpec(FrozenValue):
    """What a model is told about a tool: a name, a description, a JSON Schema of its arguments."""

    name: str
    """Tool name, unique among the tools of one request; no whitespace."""
    description: str = ""
    """What the tool does, for the model."""
    parameters: dict[str, JsonValue] = Field(default_factory=_empty_object_schema)
    """JSON Schema of the arguments object."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        _non_empty(value, "tool name")
        if any(c.isspace() for c in value):
            raise ValueError(f"tool name {value!r} must not contain whitespace")
        return value

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        check_json(value, ("parameters",))
        if value.get("type", "object") != "object":
            raise ValueError(
                f"parameters must be the JSON Schema of an object, not type {value.get('type')!r}"
            )
        return value
