"""``make run`` and ``make test`` take every Python the package declares (scripts/lib.sh), and
no other."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "scripts" / "lib.sh"


def _declared_minors() -> range:
    """The 3.x minors of pyproject's ``requires-python`` (``>=3.A,<3.B``)."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    match = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", spec.replace(" ", ""))
    assert match, spec
    return range(int(match[1]), int(match[2]))


def _lib_bounds() -> range:
    text = LIB.read_text()
    low = re.search(r"^PYTHON_MIN_MINOR=(\d+)$", text, re.M)
    high = re.search(r"^PYTHON_MAX_MINOR=(\d+)$", text, re.M)
    assert low and high
    return range(int(low[1]), int(high[1]) + 1)


def test_the_scripts_accept_exactly_the_declared_pythons() -> None:
    assert _lib_bounds() == _declared_minors()


def _find_python(python: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'source "{LIB}"; PYTHON="{python}" find_python'],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_running_python_is_taken() -> None:
    assert sys.version_info[1] in _declared_minors()
    found = _find_python(sys.executable)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == sys.executable


def test_a_python_outside_the_range_is_refused_by_name(tmp_path: Path) -> None:
    # A stand-in interpreter that answers as Python 3.10 would.
    old = tmp_path / "python3.10"
    old.write_text("#!/bin/sh\necho 10\n")
    old.chmod(0o755)
    found = _find_python(str(old))
    assert found.returncode != 0
    assert "is Python 3.10; the package needs 3.11 to 3.14" in found.stderr


def test_the_newest_lock_finds_a_python_of_at_least_3_12() -> None:
    floor = 12  # Django 6 needs Python 3.12
    found = subprocess.run(
        ["bash", "-c", f'source "{LIB}"; find_newest_python {floor}'],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    # make test needs one (Django 6 needs 3.12); this machine's image carries 3.12 and 3.13.
    assert found.returncode == 0, found.stderr
    version = subprocess.run(
        [found.stdout.strip(), "-c", "import sys; print(sys.version_info[1])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert floor <= int(version.stdout) <= max(_declared_minors())
