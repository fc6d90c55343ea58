#!/usr/bin/env python3
"""The inspector page in a real headless Chromium, against a real `agent-state serve`.

Run by tests/inspector/run.sh: `test_inspector.py [--update-screenshot]` prints a line per test and
ends with "N passed, M failed" (exit 1 on a failure); under pytest they run as one test.
Four stores, each served by its own `agent-state serve` (always stopped with SIGTERM): the main
one (four agents, a support bot with a dozen changes), one written by JSON Patches, one with the
change log off (409) and one keeping only two changes (410). Every wait is a DOM condition with a deadline, polled.
"""
import base64
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "target" / "release" / "agent-state"
ARTIFACT = ROOT / "target" / "inspector" / "inspector.png"
README_SHOT = ROOT / "docs" / "src" / "images" / "inspector.png"
DEADLINE = 20.0  # seconds, for every wait but the live-update one
LIVE_LIMIT_MS = 1000.0
BOT = "support-bot/ticket-4711"
OTHERS = ["billing-bot/run-88", "support-bot/ticket-4712", "triage-bot/inbox"]

MSGS = [
    {"role": "user", "text": "Hi, I was charged twice for my March invoice."},
    {"role": "assistant", "text": "Sorry about that, Dana. Let me look at your invoices."},
    {"role": "assistant", "text": "I found a duplicate charge of EUR 49.00 (INV-2031-B). Shall I refund it?"},
    {"role": "user", "text": "Yes please!"},
    {"role": "assistant", "text": "Done: EUR 49.00 is on its way back to your card, within 3 days."},
]
# The support bot's merge patches, written one by one (version = index + 1).
BOT_CHANGES = [
    {"ticket": {"id": "T-4711", "subject": "Charged twice for my March invoice", "status": "open", "priority": "normal",
                "channel": "chat"},
     "user": {"id": "u_1842", "name": "Dana Whitfield", "email": "dana.whitfield@example.com", "plan": "pro",
              "locale": "en-GB"}, "messages": MSGS[:1], "draft": "Looking into it..."},
    {"agent": {"name": "Aria", "model": "support-v3", "step": "lookup_invoices"}},
    {"messages": MSGS[:2]},
    {"tools": {"billing.lookup_invoices": {"status": "running", "args": {"user": "u_1842", "month": "2024-03"}}}},
    {"tools": {"billing.lookup_invoices": {"status": "ok", "ms": 182, "result": {"invoices": [
        {"id": "INV-2031", "amount": 49.0, "status": "paid"},
        {"id": "INV-2031-B", "amount": 49.0, "status": "paid", "duplicate_of": "INV-2031"}]}}}},
    {"ticket": {"priority": "high", "tags": ["billing", "duplicate-charge"]}, "agent": {"step": "propose_refund"}},
    {"messages": MSGS[:3]},
    {"messages": MSGS[:4]},
    {"tools": {"billing.refund": {"status": "running", "args": {"invoice": "INV-2031-B", "amount": 49.0}}},
     "agent": {"step": "refund"}},
    {"tools": {"billing.refund": {"status": "ok", "ms": 421,
                                  "result": {"refund_id": "re_9QX2L", "amount": 49.0, "eta_days": 3}}}},
    {"messages": MSGS[:5], "draft": None},
    {"ticket": {"status": "resolved", "resolution": "refund_issued"}, "agent": {"step": "done"},
     "sentiment": {"label": "positive", "score": 0.86}},
]
# Written by another process while the page watches: (patch, JSON pointer, expected text).
LIVE = [
    ({"agent": {"step": "await_feedback"}}, "/agent/step", '"await_feedback"'),
    ({"sentiment": {"score": 0.93}}, "/sentiment/score", "0.93"),
    ({"ticket": {"csat": 5}}, "/ticket/csat", "5"),
]


def write(store, agent, patch, log=None, verb="set"):
    """`agent-state set|replace|patch`; the change log is switched on per agent, by its first
    write."""
    args = [str(CLI), verb, "--agent", agent, *(["--change-log", json.dumps(log)] if log else []), str(store)]
    out = subprocess.run([*args, json.dumps(patch)], capture_output=True, text=True)
    assert out.returncode == 0, f"{args}: exit {out.returncode}: {out.stderr}"


class Server:
    """One `agent-state serve STORE` on a free loopback port (or `port`)."""

    def __init__(self, store, token_file, tmp, port=0, args=()):
        self.log = open(Path(tmp) / f"serve-{Path(store).stem}-{time.monotonic_ns()}.log", "w+")
        self.proc = subprocess.Popen(
            [str(CLI), "serve", str(store), "--listen", f"127.0.0.1:{port}", "--token-file", str(token_file), *args],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        lines = queue.Queue()  # stdout, read to its end (None) by a thread so it never blocks serve
        threading.Thread(target=lambda: [*map(lines.put, self.proc.stdout), lines.put(None)], daemon=True).start()
        end, m = time.monotonic() + DEADLINE, None
        while m is None:
            try:
                line = lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise AssertionError(f"no 'listening on' line (exit {self.proc.returncode}): {self.stderr()}")
            m = re.search(r"listening on (http://[0-9.]+:(\d+))", line)
        self.base, self.port = m.group(1), int(m.group(2))

    def stderr(self):
        self.log.seek(0)
        return self.log.read()[-2000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def http_get(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=DEADLINE) as res:
            return res.status, dict(res.headers), res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


class Context:
    def __init__(self):
        self.tmpdir = tempfile.TemporaryDirectory(prefix="inspector-")
        self.tmp = Path(self.tmpdir.name)
        self.servers, self.driver = [], None
        self.token, self.token_file = "inspector-test-token-0123456789", self.tmp / "token"
        self.token_file.write_text(self.token + "\n")
        self.token_file.chmod(0o600)  # private, as serve requires of a token file

    def start(self):
        assert CLI.exists(), f"{CLI} is missing: cargo build --release -p agent-state-cli"
        self.store = self.tmp / "agents.db"
        log = {"keep_last": 1000}
        for i, patch in enumerate(BOT_CHANGES):
            write(self.store, BOT, patch, log if i == 0 else None)
        write(self.store, "support-bot/ticket-4712", log=log, patch={
            "ticket": {"id": "T-4712", "subject": "Cannot log in after a password reset", "status": "open"},
            "user": {"id": "u_2210", "name": "Marco Rossi", "plan": "free"},
            "messages": [{"role": "user", "text": "The reset link says it has expired."}]})
        write(self.store, "support-bot/ticket-4712", {"agent": {"name": "Aria", "step": "triage"}})
        write(self.store, "support-bot/ticket-4712", {
            "ticket": {"id": "T-4712", "status": "escalated", "queue": "identity"},
            "user": {"id": "u_2210", "name": "Marco Rossi", "plan": "free"},
            "handoff": {"to": "human", "reason": "account locked after 5 attempts"}}, verb="replace")
        for p in (0.25, 0.5, 0.75):
            write(self.store, "billing-bot/run-88", {"run": {"id": 88, "job": "monthly-invoices", "progress": p}},
                  log if p == 0.25 else None)
        write(self.store, "triage-bot/inbox", {"queue": {"pending": 3, "oldest": "T-4720"}}, log)
        self.main = self.serve(self.store)
        self.page = f"{self.main.base}/?access_token={self.token}"

        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download anything
        self.driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=opts)
        # A viewport of exactly 1400 x 900 CSS pixels for the screenshot.
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})

    def serve(self, store, port=0, token_file=None, args=()):
        server = Server(store, token_file or self.token_file, self.tmp, port, args)
        self.servers.append(server)
        return server

    def close(self):
        try:
            if self.driver is not None:
                self.driver.quit()
        finally:
            for s in self.servers:
                s.stop()
            self.tmpdir.cleanup()

    # ---- browser helpers ----
    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def text(self, selector):
        return self.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", selector)

    def wait(self, what, cond, timeout=DEADLINE):
        end, last = time.monotonic() + timeout, None
        while True:
            try:
                if got := cond():
                    return got
            except WebDriverException as e:
                last = e
            if time.monotonic() > end:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}"
                                     f"{f' ({last})' if last else ''}; status line: {self.text('#status-text')!r}")
            time.sleep(0.05)

    def wait_text(self, selector, expected, timeout=DEADLINE):
        self.wait(f"{selector} to read {expected!r}", lambda: self.text(selector) == expected, timeout)

    def versions(self):
        return self.js("return [...document.querySelectorAll('#history .change')].map(e => +e.dataset.version);")

    def agent_ids(self):
        return self.js("return [...document.querySelectorAll('#agents .agent-item')].map(b => b.dataset.id);")

    def open_agent(self, agent, base=None):
        self.driver.get(f"{base or self.page}#agent={urllib.parse.quote(agent, safe='')}")
        self.wait_text("#agent-id", agent)
        self.wait("the watch stream to be live", lambda: self.text("#live") == "live")

    def check_console(self, allow_network=False):
        """Fails on SEVERE browser console entries (JS errors, CSP violations); with
        allow_network, failed requests the test provoked (409, 410, 401, refused) are allowed."""
        bad = [e for e in self.driver.get_log("browser") if e["level"] == "SEVERE"
               and not (allow_network and e.get("source") == "network")]
        assert not bad, "browser console errors:\n" + "\n".join(e["message"] for e in bad)

    def status_log(self):
        """The status line's latest error and, in its title, every error kept."""
        return self.text("#status-text") + "\n" + self.js("return document.getElementById('status').title;")

    def clean(self, network=False):
        """No error in the status line, nor in the console (but provoked failed requests)."""
        cls = self.js("return document.getElementById('status').className;")
        assert "status-error" not in cls, f"the status line shows an error: {self.text('#status-text')!r}"
        self.check_console(network)

    def type(self, element_id, *keys):
        """Replaces the text of an input, as a user would (select all, type)."""
        field = self.driver.find_element(By.ID, element_id)
        field.send_keys(Keys.CONTROL, "a")
        field.send_keys(*keys)
        return field


# ---- the tests, in order (they share the page) ----

def check_http_token_and_csp(ctx):
    status, _, body = http_get(f"{ctx.main.base}/")
    assert status == 401, f"GET / without the token: {status}"
    assert json.loads(body) == {"error": {"code": "unauthorized"}}, body
    assert http_get(f"{ctx.main.base}/?access_token=wrong-token-wrong-token")[0] == 401, "a wrong token"
    status, headers, html = http_get(ctx.page)
    assert status == 200, f"GET / with the token: {status}"
    csp = {k.lower(): v for k, v in headers.items()}.get("content-security-policy")
    assert csp and "default-src 'none'" in csp and "connect-src 'self'" in csp, f"CSP header: {csp!r}"
    assert "<!--STYLE-->" not in html and "<!--SCRIPT-->" not in html
    for tag in ("style", 'script type="module"'):
        inline = re.search(f"<{tag}>(.*?)</{tag.split()[0]}>", html, re.S).group(1)
        digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp, f"the CSP does not allow the inline <{tag}> by its hash"
    status, _, body = http_get(f"{ctx.main.base}/v1/agents", ctx.token)
    assert status == 200 and [a["id"] for a in json.loads(body)["agents"]] == sorted([BOT] + OTHERS), body


def check_the_token_leaves_the_address_bar(ctx):
    ctx.driver.get(ctx.page + "&page_size=50#keep")
    ctx.wait("the agent list", lambda: len(ctx.agent_ids()) > 0)
    url = ctx.driver.current_url
    assert "access_token" not in url and ctx.token not in url, f"the address bar: {url}"
    assert url.endswith("/?page_size=50#keep"), f"the rest of the address is kept: {url}"
    assert ctx.token not in ctx.js("return location.href + JSON.stringify(history.state);")
    ctx.driver.get(ctx.page)  # back to the page the next checks expect
    ctx.wait("the agent list", lambda: len(ctx.agent_ids()) > 0)


def check_agent_list_paging_and_search(ctx):
    ctx.driver.get(ctx.page + "&page_size=3")
    ctx.wait("the first page of 3 agents", lambda: len(ctx.agent_ids()) == 3)
    more = ctx.driver.find_element(By.ID, "more")
    assert more.is_displayed(), "a 'more' button after a full page"
    more.click()
    ctx.wait("all 4 agents after 'more'", lambda: ctx.agent_ids() == sorted([BOT] + OTHERS))
    ctx.wait("'more' to go away on the last page", lambda: not more.is_displayed())
    row = f'#agents .agent-item[data-id="{BOT}"]'
    meta = [ctx.text(f"{row} .a-{k}") for k in ("version", "bytes", "when")]
    assert meta[0] == f"v{len(BOT_CHANGES)}" and re.fullmatch(r"[\d.]+ (B|KiB)", meta[1]) \
        and ("ago" in meta[2] or meta[2] == "just now"), f"version, bytes, time: {meta!r}"
    ctx.driver.get(ctx.page)
    ctx.wait("the agent list", lambda: len(ctx.agent_ids()) == 4)
    ctx.type("search", "support")
    ctx.wait("search 'support' to list the two support agents",
             lambda: ctx.agent_ids() == [BOT, "support-bot/ticket-4712"])
    ctx.type("search", "bill")
    ctx.wait("search 'bill' to list the billing agent", lambda: ctx.agent_ids() == ["billing-bot/run-88"])
    ctx.type("search", "nobody")
    ctx.wait("no agent, and a note", lambda: ctx.js("return !document.getElementById('agents-empty').hidden;"))
    assert ctx.agent_ids() == []
    ctx.type("search", Keys.BACKSPACE)
    ctx.wait("all agents again", lambda: len(ctx.agent_ids()) == 4)
    ctx.clean()


def check_selecting_an_agent_shows_its_state_tree(ctx):
    ctx.driver.find_element(By.CSS_SELECTOR, f'#agents .agent-item[data-id="{BOT}"]').click()
    ctx.wait_text("#agent-id", BOT)
    assert ctx.js("return location.hash;") == "#agent=support-bot%2Fticket-4711"
    ctx.wait_text('#state [data-path="/user/name"]', '"Dana Whitfield"')
    ctx.wait_text('#state [data-path="/tools/billing.refund/result/refund_id"]', '"re_9QX2L"')
    ctx.wait_text('#state [data-path="/messages/3/text"]', '"Yes please!"')
    deep = '#state [data-path="/tools/billing.lookup_invoices/result/invoices/1/amount"]'
    assert ctx.text(deep) is None, "depth 5 starts collapsed"
    ctx.driver.find_element(By.ID, "expand-all").click()
    ctx.wait_text(deep, "49")
    ctx.driver.find_element(By.ID, "collapse-all").click()
    ctx.wait("collapse all", lambda: ctx.text('#state [data-path="/user/name"]') is None)
    ctx.driver.find_element(By.ID, "expand-all").click()
    ctx.wait_text("#version", f"version {len(BOT_CHANGES)}")
    assert ctx.js("return document.querySelector('.agent-item.selected').dataset.id;") == BOT
    # Typed values are colored by class; objects and arrays collapse and expand.
    assert ctx.js("return document.querySelector(arguments[0]).className;", '#state [data-path="/sentiment/score"]') \
        == "value t-number"
    node = '#state .node[data-path="/user"]'
    ctx.driver.find_element(By.CSS_SELECTOR, f"{node} > .row > .toggle").click()
    ctx.wait("/user to collapse", lambda: ctx.text('#state [data-path="/user/name"]') is None)
    assert "5 keys" in ctx.text(f"{node} > .row > .summary")
    ctx.driver.find_element(By.CSS_SELECTOR, f"{node} > .row > .toggle").click()
    ctx.wait_text('#state [data-path="/user/name"]', '"Dana Whitfield"')
    ctx.clean()


def check_hash_link_opens_an_agent(ctx):
    ctx.driver.get("about:blank")
    ctx.open_agent("support-bot/ticket-4712")
    ctx.wait_text('#state [data-path="/handoff/reason"]', '"account locked after 5 attempts"')
    ctx.wait_text("#version", "version 3")
    assert ctx.text('#state [data-path="/agent"]') is None, "the replacement removed /agent"
    kinds = "return [...document.querySelectorAll('#history .change')].map(e => e.dataset.kind).join();"
    ctx.wait("the history of 3 changes", lambda: ctx.js(kinds) == "replace,patch,patch")
    assert "The whole state was replaced" in ctx.text('#history .change[data-version="3"] .patch')
    assert ctx.text('#history .change[data-version="3"] .d-removed[data-diff-path="/agent"] .d-path') == "/agent"
    ctx.driver.get(ctx.page)  # the hash is the only way in: no agent without it
    ctx.wait("the agent list", lambda: len(ctx.agent_ids()) == 4)
    assert ctx.js("return document.getElementById('agent').hidden;") is True
    ctx.check_console()


def check_history_shows_the_changes(ctx):
    ctx.open_agent(BOT)
    n = len(BOT_CHANGES)
    ctx.wait("every change, newest first", lambda: ctx.versions() == list(range(n, 0, -1)))
    summary = ctx.driver.find_element(By.CSS_SELECTOR, f'#history .change[data-version="{n}"] > summary')
    assert summary.is_displayed() and f"v{n}" in summary.text and "patch" in summary.text, summary.text
    assert ctx.text("#history-count") == f"{n} changes"
    assert ctx.js("return document.querySelector('#history .change[data-version=\"12\"]').open;") is True
    six = '#history .change[data-version="6"]'
    assert '"priority": "high"' in ctx.text(f"{six} .patch"), ctx.text(f"{six} .patch")
    changed = f'{six} .d-changed[data-diff-path="/ticket/priority"]'
    assert (ctx.text(f"{changed} .d-old"), ctx.text(f"{changed} .d-new")) == ('"normal"', '"high"')
    assert ctx.text(f'{six} .d-added[data-diff-path="/ticket/tags"] .d-new') == '["billing","duplicate-charge"]'
    eleven = '#history .change[data-version="11"]'
    assert ctx.text(f'{eleven} .d-removed[data-diff-path="/draft"] .d-old') == '"Looking into it..."'
    assert ctx.text(f'{eleven} .d-added[data-diff-path="/messages/4"]') is not None
    assert ctx.text('#history .change[data-version="1"] .c-counts') == "+4~0−0"
    ctx.clean()


def check_state_at_an_older_version(ctx):
    ctx.wait("the slider to follow the newest version",
             lambda: ctx.js("return document.getElementById('at-version').value;") == str(len(BOT_CHANGES)))
    ctx.type("at-version-number", "5", Keys.ENTER)
    at = "#at-version-state"
    ctx.wait_text(f'{at} [data-path="/ticket/priority"]', '"normal"')
    assert ctx.text(f'{at} [data-path="/tools/billing.lookup_invoices/status"]') == '"ok"'
    assert ctx.text(f'{at} [data-path="/tools/billing.refund"]') is None, "no refund at version 5"
    assert ctx.text(f'{at} [data-path="/draft"]') == '"Looking into it..."'
    assert ctx.text('#state [data-path="/ticket/priority"]') == '"high"', "the live tree stays current"
    assert ctx.text("#at-version-label").startswith("version 5 · written"), ctx.text("#at-version-label")
    slider = ctx.driver.find_element(By.ID, "at-version")
    slider.send_keys(Keys.HOME)
    ctx.wait("version 0: the initial state {}", lambda: "(empty state)" in (ctx.text(at) or ""))
    slider.send_keys(Keys.END)
    ctx.wait_text(f'{at} [data-path="/ticket/status"]', '"resolved"')
    ctx.type("at-version-number", "2", Keys.ENTER)
    ctx.wait_text(f'{at} [data-path="/agent/step"]', '"lookup_invoices"')
    assert ctx.text(f'{at} [data-path="/messages/1"]') is None
    ctx.clean()


def check_a_write_by_another_process_shows_up_live(ctx):
    ctx.wait("the watch stream to be live", lambda: ctx.text("#live") == "live")
    for i, (patch, path, expected) in enumerate(LIVE):
        version = len(BOT_CHANGES) + i + 1
        selector = f'#state [data-path="{path}"]'
        assert ctx.text(selector) != expected
        write(ctx.store, BOT, patch)
        t0 = time.monotonic()
        while ctx.text(selector) != expected:
            elapsed = (time.monotonic() - t0) * 1000
            assert elapsed < LIVE_LIMIT_MS, f"{path} not {expected} {elapsed:.0f} ms after the CLI returned"
            time.sleep(0.02)
        ms = (time.monotonic() - t0) * 1000
        print(f"    live update {i + 1}: {path} = {expected} in the DOM {ms:.0f} ms after the CLI returned")
        assert ms < LIVE_LIMIT_MS
        ctx.wait_text("#version", f"version {version}")
        node_class = ctx.js("return arguments[0].closest('.node').className;",
                            ctx.driver.find_element(By.CSS_SELECTOR, selector))
        assert "changed" in node_class or "added" in node_class, f"no highlight: {node_class!r}"
        ctx.wait(f"history entry v{version} on top", lambda: ctx.js(
            "return document.querySelector('#history .change').dataset.version;") == str(version))
    assert "v15 (patch), 1 added" in ctx.text("#last-change"), ctx.text("#last-change")
    assert ctx.text('#history .change[data-version="15"] .d-added[data-diff-path="/ticket/csat"] .d-new') == "5"
    ctx.wait("the slider at the newest version",
             lambda: ctx.js("return document.getElementById('at-version').max;") == "15")
    ctx.wait("the list row's version", lambda: "v15" in ctx.text(f'#agents .agent-item[data-id="{BOT}"]'))
    ctx.clean()


def check_screenshot(ctx):
    ctx.type("at-version-number", "9", Keys.ENTER)
    ctx.wait_text('#at-version-state [data-path="/agent/step"]', '"refund"')
    ctx.js("document.getElementById('state').scrollTop = 0; document.activeElement.blur();")
    ctx.wait("the highlights' animations to end", lambda: ctx.js("return document.getAnimations().length === 0;"))
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    assert ctx.driver.save_screenshot(str(ARTIFACT)), "screenshot failed"
    print(f"    screenshot: {ARTIFACT.relative_to(ROOT)}")
    if "--update-screenshot" in sys.argv or os.environ.get("INSPECTOR_UPDATE_SCREENSHOT") == "1":
        README_SHOT.parent.mkdir(parents=True, exist_ok=True)
        README_SHOT.write_bytes(ARTIFACT.read_bytes())
        print(f"    screenshot: {README_SHOT.relative_to(ROOT)}")
    ctx.check_console()


def check_a_json_patch_shows_its_kind_and_operations(ctx):
    store = ctx.tmp / "jsonpatch.db"
    agent = "support-bot/ticket-7001"
    write(store, agent, {"messages": [{"role": "user", "text": "Where is my parcel?"}], "status": "open"},
          {"keep_last": 100})
    # A value that would be markup if the page ever parsed it as HTML.
    trap = "<img src=x onerror=document.title='pwned'>"
    write(store, agent, [{"op": "add", "path": "/messages/-", "value": {"role": "assistant", "text": trap}},
                         {"op": "test", "path": "/status", "value": "open"},
                         {"op": "replace", "path": "/status", "value": "answered"}], verb="patch")
    server = ctx.serve(store)
    ctx.driver.get("about:blank")
    ctx.open_agent(agent, f"{server.base}/?access_token={ctx.token}")
    ctx.wait_text('#state [data-path="/status"]', '"answered"')
    kinds = "return [...document.querySelectorAll('#history .change')].map(e => e.dataset.kind).join();"
    ctx.wait("the history of 2 changes", lambda: ctx.js(kinds) == "json_patch,patch")
    two = '#history .change[data-version="2"]'
    assert ctx.text(f"{two} .c-kind") == "json_patch", ctx.text(f"{two} .c-kind")
    assert ctx.text(f"{two} h4") == "JSON Patch: 3 operations", ctx.text(f"{two} h4")
    ops = ctx.text(f"{two} .patch").split("\n")
    assert [json.loads(line)["op"] for line in ops] == ["add", "test", "replace"], ops
    assert json.loads(ops[0])["value"]["text"] == trap, "the operation's value, as text"
    assert ctx.text(f'{two} .d-added[data-diff-path="/messages/1"]') is not None
    # Live: one more JSON Patch, applied to the page's copy by the client.
    write(store, agent, [{"op": "move", "from": "/messages/0", "path": "/first"},
                         {"op": "add", "path": "/messages/0/seen", "value": True}], verb="patch")
    ctx.wait_text('#state [data-path="/messages/0/seen"]', "true")
    ctx.wait_text('#state [data-path="/first/text"]', '"Where is my parcel?"')
    ctx.wait_text("#version", "version 3")
    assert "v3 (json_patch)" in ctx.text("#last-change"), ctx.text("#last-change")
    ctx.wait("the new change on top", lambda: ctx.js(kinds) == "json_patch,json_patch,patch")
    assert ctx.text('#history .change[data-version="3"] h4') == "JSON Patch: 2 operations"
    assert ctx.js("return document.querySelectorAll('img').length;") == 0, "no markup was parsed"
    assert ctx.js("return document.title;") != "pwned"
    ctx.clean()
    server.stop()


def check_change_log_off(ctx):
    store = ctx.tmp / "nolog.db"
    write(store, "support-bot/ticket-5001", {"ticket": {"id": "T-5001", "status": "open"}})
    write(store, "support-bot/ticket-5001", {"ticket": {"status": "pending"}})
    server = ctx.serve(store)
    ctx.driver.get("about:blank")
    ctx.open_agent("support-bot/ticket-5001", f"{server.base}/?access_token={ctx.token}")
    ctx.wait_text('#state [data-path="/ticket/status"]', '"pending"')
    ctx.wait("the history panel to say the change log is off",
             lambda: "change log is off" in (ctx.text("#history .log-off") or ""))
    assert ctx.js("return document.getElementById('at-version-number').disabled;") is True
    write(store, "support-bot/ticket-5001", {"ticket": {"status": "closed"}})
    ctx.wait_text('#state [data-path="/ticket/status"]', '"closed"')
    ctx.clean(network=True)  # the 409 answers are failed requests
    server.stop()


def check_gone_network_and_401_in_the_status_line(ctx):
    store = ctx.tmp / "short.db"
    for i in range(5):
        write(store, "support-bot/ticket-6001", {"step": i + 1}, {"keep_last": 2} if i == 0 else None)
    server = ctx.serve(store)
    ctx.driver.get("about:blank")
    ctx.open_agent("support-bot/ticket-6001", f"{server.base}/?access_token={ctx.token}")
    ctx.wait("the two retained changes", lambda: ctx.versions() == [5, 4])
    assert "no longer in the change log" in ctx.text("#history .history-note")
    ctx.type("at-version-number", "1", Keys.ENTER)
    ctx.wait("410 gone in the status line", lambda: "410 gone" in (ctx.text("#status-text") or ""))
    assert "410 gone" in ctx.text("#at-version-state .notice-error")
    server.stop()  # the watch stream is closed (1001), then requests fail
    ctx.wait("the closed stream in the status line", lambda: "watch" in ctx.status_log())
    ctx.driver.find_element(By.ID, "refresh").click()
    ctx.wait("a network error in the status line", lambda: "agent list: network" in ctx.status_log())
    (other := ctx.tmp / "other-token").write_text("another-token-0123456789\n")
    other.chmod(0o600)
    ctx.serve(store, port=server.port, token_file=other)
    ctx.driver.find_element(By.ID, "refresh").click()
    ctx.wait("401 in the status line", lambda: "agent list: 401 unauthorized" in ctx.status_log())
    assert "earlier" in ctx.text("#status-text") and "410 gone" in ctx.status_log(), "the earlier errors are kept"
    ctx.driver.find_element(By.ID, "status-clear").click()
    ctx.wait("dismissed errors", lambda: ctx.text("#status-text").startswith("Connected"))
    ctx.check_console(allow_network=True)


def check_history_is_read_page_by_page(ctx):
    # A byte budget of 1: every page of /changes holds one change, so the whole history shows
    # only if the page follows each answer's `next`.
    server = ctx.serve(ctx.store, args=("--page-bytes", "1"))
    ctx.driver.get("about:blank")
    ctx.open_agent(BOT, f"{server.base}/?access_token={ctx.token}")
    ctx.wait("the agent's version", lambda: (ctx.text("#version") or "").startswith("version "))
    n = int(ctx.text("#version").split()[1])  # the checks before may have written more changes
    assert n >= len(BOT_CHANGES)
    ctx.wait("every change, one page each", lambda: ctx.versions() == list(range(n, 0, -1)))
    assert ctx.text("#history-count") == f"{n} changes"
    ctx.check_console()
    ctx.driver.get("about:blank")  # nothing left talking to the server it stops
    server.stop()


def test_inspector():  # for pytest: the checks share one page, so they run as one test
    assert main() == 0


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the servers (finally)
    passed = failed = 0
    ctx = Context()
    try:
        ctx.start()
        for test in [f for name, f in list(globals().items()) if name.startswith("check_")]:
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
        for s in ctx.servers:
            if s.proc.poll() not in (None, 0):
                print(f"serve exited with {s.proc.returncode}: {s.stderr()}")
        ctx.close()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
