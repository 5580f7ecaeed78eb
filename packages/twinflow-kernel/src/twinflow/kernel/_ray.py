"""`RayExecutor`: the `Executor` port on a Ray cluster, local or existing (the ``ray`` extra).

Ray is a scheduler with threads, sockets and processes of its own, so it lives where the rest
of the workspace's concurrency does: behind `Executor`, in the kernel (docs/adr/0041). Each call
runs as one Ray task. What a task needs travels with it (``fn`` is serialised once, with
cloudpickle, and each item per task); what it returns travels back. A task is never told where
the driver keeps its files: callers that run on a cluster must return their output, not write it
(`RayExecutor.shares_filesystem` is False, and `twinflow.eval` reads it).

Failures:

- a call that raises: the same exception is raised in the driver, with a note naming the node
  (host, IP, node id) it ran on, after the calls already in flight have finished and been
  yielded (their results are not thrown away);
- a worker process (or node) that dies mid-call: Ray runs the call again, at most
  ``max_retries`` times (default once); after that, a `ClusterError` (reason
  ``"task_lost"``) names the call's index;
- a worker that cannot start (its interpreter or environment is broken, or it does not
  register in time): a `ClusterError` (reason ``"worker_start"``) names the node and gives
  Ray's reason. A local Ray started here gives a worker one start of at most `WORKER_START_SECONDS` (docs/adr/0045).

Workers run the interpreter and environment they find, never a copy Ray makes: Ray's own
``uv run`` integration (which, when the driver runs under ``uv run``, packages the current
directory and starts each worker through ``uv run`` in that copy, re-syncing the project
there) is switched off with Ray's switch ``RAY_ENABLE_UV_RUN_RUNTIME_ENV=0`` before Ray is
imported. A local Ray's workers are then this interpreter with this environment; on a cluster,
each node's own Python, which must have twinflow (and the spec's tool modules) installed.

``ray`` is imported only when a `RayExecutor` is first used, so the kernel stays importable
without the extra.
"""

from __future__ import annotations

import os
import pickle
import platform
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, ClassVar, Self, TypeVar

from twinflow.kernel._concurrency import _check_limit
from twinflow.kernel._errors import ClusterError
from twinflow.kernel._nondeterminism import guard_active, guarded_elsewhere, on_behalf_of_caller
from twinflow.trace import UserError

__all__ = ["WORKER_START_SECONDS", "RayExecutor"]

WORKER_START_SECONDS = 60
"""How long a local Ray started by `RayExecutor` waits for a worker to start and register
(Ray's default wait), with no second start: a worker that cannot start fails the run about a
minute after its first task is submitted. Ray would otherwise start it six times (each start
given its full wait), so a broken worker environment took six minutes to report (and an hour
at the ten minutes once set here). Both are Ray settings that a value in the environment
overrides: ``RAY_worker_register_timeout_seconds`` and ``RAY_pop_worker_max_retries``."""

# Ray's settings for a Ray started here, each kept if the user set it (docs/adr/0045).
_LOCAL_RAY_SETTINGS = {
    # Ray reads this switch (meant for laptops) once, when it is imported; without it a Linux
    # node binds every interface. A Ray started here serves this machine only: loopback alone.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # Read by the raylet started here: one start per worker, of at most WORKER_START_SECONDS.
    "RAY_worker_register_timeout_seconds": str(WORKER_START_SECONDS),
    "RAY_pop_worker_max_retries": "0",
}
# Read by `ray` when it is imported, for a local Ray and a cluster alike: workers run the
# Python they find, never a `uv run` re-sync of a copy of the current directory.
_ANY_RAY_SETTINGS = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}

T = TypeVar("T")
R = TypeVar("R")

_END = object()


def _import_ray() -> ModuleType:
    try:
        import ray  # the optional extra: imported when a RayExecutor is first used
    except ImportError:
        raise UserError(
            "the Ray executor needs the ray extra: pip install 'twinflow-eval[ray]' "
            "(or uv sync --extra ray)"
        ) from None
    return ray


def _where() -> str:
    """Name the node this task runs on, for a message read by a person."""
    ray = _import_ray()
    node = ray.get_runtime_context().get_node_id()
    return f"Ray node {platform.node()} ({ray.util.get_node_ip_address()}, node id {node[:12]})"


def _call(code_dirs: tuple[str, ...], fn: bytes, item: bytes) -> Any:
    """Run one call inside a Ray worker; an exception leaves with the node's name on it.

    The call and its item arrive pickled and are loaded only after ``code_dirs`` are on the
    worker's ``sys.path``, so they may refer to modules that live there.
    """
    for directory in reversed(code_dirs):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    cloudpickle = _import_ray().cloudpickle
    call = cloudpickle.loads(fn)
    try:
        return on_behalf_of_caller(call, cloudpickle.loads(item))
    except Exception as exc:
        exc.add_note(f"raised on {_where()}")
        raise


def _node_named_in(ray: ModuleType, text: str) -> str:
    """The Ray node whose id ``text`` mentions, as host (IP, node id); else "an unnamed node"."""
    try:
        nodes = ray.nodes()
    except Exception:  # the cluster is going away: the message is still worth giving
        nodes = []
    for node in nodes:
        node_id = str(node.get("NodeID", ""))
        if node_id and node_id in text:
            host, ip = node.get("NodeManagerHostname"), node.get("NodeManagerAddress")
            return f"Ray node {host} ({ip}, node id {node_id[:12]})"
    return "an unnamed Ray node"


def _one_line(exc: BaseException) -> str:
    """Ray's reason, as one line (its messages run over several)."""
    return " ".join(str(exc).split())


def _ship(send: Callable[[], Any], what: str) -> Any:
    """Serialise something for the workers; what cannot be pickled is the caller's mistake."""
    try:
        return send()
    except (TypeError, pickle.PicklingError) as exc:
        raise UserError(
            f"the Ray executor cannot send {what} to its workers: {exc}; calls and items must "
            "pickle (closures over plain values do; open files, locks and connections do not: "
            "make them inside the call)"
        ) from exc


def _failure(ray: ModuleType, exc: BaseException, index: int, max_retries: int) -> BaseException:
    """What a failed call raises in the driver: its own exception, or a `ClusterError`."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = getattr(exc, "cause", None)
        return cause if isinstance(cause, BaseException) else exc
    if isinstance(exc, ray.exceptions.RaySystemError | ray.exceptions.RuntimeEnvSetupError):
        # No worker could be started for the call: retrying will not help.
        return ClusterError(
            f"call {index}: Ray could not start a worker for it on "
            f"{_node_named_in(ray, str(exc))}: {_one_line(exc)}; a local Ray's "
            f"workers run {sys.executable}, a cluster's run each node's own Python "
            "(it needs twinflow and the spec's tool modules); Ray's logs are in "
            "the node's /tmp/ray/session_latest/logs",
            reason="worker_start",
            index=index,
        )
    # The worker (or its node) died on the last allowed attempt.
    return ClusterError(
        f"call {index} was lost: its Ray worker died on each of "
        f"{max_retries + 1} attempt(s) ({type(exc).__name__}: {exc})",
        reason="task_lost",
        index=index,
    )


def ray_settings(address: str | None) -> dict[str, str]:
    """The Ray settings `RayExecutor` puts in the environment (each unless already set) before
    it starts a local Ray (``address`` None) or joins ``address``."""
    settings = dict(_ANY_RAY_SETTINGS)
    if address is None:
        settings.update(_LOCAL_RAY_SETTINGS)
    return settings


class RayExecutor:
    """Runs each call as a Ray task; yields results in completion order.

    Connects on first use: to ``address`` (``"auto"`` for the cluster this machine is part
    of, ``"ray://host:10001"`` for a remote head) or, without one, to a Ray already started in
    this process, else to a new local Ray of ``num_cpus`` workers (no dashboard, listening on
    loopback only). `close` shuts down only a Ray this executor started or connected to.
    """

    shares_filesystem: ClassVar[bool] = False
    """Calls run in other processes, perhaps on other machines: they must not write the
    driver's files (a caller returns its output instead)."""

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        max_retries: int = 1,
        code_dirs: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        """Configure the executor (nothing starts until the first `map_bounded`).

        Args:
            address: The cluster to join; None starts a local Ray (or uses the running one).
            num_cpus: CPUs of a local Ray started here (default: all of them).
            max_retries: Times Ray runs a call again after its worker died (not after it raised).
            code_dirs: Directories the workers import code from (put at the front of their
                ``sys.path`` before a call is loaded); on a remote cluster they must exist on
                every node.

        Raises:
            UserError: ``max_retries`` is negative or ``num_cpus`` below 1.
        """
        if max_retries < 0:
            raise UserError(f"max_retries must be 0 or more, not {max_retries}")
        if num_cpus is not None and num_cpus < 1:
            raise UserError(f"num_cpus must be at least 1, not {num_cpus}")
        self.address = address
        self.num_cpus = num_cpus
        self.max_retries = max_retries
        self.code_dirs = tuple(os.fspath(d) for d in code_dirs)
        self._owned = False

    def start(self) -> Self:
        """Start or join the cluster now rather than at the first `map_bounded`.

        Raises:
            UserError: The ray extra is not installed.
            ClusterError: The cluster could not be started or joined.
        """
        self._connect()
        return self

    def _connect(self) -> ModuleType:
        for name, value in ray_settings(self.address).items():
            os.environ.setdefault(name, value)
        ray = _import_ray()
        if ray.is_initialized():
            return ray
        try:
            if self.address is None:
                ray.init(num_cpus=self.num_cpus, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=self.address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = self.address or "a new local Ray"
            raise ClusterError(
                f"could not start or join the Ray cluster at {where}: {exc}; check the address "
                "(host:6379, ray://host:10001 or auto) and that the cluster is up",
                reason="unreachable",
            ) from exc
        self._owned = True
        return ray

    def map_bounded(
        self, fn: Callable[[T], R], items: Iterable[T], limit: int
    ) -> Iterator[tuple[int, R]]:
        """Yield ``(index, fn(item))`` as tasks finish, at most ``limit`` tasks in flight.

        Items are taken only as slots free up. ``fn``, each item and each result must be
        picklable (cloudpickle): closures are, open files and connections are not.

        Raises:
            UserError: ``limit`` is below 1, or the ray extra is not installed.
            ClusterError: The cluster could not be started or joined.
            ClusterError: A call's worker died on every allowed attempt (``"task_lost"``).
        """
        _check_limit(limit)
        return self._run(fn, iter(items), limit)

    def _run(self, fn: Callable[[T], R], items: Iterator[T], limit: int) -> Iterator[tuple[int, R]]:
        ray = self._connect()
        task = ray.remote(_call).options(max_retries=self.max_retries, num_cpus=1)
        dumps = ray.cloudpickle.dumps
        # Serialised once, not once per task; loaded by `_call` after its code_dirs are set.
        # Under a guard, each call is guarded in its worker too: the guard does not cross
        # processes, and the function is the caller's, not the kernel's.
        call: Callable[[T], R] = fn
        if guard_active():

            def call(item: T) -> R:
                return guarded_elsewhere(fn, item)

        shipped = ray.put(_ship(lambda: dumps(call), "the function"))
        pending: dict[Any, int] = {}
        counter = 0
        failure: BaseException | None = None

        def submit() -> None:
            nonlocal counter
            item = next(items, _END)
            if item is not _END:
                data = _ship(lambda: dumps(item), f"item {counter}")
                pending[task.remote(self.code_dirs, shipped, data)] = counter
                counter += 1

        try:
            for _ in range(limit):
                submit()
            while pending:
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                index = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    failure = failure or _failure(ray, exc, index, self.max_retries)
                    continue
                # The caller sees each result before the next item is taken: one that stops
                # taking items on what a result says (an eval's total budget) starts no more.
                yield index, result
                if failure is None:
                    submit()
            if failure is not None:
                raise failure
        finally:
            # The port's promise when the caller stops early: calls in flight finish, none starts.
            if pending:
                ray.wait(list(pending), num_returns=len(pending))

    def close(self) -> None:
        """Shut down the Ray this executor started or joined (idempotent)."""
        if self._owned:
            _import_ray().shutdown()
            self._owned = False
