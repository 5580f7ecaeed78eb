"""Importing twinflow.kernel stays cheap (its names: tests/gates/test_exported_members.py)."""


def test_importing_the_kernel_builds_no_pydantic_models() -> None:
    """`import twinflow.kernel` stays cheap: pydantic is loaded only when a value class is used."""
    import sys

    from twinflow.kernel import run_process

    script = (
        "import sys, twinflow.kernel as k; before = 'pydantic' in sys.modules; "
        "k.LoopbackResponse; print(before, 'pydantic' in sys.modules)"
    )
    result = run_process([sys.executable, "-c", script])
    assert (0, "False True\n") == (result.returncode, result.stdout)
