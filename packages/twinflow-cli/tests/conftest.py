"""The CLI test kit on the path, and the scripted server most tests run against. The Ray
fixture (``ray_executor``) is the root conftest.py's."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow.kernel import LoopbackServer

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """A scripted OpenAI-compatible server on loopback (`cli_testkit.scripted_chat`)."""
    from cli_testkit import scripted_chat

    with LoopbackServer(scripted_chat) as running:
        yield running
