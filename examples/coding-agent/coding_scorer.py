"""The coding example's scorer: the case's unit test, run inside the sandbox.

The agent's own recorded ``run_python`` calls are run again, in order, in a fresh sandbox
(rebuilding the files the agent wrote), and then the test; the case passes when the test exits 0.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from twinflow.eval import Score
from twinflow.kernel import BubblewrapSandbox, SandboxLimits

LIMITS = SandboxLimits(cpu_seconds=5, wall_seconds=30, memory_bytes=256 * 1024 * 1024)


def passes_test(observation: object, expected: dict[str, str]) -> Score:
    """Run the agent's code, then ``expected["test"]``, in one fresh sandbox."""
    sandbox = BubblewrapSandbox()
    with tempfile.TemporaryDirectory(prefix="coding-scorer-") as tmp:
        work = Path(tmp) / "work"
        for call in getattr(observation, "tool_calls", ()):
            if call.tool == "run_python" and call.decision == "allow":
                code = str(call.arguments.get("code", ""))
                sandbox.run([sys.executable, "-I", "-c", code], work_dir=work, limits=LIMITS)
        test = sandbox.run(
            [sys.executable, "-I", "-c", expected["test"]], work_dir=work, limits=LIMITS
        )
    passed = test.returncode == 0
    detail = "the test passed" if passed else (test.stderr.strip().splitlines() or ["failed"])[-1]
    return Score(
        scorer="unit_test",
        outcome="passed" if passed else "failed",
        value=float(passed),
        detail=detail,
    )
