"""twinflow.kernel: L1: ports for all nondeterminism (clock, ids, transport, process launcher), the real adapters, and record / replay / fault adapters."""

__all__: list[str] = []
