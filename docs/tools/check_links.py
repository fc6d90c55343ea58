#!/usr/bin/env python3
"""Checks every internal link of the built book (target/book by default): each relative href
and src of every HTML page must name a file that exists in the build, and a #fragment must name
an element id (or anchor name) of the page it points into. External links (a scheme such as
https:, mailto:) are not followed: the check needs no network.

Usage: check_links.py [BOOK_DIR]   (exits 1 and lists each broken link with the page it is on)
"""
import html.parser
import os
import pathlib
import sys
import urllib.parse

# Pages mdBook writes itself whose links are its own business (the print page repeats every
# page's links with rewritten fragments; 404.html uses site-absolute paths).
SKIP_PAGES = {"print.html", "404.html"}


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (attribute value, line)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)
            elif (name == "href" and tag in ("a", "link")) or (name == "src" and tag in ("img", "script", "iframe")):
                self.links.append((value, self.getpos()[0]))


def parse(path, cache):
    if path not in cache:
        page = Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = page
    return cache[path]


def main():
    book = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/book").resolve()
    if not (book / "index.html").is_file():
        print(f"check_links.py: {book}/index.html is missing: build the book first (make docs)")
        return 1
    cache, broken, checked = {}, [], 0
    pages = sorted(p for p in book.rglob("*.html")
                   if p.name not in SKIP_PAGES and "api" not in p.relative_to(book).parts[:1])
    for page_path in pages:
        page = parse(page_path, cache)
        for value, line in page.links:
            url = urllib.parse.urlsplit(value)
            if url.scheme or url.netloc or value.startswith("//"):
                continue  # external
            checked += 1
            where = f"{page_path.relative_to(book)}:{line}"
            target = page_path if not url.path else (page_path.parent / urllib.parse.unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if book not in target.parents and target != book:
                broken.append(f"{where}: {value}: outside the book")
                continue
            if not target.is_file():
                broken.append(f"{where}: {value}: no such file {target.relative_to(book)}")
                continue
            if url.fragment and target.suffix == ".html":
                ids = parse(target, cache).ids
                if urllib.parse.unquote(url.fragment) not in ids:
                    broken.append(f"{where}: {value}: no anchor #{url.fragment} in {target.relative_to(book)}")
    for b in broken:
        print("broken link: " + b)
    print(f"check_links.py: {len(pages)} pages, {checked} internal links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
