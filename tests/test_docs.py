"""The docs stay true and short: the configuration reference matches ``copilot_runtime/conf.py``,
the two READMEs stay under 300 lines, and every relative link in them and in docs/ resolves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from copilot_runtime import conf

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
KEYS_SECTION = "## The `COPILOT_RUNTIME` keys"
# | `KEY` | `default` | meaning |
KEY_ROW = re.compile(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*`([^`]*)`")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
LINKED_DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "benchmarks" / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "benchmarks" / "journal").glob("*.md"),
    ]
)


def product_defaults() -> dict[str, object]:
    """``DEFAULTS`` as conf.py writes it (the suite's fixtures change the live dict): each
    value's expression evaluated in the module's namespace."""
    source = Path(conf.__file__).read_text()
    for node in ast.parse(source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "DEFAULTS":
            assert isinstance(node.value, ast.Dict)
            return {
                ast.literal_eval(key): eval(
                    compile(ast.Expression(value), conf.__file__, "eval"), vars(conf)
                )
                for key, value in zip(node.value.keys, node.value.values, strict=True)
                if key is not None
            }
    raise AssertionError("conf.py no longer assigns DEFAULTS")


def documented_settings(text: str) -> dict[str, str]:
    """Each key of the reference's COPILOT_RUNTIME section with the default it documents."""
    start = text.index(KEYS_SECTION) + len(KEYS_SECTION)
    end = text.find("\n## ", start)
    section = text[start : end if end != -1 else len(text)]
    documented: dict[str, str] = {}
    for line in section.splitlines():
        match = KEY_ROW.match(line)
        if match:
            key, default = match.groups()
            assert key not in documented, f"{key} is documented twice"
            documented[key] = default
    return documented


def test_the_configuration_reference_documents_every_setting_with_its_default() -> None:
    documented = documented_settings(CONFIGURATION.read_text())
    defaults = product_defaults()

    assert set(defaults) == set(conf.DEFAULTS)
    assert sorted(set(defaults) - set(documented)) == [], "in conf.py, not in the reference"
    assert sorted(set(documented) - set(defaults)) == [], "in the reference, not in conf.py"
    wrong = {}
    for key, written in documented.items():
        value = ast.literal_eval(written)
        if value != defaults[key] or isinstance(value, bool) != isinstance(defaults[key], bool):
            wrong[key] = (written, defaults[key])
    assert wrong == {}, "documented default -> conf.py's"


@pytest.mark.parametrize("path", ["README.md", "benchmarks/README.md"])
def test_readmes_stay_short(path: str) -> None:
    lines = (ROOT / path).read_text().count("\n")
    assert lines < 300, f"{path} has {lines} lines: move detail into docs/ (or the journal)"


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings (lower case, punctuation dropped, spaces
    to hyphens, ``-1`` and so on for repeats)."""
    anchors: set[str] = set()
    for line in FENCE.sub("", markdown).splitlines():
        if not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def broken_links(doc: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        linked = (doc.parent / path_part).resolve() if path_part else doc
        if anchor and linked.suffix != ".md":
            anchor = ""  # a line or a fragment of a non-Markdown file
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in heading_anchors(linked.read_text()):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    assert broken_links(doc) == []


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "[ok](there.md) [ok](there.md#a-heading) [web](https://example.com) [self](#top)\n"
        "# Top\n[gone](missing.md) [bad anchor](there.md#nowhere)\n"
        "```\n[in code](ignored.md)\n```\n"
    )

    assert broken_links(doc) == ["missing.md: no such file", "there.md#nowhere: no such heading"]
