"""Shared fixtures for the CLI tests: the CLI test kit on the path, and a local Ray once per session."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow.kernel import RayExecutor

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray of two CPUs for the session (about 4 s); ``--ray`` runs join it.

    If another package's tests started Ray already it is joined, and shut down by whichever
    started it.
    """
    executor = RayExecutor(num_cpus=2).start()
    yield
    executor.close()
