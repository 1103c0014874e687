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
