"""Drives the Weir console in headless Chromium (Playwright for Python, Debian's
`chromium` binary) and prints what it saw as one JSON object.

Arguments (JSON on argv[1]): `base` (the gateway's root URL), `admin` and `plain`
(an admin key's token and a non-admin one), `out` (the folder for screenshots),
`chromium` (the browser's path). The Rust test (tests/tests/console.rs) compares
the numbers shown with `/v1/usage` and checks every step's result.
"""

import json
import sys

from playwright.sync_api import sync_playwright

from console_pages import WIDTHS, chat, shoot, wait_loaded

ARGS = json.loads(sys.argv[1])
BASE = ARGS["base"].rstrip("/")
PAGES = ["usage", "keys", "budgets", "calls", "providers"]


def visit(page, name, result):
    page.click(f'#nav [data-page="{name}"]')
    wait_loaded(page, name)
    shoot(page, ARGS["out"], name, result)


def main():
    result = {"pages": {}, "requests": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=ARGS["chromium"], headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.on("request", lambda request: result["requests"].append(request.url))
        errors = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

        # A non-admin key cannot sign in.
        page.goto(BASE + "/console")
        wait_loaded(page, "sign-in")
        page.fill("#token", ARGS["plain"])
        page.click("#sign-in-form button")
        page.wait_for_selector("#error:not([hidden])")
        result["plain_sign_in_error"] = page.text_content("#error")
        result["plain_nav_hidden"] = page.is_hidden("#nav")
        result["token_field_after_sign_in"] = page.input_value("#token")

        # The admin key signs in; the usage page shows the ledger's sums.
        page.fill("#token", ARGS["admin"])
        page.click("#sign-in-form button")
        wait_loaded(page, "usage")
        result["cookie_readable_by_script"] = page.evaluate("document.cookie")
        result["usage"] = {
            "calls": page.text_content("#usage-total-calls"),
            "tokens": page.text_content("#usage-total-tokens"),
            "cost": page.text_content("#usage-total-cost"),
            "group_rows": page.locator("#usage-table tbody tr").count(),
            "chart_calls": page.evaluate(
                "[...document.querySelectorAll('#usage-chart rect')].reduce((s, r) => s + Number(r.dataset.value), 0)"
            ),
            "group_chart_bars": page.locator("#usage-group-chart rect").count(),
            "p50": page.text_content("#usage-total-p50"),
            "p99": page.text_content("#usage-total-p99"),
            "errors": page.text_content("#usage-total-errors"),
            "error_rows": page.locator("#usage-errors tbody tr").count(),
        }
        # By team: the same page, grouped again.
        page.select_option("#usage-group", "team")
        page.click("#usage-form button[type=submit]")
        page.wait_for_function("() => document.querySelector('#usage-table th')?.textContent === 'team'")
        result["usage"]["team_rows"] = page.locator("#usage-table tbody tr").count()
        result["usage"]["team_names"] = page.evaluate(
            "[...document.querySelectorAll('#usage-table tbody tr')].map((row) => row.cells[0].textContent)"
        )
        visit(page, "usage", result)

        # Keys: create one (its token shown once), call with it, revoke it.
        visit(page, "keys", result)
        page.fill("#key-member", "carol")
        page.fill("#key-id", "carol-key")
        page.click("#key-form button[type=submit]")
        page.wait_for_selector("#new-token:not([hidden])")
        token = page.text_content("#new-token-value")
        page.click("#copy-token")
        result["new_token_prefix"] = token[:5]
        page.wait_for_selector('[data-key="carol-key"]')
        result["call_with_new_key"] = chat(BASE, token)
        page.click('[data-key="carol-key"] >> text=Revoke')
        page.wait_for_function(
            "() => [...document.querySelectorAll('#keys-table tbody tr')]"
            ".some((row) => row.cells[0].textContent === 'carol-key' && row.cells[4].textContent === 'revoked')"
        )
        result["call_after_revoke"] = chat(BASE, token)
        page.screenshot(path=f'{ARGS["out"]}/keys-created-1280.png', full_page=True)

        visit(page, "budgets", result)
        result["budget_rows"] = page.locator("#budgets-table tbody tr").count()
        result["budget_meters"] = page.locator("#budgets-table svg.meter").count()

        # Calls: search, open the newest.
        visit(page, "calls", result)
        result["call_rows"] = page.locator("#calls-table tbody tr").count()
        page.fill("#calls-category", "ok")
        page.click("#calls-form button[type=submit]")
        page.wait_for_function(
            "() => [...document.querySelectorAll('#calls-table tbody tr')].every((row) => row.cells[5].textContent === 'ok')"
        )
        result["ok_call_rows"] = page.locator("#calls-table tbody tr").count()
        first = page.locator("#calls-table [data-call]").first
        wanted = first.get_attribute("data-call")
        first.click()
        page.wait_for_selector("#call-detail:not([hidden])")
        result["call_opened"] = {"wanted": wanted, "shown": page.text_content("#call-detail-id"),
                                 "attempt_rows": page.locator("#call-attempts tbody tr").count()}
        for width, height in WIDTHS:
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(100)
            page.screenshot(path=f'{ARGS["out"]}/call-detail-{width}.png', full_page=True)
            result["pages"]["calls"][f"detail-{width}"] = {
                "overflow": page.evaluate("document.documentElement.scrollWidth - window.innerWidth")}
        page.set_viewport_size({"width": 1280, "height": 900})

        visit(page, "providers", result)
        result["model_rows"] = page.locator("#models-table tbody tr").count()

        # A change without the CSRF token is refused, with the session's cookie.
        result["change_without_csrf"] = page.evaluate(
            """() => fetch('/console/api/admin/v1/keys', {method: 'POST', credentials: 'same-origin',
                 headers: {'content-type': 'application/json'}, body: JSON.stringify({member: 'mallory'})})
                 .then((r) => r.status)"""
        )

        # Sign out: the session is gone.
        page.click("#sign-out")
        wait_loaded(page, "sign-in")
        result["after_sign_out"] = page.evaluate(
            "() => fetch('/console/api/v1/usage', {credentials: 'same-origin'}).then((r) => r.status)"
        )
        result["console_errors"] = [e for e in errors if "401" not in e and "403" not in e]
        browser.close()
    print(json.dumps(result))


main()
