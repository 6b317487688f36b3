"""Page numbers of the inspector's lists, from what a query string names."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Any

from copilot_runtime.client_numbers import ClientNumberError, parse_client_int


@dataclass(frozen=True, slots=True)
class Pages:
    number: int
    count: int
    total: int

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.count

    @property
    def previous_number(self) -> int:
        return self.number - 1

    @property
    def next_number(self) -> int:
        return self.number + 1


# Past the last page the last one is shown, so no larger page number is worth reading (the
# offset of a page still fits the database's bigint).
_PAGE_READ_MAX = 2**31 - 1


def page_number(requested: Any) -> int:
    """The page a query string (or this module) names: a number too large is the last page,
    anything that is no page number the first."""
    if isinstance(requested, int) and not isinstance(requested, bool):
        return max(requested, 1)
    try:
        return parse_client_int(requested, minimum=1, maximum=_PAGE_READ_MAX)
    except ClientNumberError as refused:
        return _PAGE_READ_MAX if refused.too_large else 1


def pages_of(total: int, per_page: int, requested: Any) -> Pages:
    count = max(1, ceil(total / per_page))
    return Pages(number=min(page_number(requested), count), count=count, total=total)
