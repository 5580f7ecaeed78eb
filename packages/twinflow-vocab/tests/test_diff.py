"""Structural diff names the first difference by JSON pointer."""

from twinflow.vocab import Difference, Message, Transcript, diff


def test_equal_values_have_no_difference() -> None:
    """Equal values (1 and 1.0 included) give None."""
    assert None is diff({"a": [1, 2.0]}, {"a": [1.0, 2]})


def test_value_difference_named_by_pointer() -> None:
    """A differing leaf is named by its pointer, with both sides."""
    expected = Difference(pointer="/a/1", expected=2, actual=3, reason="value")
    assert expected == diff({"a": [1, 2]}, {"a": [1, 3]})


def test_type_difference() -> None:
    """A boolean is not the number 1."""
    expected = "type"
    assert expected == diff([True], [1]).reason  # type: ignore[union-attr]  # diff returns None only for equal values


def test_missing_and_unexpected() -> None:
    """Absent keys and items are reported as missing or unexpected."""
    assert Difference(pointer="/b", expected=1, actual=None, reason="missing") == diff(
        {"a": 0, "b": 1}, {"a": 0}
    )
    assert Difference(pointer="/2", expected=None, actual=3, reason="unexpected") == diff(
        [1, 2], [1, 2, 3]
    )


def test_pointer_escapes() -> None:
    """Keys with / and ~ are escaped as RFC 6901 says."""
    expected = "/a~1b~0c"
    assert expected == diff({"a/b~c": 1}, {"a/b~c": 2}).pointer  # type: ignore[union-attr]  # diff returns None only for equal values


def test_first_difference_in_canonical_key_order() -> None:
    """With several differences, the first in canonical key order wins."""
    expected = "/a"
    assert expected == diff({"b": 1, "a": 1}, {"b": 2, "a": 2}).pointer  # type: ignore[union-attr]  # diff returns None only for equal values


def test_models_are_compared_by_dump() -> None:
    """Transcripts compare by their JSON dump, and str() is readable."""
    a = Transcript(messages=(Message.user("hello"),))
    b = Transcript(messages=(Message.user("help"),))
    d = diff(a, b)
    expected = "/messages/0/parts/0/text"
    assert expected == d.pointer  # type: ignore[union-attr]  # diff returns None only for equal values
    expected = 'at /messages/0/parts/0/text: value differs: expected "hello", actual "help"'
    assert expected == str(d)


def test_long_strings_show_a_window_around_the_first_differing_character() -> None:
    """Two 1000-character strings differing at 700: the line shows that place on both sides."""
    a = "x" * 700 + "EXPECTED" + "y" * 292
    b = "x" * 700 + "ACTUAL" + "y" * 294
    d = diff({"text": a}, {"text": b})
    expected = (
        f'at /text: value differs from character 700 (of 1000 and 1000): expected ..."'
        f'{"x" * 30}EXPECTED{"y" * 52}"..., actual ..."{"x" * 30}ACTUAL{"y" * 54}"...'
    )
    assert expected == str(d)


def test_a_long_string_that_is_a_prefix_of_the_other_shows_where_it_ends() -> None:
    """A string cut short: the window starts just before its end, the other side goes on."""
    a = "z" * 500
    d = diff(a, a + "MORE")
    expected = (
        f'at /: value differs from character 500 (of 500 and 504): expected ..."{"z" * 30}", '
        f'actual ..."{"z" * 30}MORE"'
    )
    assert expected == str(d)
