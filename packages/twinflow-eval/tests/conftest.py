"""The shared test kit importable (also by dotted path, as custom scorers are named); a local Ray."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow.kernel import RayExecutor

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def ray_executor() -> Iterator[RayExecutor]:
    """A RayExecutor on a local Ray of two CPUs, started once per session (about 4 s).

    Its workers import this directory's modules (`eval_testkit`). If another package's tests
    started Ray already, it is joined, and shut down by whichever started it.
    """
    executor = RayExecutor(num_cpus=2, code_dirs=[str(Path(__file__).parent)])
    yield executor
    executor.close()
