"""twinflow.local_model: L2: guaranteed structured output from Ollama and OpenAI-compatible servers, on the standard library and pydantic."""

__all__: list[str] = []
