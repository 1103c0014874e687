"""Decoding a 2xx Chat Completions body whose tool calls and reasoning may be text
markup. Lenient like the servers it reads: unknown keys are ignored, `""` counts as
absent, native `tool_calls` (from a server that does run a parser) are read too.
The stop-reason, usage and id helpers are shared with the stream decoder."""

import hashlib

from . import markup
from .errors import ErrorFields, header, is_error_object
from .model import ChatResponse, CodecError, Thinking, ToolUse, Usage
from .wire import dump, parse_json, text


def decode(status: int, headers, body: bytes) -> ChatResponse:
    value = parse_json(body, "response body")
    if not isinstance(value, dict):
        raise CodecError("malformed", "response body is not a JSON object")
    if is_error_object(value):
        detail = ErrorFields.from_value(value).detail(status)
        raise CodecError("malformed", f"HTTP {status} body is an error object, not a completion: {detail}")
    choices = value.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise CodecError("malformed", "response has no choices[0]")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise CodecError("malformed", "choices[0] has no message object")

    content = []
    visible = message_text(message.get("content"))
    reasoning = reasoning_text(message)
    if reasoning is None:
        reasoning, visible = markup.split_think(visible)
    if reasoning:
        content.append(("thinking", Thinking(reasoning)))
    visible, markup_calls = markup.split_tool_calls(visible)
    if visible:
        content.append(("text", visible))
    response_id = text(value.get("id"))
    calls = native_tool_calls(message) + [
        ToolUse(call_id(response_id, position, name), name, arguments)
        for position, (name, arguments) in enumerate(markup_calls)
    ]
    content.extend(("tool-use", call) for call in calls)

    raw = text(choice.get("finish_reason"))
    return ChatResponse(
        content=content,
        stop_reason=stop_reason(raw, bool(calls), choice.get("stop_reason")),
        raw_stop_reason=raw,
        usage=usage(value.get("usage")),
        served_model=text(value.get("model")),
        request_id=text(header(headers, "x-request-id")) or response_id,
    )


def message_text(content) -> str:
    """`content` as text: a string, or (from some servers) an array of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def reasoning_text(message: dict):
    """DeepSeek and llama.cpp call it `reasoning_content`, vLLM and Ollama `reasoning`."""
    return text(message.get("reasoning_content")) or text(message.get("reasoning"))


def native_tool_calls(message: dict) -> list:
    items = message.get("tool_calls")
    if not isinstance(items, list):
        return []
    calls = []
    for position, item in enumerate(items):
        function = item.get("function") if isinstance(item, dict) else None
        name = text(function.get("name")) if isinstance(function, dict) else None
        if name is None:
            raise CodecError("malformed", f"tool call {position} has no function name")
        calls.append(ToolUse(text(item.get("id")) or f"call_{position}", name, arguments_text(function.get("arguments"))))
    return calls


def arguments_text(value) -> str:
    """Arguments as sent: a string verbatim (empty means `{}`), an object serialized."""
    if isinstance(value, str):
        return value if value.strip() else "{}"
    return "{}" if value is None else dump(value)


def call_id(response_id, position: int, name: str) -> str:
    """An id for a call parsed from markup, which has none. Derived from the
    response's id so it differs between responses yet is the same on a replay; the
    component has no randomness worth the name (a stubbed WASI build seeds it once)."""
    seed = f"{response_id}\0{position}\0{name}".encode("utf-8")
    return "call_" + hashlib.sha256(seed).hexdigest()[:24]


def stop_reason(raw, has_tool_calls: bool, matched_stop=None) -> str:
    """`finish_reason` → stop reason. A `stop` with tool calls is a tool-use stop:
    servers without a parser report `stop` after writing the markup. vLLM names the
    stop string that matched in `stop_reason`; a string there is a stop sequence."""
    if raw == "stop":
        if has_tool_calls:
            return "tool-use"
        return "stop-sequence" if isinstance(matched_stop, str) else "end-turn"
    return {
        "length": "max-tokens",
        "tool_calls": "tool-use",
        "function_call": "tool-use",
        "content_filter": "content-filtered",
    }.get(raw, "other")


def usage(value):
    """OpenAI-style usage in Weir's additive shape: cached prompt tokens move from
    `input` to `cache-read`. None for a missing or null usage."""
    if not isinstance(value, dict):
        return None
    prompt = _count(value.get("prompt_tokens")) or 0
    cached = _count(_detail(value, "prompt_tokens_details", "cached_tokens")) or 0
    return Usage(
        input=max(prompt - cached, 0),
        output=_count(value.get("completion_tokens")) or 0,
        cache_read=cached,
        cache_write=0,
        reasoning=_count(_detail(value, "completion_tokens_details", "reasoning_tokens")),
    )


def _detail(value: dict, parent: str, key: str):
    details = value.get(parent)
    return details.get(key) if isinstance(details, dict) else None


def _count(value):
    """A token count that fits the WIT `u64`, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
        return value
    return None
