#!/usr/bin/env python3
"""Checks that nothing of an old README was lost when it moved into the book:
every heading of OLD (outside code blocks) is a heading of some page under
docs/src, and every fenced code block of OLD appears, byte for byte, in some
page. Exit 1 naming what is missing.

    python3 docs/tools/check-moved.py OLD_README [docs/src]
    python3 docs/tools/check-moved.py <(git show BASE:README.md)
"""
import pathlib
import re
import sys


def parse(text):
    """Headings (text) and fenced code blocks (body) outside other blocks."""
    headings, blocks = [], []
    lines = text.split("\n")
    fence, body = None, []
    for line in lines:
        if fence is None:
            match = re.match(r"^(\s*)(```+|~~~+)", line)
            if match:
                fence, body = match.group(2), []
                continue
            heading = re.match(r"^#{1,6} (.*)$", line)
            if heading:
                headings.append(heading.group(1).strip())
        elif line.strip().startswith(fence):
            blocks.append("\n".join(body))
            fence = None
        else:
            body.append(line)
    return headings, blocks


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    old = pathlib.Path(sys.argv[1]).read_text()
    src = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "docs/src")
    pages = {path: path.read_text() for path in src.rglob("*.md")}
    book_headings = set()
    for text in pages.values():
        # A heading may have moved up or down a level: its text is what counts.
        book_headings.update(parse(text)[0])
    headings, blocks = parse(old)
    missing = [f"heading: {h}" for h in headings if h not in book_headings]
    everything = "\n".join(pages.values())
    missing += [f"code block:\n{b}" for b in blocks if b not in everything]
    for item in missing:
        print(f"not in {src}: {item}")
    print(f"{len(headings)} headings and {len(blocks)} code blocks checked, {len(missing)} missing")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
