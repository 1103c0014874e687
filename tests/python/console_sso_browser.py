"""Drives the Weir console's single sign-on and its editing pages in headless Chromium
(Playwright for Python, Debian's `chromium`) and prints what it saw as one JSON object.

Arguments (JSON on argv[1]): `base` (the gateway's root URL), `out` (the folder for
screenshots), `chromium` (the browser's path). The fake identity provider signs in a member
of no admin group first, then an admin. The Rust test (tests/tests/console_oidc.rs) checks
every step's result against the gateway's admin API.
"""

import json
import sys

from playwright.sync_api import sync_playwright

from console_pages import chat, shoot, wait_loaded

ARGS = json.loads(sys.argv[1])
BASE = ARGS["base"].rstrip("/")


def visit(page, name):
    page.click(f'#nav [data-page="{name}"]')
    wait_loaded(page, name)


def main():
    result = {"pages": {}, "requests": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=ARGS["chromium"], headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.on("request", lambda request: result["requests"].append(request.url))
        errors = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

        page.goto(BASE + "/console")
        wait_loaded(page, "sign-in")
        result["sign_on_link_visible"] = page.is_visible("#sign-on-link")
        result["key_form_visible"] = page.is_visible("#sign-in-form")
        shoot(page, ARGS["out"], "sso-sign-in", result)

        # The first person is in no admin group: the gateway's page says so.
        page.click("#sign-on-link")
        page.wait_for_selector("#sign-on-error", timeout=15000)
        result["refused"] = {
            "code": page.get_attribute("#sign-on-error", "data-code"),
            "text": page.text_content("#sign-on-error"),
            "path": page.evaluate("location.pathname"),
        }
        shoot(page, ARGS["out"], "sso-refused", result)
        page.click("text=Back to the console")
        wait_loaded(page, "sign-in")
        result["nav_hidden_after_refusal"] = page.is_hidden("#nav")

        # The admin signs in through the provider and lands on the console.
        page.click("#sign-on-link")
        wait_loaded(page, "usage")
        result["who"] = page.text_content("#who")
        result["landed_path"] = page.evaluate("location.pathname")
        result["cookie_readable_by_script"] = page.evaluate("document.cookie")

        # A key made in the page calls both models; its list edited to one, the other is refused.
        visit(page, "keys")
        page.fill("#key-member", "dev")
        page.fill("#key-id", "dev-key")
        page.fill("#key-models", "gpt, gpt-mini")
        page.click("#key-form button[type=submit]")
        page.wait_for_selector("#new-token:not([hidden])")
        token = page.text_content("#new-token-value")
        result["before_edit"] = {"gpt-mini": chat(BASE, token, "gpt-mini"), "gpt": chat(BASE, token, "gpt")}
        page.click('[data-key="dev-key"] >> text=Edit')
        page.wait_for_selector("#key-edit-form:not([hidden])")
        result["edit_prefilled_models"] = page.input_value("#key-edit-models")
        page.fill("#key-edit-models", "gpt")
        page.fill("#key-edit-rpm", "30")
        page.fill("#key-edit-team", "search")
        page.fill("#key-edit-expires", "2099-01-31T00:00:00Z")
        page.select_option("#key-edit-effort", "low")
        page.fill("#key-edit-daily_tokens", "9000")
        shoot(page, ARGS["out"], "keys-edit", result)
        page.click("#key-edit-form button[type=submit]")
        page.wait_for_selector("#key-edit-form", state="hidden")
        result["after_edit"] = {"gpt-mini": chat(BASE, token, "gpt-mini"), "gpt": chat(BASE, token, "gpt")}

        # A member's budget and a team's, set in the page; the team's then deleted.
        visit(page, "members")
        page.fill("#members-name", "dev")
        page.fill("#members-daily_tokens", "5000")
        page.click("#members-form button[type=submit]")
        page.wait_for_selector('[data-scope="dev"]')
        result["member_row"] = page.text_content('#members-table tr:has([data-scope="dev"])')
        shoot(page, ARGS["out"], "members", result)
        visit(page, "teams")
        page.fill("#teams-name", "search")
        page.fill("#teams-daily_usd", "2.5")
        page.click("#teams-form button[type=submit]")
        page.wait_for_selector('[data-scope="search"]')
        result["team_row"] = page.text_content('#teams-table tr:has([data-scope="search"])')
        page.fill("#teams-name", "research")
        page.fill("#teams-monthly_tokens", "100000")
        page.click("#teams-form button[type=submit]")
        page.wait_for_selector('[data-scope="research"]')
        shoot(page, ARGS["out"], "teams", result)
        page.click('[data-scope="search"] >> text=Delete')
        page.wait_for_selector('[data-scope="search"]', state="detached")
        result["team_rows_after_delete"] = page.locator("#teams-table tbody tr").count()

        # A refused change shows the gateway's typed message and leaves the page working.
        visit(page, "keys")
        page.click('[data-key="dev-key"] >> text=Edit')
        page.fill("#key-edit-models", "no-such-model")
        page.click("#key-edit-form button[type=submit]")
        page.wait_for_selector("#error:not([hidden])")
        result["bad_edit_error"] = page.text_content("#error")
        page.click("#key-edit-cancel")

        # Sign out: the session is gone.
        page.click("#sign-out")
        wait_loaded(page, "sign-in")
        result["after_sign_out"] = page.evaluate(
            "() => fetch('/console/api/v1/usage', {credentials: 'same-origin'}).then((r) => r.status)"
        )
        # The refusals this script asks for (the refused sign-on's 403, the bad edit's 400, the
        # 401s of a signed-out page) are logged by the browser as failed loads; nothing else may be.
        expected = ("400 (Bad Request)", "401 (Unauthorized)", "403 (Forbidden)")
        result["console_errors"] = [error for error in errors if not any(code in error for code in expected)]
        browser.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
