"""Settings every test run shares, wherever pytest is started from the repository root.

Hypothesis: the suite must pass on a busy two-core machine (a CI runner beside other jobs), so
no property test may fail because an example took long to generate or run. The ``twinflow``
profile turns off the two checks that measure wall-clock time (the per-example deadline and the
too-slow health check); every other health check stays on. Set ``HYPOTHESIS_PROFILE=thorough``
for a longer local run with ten times the examples.

Markers (registered in the root pyproject): ``real_model`` on tests that start the real SmolLM2
model, ``ray`` on tests that start or join a local Ray. A test that takes the ``llama_server``
or ``ray_executor`` fixture is marked here from the fixture, so the mark cannot be forgotten;
the CLI tests that start the embedded model in a subprocess carry ``real_model`` themselves.
CI runs every test; a contributor selects with ``-m "not real_model and not ray"``.

The one Ray fixture of the workspace, ``ray_executor``, lives here too: its workers import the
modules of every member's tests directory (``ray_tasks``, ``eval_testkit``).
"""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("twinflow", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", parent=settings.get_profile("twinflow"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "twinflow"))

_ROOT = Path(__file__).resolve().parent
_MARKED_BY_FIXTURE = {"llama_server": "real_model", "ray_executor": "ray"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that take the real model's or Ray's fixture."""
    for item in items:
        for fixture, marker in _MARKED_BY_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)


@pytest.fixture(scope="session", autouse=True)
def _machine_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """This machine's state directory (the decisions `approve` recorded here), one per session:
    the suite's commands never write under the user's home."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TWINFLOW_STATE_DIR", str(tmp_path_factory.mktemp("machine-state")))
        yield


@pytest.fixture(scope="session")
def ray_executor() -> Iterator[Any]:
    """A RayExecutor on a local Ray of two CPUs, started once per session (about 4 s).

    Started here, so a CLI ``--ray`` run joins it; its workers import every member's tests
    directory. If Ray was started already it is joined, and shut down by whichever started it.
    """
    # Imported here: a member's tests run without the kernel installed (the trace leaf's).
    from twinflow.kernel import RayExecutor

    code_dirs = [str(p) for p in sorted(_ROOT.glob("packages/*/tests")) if p.is_dir()]
    # The suite runs on busy two-core machines, where a worker's start has taken more than the
    # minute a local Ray gives it (WORKER_START_SECONDS) and the run failed: the tests' Ray
    # waits five. A user's run keeps the minute, so a broken worker fails fast there.
    os.environ.setdefault("RAY_worker_register_timeout_seconds", "300")
    executor = RayExecutor(num_cpus=2, code_dirs=code_dirs).start()
    yield executor
    executor.close()


@pytest.fixture(autouse=True)
def _secrets_registered_by_a_test_end_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret one test registers is not screened in the next test's text: a short key or a
    hex fragment left registered would scrub another test's files, in an order-dependent way.
    Each part of the secret screen's process-wide registry is restored after the test."""
    import twinflow._base._untrusted as untrusted

    monkeypatch.setattr(untrusted, "_forms", set(untrusted._forms))
    monkeypatch.setattr(untrusted, "_exact", set(untrusted._exact))
    monkeypatch.setattr(untrusted, "_short", set(untrusted._short))
    monkeypatch.setattr(untrusted, "_installed", untrusted._installed)
    monkeypatch.setattr(untrusted, "_pattern", untrusted._pattern)
    monkeypatch.setattr(untrusted, "_names_pattern", untrusted._names_pattern)
    monkeypatch.setattr(untrusted, "_bytes_pattern", untrusted._bytes_pattern)
