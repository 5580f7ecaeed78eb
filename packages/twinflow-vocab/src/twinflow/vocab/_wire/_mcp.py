"""MCP content blocks (a tool result's ``content``) to parts.

The Model Context Protocol's content blocks map onto parts as: ``text`` a text part, ``image``
and ``audio`` a media part with a base64 ``data:`` URI, ``resource_link`` a `ResourceLinkPart`,
an embedded ``resource`` an `EmbeddedResourcePart` (text or base64 blob). Annotations and
``_meta`` are not kept: they steer a client's display, not what the model is told.
"""

from __future__ import annotations

import binascii
from typing import Any

from twinflow.vocab._values import (
    EmbeddedResourcePart,
    MediaPart,
    Part,
    ResourceLinkPart,
    TextPart,
)
from twinflow.vocab._wire._reader import Path, build, fail, field, obj, optional, string

__all__ = ["from_mcp_content"]


def _base64(o: dict[str, Any], key: str, path: Path) -> str:
    """A field that must be base64 (MCP's ``data`` and ``blob``), checked strictly."""
    value = field(o, key, path, string)
    try:
        binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        raise fail(f"{key} is not valid base64", (*path, key)) from None
    return value


def from_mcp_content(block: object, path: Path = ()) -> Part:
    """Translate one MCP content block to a part.

    Args:
        block: The block, as decoded JSON (an object with a ``type``).
        path: Where the block is in its payload, for errors (``("result", "content", 0)``).

    Returns:
        A `TextPart`, a `MediaPart`, a `ResourceLinkPart` or an `EmbeddedResourcePart`.

    Raises:
        WireFormatError: Not a content block of a type MCP defines, or a field of the wrong
            type; `.path` points at it.
    """
    o = obj(block, path)
    kind = field(o, "type", path, string)
    if kind == "text":
        return TextPart(text=field(o, "text", path, string))
    if kind in ("image", "audio"):
        media_type = field(o, "mimeType", path, string)
        data = _base64(o, "data", path)
        if not media_type.startswith(f"{kind}/"):
            raise fail(f"an {kind} block's mimeType must be {kind}/...", (*path, "mimeType"))
        uri = f"data:{media_type};base64,{data}"
        return build(path, MediaPart, media_type=media_type, uri=uri)
    if kind == "resource_link":
        return build(
            path,
            ResourceLinkPart,
            uri=field(o, "uri", path, string),
            name=field(o, "name", path, string),
            title=optional(o, "title", path, string),
            description=optional(o, "description", path, string),
            media_type=optional(o, "mimeType", path, string),
        )
    if kind == "resource":
        rpath = (*path, "resource")
        resource = field(o, "resource", path, obj)
        return build(
            rpath,
            EmbeddedResourcePart,
            uri=field(resource, "uri", rpath, string),
            media_type=optional(resource, "mimeType", rpath, string),
            text=optional(resource, "text", rpath, string),
            blob=None if resource.get("blob") is None else _base64(resource, "blob", rpath),
        )
    raise fail(
        f"unknown content block type {kind!r} (MCP defines text, image, audio, "
        "resource_link and resource)",
        (*path, "type"),
    )
