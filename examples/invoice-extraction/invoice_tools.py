"""The invoice example's tool and output model (importable next to the spec by dotted path)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RATES_TO_EUR = {"EUR": 1.0, "USD": 0.9, "GBP": 1.2, "CHF": 1.05, "JPY": 0.006}
"""Fixed conversion rates, so the expected answers are exact."""


def convert_to_eur(amount: float, currency: Literal["EUR", "USD", "GBP", "CHF", "JPY"]) -> float:
    """Convert an amount in the given currency to euros, rounded to cents."""
    return round(amount * RATES_TO_EUR[currency], 2)


class Invoice(BaseModel):
    """What is extracted from an invoice."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vendor: str = Field(min_length=1)
    """Who issued the invoice."""
    currency: Literal["EUR", "USD", "GBP", "CHF", "JPY"]
    """The invoice's currency, ISO 4217."""
    total: float = Field(ge=0)
    """The amount due, in the invoice's currency."""
    total_eur: float = Field(ge=0)
    """The amount due converted to euros (with the convert_to_eur tool)."""
