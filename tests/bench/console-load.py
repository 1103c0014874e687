#!/usr/bin/env python3
"""How long the console's pages take to load on a large ledger (issue 50: under 300 ms on
1,000,000 calls). Three steps, run from the project root:

    tests/bench/console-load.py setup DIR PORT          # DIR/weir.toml, DIR/keys.lua
    tests/bench/console-load.py fill DIR PORT CALLS     # wrk through the gateway until CALLS calls
    tests/bench/console-load.py measure DIR PORT [RUNS] # each page RUNS times in Chromium

`setup` writes a production-profile config (the ledger on, metrics on) with 24 caller keys in
4 teams, 4 priced models on the shared bench's instant upstream (start it first:
`../shared/bench/upstream/start.sh 18080 0`), member and team budgets, and an admin key.
Serve it with the release binary: `target/release/weir serve --config DIR/weir.toml`, with
`BENCH_KEY` set to anything.

`fill` drives `wrk` with `DIR/keys.lua` (each request a random key and model) in 30 s rounds
until `/v1/usage` counts CALLS calls, so the ledger holds a spread of keys, members, teams and
models rather than one of each.

`measure` signs in with the admin key and loads each page (`/console#NAME`, a full page load:
HTML, script, styles and the page's API requests) RUNS times, timing from the navigation's
start to the page's `body[data-loaded=NAME]`, then opens one call's detail from the calls page.
It prints each page's p50 and max, and each API request's server time (Playwright's timing of
the response's headers), as a table and as one JSON line.
"""

import hashlib
import json
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

UPSTREAM = "http://127.0.0.1:18080/v1"
TEAMS = ["search", "support", "labs", "finance"]
MODELS = ["gpt-small", "gpt-large", "claude-mid", "mix-fast"]
CALLERS = 24
ADMIN_TOKEN = "wk-console-admin-" + "a" * 40
PAGES = ["usage", "keys", "budgets", "calls", "providers"]
CHROMIUM = "/usr/bin/chromium"


def caller_token(index):
    return f"wk-load{index:02d}-" + hashlib.sha256(f"console-load {index}".encode()).hexdigest()[:40]


def sha(token):
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def setup(folder, port):
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f'listen = "127.0.0.1:{port}"', "", "[ledger]", f'path = "{folder / "ledger.db"}"', ""]
    lines += ["[[key]]", 'id = "console-admin"', 'member = "operator"', "admin = true",
              f'hash = "{sha(ADMIN_TOKEN)}"', ""]
    for index in range(CALLERS):
        lines += ["[[key]]", f'id = "load{index:02d}"', f'member = "member{index % 12:02d}"',
                  f'team = "{TEAMS[index % len(TEAMS)]}"', f'hash = "{sha(caller_token(index))}"', ""]
    for team in TEAMS:
        lines += [f"[team.{team}]", "monthly_usd = 100000", ""]
    for member in range(0, 12, 3):
        lines += [f"[member.member{member:02d}]", "daily_usd = 5000", ""]
    for index, model in enumerate(MODELS):
        lines += ["[[model]]", f'id = "{model}"', 'provider = "openai"', 'wire_id = "bench-model"',
                  f'endpoint = "{UPSTREAM}"', 'credential = "BENCH_KEY"', "max_output_tokens = 1000",
                  "context_window = 8000", "output_tokens = 100", f"input_price = {0.5 + index}",
                  f"output_price = {2.0 + 4 * index}", ""]
    (folder / "weir.toml").write_text("\n".join(lines))
    tokens = ", ".join(f'"{caller_token(index)}"' for index in range(CALLERS))
    models = ", ".join(f'"{model}"' for model in MODELS)
    (folder / "keys.lua").write_text(f"""-- Each request: a random caller key and model (tests/bench/console-load.py).
local tokens = {{{tokens}}}
local models = {{{models}}}
math.randomseed(os.time())
wrk.method = "POST"
request = function()
  local body = '{{"model":"' .. models[math.random(#models)] .. '","messages":[{{"role":"user","content":"hi"}}],"max_tokens":20}}'
  local headers = {{["content-type"] = "application/json", ["authorization"] = "Bearer " .. tokens[math.random(#tokens)]}}
  return wrk.format(nil, "/v1/chat/completions", headers, body)
end
""")
    print(f"wrote {folder / 'weir.toml'} and {folder / 'keys.lua'}")


def usage_calls(port):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/usage",
                                     headers={"authorization": "Bearer " + ADMIN_TOKEN})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return json.load(answer)["total"]["calls"]


def fill(folder, port, calls):
    while (have := usage_calls(port)) < calls:
        print(f"{have} calls; 30 s more of wrk", flush=True)
        subprocess.run(["wrk", "-t2", "-c32", "-d30s", "-s", str(folder / "keys.lua"), f"http://127.0.0.1:{port}"],
                       check=True, stdout=subprocess.DEVNULL)
    print(f"{have} calls in the ledger")


def page_times(page, base, name, runs):
    times = []
    for _ in range(runs):
        page.goto("about:blank")
        start = time.perf_counter()
        page.goto(f"{base}/console#{name}")
        page.wait_for_selector(f'body[data-loaded="{name}"]', timeout=120000)
        times.append((time.perf_counter() - start) * 1000)
    return times


def measure(port, runs):
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{port}"
    api = {}
    result = {"calls": usage_calls(port), "pages": {}, "api": api}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()

        def timed(response):
            path = response.url.removeprefix(base).split("?")[0]
            if "/v1/" in path:
                timing = response.request.timing
                api.setdefault(path, []).append(timing["responseStart"] - timing["requestStart"])

        page.goto(f"{base}/console")
        page.wait_for_selector('body[data-loaded="sign-in"]')
        page.fill("#token", ADMIN_TOKEN)
        page.click("#sign-in-form button")
        page.wait_for_selector('body[data-loaded="usage"]', timeout=120000)
        page.on("response", timed)
        for name in PAGES:
            result["pages"][name] = page_times(page, base, name, runs)
        details = []
        for _ in range(runs):
            page.goto("about:blank")
            page.goto(f"{base}/console#calls")
            page.wait_for_selector('body[data-loaded="calls"]', timeout=120000)
            row = page.locator("#calls-table [data-call]").nth(random.randrange(10))
            wanted = row.get_attribute("data-call")
            start = time.perf_counter()
            row.click()
            page.wait_for_function(
                "(id) => document.querySelector('#call-detail-id')?.textContent === id", arg=wanted, timeout=120000
            )
            details.append((time.perf_counter() - start) * 1000)
        result["pages"]["call detail"] = details
        browser.close()
    print(f"ledger: {result['calls']} calls; {runs} loads per page (ms from navigation to data shown)")
    print(f"{'page':<14} {'p50':>8} {'max':>8}")
    for name, times in result["pages"].items():
        print(f"{name:<14} {statistics.median(times):8.1f} {max(times):8.1f}")
    print(f"{'API request':<34} {'n':>3} {'p50 ms':>8} {'max ms':>8}")
    for path, times in sorted(api.items()):
        print(f"{path:<34} {len(times):>3} {statistics.median(times):8.1f} {max(times):8.1f}")
    print(json.dumps(result))


def main():
    step, folder, port = sys.argv[1], Path(sys.argv[2]).resolve(), int(sys.argv[3])
    if step == "setup":
        setup(folder, port)
    elif step == "fill":
        fill(folder, port, int(sys.argv[4]))
    elif step == "measure":
        measure(port, int(sys.argv[4]) if len(sys.argv) > 4 else 7)
    else:
        sys.exit(f"unknown step {step!r}: setup, fill or measure")


if __name__ == "__main__":
    main()
