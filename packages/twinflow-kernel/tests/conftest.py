"""Shared fixtures for the kernel tests."""

from collections.abc import Iterator

import pytest

from twinflow.kernel import LoopbackRequest, LoopbackResponse, LoopbackServer


def echo(request: LoopbackRequest) -> LoopbackResponse:
    """Answer a JSON request with its body and path."""
    return LoopbackResponse.json_body({"path": request.path, "echo": request.json_value()})


@pytest.fixture
def echo_server() -> Iterator[LoopbackServer]:
    """A loopback server that echoes JSON."""
    with LoopbackServer(echo) as server:
        yield server
