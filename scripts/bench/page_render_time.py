#!/usr/bin/env python3
"""Loads the job's web page in headless Chromium and prints when it first drew its data, on the
page's own wall clock, then turns the grid's page and prints what the next page shows.

Usage: page_render_time.py CHROMIUM URL [PAGES_TO_TURN]

Chromium runs without virtual time (whose clock stands still while a script runs) and is driven
over its DevTools pipe (--remote-debugging-pipe: commands on fd 3, answers on fd 4, each JSON
message ended by a NUL byte), so nothing but the Python standard library is needed. The page
itself writes its figures into the DOM (monitor/job_page_html.cpp): data-first-render-ms, the
time from the navigation's start to its first data drawn and laid out (the page, its script, the
first /data, its JSON parsed, the tiles built), and data-render-ms, the drawing and layout alone.

Prints one JSON object per line:
  {"first_render_ms": F, "render_ms": R, ..., "tiles": N, "page": P, "pages": Q, "first_rank": K}
for the first page, with where the time before it went (page_received_ms, script_reached_ms,
data_asked_ms, data_received_ms, from the browser's timing entries), then one {"page": P, "tiles": N, "first_rank": K, "turn_ms": T} per page
turned with the page's `>` button (T: from the click to the new tiles drawn).
Exit 1 when the page does not draw within 30 s or Chromium fails.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class DevTools:
    """One Chromium over its DevTools pipe."""

    def __init__(self, chromium, profile):
        commands_read, self.commands = os.pipe()
        self.answers, answers_write = os.pipe()

        def onto_3_and_4():
            # Through high numbers first: a pipe's own descriptor may be 3 or 4.
            os.dup2(commands_read, 100)
            os.dup2(answers_write, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--window-size=1280,1100", "--user-data-dir=" + profile, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=onto_3_and_4, pass_fds=(3, 4))
        os.close(commands_read)
        os.close(answers_write)
        self.pending = b""
        self.next_id = 0

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self.pending:
                chunk = os.read(self.answers, 1 << 16)
                if not chunk:
                    raise RuntimeError("Chromium closed its DevTools pipe")
                self.pending += chunk
            line, self.pending = self.pending.split(b"\0", 1)
            answer = json.loads(line)
            if answer.get("id") != self.next_id:
                continue  # an event, or an answer to nobody
            if "error" in answer:
                raise RuntimeError(f"{method}: {answer['error']}")
            return answer["result"]

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


# Resolves, once `ready` (a JS expression) holds, to `value` (a JS expression), polled every 5 ms;
# rejects after 30 s.
def waiting(ready, value):
    return f"""new Promise((resolve, reject) => {{
  const start = performance.now();
  const check = () => {{
    if ({ready}) resolve({value});
    else if (performance.now() - start > 30000) reject(new Error("not drawn within 30 s"));
    else setTimeout(check, 5);
  }};
  check();
}})"""


# Where the time before the first drawing went, from the browser's own timing entries (ms from
# the navigation's start): the page received, its script reached, the first /data asked for and
# received.
STAGES = """{page_received_ms: performance.getEntriesByType("navigation")[0].responseEnd,
  script_reached_ms: performance.getEntriesByType("navigation")[0].domInteractive,
  data_asked_ms: performance.getEntriesByType("resource").find(e => e.name.includes("/data")).startTime,
  data_received_ms: performance.getEntriesByType("resource").find(e => e.name.includes("/data")).responseEnd}"""

GRID = """{tiles: document.querySelectorAll("#grid .tile").length,
  page: Number(document.getElementById("page-no").textContent),
  pages: Number(document.getElementById("page-count").textContent),
  first_rank: Number(document.querySelector("#grid .tile").dataset.rank)}"""


def main(chromium, url, turns):
    profile = tempfile.mkdtemp(prefix="troupe-page-render-")
    browser = DevTools(chromium, profile)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.call("Page.navigate", {"url": url}, session)

        def evaluate(expression):
            # The navigation may replace the document the first calls reach: those are asked again.
            for _ in range(100):
                try:
                    result = browser.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                               "returnByValue": True}, session)
                    break
                except RuntimeError as failed:
                    if "context" not in str(failed):
                        raise
                    time.sleep(0.01)
            else:
                raise RuntimeError("the page's document never settled")
            if "exceptionDetails" in result:
                raise RuntimeError(result["exceptionDetails"].get("exception", {}).get("description", "failed"))
            return result["result"]["value"]

        first = evaluate(waiting("document.body && document.body.dataset.firstRenderMs",
                                 "Object.assign({first_render_ms: Number(document.body.dataset.firstRenderMs), "
                                 "render_ms: Number(document.body.dataset.renderMs)}, " + STAGES + ", " + GRID + ")"))
        print(json.dumps(first), flush=True)
        for turn in range(turns):
            shown = first["page"] + turn
            turned = evaluate(
                "(() => { window.turnStart = performance.now(); document.getElementById('next').click(); return " +
                waiting(f"Number(document.getElementById('page-no').textContent) === {shown + 1}",
                        "Object.assign({turn_ms: performance.now() - window.turnStart}, " + GRID + ")") + "; })()")
            print(json.dumps(turned), flush=True)
        return 0
    except (RuntimeError, OSError, KeyError) as failed:
        print(f"page_render_time: {failed}", file=sys.stderr)
        return 1
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 0))
