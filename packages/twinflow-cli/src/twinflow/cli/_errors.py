"""The root of `twinflow.cli`'s errors; the whole tree is drawn in the package docstring."""

from __future__ import annotations

from twinflow.trace import TwinflowError

__all__ = ["CliError"]


class CliError(TwinflowError):
    """Root of the errors raised by `twinflow.cli` (the command and its Python API)."""
