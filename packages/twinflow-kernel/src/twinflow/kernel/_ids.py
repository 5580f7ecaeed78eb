"""Id adapters: the real one and the deterministic ones.

Real and seeded ids share one shape, `run_<32 hex>` and `call_<24 hex>`, so code that parses or
displays them cannot tell the adapters apart; counting ids are short and readable for tests.
"""

from __future__ import annotations

import os
import random
import uuid

from twinflow.vocab import CallId, RunId


class SystemIds:
    """Random ids from `uuid.uuid4()`."""

    def run_id(self) -> RunId:
        """Return a new random run id."""
        return RunId(f"run_{uuid.uuid4().hex}")

    def call_id(self) -> CallId:
        """Return a new random call id."""
        return CallId(f"call_{uuid.uuid4().hex[:24]}")

    def jitter(self) -> float:
        """Return a fraction in [0, 1) from the operating system's randomness (a retry's spread)."""
        return random.SystemRandom().random()

    def secret(self, size: int = 32) -> bytes:
        """Return ``size`` bytes from the operating system's CSPRNG (a new signing key's seed)."""
        return os.urandom(size)


class CountingIds:
    """Ids numbered from 1: `<prefix>run-1`, `<prefix>run-2`, ... and `<prefix>call-1`, ..."""

    def __init__(self, prefix: str = "") -> None:
        """Create the id source.

        Args:
            prefix: Text put before every id.
        """
        self._prefix = prefix
        self._runs = 0
        self._calls = 0

    def run_id(self) -> RunId:
        """Return the next run id."""
        self._runs += 1
        return RunId(f"{self._prefix}run-{self._runs}")

    def call_id(self) -> CallId:
        """Return the next call id."""
        self._calls += 1
        return CallId(f"{self._prefix}call-{self._calls}")

    def jitter(self) -> float:
        """Return 0.5 every time: the middle of a retry's spread."""
        return 0.5


class SeededIds:
    """Random-looking ids that are the same sequence for the same seed, in every process."""

    def __init__(self, seed: int) -> None:
        """Create the id source.

        Args:
            seed: Seed of the private generator.
        """
        self._random = random.Random(seed)
        # Its own stream: a retry's spread never moves the ids that follow it.
        self._jitter = random.Random(f"jitter:{seed}")

    def run_id(self) -> RunId:
        """Return the next run id."""
        return RunId(f"run_{self._random.getrandbits(128):032x}")

    def call_id(self) -> CallId:
        """Return the next call id."""
        return CallId(f"call_{self._random.getrandbits(96):024x}")

    def jitter(self) -> float:
        """Return the next fraction in [0, 1) of the seed's own jitter sequence."""
        return self._jitter.random()
