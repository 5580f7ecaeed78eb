"""Hostile-input campaign, deny by default: modules off the allowlist, a guard that lends nothing.

Two attacks, each counted:

- **Modules off the allowlist.** One throw-away tree holds one shipped module per way of
  reaching a standard-library module that is not pure (an import, a chain, a star import, a
  re-export, a literal dynamic import, an importer's table); the determinism gate runs once over
  it and must name every planted file.
- **A guard that lends nothing.** Under `nondeterminism_guard`, callables handed to an event loop
  and logging, profilers, SQLite, clock files, real waits and the C generator: every one is a
  `NondeterminismError`, none a clock read, a wait, a file or a connection.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import Figures

from twinflow.kernel import NondeterminismError, nondeterminism_guard

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "packages/twinflow-kernel/src/twinflow/kernel"

PLANTED = {
    "chain": "import logging.handlers\n\nh = logging.handlers.SocketHandler\n",
    "from_import": "from logging import config\n\nconfig.dictConfig({})\n",
    "spawning_helper": "import uuid\n\nx = uuid._get_command_stdout\n",
    "pager": "import pydoc\n\npydoc.pipepager('x', 'cat')\n",
    "unused": "import imaplib\n",
    "c_module": "import _pickle\n\nx = _pickle.loads\n",
    "star": "from pickle import *\n",
    "through_allowed": "import traceback\n\nx = traceback.linecache.getline\n",
    "dynamic": "import importlib\n\nm = importlib.import_module('xml.sax')\n",
    "dunder_import": "m = __import__('shelve')\n",
    "reload": "import importlib\n\nf = importlib.reload\n",
    "entry_point": "from importlib.metadata import EntryPoint\n",
    "runpy": "import runpy\n\nrunpy.run_path('x.py')\n",
    "doctest": "import doctest\n\ndoctest.testmod()\n",
    "modules_table": "import sys\n\nm = sys.modules\n",
    "meta_path": "from sys import meta_path\n",
    "webbrowser": "import webbrowser\n\nwebbrowser.open('x')\n",
    "mailbox_by_getattr": "import traceback\n\nx = getattr(traceback, 'linecache')\n",
}


def modules_off_the_allowlist(figures: Figures, work: Path) -> None:
    """Every planted module reaching a module off the allowlist is named by the gate."""
    root = work / "allowlist-tree"
    (root / KERNEL).mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for table in ("banned.toml", "stdlib.toml"):
        shutil.copy(ROOT / KERNEL / table, root / KERNEL / table)
    for distribution, package in (("twinflow-kernel", "kernel"), ("twinflow-agent", "agent")):
        member = root / "packages" / distribution
        (member / "src" / "twinflow" / package).mkdir(parents=True, exist_ok=True)
        (member / "pyproject.toml").write_text(f'[project]\nname = "{distribution}"\n')
    agent = root / "packages/twinflow-agent/src/twinflow/agent"
    for name, source in PLANTED.items():
        (agent / f"_{name}.py").write_text(source)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/checks/determinism"), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    named = {name for name in PLANTED if f"agent/_{name}.py:" in done.stderr}
    for name in sorted(set(PLANTED) - named):
        figures.fail(f"the determinism gate let {name} through: {PLANTED[name]!r}")
    figures.values["modules off the allowlist named by the gate"] = (
        f"{len(named)} of {len(PLANTED)}"
    )


def _on_a_loop(callback: Callable[..., object], *args: object) -> None:
    loop = importlib.import_module("asyncio").new_event_loop()
    errors: list[BaseException] = []
    loop.set_exception_handler(lambda _, context: errors.append(context["exception"]))
    try:
        loop.call_soon(callback, *args)
        loop.call_soon(loop.stop)
        loop.run_forever()
    finally:
        loop.close()
    if errors:
        raise errors[0]


def _subclass(module: str, name: str) -> Any:
    return next(c for c in object.__subclasses__() if (c.__module__, c.__name__) == (module, name))


ATTEMPTS: dict[str, Callable[[], object]] = {
    "loop.call_soon(time.time)": lambda: _on_a_loop(time.time),
    "loop.call_soon(time.monotonic)": lambda: _on_a_loop(time.monotonic),
    "loop.call_soon(os.urandom, 4)": lambda: _on_a_loop(os.urandom, 4),
    "loop.call_soon(os.system, 'true')": lambda: _on_a_loop(os.system, "true"),
    "logging.FileHandler('/dev/urandom')": lambda: importlib.import_module("logging").FileHandler(
        "/dev/" + "urandom"
    ),
    "a handler opening /proc/uptime on emit": lambda: (
        importlib.import_module("logging")
        .FileHandler("/proc/uptime", delay=True)
        .emit(importlib.import_module("logging").makeLogRecord({"msg": "x"}))
    ),
    "cProfile enabled": lambda: importlib.import_module("cProfile").Profile().enable(),
    "sqlite3 in memory": lambda: importlib.import_module("sqlite3").connect(":memory:"),
    "open('/proc/stat')": lambda: open("/proc/stat").close(),
    "queue get with a timeout": lambda: importlib.import_module("queue").Queue().get(timeout=5),
    "Event.wait(5)": lambda: importlib.import_module("threading").Event().wait(5),
    "a held lock with a timeout": lambda: (
        importlib.import_module("threading").Lock().acquire(True, 5)
    ),
    "_random.Random via __subclasses__": lambda: _subclass("_random", "Random")().random(),
}


def guard_lends_nothing(figures: Figures) -> None:
    """Every attempt under the guard is refused before it reads, waits, opens or connects."""
    refused = 0
    for name, attempt in ATTEMPTS.items():
        with nondeterminism_guard() as record:
            try:
                attempt()
            except NondeterminismError:
                pass
            except Exception as exc:
                figures.fail(f"under the guard, {name} raised {type(exc).__name__}: {exc}")
        if record.violations:
            refused += 1
        else:
            figures.fail(f"under the guard, {name} was not refused")
    figures.values["guard attempts refused (callbacks, profilers, SQLite, clock files, waits)"] = (
        f"{refused} of {len(ATTEMPTS)}"
    )
