"""The price table twinflow ships (``prices.json``, dated, its source named) and the cost of a
reply's usage by it.

The table is data: ``scripts/prices`` writes it from the genai-prices package (a development
dependency only). A run records the price it used beside each reply's cost, so a later table
never changes an old run's cost (docs/adr/0198). A model the table does not hold has an
unknown price: `Prices.find` returns None, and the reply's cost is absent.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Price", "Prices", "priced_name", "prices"]

_KIND_PROVIDER = {"openai-compatible": "openai", "anthropic": "anthropic", "gemini": "gemini"}
"""A model spec's ``kind``: the provider whose prices it is charged at (Ollama's are local)."""


_FOUND_SIZE = 256
"""How many answers `Prices.find` keeps (a run names a handful of models)."""

_TABLE = Path(__file__).with_name("prices.json")
"""The table, beside this module in the package."""


@dataclass(frozen=True, slots=True)
class Price:
    """One model's price: US dollars per million input and output tokens, from `table`."""

    model: str
    """The table's id of the model priced."""
    input_per_mtok: float
    output_per_mtok: float
    table: str
    """The table's source and date."""

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """US dollars for the tokens, rounded to 10 places (the same bytes on every machine)."""
        total = input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok
        return round(total / 1_000_000, 10)


def _matches(rule: dict[str, Any], name: str) -> bool:
    ((key, value),) = rule.items()
    if key == "or":
        return any(_matches(r, name) for r in value)
    if key == "and":
        return all(_matches(r, name) for r in value)
    if key == "equals":
        return bool(name == value)
    if key == "starts_with":
        return name.startswith(value)
    if key == "ends_with":
        return name.endswith(value)
    if key == "contains":
        return value in name
    return re.fullmatch(value, name) is not None


class Prices:
    """A price table: its rows by provider, its source and date."""

    def __init__(self, table: dict[str, Any]) -> None:
        self.source = str(table["source"])
        self.date = str(table["date"])
        self.label = f"{self.source}, {self.date}"
        """How a recorded cost names the table: its source and date."""
        self._rows: dict[str, list[dict[str, Any]]] = table["providers"]
        # What `find` answered, by its arguments: a run prices every reply of the same model,
        # and the table never changes. Bounded; a plain dict's get and set are thread-safe.
        self._found: dict[tuple[str, str], tuple[Price | None]] = {}

    def find(self, kind: str, name: str) -> Price | None:
        """The price of model ``name`` served on a ``kind`` wire (a model spec's ``kind``), or
        None where the table has none (an Ollama or unknown model)."""
        key = (kind, name)
        known = self._found.get(key)
        if known is not None:
            return known[0]
        found = self._scan(kind, name)
        if len(self._found) >= _FOUND_SIZE:
            self._found.clear()
        self._found[key] = (found,)
        return found

    def _scan(self, kind: str, name: str) -> Price | None:
        """`find` without its memory: the first row whose rule matches the bare name."""
        provider = _KIND_PROVIDER.get(kind)
        bare = name.rsplit("/", 1)[-1]  # ``models/gemini-2.5-flash``, ``openai/gpt-4o``
        for row in self._rows.get(provider or "", ()):
            if _matches(row["match"], bare):
                return Price(row["id"], float(row["input"]), float(row["output"]), self.label)
        return None


@functools.cache
def prices() -> Prices:
    """The table shipped with twinflow (read once)."""
    text = _TABLE.read_text("utf-8")
    return Prices(json.loads(text))


def priced_name(label: str) -> tuple[str, str]:
    """A model label ``KIND:NAME@URL`` (how a run names a model) as its kind and name."""
    kind, _, rest = label.partition(":")
    name = rest.rsplit("@", 1)[0] if "@" in rest else rest
    return kind, name
