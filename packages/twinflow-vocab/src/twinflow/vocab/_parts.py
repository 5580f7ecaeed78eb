"""What a wire adapter sends for parts whose kind it does not carry: one function for all.

Every adapter (the provider wire formats, datapizza's, the local model clients) passes a
message's parts through `carried_parts` with the set of extension kinds it carries itself; a
part of any other extension kind becomes the text its kind declares (`ExtensionPart.fallback`),
is dropped (a fallback of ``""``), or is refused with `PartNotCarriedError` naming the adapter
and the kind. Core parts pass unchanged: each adapter handles those as before.

A tool result whose content has more than text (`ToolResultPart.parts`) goes through the same
rule, inside the result: its extension parts by the rule above, and its media by
`MediaPart.fallback` unless the adapter names ``media`` among the kinds it carries there. What
is left is text only: the result is sent as that text (its blocks joined by newlines), so an
adapter that reads ``content`` sends the fallback without knowing parts exist.
"""

from __future__ import annotations

from collections.abc import Iterable

from twinflow.vocab._errors import PartNotCarriedError
from twinflow.vocab._values import ExtensionPart, MediaPart, Part, TextPart, ToolResultPart

__all__ = ["carried_parts"]


def carried_parts(
    parts: Iterable[Part], adapter: str, carries: frozenset[str] = frozenset()
) -> list[Part]:
    """The parts an adapter sends: its own kinds kept, other extension kinds by their fallback.

    Args:
        parts: A message's parts, in order.
        adapter: The adapter's name, for the error (``openai``, ``anthropic``, ...).
        carries: The extension kinds the adapter translates itself.

    Returns:
        The parts in order: core parts and carried kinds as given, the rest as a `TextPart`
        of their fallback text, or left out when that text is empty.

    Raises:
        PartNotCarriedError: A part of a kind the adapter does not carry declares no fallback.
    """
    out: list[Part] = []
    for part in parts:
        if isinstance(part, ToolResultPart) and part.parts:
            out.append(_carried_result(part, adapter, carries))
            continue
        if not isinstance(part, ExtensionPart) or part.kind in carries:
            out.append(part)
            continue
        text = part.fallback()
        if text is None:
            raise PartNotCarriedError(adapter, part.kind)
        if text:
            out.append(TextPart(text=text))
    return out


def _carried_result(result: ToolResultPart, adapter: str, carries: frozenset[str]) -> Part:
    inner: list[Part] = []
    for part in carried_parts(result.parts, adapter, carries):
        if isinstance(part, MediaPart) and "media" not in carries:
            part = TextPart(text=part.fallback())
        inner.append(part)
    if all(isinstance(part, TextPart) for part in inner):
        text = "\n".join(part.text for part in inner if isinstance(part, TextPart))
        return result.model_copy(update={"content": text, "parts": ()})
    return result.model_copy(update={"parts": tuple(inner)})
