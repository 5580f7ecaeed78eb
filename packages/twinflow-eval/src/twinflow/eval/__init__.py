"""twinflow.eval: L3: eval harness with Lab Notes reports."""

__all__: list[str] = []
