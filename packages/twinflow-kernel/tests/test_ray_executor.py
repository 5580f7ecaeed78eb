"""RayExecutor: the Executor port on a local Ray (two CPUs, started once per session)."""

from __future__ import annotations

import functools
import itertools
import json
import os
import platform
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray_tasks

from twinflow.kernel import ClusterError, RayExecutor, SerialExecutor
from twinflow.kernel._process import run_process
from twinflow.kernel._ray import WORKER_START_SECONDS, ray_settings
from twinflow.trace import UserError

ROOT = Path(__file__).resolve().parents[3]


def test_every_result_comes_back_once_with_its_index(ray_executor: RayExecutor) -> None:
    """Twelve calls at two in flight yield each (index, result) exactly once."""
    results = sorted(ray_executor.map_bounded(ray_tasks.square, range(12), 2))
    assert [(i, i * i) for i in range(12)] == results


def test_a_local_ray_starts_each_worker_once_with_a_bounded_wait(
    ray_executor: RayExecutor,
) -> None:
    """A Ray started here waits WORKER_START_SECONDS for a worker, once, and leaves uv alone.

    The suite's own Ray (the root conftest) waits longer on busy machines: a value already in
    the environment wins, so the defaults are read from `ray_settings`, the rest from the
    environment the started Ray read.
    """
    ray_executor.start()
    # Ray's own spellings: RAY_ + the config key; the raylet and `import ray` read them.
    expected = {
        "RAY_worker_register_timeout_seconds": str(WORKER_START_SECONDS),
        "RAY_pop_worker_max_retries": "0",
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    }
    assert expected.items() <= ray_settings(None).items()
    assert {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"} == ray_settings("auto")
    started = ("RAY_pop_worker_max_retries", "RAY_ENABLE_UV_RUN_RUNTIME_ENV")
    assert ("0", "0") == tuple(os.environ[name] for name in started)


DRIVER = """\
import json, sys
from twinflow.kernel import RayExecutor
from twinflow.kernel import ClusterError
executor = RayExecutor(num_cpus=1, code_dirs=[{tests!r}])
sys.path.insert(0, {tests!r})
try:
    import ray_tasks
    results = list(executor.map_bounded(ray_tasks.interpreter, [0], 1))
    print(json.dumps({{"driver": [sys.executable, sys.prefix], "worker": results[0][1][1:]}}))
except ClusterError as exc:
    print(json.dumps({{"reason": exc.reason, "index": exc.index, "error": str(exc)}}))
finally:
    executor.close()
"""


def drive(tmp_path: Path, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a driver that maps one call on its own local Ray; its one JSON line, parsed."""
    script = tmp_path / "driver.py"
    tests = str(Path(__file__).parent)
    script.write_text(DRIVER.format(tests=tests), encoding="utf-8")
    result = run_process([*argv, str(script)], cwd=ROOT, env={**os.environ, **env}, timeout=600)
    assert 0 == result.returncode, result.stderr[-3000:]
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


def test_under_uv_run_a_local_rays_workers_run_the_drivers_interpreter(tmp_path: Path) -> None:
    """`uv run` does not reach the workers: no copy of the directory, no re-sync, same Python."""
    uv = shutil.which("uv")
    assert uv is not None, "these tests run the driver as users do, with `uv run`: install uv"
    ran = drive(tmp_path, [uv, "run", "--frozen", "python"], {})
    assert ran["driver"] == ran["worker"]


def test_a_worker_that_cannot_start_fails_the_run_naming_its_node_and_rays_reason(
    tmp_path: Path,
) -> None:
    """A broken worker interpreter is started once and reported with its node, not retried."""
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'this interpreter is broken' >&2\nexit 3\n")
    broken.chmod(0o755)
    env = {
        # The job's own runtime environment, as `ray job submit` passes it: its workers'
        # interpreter is the broken one.
        "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"runtime_env": {"py_executable": str(broken)}}),
        "RAY_worker_register_timeout_seconds": "5",  # the bound, shortened for the test
    }
    ran = drive(tmp_path, [sys.executable], env)
    assert ("worker_start", 0) == (ran["reason"], ran["index"])
    where = f"call 0: Ray could not start a worker for it on Ray node {platform.node()} ("
    assert where == ran["error"][: len(where)]
    assert "Failed to startup worker after retrying 0 times" in ran["error"]


def test_ray_gives_the_serial_executors_results(ray_executor: RayExecutor) -> None:
    """Ray and the serial executor agree on every (index, result), whatever the order."""
    items = [5, 1, 4, 1, 5, 9, 2, 6]
    serial = sorted(SerialExecutor().map_bounded(ray_tasks.square, items, 1))
    assert serial == sorted(ray_executor.map_bounded(ray_tasks.square, items, 2))


def test_items_are_read_only_as_slots_free_up(ray_executor: RayExecutor) -> None:
    """From an endless iterable, stopping after three results has read at most three plus the limit."""
    read: list[int] = []

    def counting() -> Iterator[int]:
        for n in itertools.count():
            read.append(n)
            yield n

    results = ray_executor.map_bounded(ray_tasks.square, counting(), 2)
    taken = list(itertools.islice(results, 3))
    results.close()  # type: ignore[attr-defined]  # a generator
    assert 3 == len(taken)
    assert len(read) <= 3 + 2


def test_a_raising_call_is_raised_in_the_driver_naming_its_node(
    ray_executor: RayExecutor,
) -> None:
    """The call's own exception reaches the driver, with a note naming the Ray node it ran on."""
    with pytest.raises(ValueError, match="three is not allowed") as caught:
        list(ray_executor.map_bounded(ray_tasks.fail_on_three, range(6), 2))
    notes = getattr(caught.value, "__notes__", [])
    assert 1 == len(notes)
    assert notes[0].startswith("raised on Ray node ")
    assert "(127.0.0.1, node id " in notes[0]  # a local Ray listens on loopback only


def test_results_in_flight_when_a_call_raises_are_still_yielded(
    ray_executor: RayExecutor,
) -> None:
    """A failing call starts nothing new; the calls already in flight finish and are yielded."""
    seen: list[int] = []
    with pytest.raises(ValueError):
        for _, result in ray_executor.map_bounded(ray_tasks.fail_on_three, range(4), 4):
            seen.append(result)
    assert [0, 1, 2] == sorted(seen)


def test_a_worker_killed_mid_call_is_retried_once(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """A worker that dies on the first attempt is replaced; the call runs twice, its result comes once."""
    call = functools.partial(ray_tasks.attempt, str(tmp_path), deaths=1)
    results = sorted(ray_executor.map_bounded(call, range(3), 2))
    assert [(0, 0), (1, 1), (2, 2)] == results
    assert [2, 2, 2] == [len((tmp_path / str(n)).read_text().splitlines()) for n in range(3)]


def test_a_worker_that_always_dies_is_lost_after_one_retry(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """Two deaths of the same call end the map with ClusterError "task_lost" naming the call; no third attempt."""
    call = functools.partial(ray_tasks.attempt, str(tmp_path), deaths=2)
    with pytest.raises(
        ClusterError, check=lambda e: "task_lost" == e.reason, match="call 0 was lost"
    ) as caught:
        list(ray_executor.map_bounded(call, [0], 1))
    assert 0 == caught.value.index
    assert 2 == len((tmp_path / "0").read_text().splitlines())


def test_bad_settings_are_usage_errors() -> None:
    """A limit below one, negative retries and zero CPUs are refused before anything starts."""
    with pytest.raises(UserError, match="at least 1, not 0"):
        RayExecutor().map_bounded(ray_tasks.square, [1], 0)
    with pytest.raises(UserError, match="max_retries must be 0 or more"):
        RayExecutor(max_retries=-1)
    with pytest.raises(UserError, match="num_cpus must be at least 1"):
        RayExecutor(num_cpus=0)


def test_without_the_ray_extra_the_executor_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ray not importable, using the executor names the extra to install."""
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(UserError, match=r"twinflow-eval\[ray\]"):
        list(RayExecutor().map_bounded(ray_tasks.square, [1], 1))


def test_the_executor_is_marked_as_not_sharing_the_filesystem() -> None:
    """Callers learn from the class that calls run elsewhere and must return their output."""
    assert RayExecutor.shares_filesystem is False


def test_a_call_that_cannot_be_pickled_is_a_usage_error(ray_executor: RayExecutor) -> None:
    """A call holding something unpicklable (a generator here) is refused, naming what to do."""
    pending = (n for n in range(3))

    def holds_a_generator(n: int) -> int:
        return n + len(list(pending))

    with pytest.raises(UserError, match="cannot send the function to its workers"):
        list(ray_executor.map_bounded(holds_a_generator, [1], 1))
