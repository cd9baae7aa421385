#!/usr/bin/env python3
"""Every relative link of the book and of the README resolves, anchors included.

Run after `mdbook build docs/book` (which renders into target/book/):

    python3 docs/book/check-links.py [BOOK_HTML_DIR]

- The rendered book: every chapter of docs/book/src is rendered (listed in SUMMARY.md),
  every relative `href` in a page's content (its <main>) names a file
  of the rendered book, and every `#anchor` an `id` in that file. This is what a reader
  clicks, after mdBook turned `chapter.md#x` into `chapter.html#x`: a chapter missing from
  SUMMARY.md, or a link to a repository file outside the book, does not resolve there.
- The Markdown outside the book (README.md, CHANGELOG.md, docs/*.md): every relative link
  names a file of the repository, and an anchor into a Markdown file names one of its
  headings (GitHub's ids), so the front door's links into the book hold too.

Prints each broken link with its page and exits 1 when there is one.
"""

import html.parser
import pathlib
import re
import sys
import urllib.parse

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
SKIPPED_PAGES = {"print.html", "toc.html", "404.html"}
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


class Page(html.parser.HTMLParser):
    """The ids of a rendered page, and the hrefs inside its <main>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.hrefs = []
        self.main = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "main":
            self.main += 1
        if self.main and tag == "a" and attrs.get("href"):
            self.hrefs.append((attrs["href"], self.getpos()[0]))

    def handle_endtag(self, tag):
        if tag == "main":
            self.main -= 1


def parse(path, cache={}):
    if path not in cache:
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        cache[path] = page
    return cache[path]


def check_book(book):
    broken = []
    pages = sorted(p for p in book.rglob("*.html") if p.name not in SKIPPED_PAGES)
    if len(pages) < 10:
        return [f"{book}: only {len(pages)} pages: was the book built?"], 0
    # A chapter left out of SUMMARY.md is not rendered: no reader finds it.
    src = REPO / "docs" / "book" / "src"
    for chapter in sorted(src.rglob("*.md")):
        if chapter.name != "SUMMARY.md":
            rendered = book / chapter.relative_to(src).with_suffix(".html")
            if not rendered.is_file():
                broken.append(f"{chapter.relative_to(REPO)}: not in SUMMARY.md, so not in the book")
    links = 0
    for page in pages:
        for href, line in parse(page).hrefs:
            if EXTERNAL.match(href):
                continue
            links += 1
            where = f"{page.relative_to(book)}:{line}: {href}"
            path, _, anchor = href.partition("#")
            target = (page.parent / urllib.parse.unquote(path)).resolve() if path else page
            if book.resolve() not in [target, *target.parents]:
                broken.append(f"{where}: leaves the book (name repository files as code)")
            elif not target.is_file():
                broken.append(f"{where}: no such page")
            elif anchor and target.suffix == ".html":
                if urllib.parse.unquote(anchor) not in parse(target).ids:
                    broken.append(f"{where}: no id `{anchor}` in {target.name}")
    return broken, links


def outside_code(text):
    """(line number, line) of every line of a Markdown file outside fenced code."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
            continue
        if not fence:
            yield number, line


def github_ids(text):
    """The anchors GitHub gives the headings of a Markdown file."""
    ids, seen = set(), {}
    for _, line in outside_code(text):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2))
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, -1) + 1
        seen[slug] = n
        ids.add(slug if n == 0 else f"{slug}-{n}")
    return ids


def markdown_links(text):
    """(target, line) of every inline link outside code."""
    found = []
    for number, line in outside_code(text):
        line = re.sub(r"`[^`]*`", "", line)
        for m in re.finditer(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            found.append((m.group(1), number))
    return found


def check_markdown():
    broken, links = [], 0
    files = [REPO / "README.md", REPO / "CHANGELOG.md"]
    files += sorted(p for p in (REPO / "docs").glob("*.md"))
    for page in files:
        if not page.is_file():
            continue
        for href, line in markdown_links(page.read_text(encoding="utf-8")):
            if EXTERNAL.match(href):
                continue
            links += 1
            where = f"{page.relative_to(REPO)}:{line}: {href}"
            path, _, anchor = href.partition("#")
            target = (page.parent / urllib.parse.unquote(path)).resolve() if path else page
            if not target.exists():
                broken.append(f"{where}: no such file")
            elif anchor and target.suffix == ".md":
                if anchor not in github_ids(target.read_text(encoding="utf-8")):
                    broken.append(f"{where}: no heading `{anchor}` in {target.name}")
    return broken, links


def main():
    book = pathlib.Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else REPO / "target" / "book"
    broken_book, book_links = check_book(book)
    broken_md, md_links = check_markdown()
    broken = broken_book + broken_md
    for line in broken:
        print(f"broken link: {line}", file=sys.stderr)
    print(f"links: {book_links} in the book, {md_links} in the README and docs/; {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
