"""Whole numbers a client writes as text (a query string's ``limit``, a ``Content-Length``, a
replay cursor's sequence number, an admin page number), read strictly.

``str.isdigit`` then ``int`` is not such a reader: ``isdigit`` accepts "²" and "٣", which
``int`` refuses (or reads as 3), ``int`` also takes " 5", "+5" and "1_000", and it raises past
4,300 digits (and costs quadratic time below that). Here only ASCII digits are read, at most as
many significant digits as the range's bounds have, so ``int`` never sees anything it could
refuse or spend time on. This module imports nothing of the project: every layer may use it.
"""

from __future__ import annotations


class ClientNumberError(ValueError):
    """Not a whole number in the range the caller allows.

    ``too_large`` tells a number written correctly but above the maximum (a Content-Length over
    the body limit is a 413, not a malformed request) from everything else."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


def parse_client_int(text: object, *, minimum: int, maximum: int) -> int:
    """``text`` read as a decimal integer in ``[minimum, maximum]``, else ``ClientNumberError``.

    Accepted: ASCII digits, leading zeros included (they do not count towards the length
    bound), with one leading "-" only when ``minimum`` is negative. Refused: anything else,
    whitespace, "+", a decimal point, underscores and non-ASCII digits included; a value that is
    not a ``str``. Nothing but ``ClientNumberError`` is raised."""
    if not isinstance(text, str):
        raise ClientNumberError("not text")
    negative = minimum < 0 and text.startswith("-")
    digits = text[1:] if negative else text
    # Among ASCII characters only 0-9 are digits to str.isdigit.
    if not (digits.isascii() and digits.isdigit()):
        raise ClientNumberError("not a whole number in ASCII digits")
    significant = digits.lstrip("0")
    bound = -minimum if negative else maximum
    # Longer than the bound needs: out of range whatever the digits, and never handed to int().
    if len(significant) > len(str(bound)):
        raise ClientNumberError("out of range", too_large=not negative)
    # The significant digits only: int() counts leading zeros towards its own digit limit.
    value = int(significant or "0")
    if negative:
        value = -value
    if value > maximum:
        raise ClientNumberError("out of range", too_large=True)
    if value < minimum:
        raise ClientNumberError("out of range")
    return value
