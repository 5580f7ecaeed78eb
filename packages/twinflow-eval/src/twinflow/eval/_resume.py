"""Resuming an interrupted case repeat from its trace in the run directory (`_resumed`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from twinflow.agent import CannotResume, RunError
from twinflow.eval._dataset import Case
from twinflow.eval._errors import RunDirError
from twinflow.eval._results import set_aside, trial_seed
from twinflow.eval._simulated import user_trace
from twinflow.kernel import ReplayDivergenceError
from twinflow.trace import MemoryTraceSink, TraceCorruptError

if TYPE_CHECKING:
    from twinflow.eval._runner import AgentFactory


def _resumed(
    run_dir: Path, factory: AgentFactory, case: Case, repeat: int, key: str, simulated: bool
) -> bool:
    """Continue a case's interrupted run from its trace; False if it cannot be (set aside).

    A conversation with a simulated user is not continued: its messages depend on the
    answers, so the case runs again from the start (both traces are set aside)."""
    trace = run_dir / "traces" / f"{key}.jsonl"
    if simulated:
        set_aside(trace)
        if user_trace(trace).exists():
            set_aside(user_trace(trace))
        return False
    with trace.open("rb") as f:
        started = b"\n" in f.read(1 << 16)
    if not started:  # not one whole event: there is no run to continue
        set_aside(trace)
        return False
    agent = factory(case, MemoryTraceSink(), trial_seed(repeat))
    try:
        result = agent.resume(trace)
        # A conversation goes on with the turns the interrupted run had not reached.
        for turn in case.turns[result.turn - 1 :]:
            result = agent.run(turn, continue_from=result)
    except CannotResume as exc:
        if exc.reason == "in_flight":
            # Running the case again from the start would repeat a call that may have taken
            # effect: a person decides, and nothing more runs.
            raise RunDirError(
                f"case {key}: {exc}; running the case again would repeat that call: declare "
                f"the tool repeat_safe, or move {trace} away to run the case from the start"
            ) from None
        set_aside(trace)
        return False
    except (ReplayDivergenceError, TraceCorruptError):
        # Not a run this code can continue (torn at its start, another spec, finished
        # without a result file): kept aside, and the case runs again from the start.
        set_aside(trace)
        return False
    except RunError:  # recorded in the trace (run_failed); scoring reads it there
        pass
    finally:
        agent.close()
    return True
