"""The tool of `examples/approval`: adding two integers, once a person approves the call."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
