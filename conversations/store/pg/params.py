"""The statements' parameters: many rows as one JSON text, NUL characters replaced.

Rows travel as one JSON parameter, unpacked by ``jsonb_array_elements`` in SQL: one statement
however many rows, since each statement costs psycopg and the server far more than a few more
bytes of JSON.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# An escaped NUL, not preceded by an escaped backslash (the text "\\u0000" stays as it is).
_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def dumps(value: Any) -> str:
    """``value`` as the JSON text Django's JSONField would write, NULs replaced by U+FFFD."""
    # Django's JSONField writes with json.dumps; orjson writes the same JSON for the values
    # the runtime stores (it also accepts non-str keys, as json does, when told to).
    data = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    if b"\\u0000" in data:
        # PostgreSQL stores no NUL character in text or jsonb; models do emit them (in a tool
        # call's arguments, say). Kept visible as U+FFFD rather than failing the run's write.
        data = _NUL.sub(rb"\1\\ufffd", data)
    return data.decode()


def json_rows(rows: list[Any]) -> str:
    """Many rows as one JSON parameter, for ``jsonb_array_elements(%s::jsonb)``."""
    return dumps(rows)
