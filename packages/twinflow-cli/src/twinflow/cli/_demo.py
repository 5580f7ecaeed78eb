"""The demo's task: a currency conversion that needs one tool call and a structured answer.

The tool is deterministic (a fixed rate table), so a replay in ``live`` mode, which runs the
tool again, reproduces the recorded run exactly.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["PROMPT", "RATES", "SYSTEM", "Conversion", "convert_currency", "judge"]

Currency = Literal["EUR", "USD", "GBP", "JPY", "CHF"]

# Fixed reference rates (units of target per unit of source), so the demo is reproducible.
RATES: dict[tuple[str, str], float] = {
    ("EUR", "USD"): 1.08,
    ("USD", "EUR"): 0.926,
    ("GBP", "USD"): 1.27,
    ("USD", "GBP"): 0.787,
    ("EUR", "GBP"): 0.85,
    ("GBP", "EUR"): 1.176,
    ("USD", "JPY"): 151.2,
    ("JPY", "USD"): 0.00661,
    ("EUR", "CHF"): 0.95,
    ("CHF", "EUR"): 1.053,
}


def convert_currency(amount: float, source: Currency, target: Currency) -> float:
    """Convert an amount of money from the source currency to the target currency."""
    if source == target:
        return amount
    rate = RATES.get((source, target))
    if rate is None:
        raise ValueError(f"no rate from {source} to {target}; known pairs: {sorted(RATES)}")
    return round(amount * rate, 2)


class Conversion(BaseModel):
    """The demo's final answer."""

    amount: float = Field(ge=0)
    """The converted amount."""
    currency: Currency
    """The currency of the converted amount."""


AMOUNT: int = 120
SOURCE: Currency = "EUR"
TARGET: Currency = "USD"
"""The conversion the demo asks for: the prompt names it and `judge` checks the answer against it."""

PROMPT = (
    f"Convert {AMOUNT} {SOURCE} to {TARGET}. Call the convert_currency tool with amount {AMOUNT}, "
    f"source {SOURCE} and target {TARGET}, then give the converted amount and its currency as "
    "the final answer."
)

SYSTEM = "You are a careful assistant. Use the tools you are given; answer with what they return."


def judge(output: object) -> tuple[bool, str]:
    """Whether the demo's answer is the conversion it asked for, and a line saying so.

    The rate table is the demo's own, so the right answer is known: a small model that converts
    the wrong way round, or copies the input amount, is told so rather than shown as a success.
    """
    rate = RATES[(SOURCE, TARGET)]
    expected = convert_currency(AMOUNT, SOURCE, TARGET)
    want = f"{expected:.2f} {TARGET} ({AMOUNT} {SOURCE} at {rate} {TARGET}/{SOURCE})"
    if not isinstance(output, dict):
        return False, f"wrong: no answer; expected {want}"
    amount, currency = output.get("amount"), output.get("currency")
    right = (
        currency == TARGET
        and isinstance(amount, int | float)
        and not isinstance(amount, bool)
        and abs(amount - expected) < 0.005
    )
    return (True, f"right: {want}") if right else (False, f"wrong: expected {want}")
