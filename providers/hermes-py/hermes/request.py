"""Encoding: a prepared conversation and its parameters → one Chat Completions
request. The request never carries a credential; the host adds it."""

import math

from .fallback import block_as_text
from .model import CallParams, CodecError, Conversation, HttpRequest, ToolUse, Turn
from .wire import parse_json_text, to_body

PROVIDER = "hermes-text"
# Appended to the endpoint's base URL (which ends in `/v1` for these servers).
PATH = "/chat/completions"

# Weir's effort words in the OpenAI dialect, which has no `max`.
_EFFORT_WORDS = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high", "max": "high"}


def encode(provider: str, conversation: Conversation, params: CallParams) -> HttpRequest:
    if provider != PROVIDER:
        raise CodecError("unsupported", f"unknown provider key {provider!r}")
    headers = [("content-type", "application/json")]
    if params.stream:
        headers.append(("accept", "text/event-stream"))
    return HttpRequest("POST", PATH, headers, to_body(body(conversation, params)))


def body(conversation: Conversation, params: CallParams) -> dict:
    body = {"model": params.wire_model_id, "messages": messages(conversation)}
    if conversation.tools:
        body["tools"] = [tool(definition) for definition in conversation.tools]
    choice = tool_choice(conversation)
    if choice is not None:
        body["tool_choice"] = choice
    # Exactly the host's output reserve, under the name every such server knows.
    body["max_tokens"] = params.max_tokens
    if params.temperature is not None:
        body["temperature"] = temperature(params.temperature)
    if params.stop:
        body["stop"] = list(params.stop)
    if params.reasoning_effort is not None:
        body["reasoning_effort"] = _EFFORT_WORDS[params.reasoning_effort]
    if params.response_schema is not None:
        schema = _json(params.response_schema.schema_json, f"response schema {params.response_schema.name!r}")
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": params.response_schema.name, "schema": schema},
        }
    if params.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def temperature(value: float):
    """The temperature as the host sends it: weir:provider 0.5.0 carries the
    caller's own number (an `f64`, a Python float), so 0.3 goes out as 0.3.
    A number that is not finite is refused."""
    if not math.isfinite(value):
        raise CodecError("unsupported", f"temperature {value} is not finite")
    return value


def tool(definition) -> dict:
    function = {"name": definition.name}
    if definition.description:
        function["description"] = definition.description
    function["parameters"] = _json(definition.parameters_json, f"parameters_json of tool {definition.name!r}")
    return {"type": "function", "function": function}


def tool_choice(conversation: Conversation):
    """The tool choice for a server without a tool parser. `auto` is left out: vLLM
    refuses an explicit `"auto"` unless it runs a tool parser, and its default still
    renders the tools into the prompt, so the model calls them in markup. `required`
    and a named tool are kept: vLLM serves those by guided decoding, parser or not."""
    if conversation.tool_choice is None:
        return None
    case, name = conversation.tool_choice
    if case == "auto" or (case == "none" and not conversation.tools):
        return None
    if case == "named":
        return {"type": "function", "function": {"name": name}}
    return case  # "none" | "required"


def messages(conversation: Conversation) -> list:
    out = []
    if conversation.system:
        out.append({"role": "system", "content": "\n\n".join(conversation.system)})
    for turn in conversation.turns:
        if turn.role == "user":
            out.extend(user_messages(turn))
        else:
            out.append(assistant_message(turn))
    return out


def user_messages(turn: Turn) -> list:
    """A user turn. Its tool results become `tool` messages placed first, right after
    the assistant message that made the calls. Images and documents go as their text
    fallback: this dialect's servers are text models (no `images` capability)."""
    out = []
    texts = []
    for case, payload in turn.content:
        if case == "tool-result":
            out.append(tool_message(payload))
        else:
            texts.append(block_as_text(case, payload))
    if len(texts) == 1:
        out.append({"role": "user", "content": texts[0]})
    elif texts:
        out.append({"role": "user", "content": [{"type": "text", "text": text} for text in texts]})
    return out


def tool_message(result) -> dict:
    text = "\n".join(block_as_text(case, leaf) for case, leaf in result.content)
    return {
        "role": "tool",
        "tool_call_id": result.tool_use_id,
        "content": f"Error: {text}" if result.is_error else text,
    }


def assistant_message(turn: Turn) -> dict:
    """An assistant turn: its text (and the text fallback of reasoning and anything
    else) joined, and its tool calls in `tool_calls`, which the server's chat
    template renders back into the model's own markup."""
    texts = []
    calls = []
    for case, payload in turn.content:
        if case == "tool-use":
            calls.append(tool_call(payload))
        elif case != "text" or payload:
            texts.append(block_as_text(case, payload))
    message = {"role": "assistant"}
    if texts:
        message["content"] = "\n\n".join(texts)
    else:
        # null beside tool calls; "" when there is nothing, which servers accept.
        message["content"] = None if calls else ""
    if calls:
        message["tool_calls"] = calls
    return message


def tool_call(call: ToolUse) -> dict:
    """The arguments go out as the host's JSON text, verbatim, once we know it is JSON."""
    _json(call.input_json, f"input_json of tool_use {call.id!r}")
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.input_json}}


def _json(text: str, what: str):
    value = parse_json_text(text)
    if value is None and text.strip() != "null":
        raise CodecError("unsupported", f"{what} is not JSON")
    return value
