"""The README and docs/: every relative link reaches a file, every anchor a heading of it,
and the README stays short (the reference lives in docs/).

Links are read with markdown-it-py, a CommonMark parser, so that code spans and code
blocks are not mistaken for links; anchors are made from headings as GitHub and GitLab
make them.
"""

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 200
DOCS = sorted(
    [README, ROOT / "bench" / "RESULTS.md", *(ROOT / "docs").rglob("*.md")],
    key=lambda p: str(p),
)

PARSER = MarkdownIt("commonmark").enable("table")


def tokens(path: Path):
    return PARSER.parse(path.read_text(encoding="utf-8"))


def inline_text(inline) -> str:
    """A heading's text as it shows: the words and code spans, without the markup."""
    return "".join(
        child.content for child in inline.children or () if child.type in ("text", "code_inline")
    )


def slug(text: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    stream = tokens(path)
    for index, token in enumerate(stream):
        if token.type != "heading_open":
            continue
        base = slug(inline_text(stream[index + 1]))
        name, n = base, 0
        while name in found:  # a repeated heading gets -1, -2, ...
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def links(path: Path) -> list[str]:
    found = []
    for token in tokens(path):
        for child in token.children or ():
            if child.type == "link_open":
                found.append(child.attrs["href"])
            elif child.type == "image":
                found.append(child.attrs["src"])
    return found


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_readme_stays_under_200_lines():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move reference to docs/"


def test_docs_has_its_map_and_the_readme_links_it():
    assert (ROOT / "docs" / "index.md").is_file()
    assert "docs/index.md" in links(README)


@pytest.mark.parametrize("doc", DOCS, ids=relative)
def test_every_relative_link_and_anchor_resolves(doc: Path):
    broken = []
    for href in links(doc):
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or href.startswith("/"):
            continue  # a web address or a path of the running service, not of this tree
        target = (doc.parent / unquote(parts.path)).resolve() if parts.path else doc
        if not target.exists():
            broken.append(f"{href}: no {relative(target)}")
        elif ROOT not in target.parents and target != ROOT:
            broken.append(f"{href}: outside the repository")
        elif parts.fragment:
            if target.suffix != ".md":
                broken.append(f"{href}: an anchor into a file that is not Markdown")
            elif unquote(parts.fragment) not in anchors(target):
                broken.append(f"{href}: no heading with that anchor in {relative(target)}")
    assert not broken, f"{relative(doc)}:\n" + "\n".join(broken)


def test_the_link_check_sees_broken_links_and_anchors(tmp_path):
    """The check itself: a missing file and a missing anchor are found, code is not read."""
    (tmp_path / "a.md").write_text(
        "# Top `x.y` — here\n\n## Top `x.y` — here\n\n"
        "[ok](#top-xy--here-1) [bad](#nowhere) [gone](missing.md) `[code](missing.md)`\n\n"
        "```\n[block](missing.md)\n```\n"
    )
    doc = tmp_path / "a.md"
    assert anchors(doc) == {"top-xy--here", "top-xy--here-1"}
    assert links(doc) == ["#top-xy--here-1", "#nowhere", "missing.md"]
