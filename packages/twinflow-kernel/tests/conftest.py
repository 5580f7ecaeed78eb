"""Shared fixtures for the kernel tests."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

# The Ray tests' calls live in ray_tasks.py, imported by name here and on the workers.
sys.path.insert(0, str(Path(__file__).parent))


def echo(request: LoopbackRequest) -> LoopbackResponse:
    """Answer a JSON request with its body and path."""
    return LoopbackResponse.json_body({"path": request.path, "echo": request.json_value()})


@pytest.fixture
def echo_server() -> Iterator[LoopbackServer]:
    """A loopback server that echoes JSON."""
    with LoopbackServer(echo) as server:
        yield server
