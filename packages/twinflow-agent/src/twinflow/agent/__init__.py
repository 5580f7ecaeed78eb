"""twinflow.agent: L2: the agent loop, deny-by-default tool policy, the tamper-evident trace and replay."""

__all__: list[str] = []
