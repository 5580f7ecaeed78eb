"""The shared "did you mean" suggestion."""

from twinflow.vocab._suggest import did_you_mean


def test_a_close_name_is_suggested() -> None:
    """A one-letter typo suggests the name it was meant to be."""
    expected = " (did you mean 'expected'?)"
    assert expected == did_you_mean("expcted", ["input", "expected", "id"])


def test_nothing_close_suggests_nothing() -> None:
    """A name far from every known one adds nothing to the message."""
    expected = ""
    assert expected == did_you_mean("zzz", ["input", "expected", "id"])
