"""A database that cannot write because its disk is full, told apart from one that is down.

The two need different people: a database that is down comes back by itself or by a restart;
a full disk needs someone to free space, and until then every write fails while reads still
work. So a write refused for lack of space is answered as that, and ``/readyz`` fails for as
long as it lasts: on SQLite by the free space beside the database file, on a server database
(whose disk this process cannot see) for a while after such a refusal.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from django.conf import settings

# Below this, the SQLite file's disk counts as full: a turn writes a few pages, and SQLite
# needs room for its write-ahead log besides.
MIN_FREE_BYTES = 1024 * 1024
# How long a server database's disk counts as full after it refused a write for it.
REFUSED_RECENTLY_SECONDS = 30.0
DISK_FULL_MESSAGE = (
    "The runtime's database disk is full; nothing new can be stored until space is freed."
)
UNAVAILABLE_MESSAGE = "The runtime's database is unavailable; try again shortly."

# SQLite's SQLITE_FULL, PostgreSQL's disk_full (53100) and the OS's ENOSPC, as drivers word them.
_MARKERS = ("database or disk is full", "no space left on device", "disk full")
_POSTGRES_DISK_FULL = "53100"

_refused_at = float("-inf")


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` (a database error, or what caused it) says the disk is full; when it
    does, ``/readyz`` learns of it too."""
    global _refused_at
    seen: BaseException | None = error
    for _ in range(4):  # the error and the few it was raised from
        if seen is None:
            break
        if getattr(seen, "sqlstate", None) == _POSTGRES_DISK_FULL or any(
            marker in str(seen).lower() for marker in _MARKERS
        ):
            _refused_at = time.monotonic()
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def database_trouble_message(error: BaseException) -> str:
    """What to tell a client whose request failed on the database."""
    return DISK_FULL_MESSAGE if is_disk_full(error) else UNAVAILABLE_MESSAGE


def _sqlite_directory() -> Path | None:
    database = settings.DATABASES["default"]
    if not database["ENGINE"].endswith("sqlite3"):
        return None
    name = str(database.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        return None
    return Path(name).resolve().parent


def database_disk_full() -> bool:
    """Whether the default database's disk is full now, as far as this process can tell."""
    directory = _sqlite_directory()
    if directory is not None:
        try:
            return shutil.disk_usage(directory).free < MIN_FREE_BYTES
        except OSError:
            return False
    return time.monotonic() - _refused_at < REFUSED_RECENTLY_SECONDS
