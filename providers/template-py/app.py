"""The `template-py` provider: a whole streaming provider in two Python modules.

Copy this folder to start a provider in Python (see docs/src/providers/writing-a-provider.md).
The dialect is OpenAI-style Chat Completions without tools: `POST /chat/completions`
with `model`, `max_tokens` and text `messages`; the answer in
`choices[0].message.content`; streamed with `stream: true`, `data:` chunks ending in
`data: [DONE]`. Replace the five marked places with your dialect's: four here, the
stream decoder (5) in `chat.py`.

componentize-py builds this module into a component: `Describe` and `Chat` are the
world's exported interfaces; the `stream-decoder` resource lives in `chat.py`, the
module componentize-py looks it up in. An uncaught exception is a trap (the call
fails as a provider fault with no word on why), so every export catches everything
and answers with the world's own failures.
"""

import email.utils
import json
import re
from typing import List

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types as wit

KEY = "template-py"
# Longest error detail kept for the server log (the kit allows 4 KiB).
DETAIL_LIMIT = 2048
# Deeper JSON than any answer needs: CPython's parser recurses once per level, and
# inside a component running out of stack is a trap, not an exception.
MAX_DEPTH = 200
_BRACKETS = re.compile(rb'[\[\]{}]|"(?:[^"\\]|\\.)*"', re.DOTALL)


def unsupported(message: str) -> Err:
    """What an export raises to refuse: `codec-error.unsupported`."""
    return Err(wit.CodecError_Unsupported(message))


def malformed(message: str) -> Err:
    """What an export raises for a body the dialect does not promise: `codec-error.malformed`."""
    return Err(wit.CodecError_Malformed(message[:1024]))


class Describe(exports.Describe):
    def providers(self) -> List[wit.ProviderInfo]:
        # (1) Who you are: the key catalog entries name, where the secret goes, what you can do.
        return [
            wit.ProviderInfo(
                key=KEY,
                description="Chat Completions, text only, streaming (the Python template)",
                # None: every catalog entry names its `endpoint`.
                default_endpoint=None,
                credential=wit.CredentialShape_Header(
                    wit.HeaderCredential(
                        default_credential_id="template-py-api-key",
                        header_name="authorization",
                        prefix="Bearer ",
                        # False: a missing secret sends no header (local servers need none).
                        required=False,
                    )
                ),
                # Flags combine with `|`; no flag (wit.Capabilities(0)) is a text-only provider
                # that does not stream. STREAMING: the host asks for streams and hands
                # their events to `chat.StreamDecoder`; leave it out and a caller's stream
                # is answered whole and replayed.
                capabilities=wit.Capabilities.STREAMING,
                stream_framing=wit.StreamFraming.SSE,
            )
        ]

    def serves(self, provider: str, wire_id: str) -> bool:
        return provider == KEY

    def claims(self, provider: str, wire_id: str) -> bool:
        return False


class Chat(exports.Chat):
    def encode(self, provider: str, conversation: wit.PreparedConversation, params: wit.CallParams) -> wit.HttpRequest:
        try:
            return encode(conversation, params)
        except Err:
            raise
        except Exception as error:  # noqa: BLE001 - a bug becomes a named refusal, not a trap
            raise unsupported(f"internal error in {KEY}: {type(error).__name__}: {error}"[:1024]) from None

    def decode(self, provider: str, response: wit.HttpResponse) -> wit.ChatResponse:
        try:
            return decode(bytes(response.body))
        except Err:
            raise
        except Exception as error:  # noqa: BLE001 - whatever the body, never a trap
            raise malformed(f"{KEY} could not read the answer: {type(error).__name__}: {error}") from None

    def classify(self, provider: str, response: wit.HttpResponse) -> wit.ErrorClass:
        try:
            return classify(response.status, response.headers, bytes(response.body))
        except Exception as error:  # noqa: BLE001 - a class is owed whatever the body
            return wit.ErrorClass_Uncorrectable(f"HTTP {response.status}: {KEY} failed to classify: {error!r}"[:1024])


# ------------------------------------------------------------------ (2) encode


def encode(conversation: wit.PreparedConversation, params: wit.CallParams) -> wit.HttpRequest:
    if conversation.tools:
        raise unsupported(f"{KEY} has no tool definitions")
    messages = [{"role": "system", "content": text} for text in conversation.system]
    for turn in conversation.turns:
        role = "user" if turn.role == wit.TurnRole.USER else "assistant"
        messages.append({"role": role, "content": "\n\n".join(block_text(block) for block in turn.content)})
    body = {"model": params.wire_model_id, "max_tokens": params.max_tokens, "messages": messages}
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.stop:
        body["stop"] = list(params.stop)
    if params.stream:
        # The usage comes in a last chunk only when asked for.
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    # ensure_ascii=False keeps text as itself; JSON escaping still covers quotes,
    # backslashes and control characters (NUL too).
    data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return wit.HttpRequest("POST", "/chat/completions", [("content-type", "application/json")], data)


def block_text(block: wit.ContentBlock) -> str:
    """Every block is sent natively, rendered as text, or refused — never dropped."""
    if isinstance(block, wit.ContentBlock_Text):
        return block.value
    if isinstance(block, wit.ContentBlock_ToolUse):
        return f"[tool call {block.value.name}: {block.value.input_json}]"
    if isinstance(block, wit.ContentBlock_ToolResult):
        parts = [leaf.value for leaf in block.value.content if isinstance(leaf, wit.LeafBlock_Text)]
        if len(parts) != len(block.value.content):
            raise unsupported(f"{KEY} cannot send an image or document inside a tool result")
        return f"[tool result: {' '.join(parts)}]"
    if isinstance(block, wit.ContentBlock_Thinking):
        if block.value.redacted:
            raise unsupported(f"{KEY} cannot send redacted thinking")
        return f"[thinking: {block.value.text}]"
    kind = "an image" if isinstance(block, wit.ContentBlock_Image) else "a document"
    raise unsupported(f"{KEY} cannot send {kind}")


# ------------------------------------------------------------------ (3) decode

STOP_REASONS = {
    "stop": wit.StopReason.END_TURN,
    "length": wit.StopReason.MAX_TOKENS,
    "content_filter": wit.StopReason.CONTENT_FILTERED,
}


def parse_json(data: bytes):
    """The body as JSON, or `malformed`; never an exception that could trap."""
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH:
        depth = 0
        for token in _BRACKETS.findall(data):
            depth += 1 if token in (b"[", b"{") else -1 if token in (b"]", b"}") else 0
            if depth > MAX_DEPTH:
                raise malformed(f"the body nests JSON deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise malformed(f"the body is not JSON: {str(error)[:200]}") from None


def decode(data: bytes) -> wit.ChatResponse:
    body = parse_json(data)
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed("the body has no `choices`")
    message = choices[0].get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        raise malformed("the first choice has no text `message.content`")
    raw_stop = choices[0].get("finish_reason")
    raw_stop = raw_stop if isinstance(raw_stop, str) else None
    usage = body.get("usage")
    counts = None
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int) and prompt >= 0 and completion >= 0:
            counts = wit.Usage(input=prompt, output=completion, cache_read=0, cache_write=0, reasoning=None)
    return wit.ChatResponse(
        content=[wit.ContentBlock_Text(text)] if text else [],
        stop_reason=STOP_REASONS.get(raw_stop, wit.StopReason.OTHER),
        raw_stop_reason=raw_stop,
        usage=counts,
        refusal=None,
        served_model=body.get("model") if isinstance(body.get("model"), str) else None,
        request_id=body.get("id") if isinstance(body.get("id"), str) else None,
    )


# ------------------------------------------------------------------ (4) classify


def classify(status: int, headers, data: bytes) -> wit.ErrorClass:
    """The class comes from the status (and structured fields), never from prose."""
    detail = error_detail(status, data)
    hint = retry_hint(headers)
    if status == 429:
        return wit.ErrorClass_RateLimited(wit.Retry(hint, detail))
    if status in (503, 529):
        return wit.ErrorClass_Overloaded(wit.Retry(hint, detail))
    if status >= 500 or status in (408, 409, 425):
        return wit.ErrorClass_Transient(wit.Retry(hint, detail))
    if status in (401, 403):
        return wit.ErrorClass_Authentication(detail)
    if status == 402:
        return wit.ErrorClass_QuotaExhausted(detail)
    if status == 404:
        return wit.ErrorClass_NotFound(detail)
    if 400 <= status < 500:
        return wit.ErrorClass_InvalidRequest(detail)
    return wit.ErrorClass_Uncorrectable(detail)


def error_detail(status: int, data: bytes) -> str:
    """One bounded line for the server log: callers only ever see the class."""
    message = data[:DETAIL_LIMIT].decode("utf-8", "replace")
    try:
        error = parse_json(data).get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
    except (Err, AttributeError):
        pass
    line = f"HTTP {status}: {message}"
    return line if len(line.encode("utf-8")) <= DETAIL_LIMIT else line.encode("utf-8")[: DETAIL_LIMIT - 3].decode("utf-8", "ignore") + "..."


def retry_hint(headers):
    """`retry-after` in seconds, or as an HTTP date (Unix milliseconds: the component has no clock)."""
    value = next((v for name, v in headers if name.lower() == "retry-after"), None)
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return wit.RetryHint_DelayMs(min(int(value) * 1000, 2**64 - 1))
    try:
        return wit.RetryHint_AtUnixMs(int(email.utils.parsedate_to_datetime(value).timestamp() * 1000))
    except (TypeError, ValueError, OverflowError):
        return None
