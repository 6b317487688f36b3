"""Reading a client's whole number (``copilot_runtime/client_numbers.py``): ASCII digits in a
range, and nothing else, without ever raising anything but ``ClientNumberError``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from copilot_runtime.client_numbers import ClientNumberError, parse_client_int

FIVE_THOUSAND_DIGITS = "9" * 5000


def parse(text: object, *, minimum: int = 0, maximum: int = 200) -> int:
    return parse_client_int(text, minimum=minimum, maximum=maximum)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("5", 5),
        ("200", 200),  # the maximum itself
        ("007", 7),  # leading zeros are the same number
        ("0" * 5000 + "5", 5),  # however many: they are not counted, nor given to int()
    ],
)
def test_ascii_digits_in_range_are_their_number(text: str, value: int) -> None:
    assert parse(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "²",  # a digit to str.isdigit, refused by int()
        "٣",  # an Arabic-indic three: int() would read 3
        "5²",
        " 5",
        "5 ",
        "+5",
        "-5",  # no negatives where the minimum is not negative
        "5.0",
        "1_000",  # int() would read 1000
        "0x10",
        "",
        "-",
    ],
)
def test_anything_but_ascii_digits_is_refused_as_malformed(text: str) -> None:
    with pytest.raises(ClientNumberError) as refused:
        parse(text)

    assert refused.value.too_large is False


@pytest.mark.parametrize("value", [None, 5, 5.0, b"5", ["5"]])
def test_a_value_that_is_not_text_is_refused(value: object) -> None:
    with pytest.raises(ClientNumberError):
        parse(value)


def test_one_past_the_maximum_is_too_large() -> None:
    with pytest.raises(ClientNumberError) as refused:
        parse("201")

    assert refused.value.too_large is True


def test_five_thousand_digits_are_too_large_without_reaching_int() -> None:
    # int() refuses more than 4,300 digits with a ValueError of its own.
    with pytest.raises(ClientNumberError) as refused:
        parse(FIVE_THOUSAND_DIGITS, maximum=2**63 - 1)

    assert refused.value.too_large is True


def test_below_the_minimum_is_refused_but_not_too_large() -> None:
    with pytest.raises(ClientNumberError) as refused:
        parse("0", minimum=1)

    assert refused.value.too_large is False


def test_a_negative_minimum_admits_one_leading_minus() -> None:
    assert parse("-5", minimum=-10) == -5
    assert parse("-010", minimum=-10) == -10
    for text in ("-11", "-" + FIVE_THOUSAND_DIGITS, "--5", "-+5", "- 5"):
        with pytest.raises(ClientNumberError) as refused:
            parse(text, minimum=-10)
        assert refused.value.too_large is False


def test_the_error_is_a_value_error() -> None:
    # A caller that forgets to catch it still fails as a bad value, not as anything stranger.
    assert issubclass(ClientNumberError, ValueError)


def test_the_module_imports_nothing_of_the_project() -> None:
    """It is the lowest layer: storage, the engine and every protocol surface may import it."""
    source = Path(__file__).resolve().parents[2] / "copilot_runtime" / "client_numbers.py"
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }

    assert imported <= {"__future__"}
