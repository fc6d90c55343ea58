#!/usr/bin/env python3
"""The built book (target/book) in a real headless Chromium, over HTTP.

Run by tests/docs/run.sh, which serves the book and passes its address:
`test_book.py http://127.0.0.1:PORT` prints a line per test and ends with "N passed, M failed"
(exit 1 on a failure). Every wait is a DOM condition with a deadline, polled. The screenshots of
the pages go to target/docs-screenshots/.
"""
import os
import sys
import time
import traceback
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "target" / "docs-screenshots"
DEADLINE = 20.0  # seconds, for every wait
# The pages whose images are checked: the front page, and a guide that shows the inspector's
# picture (../images/inspector.png).
FRONT = "index.html"
GUIDE = "guides/serve.html"
GUIDE_IMAGE = "images/inspector.png"
SEARCH_WORD = "compare"


def wait_for(what, condition, deadline=DEADLINE):
    """Polls condition() until it returns something true, which is returned; fails after deadline."""
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline:.0f} s waiting for {what}")
        time.sleep(0.1)


class Context:
    def __init__(self, base):
        self.base = base.rstrip("/")
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download anything
        self.driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=opts)
        self.console = []  # every SEVERE browser log entry seen, with the page it came from

    def open(self, page):
        """Loads a page of the book and waits until the document and mdBook's scripts are done."""
        self.driver.get(f"{self.base}/{page}")
        wait_for(f"{page} to load", lambda: self.driver.execute_script("return document.readyState") == "complete")
        self.collect_console(page)

    def collect_console(self, page):
        try:
            entries = self.driver.get_log("browser")
        except Exception:  # noqa: BLE001 - a driver without the log: nothing to check
            return
        self.console += [(page, e) for e in entries if e.get("level") == "SEVERE"]

    def images(self):
        """Every <img> of the page: (src, complete, naturalWidth)."""
        return self.driver.execute_script(
            "return Array.from(document.images).map(i => [i.currentSrc || i.src, i.complete, i.naturalWidth]);")

    def check_images(self, page):
        """Waits until every image of the page is done loading, then asserts each was decoded
        (naturalWidth > 0); returns their addresses."""
        imgs = wait_for(f"the images of {page} to finish loading",
                        lambda: (lambda l: [l] if all(c for _, c, _ in l) else None)(self.images()))[0]
        broken = [src for src, _, width in imgs if not width]
        assert not broken, f"{page}: images that did not load: {broken}"
        return [src for src, _, _ in imgs]

    def screenshot(self, name):
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / name
        assert self.driver.save_screenshot(str(path)), f"screenshot {path} failed"
        return path

    def close(self):
        self.driver.quit()


def check_front_page(ctx):
    """index.html: the book's title, the sidebar with every chapter, decoded images, a screenshot."""
    ctx.open(FRONT)
    title = ctx.driver.title
    assert "agent_state" in title, f"front page title: {title!r}"
    h1 = wait_for("the front page's heading", lambda: ctx.driver.find_elements(By.CSS_SELECTOR, "#mdbook-content h1"))
    assert h1[0].text.strip(), "the front page's first heading is empty"
    # mdBook 0.5 fills the sidebar from toc.js: wait for its links.
    links = wait_for("the sidebar's chapter links", lambda: [
        a for a in ctx.driver.find_elements(By.CSS_SELECTOR, "#mdbook-sidebar a[href]")
        if a.get_attribute("href").endswith(".html")] or None)
    hrefs = [a.get_attribute("href") for a in links]
    for page in ("introduction.html", "performance.html", "architecture.html", "contributing.html"):
        assert any(h.endswith("/" + page) for h in hrefs), f"the sidebar has no link to {page}: {hrefs}"
    assert ctx.driver.find_element(By.ID, "mdbook-sidebar").is_displayed(), "the sidebar is hidden at 1400 px"
    ctx.check_images(FRONT)
    ctx.screenshot("index.png")


def check_guide_images(ctx):
    """guides/serve.html: every image decoded, the inspector's picture among them, a screenshot."""
    ctx.open(GUIDE)
    srcs = ctx.check_images(GUIDE)
    assert any(s.endswith("/" + GUIDE_IMAGE) for s in srcs), \
        f"{GUIDE} shows no {GUIDE_IMAGE} (its images: {srcs})"
    # The screenshot shows the picture: scrolled to the middle of the viewport.
    ctx.driver.execute_script(
        "const i = Array.from(document.images).find(i => i.src.endsWith(arguments[0]));"
        "i.scrollIntoView({block: 'center'});", "/" + GUIDE_IMAGE)
    time.sleep(0.3)
    ctx.screenshot("guide-serve.png")


def check_search(ctx):
    """The search box: opened with its button, a word typed, results that link to a page of the book."""
    ctx.open(FRONT)
    d = ctx.driver
    d.find_element(By.ID, "mdbook-search-toggle").click()
    bar = wait_for("the search box", lambda: (lambda b: b if b.is_displayed() else None)(
        d.find_element(By.ID, "mdbook-searchbar")))
    bar.send_keys(SEARCH_WORD)
    results = wait_for(f"search results for {SEARCH_WORD!r}", lambda: d.find_elements(
        By.CSS_SELECTOR, "#mdbook-searchresults li a[href]") or None)
    href = results[0].get_attribute("href")
    assert href.startswith(ctx.base + "/") and ".html" in href, f"first result links to {href!r}"
    ctx.screenshot("search.png")
    target = href.split("#")[0].split("?")[0]
    results[0].click()
    wait_for(f"the result's page {target}", lambda: d.current_url.split("#")[0].split("?")[0] == target)
    wait_for("the document to load", lambda: d.execute_script("return document.readyState") == "complete")
    h1 = d.find_elements(By.CSS_SELECTOR, "#mdbook-content h1")
    assert h1 and h1[0].text.strip(), f"{target} has no heading"
    assert "404" not in d.title, f"{target}: {d.title}"
    ctx.collect_console(target)


def check_console(ctx):
    """No error in the browser's console on any page the tests above opened."""
    ctx.collect_console("(last page)")
    bad = [f"{page}: {e['message']}" for page, e in ctx.console]
    assert not bad, "browser console errors:\n" + "\n".join(bad)


def main():
    if len(sys.argv) != 2:
        print("usage: test_book.py http://127.0.0.1:PORT", file=sys.stderr)
        return 2
    passed = failed = 0
    ctx = None
    try:
        ctx = Context(sys.argv[1])
        for test in (check_front_page, check_guide_images, check_search, check_console):
            t0 = time.monotonic()
            try:
                test(ctx)
                passed += 1
                print(f"PASS {test.__name__} ({time.monotonic() - t0:.1f} s)", flush=True)
            except Exception:  # noqa: BLE001 - every failure is reported, then the next test runs
                failed += 1
                print(f"FAIL {test.__name__}\n{traceback.format_exc()}", flush=True)
    except Exception:  # noqa: BLE001
        failed += 1
        print(f"FAIL setup\n{traceback.format_exc()}", flush=True)
    finally:
        if ctx:
            ctx.close()
    print(f"screenshots: {SHOTS}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
