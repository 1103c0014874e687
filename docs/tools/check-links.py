#!/usr/bin/env python3
"""Checks every internal link of a built mdBook: each `href`/`src` that is not
an external URL must name a file of the book, and its `#fragment` an element
id in that file. Markdown files named after the book (the README) have each
relative link checked for its file. Exit 1 listing each broken link.

    python3 docs/tools/check-links.py docs/book [README.md ...]
"""
import html.parser
import pathlib
import re
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    """The ids a page defines and the links it makes."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if name in ("href", "src") and value:
                self.links.append(value)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    pages = {}
    for path in root.rglob("*.html"):
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path] = page
    broken = []
    checked = 0
    for path, page in sorted(pages.items()):
        for link in page.links:
            parsed = urllib.parse.urlsplit(link)
            if parsed.scheme or parsed.netloc or link.startswith(("mailto:", "javascript:")):
                continue
            checked += 1
            # A path from `/` is from the book's root (the 404 page's links).
            base = root if parsed.path.startswith("/") else path.parent
            target = path if not parsed.path else (base / urllib.parse.unquote(parsed.path).lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(root)}: {link}"
            if not str(target).startswith(str(root)) or not target.exists():
                broken.append(f"{where} (no file {target})")
                continue
            fragment = urllib.parse.unquote(parsed.fragment)
            if fragment and target.suffix == ".html" and fragment not in pages[target].ids:
                broken.append(f"{where} (no id `{fragment}` in {target.relative_to(root)})")
    for markdown in map(pathlib.Path, sys.argv[2:]):
        for link in re.findall(r"\]\(([^)\s]+)\)", markdown.read_text(encoding="utf-8")):
            parsed = urllib.parse.urlsplit(link)
            if parsed.scheme or not parsed.path:
                continue
            checked += 1
            if not (markdown.parent / parsed.path).exists():
                broken.append(f"{markdown}: {link} (no file)")
    for line in broken:
        print(f"broken link: {line}")
    print(f"{len(pages)} pages, {checked} internal links checked, {len(broken)} broken")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
