"""Benchmark: nested validation of `FrozenValue` models against plain frozen pydantic models.

Scenario: a four-level model (a root holding three branches, each holding three leaves' parents,
each holding three leaves) validated from one nested dict. Measured in the same run:

- the peer: the same classes on a plain ``BaseModel`` with ``frozen=True, extra="forbid"``;
- `twinflow.vocab.FrozenValue` (only the outermost value translates a `ValidationError` into
  `InvalidValueError`; nested values are validated inside pydantic-core);
- the baseline: a base whose ``__init__`` translates errors but is not marked as pydantic's
  base ``__init__``, as `FrozenValue` was, so pydantic calls it once per nested value.

Target: `FrozenValue` within 1.3x of the plain model.

Usage: .venv/bin/python benchmarks/frozen_validation.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import timeit
from typing import Any

from _bench import add_smoke  # this folder: sys.path[0]
from pydantic import BaseModel, ConfigDict, ValidationError

from twinflow.vocab import InvalidValueError
from twinflow.vocab._values import FrozenValue


class Plain(BaseModel):
    """The peer: a plain frozen pydantic model."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class CustomInit(BaseModel):
    """The baseline: FrozenValue as it was, an error-translating ``__init__`` pydantic calls per level."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        """Validate, translating the error."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidValueError(f"invalid {type(self).__name__}: {exc}") from None


def family(base: type[BaseModel]) -> type[BaseModel]:
    """The four-level model on ``base``; returns the root class."""

    class Leaf(base):  # type: ignore[valid-type,misc]
        name: str
        value: int

    class Twig(base):  # type: ignore[valid-type,misc]
        label: str
        leaves: tuple[Leaf, ...]

    class Branch(base):  # type: ignore[valid-type,misc]
        label: str
        twigs: tuple[Twig, ...]

    class Root(base):  # type: ignore[valid-type,misc]
        label: str
        branches: tuple[Branch, ...]

    return Root


DATA: dict[str, Any] = {
    "label": "root",
    "branches": [
        {
            "label": f"b{b}",
            "twigs": [
                {"label": f"t{t}", "leaves": [{"name": f"l{n}", "value": n} for n in range(3)]}
                for t in range(3)
            ],
        }
        for b in range(3)
    ],
}


def us_per_validation(root: type[BaseModel], number: int = 2000) -> float:
    """Median over 7 rounds of microseconds per ``root(**DATA)``."""
    root(**DATA)  # builds the deferred schema
    rounds = timeit.repeat(lambda: root(**DATA), number=number, repeat=7)
    return statistics.median(rounds) / number * 1e6


def main() -> None:
    """Print µs per validation and the ratios to the plain model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_smoke(parser)
    number = 5 if parser.parse_args().smoke else 2000
    plain = us_per_validation(family(Plain), number)
    frozen = us_per_validation(family(FrozenValue), number)
    baseline = us_per_validation(family(CustomInit), number)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("four-level model, 1 + 3 + 9 + 27 values per validation")
    print(f"plain frozen pydantic (peer):        {plain:7.2f} us")
    print(
        f"FrozenValue (now):                   {frozen:7.2f} us  {frozen / plain:.2f}x peer (target <= 1.3x)"
    )
    print(f"custom __init__ per level (baseline): {baseline:7.2f} us  {baseline / plain:.2f}x peer")


if __name__ == "__main__":
    main()
