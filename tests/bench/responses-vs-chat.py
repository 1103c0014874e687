#!/usr/bin/env python3
"""The shared gateway bench (../shared/bench/lib/bench.py) on `POST /v1/responses`.

    tests/bench/responses-vs-chat.py GATEWAY_BASE MODEL [bench.py options...]

Runs the shared harness unchanged except for what a Responses call is: its body
(`input`, `max_output_tokens`, `stream`), its URL (GATEWAY_BASE + /v1/responses; the
direct run still goes to the fake upstream's chat URL, which answers any body) and its
smoke check (an `output_text` of "hello", or a stream that ends `response.completed`).
The same binary on `/v1/chat/completions` is plain `../shared/bench/run.sh`; compare the
two runs' CPU ms per call (and, with --stream, per streamed event: the upstream sends 4
content chunks, which the Responses route writes as ~9 typed events, chat as 5 chunks).
"""

import json
import os
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("WEIR_SHARED_BENCH", os.path.join(HERE, "..", "..", "..", "shared", "bench"))
sys.path.insert(0, os.path.join(SHARED, "lib"))
import bench  # noqa: E402  (the shared harness, found above)


def body_for(model, stream):
    body = {"model": model, "input": "Say hello.", "max_output_tokens": 16, "store": False}
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":"))


def normalize(url):
    url = url.rstrip("/")
    if url.endswith("/responses") or url.endswith("/chat/completions"):
        return url
    return url + ("/responses" if url.endswith("/v1") else "/v1/responses")


def smoke(url, model, headers, stream):
    hdrs = {"content-type": "application/json"}
    for header in headers:
        name, _, value = header.partition(":")
        hdrs[name.strip()] = value.strip()
    request = urllib.request.Request(url, data=body_for(model, stream).encode(), headers=hdrs, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            data = answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return False, f"HTTP {error.code}: {error.read()[:500]!r}"
    if url.endswith("/chat/completions"):
        return ("hel" in data), f"direct: {len(data)} bytes"
    if stream:
        ok = "event: response.completed" in data and "hel" in data
        return ok, f"{len(data)} bytes of Responses SSE" if ok else f"bad SSE: {data[:500]!r}"
    try:
        text = json.loads(data)["output"][0]["content"][0]["text"]
        return text == "hello", f"output_text={text!r}"
    except (KeyError, IndexError, ValueError) as error:
        return False, f"bad response ({error}): {data[:500]!r}"


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    gateway, model = sys.argv[1], sys.argv[2]
    bench.body_for, bench.normalize, bench.smoke = body_for, normalize, smoke
    sys.argv = [sys.argv[0], "--gateway-url", normalize(gateway), "--model", model] + sys.argv[3:]
    bench.main()
