"""The host recipe, docs/adding-to-a-project.md, read as code: its marked blocks, and a
``startproject`` package written from them (tests/e2e/test_host_project.py builds and drives a
host from them; ``make bench``'s host row measures one: benchmarks/host_project.py).

The marking scheme: a line ``<!-- host: KEY -->`` directly followed by a fenced code block marks
that block as the recipe's ``KEY``. The keys (``BLOCKS``) and what each block is:

- ``wheel`` (sh): how a wheel is built and installed (the test builds the same wheel offline
  with ``pip wheel`` and checks the file name this block installs);
- ``settings.py append`` (python): appended to startproject's ``settings.py``;
- ``urls.py``, ``asgi.py``, ``celery.py``, ``__init__.py`` (python): the whole of that file
  of the project package;
- ``setup`` (sh): commands run in the project directory, one a line, in order;
- ``web``, ``worker`` (sh): one long-running command each, the web process and the Celery
  worker.

``recipe_blocks`` fails (``RecipeError``) when a key is missing, unknown or repeated, when a
marker is not directly followed by a fenced block, or when a block's language is not its key's.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RECIPE = REPO_ROOT / "docs" / "adding-to-a-project.md"
PACKAGE = "mysite"  # the project name the recipe is written for

# Each key and its block's language.
BLOCKS: dict[str, str] = {
    "wheel": "sh",
    "settings.py append": "python",
    "urls.py": "python",
    "asgi.py": "python",
    "celery.py": "python",
    "__init__.py": "python",
    "setup": "sh",
    "web": "sh",
    "worker": "sh",
}
# The project package's files each block is (``settings.py append`` is appended instead).
WHOLE_FILES = ("urls.py", "asgi.py", "celery.py", "__init__.py")

_MARKER = re.compile(r"^<!-- host: (?P<key>.*?) -->$", re.MULTILINE)
_MARKED_BLOCK = re.compile(
    r"^<!-- host: (?P<key>.*?) -->\n```(?P<language>\w*)\n(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)


class RecipeError(AssertionError):
    """The recipe's marked blocks are not the ones the test builds a host from."""


def recipe_blocks(text: str | None = None) -> dict[str, str]:
    """The recipe's marked blocks by key (the document's text, by default read from RECIPE)."""
    text = RECIPE.read_text() if text is None else text
    markers = [match.group("key") for match in _MARKER.finditer(text)]
    blocks: dict[str, str] = {}
    for match in _MARKED_BLOCK.finditer(text):
        key, language = match.group("key"), match.group("language")
        if key in blocks:
            raise RecipeError(f"the block <!-- host: {key} --> is marked twice")
        if key in BLOCKS and language != BLOCKS[key]:
            raise RecipeError(f"<!-- host: {key} --> is ```{language}, not ```{BLOCKS[key]}")
        blocks[key] = match.group("body")
    unfenced = [key for key in markers if key not in blocks]
    if unfenced or len(markers) != len(blocks):
        raise RecipeError(f"markers not directly followed by a fenced block: {unfenced}")
    missing = [key for key in BLOCKS if key not in blocks]
    unknown = [key for key in blocks if key not in BLOCKS]
    if missing or unknown:
        raise RecipeError(f"{RECIPE.name}: blocks missing {missing}, unknown {unknown}")
    return blocks


def commands(block: str) -> list[list[str]]:
    """A shell block's commands, split as the shell would (one a line; comments dropped)."""
    return [
        shlex.split(line, comments=True)
        for line in block.splitlines()
        if shlex.split(line, comments=True)
    ]


def write_host(project: Path, blocks: dict[str, str]) -> Path:
    """Apply the recipe's files to the project ``django-admin startproject mysite`` wrote in
    ``project``; returns the package directory."""
    package = project / PACKAGE
    settings = package / "settings.py"
    settings.write_text(settings.read_text() + "\n" + blocks["settings.py append"])
    for name in WHOLE_FILES:
        (package / name).write_text(blocks[name])
    return package
