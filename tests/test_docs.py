"""The README is a quick start and the reference lives in docs/: the README stays short,
and no link in it or in docs/ points at a file or a heading that is not there (pages
moved between the two, so a link left behind is the likely break)."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug():
    """GitHub's heading anchors, as the findings catalogue's generator writes them."""
    path = ROOT / "tools" / "generate_findings_doc.py"
    spec = importlib.util.spec_from_file_location("generate_findings_doc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.slug


slug = _slug()


def prose(text: str) -> str:
    """The text outside code fences and inline code, where a link is a link."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings, their inline code kept (a repeated
    heading gets -1, -2 ...)."""
    text, out, fenced = page.read_text(encoding="utf-8"), [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    seen: dict[str, int] = {}
    found = set()
    for line in out:
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_the_readme_is_a_quick_start():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, (
        f"README.md has {len(lines)} lines: move reference text to a page under docs/"
    )


def test_the_readmes_two_commands_are_the_makefiles():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test"):
        assert f"make {target} " in readme and f"\n{target}:" in makefile


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_and_heading_that_exist(page: Path):
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        goes_to = (page.parent / path).resolve() if path else page
        if not goes_to.exists():
            broken.append(f"{target}: no {goes_to.relative_to(ROOT)}")
        elif anchor and goes_to.suffix == ".md" and anchor not in anchors(goes_to):
            broken.append(f"{target}: no heading #{anchor} in {goes_to.relative_to(ROOT)}")
    assert broken == [], f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_link_check_sees_what_github_does(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# A `b` title\n## Exit status\n## Exit status\n```\n# not one\n```\n")
    assert anchors(page) == {"a-b-title", "exit-status", "exit-status-1"}
    assert LINK.findall(prose("[a](x.md) `[b](y.md)` ![c](z.png)")) == ["x.md", "z.png"]
