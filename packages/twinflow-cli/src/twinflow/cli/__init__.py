"""twinflow.cli: L4: the `twinflow` command, the composition root that wires real adapters.

From Python, the same wiring in one call: `connect` gives the agent a `RunSpec` describes
(the same keys as ``spec.yaml``) on the real clock, ids, transport and model, as a context
manager; `replay_run` rebuilds it from the same spec against a trace; `embedded_model` starts
the bundled SmolLM2 server.

Names resolve on first access (PEP 562), so the ``twinflow`` command, which imports this
package first, does not load the agent or pydantic to print its help.
"""

import typing as _typing
from importlib import import_module as _import_module

if _typing.TYPE_CHECKING:
    from twinflow.cli._api import connect, embedded_model, replay_run
    from twinflow.cli._main import main
    from twinflow.cli._spec import ModelSpec, PolicySpec, RunSpec, SpecError, load_spec

__all__ = [
    "ModelSpec",
    "PolicySpec",
    "RunSpec",
    "SpecError",
    "connect",
    "embedded_model",
    "load_spec",
    "main",
    "replay_run",
]

_LAZY = {
    **dict.fromkeys(("connect", "embedded_model", "replay_run"), "_api"),
    "main": "_main",
    **dict.fromkeys(("ModelSpec", "PolicySpec", "RunSpec", "SpecError", "load_spec"), "_spec"),
}


def __getattr__(name: str) -> object:
    """Import the private module that defines `name` on first access, then cache the name."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's attributes, the not yet resolved public names included."""
    return sorted({*globals(), *__all__})
