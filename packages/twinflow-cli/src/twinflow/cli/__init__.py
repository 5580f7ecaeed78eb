"""twinflow.cli: L4: the `twinflow` command, the composition root that wires real adapters.

From Python, the same wiring in one call: `connect` gives the agent a `RunSpec` describes
(the same keys as ``spec.yaml``) on the real clock, ids, transport and model, as a context
manager (the trace it writes is `trace_path_of` the agent); `replay_run` rebuilds it from the
same spec against a trace; `embedded_model` starts the bundled SmolLM2 server.

Names resolve on first access (PEP 562), so the ``twinflow`` command, which imports this
package first, does not load the agent or pydantic to print its help.

Errors (the command prints each as one line and exits 1 or 2)::

    TwinflowError                                 (twinflow.trace)
    └── CliError
        ├── SpecError (also a UserError)          a run spec that cannot be used (file:line: key: why),
        │                                         or a `RunSpec` section built with a bad field
        ├── UnreadableTrace (also a UserError)    the file is not a twinflow trace at all
        └── CheckFailed                           a check asked for did not pass (``verify``, ``replay``)

Every other package's errors pass through unchanged: `replay_run` raises the agent's
`ReplayDivergenceError` and the kernel's `NondeterminismError`, a failed run its `RunError`.
"""

import typing as _typing

from twinflow._base._lazy import lazy_exports as _lazy_exports
from twinflow.cli._errors import CliError as CliError

if _typing.TYPE_CHECKING:
    from twinflow.cli._api import connect as connect
    from twinflow.cli._api import embedded_model as embedded_model
    from twinflow.cli._api import replay_run as replay_run
    from twinflow.cli._api import trace_path_of as trace_path_of
    from twinflow.cli._main import main as main
    from twinflow.cli._spec import McpServerSpec as McpServerSpec
    from twinflow.cli._spec import ModelSpec as ModelSpec
    from twinflow.cli._spec import PolicySpec as PolicySpec
    from twinflow.cli._spec import RunSpec as RunSpec
    from twinflow.cli._spec import SpecError as SpecError
    from twinflow.cli._spec import load_spec as load_spec


__getattr__, __dir__, __all__ = _lazy_exports(
    globals(),
    {
        "_api": ("connect", "embedded_model", "replay_run", "trace_path_of"),
        "_main": ("main",),
        "_spec": (
            "load_spec",
            "McpServerSpec",
            "ModelSpec",
            "PolicySpec",
            "RunSpec",
            "SpecError",
        ),
    },
)
