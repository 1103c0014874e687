"""Helpers the console's browser scripts share (console_browser.py, console_sso_browser.py)."""

import json
import urllib.error
import urllib.request


def chat(base, token, model="gpt"):
    """One chat call to the gateway at `base` with `token` to `model`; its HTTP status."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20})
    request = urllib.request.Request(
        base + "/v1/chat/completions",
        data=body.encode(),
        headers={"content-type": "application/json", "authorization": "Bearer " + token},
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def wait_loaded(page, name):
    """Waits until the page says it has loaded `name` (its `body[data-loaded]`)."""
    page.wait_for_selector(f'body[data-loaded="{name}"]', timeout=15000)


# The widths each page is shot at: a desktop and a phone.
WIDTHS = [(1280, 900), (390, 844)]


def shoot(page, out, name, result):
    """Screenshots the page at each of WIDTHS into `out`, with how far it scrolls sideways."""
    shots = {}
    for width, height in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(100)
        path = f"{out}/{name}-{width}.png"
        page.screenshot(path=path, full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        shots[str(width)] = {"path": path, "overflow": overflow}
    page.set_viewport_size({"width": 1280, "height": 900})
    result["pages"][name] = shots
