"""twinflow.cli: the ``twinflow`` command (`main`); the library is `twinflow.agent`.

Only `main` is imported here, and its module imports each command's module when that
command is the one run, so ``twinflow --help`` loads neither the agent nor pydantic.

Errors (the command prints each as one line and exits 1 or 2)::

    TwinflowError                  (twinflow.trace)
    └── CliError                   the command refused its input (``reason``: ``unreadable_trace``)
        └── CheckFailed            a check asked for did not pass (``verify``, ``replay``): exit 1

Every other package's errors pass through unchanged and are printed the same way.

The Python names this package used to export (`connect`, `replay_run`, `RunSpec`, ...) are
`twinflow.agent`'s now; importing them from here still works for one release, with a
`DeprecationWarning` naming the new import (`_moved`).
"""

from twinflow.cli._main import main as main


def __getattr__(name: str) -> object:
    """A name this package used to export, from its new home, with a `DeprecationWarning`."""
    from twinflow.cli._moved import moved

    return moved(name)
