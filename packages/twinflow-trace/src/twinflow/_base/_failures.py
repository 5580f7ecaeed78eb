"""The failure classes a fallback list of models acts on: the models package classifies a
request's error into one, a run spec lists those that move on to the next model."""

from __future__ import annotations

from typing import Literal

FailureClass = Literal[
    "rate_limited", "overloaded", "server_error", "connect", "timeout", "malformed", "refused"
]
"""What went wrong with a model's request: a 429, a 503 or 529, another 5xx, no connection, no
answer in time, an answer not in the wire format, or an answer the provider withheld (a safety
block)."""

FAILURE_CLASSES: tuple[FailureClass, ...] = (
    "rate_limited",
    "overloaded",
    "server_error",
    "connect",
    "timeout",
    "malformed",
    "refused",
)
"""Every failure class, in the order the docs list them."""

DEFAULT_FALLBACK_ON: tuple[FailureClass, ...] = (
    "rate_limited",
    "overloaded",
    "server_error",
    "connect",
    "timeout",
)
"""The classes a fallback list acts on unless told otherwise: the provider is busy or away.
A malformed or refused answer is the model's own, and another model may not be wanted for it."""
