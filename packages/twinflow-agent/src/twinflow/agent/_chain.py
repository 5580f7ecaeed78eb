"""`MessageChain`: the running digest over transcript messages that model requests record."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from twinflow.vocab import Message
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["MessageChain"]


class MessageChain:
    """A running digest over transcript messages, O(new messages) per update.

    ``d_0 = sha256(b"")`` and ``d_i = sha256(d_{i-1} || sha256(canonical_bytes(m_i)))``, in
    hex. Used as the prefix digest of model requests so no step re-hashes the transcript.
    """

    __slots__ = ("_length", "_state")

    def __init__(self) -> None:
        """Start at the empty transcript."""
        self._state = hashlib.sha256(b"").digest()
        self._length = 0

    @property
    def length(self) -> int:
        """Messages folded in so far."""
        return self._length

    @property
    def hexdigest(self) -> str:
        """The digest of the messages so far."""
        return self._state.hex()

    def update(self, messages: tuple[Message, ...]) -> None:
        """Fold in ``messages``.

        Args:
            messages: Messages appended to the transcript, in order.
        """
        self.update_encoded([canonical_bytes(message) for message in messages])

    def update_encoded(self, encoded: Sequence[bytes]) -> None:
        """Fold in messages given as their ``canonical_bytes`` (a caller that has them).

        Args:
            encoded: Each appended message's canonical bytes, in order.
        """
        for data in encoded:
            inner = hashlib.sha256(data).digest()
            self._state = hashlib.sha256(self._state + inner).digest()
        self._length += len(encoded)
