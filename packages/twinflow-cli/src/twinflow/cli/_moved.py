"""The Python names `twinflow.cli` exported before the library moved to `twinflow.agent`.

They resolve for one release through the package's ``__getattr__`` (not listed by ``dir``),
each with a `DeprecationWarning` that names the import to write instead.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twinflow.trace import FileTraceSink, UserError

__all__ = ["MOVED", "moved"]

MOVED: dict[str, tuple[str, str]] = {
    "connect": ("twinflow.agent", "connect"),
    "replay_run": ("twinflow.agent", "replay_run"),
    "RunSpec": ("twinflow.agent", "RunSpec"),
    "ModelSpec": ("twinflow.agent", "ModelSpec"),
    "PolicySpec": ("twinflow.agent", "PolicySpec"),
    "McpServerSpec": ("twinflow.agent", "McpServerSpec"),
    "load_spec": ("twinflow.agent", "load_spec"),
    "SpecError": ("twinflow.agent", "SpecError"),
    "embedded_model": ("twinflow.agent", 'Agent(model="embedded")'),
    "trace_path_of": ("twinflow.agent", "RunResult.trace_path"),
}
"""Each old name: the module it lives in now and what to write there."""


def _trace_path_of(agent: Any) -> Path:
    """The trace file ``connect`` claimed for ``agent``.

    Raises:
        UserError: the agent does not write to a file.
    """
    sink = agent.writer.sink
    if not isinstance(sink, FileTraceSink):
        raise UserError("this agent's trace is not written to a file (it was not made by connect)")
    return sink.path


@contextlib.contextmanager
def _embedded_model(log_dir: str | Path | None = None) -> Iterator[str]:
    """Start the bundled SmolLM2 server; yields its base URL for the block."""
    from twinflow.agent import ModelSpec

    with contextlib.ExitStack() as stack:
        if log_dir is None:
            import tempfile

            log_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="twinflow-"))
        served = ModelSpec(url="embedded").serving(Path(log_dir), lambda message: None)
        yield stack.enter_context(served)


_KEPT_HERE = {"trace_path_of": _trace_path_of, "embedded_model": _embedded_model}
"""The old names with no object of the same name in their new home."""


def moved(name: str) -> object:
    """The object ``twinflow.cli.<name>`` used to be, with a `DeprecationWarning`.

    Raises:
        AttributeError: ``name`` is not one this package exported.
    """
    if name not in MOVED:
        raise AttributeError(f"module 'twinflow.cli' has no attribute {name!r}")
    module, new = MOVED[name]
    instead = (
        f"use {module}.{new}"
        if name in _KEPT_HERE
        else f"import it from {module} (from {module} import {new})"
    )
    warnings.warn(
        f"twinflow.cli.{name} is deprecated and goes in the next release: {instead}",
        DeprecationWarning,
        stacklevel=3,
    )
    if name in _KEPT_HERE:
        return _KEPT_HERE[name]
    return _agent_names()[name]


def _agent_names() -> dict[str, object]:
    """The moved names' objects in `twinflow.agent` (imported only when an old name is used)."""
    import twinflow.agent as agent

    return {
        "connect": agent.connect,
        "replay_run": agent.replay_run,
        "RunSpec": agent.RunSpec,
        "ModelSpec": agent.ModelSpec,
        "PolicySpec": agent.PolicySpec,
        "McpServerSpec": agent.McpServerSpec,
        "load_spec": agent.load_spec,
        "SpecError": agent.SpecError,
    }
