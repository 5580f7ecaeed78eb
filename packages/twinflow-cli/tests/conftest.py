"""Shared fixtures for the CLI tests: a local Ray, once per session."""

from collections.abc import Iterator

import pytest

from twinflow.kernel import RayExecutor


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray of two CPUs for the session (about 4 s); ``--ray`` runs join it.

    If another package's tests started Ray already it is joined, and shut down by whichever
    started it.
    """
    executor = RayExecutor(num_cpus=2).start()
    yield
    executor.close()
