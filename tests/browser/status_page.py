"""Drives the status page in headless Chromium over the DevTools protocol (--remote-debugging-pipe:
the protocol as NUL-separated JSON on file descriptors 3 and 4, so the standard library is enough).

Signs in the way a person would: the page answers 401 with a Basic challenge and the browser is
given the credentials when it asks (Fetch.authRequired). Then reports, as one JSON object on
stdout: each panel's text, the traffic panel's totals as data and its number of charts and bars,
every console error, exception and failed load (CSP violations
included; a self-check at the end proves both kinds are caught), how often the browser asked for credentials, what a fetch from the page's own script
got back, the number of <script> elements, and where the screenshot was written.

With --decide approve|deny it also clicks that button of the first pending approval and reports
the row's note once the page has shown the answer (the approvals API's), and what the page then
shows after a reload.

Usage: status_page.py CHROMIUM URL USER PASSWORD SCREENSHOT [--decide approve|deny] [--needle TEXT]
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

DEADLINE = 60.0
PANELS = ["traffic", "upstreams", "tools", "receipts", "rate-limited", "approvals"]
OUTCOMES = ["ok", "tool_error", "denied", "rejected_input", "rejected_output", "rate_limited",
            "timeout", "unknown", "upstream_error"]
# The traffic panel as shown: each totals row in the shape of `narrowgate receipts --summary
# --json`'s entries (counts from the cells under their headers, latencies exact from data-ms),
# the charts (and those that are labelled images) and their bars with a hover text.
TRAFFIC = """(() => {
  const rows = [];
  for (const table of document.querySelectorAll('#traffic table.totals')) {
    const heads = [...table.querySelectorAll('thead th')].map(h => h.textContent);
    for (const tr of table.querySelectorAll('tbody tr[data-series]')) {
      const cell = name => tr.cells[heads.indexOf(name)];
      const ms = name => cell(name).dataset.ms === '' ? null : Number(cell(name).dataset.ms);
      const outcomes = Object.fromEntries(OUTCOMES.map(o => [o, Number(cell(o).textContent)]));
      rows.push({series: tr.dataset.series, name: tr.dataset.name,
                 upstream: tr.dataset.upstream ?? null, calls: Number(cell('calls').textContent),
                 outcomes, p50_ms: ms('p50 ms'), p99_ms: ms('p99 ms')});
    }
  }
  const charts = [...document.querySelectorAll('#traffic svg.traffic')];
  return {rows, charts: charts.length,
          charts_as_images: charts.filter(c => c.getAttribute('role') === 'img'
                                            && (c.getAttribute('aria-label') || '') !== '').length,
          bars: document.querySelectorAll('#traffic svg.traffic rect.hit title').length};
})()"""


class Browser:
    def __init__(self, chromium, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def child_fds():
            # Through fresh numbers first: either pipe end may itself be 3 or 4.
            read_end, write_end = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--window-size=1280,1600",
                "about:blank",
            ],
            preexec_fn=child_fds,
            # Kept open in the child (subprocess closes the others after `child_fds`).
            pass_fds=(3, 4),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        return self.next_id

    def read(self, until):
        """Reads messages until one satisfies `until` (returned), within the deadline."""
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if until(message):
                    return message
                if "method" in message:
                    self.on_event(message)
            if time.monotonic() > self.deadline:
                raise TimeoutError("no answer from Chromium within the deadline")
            chunk = os.read(self.from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe: " + self.stderr_tail())
            self.buffer += chunk

    def call(self, method, params=None, session=None):
        sent = self.send(method, params, session)
        answer = self.read(lambda m: m.get("id") == sent)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def pump_until(self, condition):
        """Handles events until `condition()` holds, within the deadline."""
        def handled(message):
            if "method" in message:
                self.on_event(message)
            return condition()

        if not condition():
            self.read(handled)

    def wait_event(self, method):
        return self.read(lambda m: m.get("method") == method)

    def on_event(self, message):
        self.events.append(message)
        handler = self.handlers.get(message["method"])
        if handler:
            handler(message.get("params", {}), message.get("sessionId"))

    def stderr_tail(self):
        try:
            self.process.kill()
            return self.process.stderr.read().decode(errors="replace")[-2000:]
        except Exception as e:  # the report matters more than this detail
            return f"(no stderr: {e})"


def main():
    args = sys.argv[1:]
    chromium, url, user, password, screenshot = args[:5]
    decide = needle = None
    rest = args[5:]
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--decide":
            decide = value
        elif flag == "--needle":
            needle = value
    profile = tempfile.mkdtemp(prefix="narrowgate-chromium-")
    browser = Browser(chromium, profile)
    browser.deadline = time.monotonic() + DEADLINE
    report = {"console_errors": [], "auth_prompts": 0}

    def on_paused(params, session):
        browser.send("Fetch.continueRequest", {"requestId": params["requestId"]}, session)

    def on_auth(params, session):
        report["auth_prompts"] += 1
        response = {"response": "ProvideCredentials", "username": user, "password": password}
        browser.send(
            "Fetch.continueWithAuth",
            {"requestId": params["requestId"], "authChallengeResponse": response},
            session,
        )

    def on_console(params, _session):
        if params.get("type") in ("error", "assert"):
            texts = [a.get("value", a.get("description", "")) for a in params.get("args", [])]
            report["console_errors"].append("console." + params["type"] + ": " + " ".join(map(str, texts)))

    def on_exception(params, _session):
        details = params.get("exceptionDetails", {})
        report["console_errors"].append("exception: " + json.dumps(details)[:500])

    def on_log(params, _session):
        entry = params.get("entry", {})
        if entry.get("level") == "error":
            report["console_errors"].append(f"{entry.get('source')}: {entry.get('text')} ({entry.get('url', '')})")

    browser.handlers = {
        "Fetch.requestPaused": on_paused,
        "Fetch.authRequired": on_auth,
        "Runtime.consoleAPICalled": on_console,
        "Runtime.exceptionThrown": on_exception,
        "Log.entryAdded": on_log,
    }
    try:
        targets = browser.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        session = browser.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            browser.call(domain, None, session)
        browser.call("Fetch.enable", {"handleAuthRequests": True, "patterns": [{"urlPattern": "*"}]}, session)

        def evaluate(expression):
            result = browser.call(
                "Runtime.evaluate",
                {"expression": expression, "awaitPromise": True, "returnByValue": True},
                session,
            )
            if "exceptionDetails" in result:
                raise RuntimeError(f"evaluating {expression!r}: {result['exceptionDetails']}")
            return result["result"].get("value")

        def load(target):
            browser.call("Page.navigate", {"url": target}, session)
            browser.wait_event("Page.loadEventFired")

        load(url)
        report["title"] = evaluate("document.title")
        report["panels"] = evaluate(
            "Object.fromEntries(%s.map(id => [id, document.getElementById(id) ? document.getElementById(id).innerText : null]))"
            % json.dumps(PANELS)
        )
        report["scripts"] = evaluate("document.querySelectorAll('script').length")
        report["traffic"] = evaluate(TRAFFIC.replace("OUTCOMES", json.dumps(OUTCOMES)))
        if needle is not None:
            report["needle_as_text"] = evaluate(f"document.body.innerText.includes({json.dumps(needle)})")
            report["needle_elements"] = evaluate(
                "[...document.querySelectorAll('*')].filter(e => e.tagName === 'I' || e.tagName === 'IMG').length"
            )
        prompts = report["auth_prompts"]
        # The page's script reaches the gateway with the credentials the browser signed in with.
        report["fetch_status"] = evaluate(
            "fetch(location.origin + '/status', {credentials: 'same-origin'}).then(r => r.status)"
        )
        report["prompts_for_fetch"] = report["auth_prompts"] - prompts
        # Each header over its column: a header aligned as the cells under it (first body row
        # with one cell per header), for every table.
        report["misaligned"] = evaluate(
            "[...document.querySelectorAll('table')].flatMap(t => {"
            " const heads = [...t.querySelectorAll('thead th')];"
            " const row = [...t.querySelectorAll('tbody tr')].find(r => r.cells.length === heads.length);"
            " if (!row) return [];"
            " return heads.flatMap((h, i) => getComputedStyle(h).textAlign === getComputedStyle(row.cells[i]).textAlign"
            "   ? [] : [h.closest('section').id + ': ' + h.textContent]);"
            "})"
        )
        # Instants: shown in the browser's zone, the UTC text kept in the title.
        report["times"] = evaluate(
            "[...document.querySelectorAll('time[datetime]')].map(t => ({datetime: t.dateTime, text: t.textContent, title: t.title}))"
        )
        # Long values: cut by the style, the whole value on hover.
        report["long_cells_without_title"] = evaluate(
            "[...document.querySelectorAll('td.long')].filter(td => td.title !== td.textContent).length"
        )
        # A laptop and a phone.
        for width, height, mobile, shot in ((1366, 900, False, screenshot), (390, 844, True, screenshot.replace(".png", "-phone.png"))):
            browser.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
                session,
            )
            png = browser.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png["data"]))
            report.setdefault("screenshots", []).append(shot)
        report["screenshot"] = screenshot
        if decide is not None:
            report["decision"] = decide_first_approval(evaluate, decide)
            load(url)
            report["approvals_after"] = evaluate("document.getElementById('approvals').innerText")
            shot = screenshot.replace(".png", f"-after-{decide}.png")
            png = browser.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png["data"]))
        # Events already sent (console messages of the last steps) arrive before these answers.
        evaluate("new Promise(resolve => setTimeout(resolve, 0))")
        # Proves the capture sees what it must: a console.error, and a load the page's
        # Content-Security-Policy blocks.
        errors = list(report["console_errors"])
        evaluate(
            "console.error('narrowgate self-check');"
            "const img = document.createElement('img'); img.src = 'http://192.0.2.1/blocked.png';"
            "document.body.append(img); true"
        )
        browser.pump_until(lambda: len(report["console_errors"]) >= len(errors) + 2)
        report["self_check_errors"] = report["console_errors"][len(errors):]
        report["console_errors"] = errors
    finally:
        try:
            browser.send("Browser.close")
            browser.process.wait(timeout=10)
        except Exception:
            browser.process.kill()
        shutil.rmtree(profile, ignore_errors=True)
    json.dump(report, sys.stdout)


def decide_first_approval(evaluate, decision):
    """Clicks `decision` of the first pending approval and waits (within the deadline) for the
    page to show the answer: the row's note and its `data-decided`."""
    clicked = evaluate(
        "(() => { const b = document.querySelector('#approvals button[data-decision=%s]');"
        " if (!b) return null; b.closest('tr').querySelector('input[name=reason]').value = 'decided from the status page';"
        " b.click(); return b.dataset.id; })()" % json.dumps(decision)
    )
    if clicked is None:
        return {"error": "no pending approval with a " + decision + " button on the page"}
    note = evaluate(
        """new Promise((resolve) => {
             const row = document.querySelector('#approvals tr[data-id]');
             const note = row.querySelector('.note');
             const done = () => note.textContent !== '' && note.textContent !== 'sending…';
             if (done()) return resolve(note.textContent);
             new MutationObserver(() => { if (done()) resolve(note.textContent); })
               .observe(note, {childList: true, characterData: true, subtree: true});
           })"""
    )
    decided = evaluate("document.querySelector('#approvals tr[data-id]').dataset.decided || null")
    return {"id": clicked, "note": note, "decided": decided}


if __name__ == "__main__":
    main()
