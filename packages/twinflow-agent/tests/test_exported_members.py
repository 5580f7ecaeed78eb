"""twinflow.agent's errors hang under the one root (its names: tests/gates/test_exported_members.py)."""

import twinflow.agent


def test_errors_share_the_twinflow_root() -> None:
    """Every agent error derives from TwinflowError; config mistakes are UserErrors."""
    from twinflow.trace import TwinflowError, UserError

    assert issubclass(twinflow.agent.AgentError, TwinflowError)
    assert issubclass(twinflow.agent.AgentConfigError, UserError)
