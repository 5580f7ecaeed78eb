"""twinflow.vocab: L0: frozen conversation values, canonical JSON (RFC 8785) and digests, structural diff, the model-facing protocols, wire and datapizza translation."""

__all__: list[str] = []
