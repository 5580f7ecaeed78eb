"""A part-kind plugin, as a package outside twinflow would write one (never installed).

Tests copy this directory beside a run spec, whose ``part_kinds`` names the classes: twinflow
imports them from the spec's directory, as it imports a spec's tools.
"""

from __future__ import annotations

from typing import Literal

from twinflow.vocab import ExtensionPart

__all__ = ["CitationPart", "StampPart"]


class CitationPart(ExtensionPart):
    """Where a claim in the answer comes from."""

    kind: Literal["acme.citation"] = "acme.citation"
    """Union tag."""
    source: str
    """The document cited."""
    quote: str
    """The words quoted from it."""
    page: int | None = None
    """The page, if known."""

    def fallback(self) -> str:
        """A wire without citations gets the quote and its source as text."""
        return f'"{self.quote}" ({self.source})'


class StampPart(ExtensionPart):
    """An opaque approval stamp: no text stands for it, so a wire that cannot carry it refuses."""

    kind: Literal["acme.stamp"] = "acme.stamp"
    """Union tag."""
    by: str
    """Who stamped."""
    levels: list[int]
    """Approval levels, as the stamping system numbers them."""
