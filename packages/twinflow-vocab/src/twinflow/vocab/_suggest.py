"""The one "did you mean" helper lives in `twinflow._base._suggest`; vocab exports it."""

from __future__ import annotations

from twinflow._base._suggest import did_you_mean

__all__ = ["did_you_mean"]
