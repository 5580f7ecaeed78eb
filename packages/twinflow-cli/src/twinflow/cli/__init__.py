"""twinflow.cli: L4: the `twinflow` command, the composition root that wires real adapters."""

__all__: list[str] = []
