#!/usr/bin/env python3
"""Talk to an Anthropic Messages endpoint (Weir's `/v1/messages`) with the official
`anthropic` package, and print what came back as JSON lines.

Usage: anthropic_client.py BASE_URL MODEL [--steps plain,tools,stream,stream_tools]

BASE_URL is the server's root (the client appends `/v1/messages`), e.g. http://127.0.0.1:8080.

Steps (default: plain,tools):
  plain   a plain question with a system prompt; prints
          {"step":"plain","text":...,"stop_reason":...,"model":...,"id":...,"usage":{...}}
  tools   one tool, get_weather(city); prints the tool_use blocks, then sends the tool's
          result back and prints the final answer: {"step":"tools","tool_calls":[...],"answer":...}
  stream  `client.messages.stream(...)`: the text reassembled from `text_stream`, and the final
          message the helper accumulated; prints {"step":"stream","text":...,"final_text":...,
          "stop_reason":...,"usage":{...},"events":[event types in order]}
  stream_tools  a streamed tool question; the tool calls from the accumulated final message
          (their `input` parsed from the streamed JSON fragments); prints
          {"step":"stream_tools","tool_calls":[...],"stop_reason":...}

  beta    `client.beta.messages.with_raw_response.create(..., betas=[...])` with
          `context_management`, `output_config.effort`, adaptive thinking with
          `display: "omitted"` and `metadata.user_id`, as Claude Code sends them; prints
          {"step":"beta","text":...,"blocks":[{"type","thinking","signature"}...],
          "dropped_fields":<x-weir-dropped-fields>}
  web_search  `client.messages.create` with Anthropic's `web_search_20250305` server tool; the
          answer's blocks as the client parsed them (`to_dict()`: the fields the answer set), then a
          second turn that sends those blocks back as the assistant's history; prints
          {"step":"web_search","blocks":[...],"usage":{...},"dropped_tools":<x-weir-dropped-tools>,
          "answer":<the second turn's text>}
  stream_web_search  the same first turn through `client.messages.stream(...)`; prints
          {"step":"stream_web_search","blocks":[final message's blocks],"events":[...],
          "deltas":[content_block_delta types in order],"usage":{...}}
  live_web_search  the first turn streamed as `stream_web_search` does; once it has read the
          first `text_delta` it creates the file $WEIR_GATE_FILE (a fake upstream holds the rest
          of its stream until then), then sends the final message's blocks back as the next
          turn's history with `client.messages.create`; prints {"step":"live_web_search",
          "blocks":[...],"events":[...],"deltas":[...],"usage":{...},"first_text":<the text of
          the delta that opened the gate>,"answer":<the second turn's text>}
  budgeted_web_search  one `client.messages.create` with the `web_search_20250305` tool, its
          `max_uses` from $WEIR_MAX_USES (`none`: the tool has none); a refusal is caught, not
          raised; prints {"step":"budgeted_web_search","status":<HTTP status>,"category":
          <error's weir_category, or null>,"usage":{...},"dropped_tools":<x-weir-dropped-tools>}
  count   `client.messages.count_tokens` and `client.beta.messages.count_tokens` (with betas,
          `context_management` and a tool); prints {"step":"count","input_tokens":...,
          "marked":<x-weir-token-count>,"beta_input_tokens":...,"beta_dropped_fields":...}

The caller key is $WEIR_CALLER_KEY when set (a gateway with keys and budgets).

Exits non-zero on any exception, so a caller can treat the exit code as the verdict.
"""

import argparse
import json
import os
import sys

import anthropic
from anthropic import Anthropic

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def usage_dict(usage):
    return None if usage is None else usage.model_dump(exclude_none=True)


def text_of(message):
    return "".join(block.text for block in message.content if block.type == "text")


def tool_calls_of(message):
    return [
        {"id": block.id, "name": block.name, "input": block.input}
        for block in message.content
        if block.type == "tool_use"
    ]


def plain(client, model):
    message = client.messages.create(
        model=model,
        max_tokens=200,
        system="Answer briefly.",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    return {
        "step": "plain",
        "id": message.id,
        "type": message.type,
        "role": message.role,
        "model": message.model,
        "text": text_of(message),
        "stop_reason": message.stop_reason,
        "usage": usage_dict(message.usage),
    }


def tools(client, model):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.messages.create(model=model, max_tokens=200, tools=[WEATHER_TOOL], messages=messages)
    calls = tool_calls_of(first)
    # The caller runs the tool and sends the result back, as the client's users do.
    messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "18C, sunny"} for call in calls],
        }
    )
    second = client.messages.create(model=model, max_tokens=200, tools=[WEATHER_TOOL], messages=messages)
    return {
        "step": "tools",
        "tool_calls": calls,
        "text": text_of(first),
        "stop_reason": first.stop_reason,
        "answer": text_of(second),
        "answer_stop_reason": second.stop_reason,
    }


def stream(client, model):
    events = []
    text = []
    with client.messages.stream(
        model=model,
        max_tokens=200,
        messages=[{"role": "user", "content": "Count to three."}],
    ) as messages:
        for event in messages:
            events.append(event.type)
            if event.type == "text":
                text.append(event.text)
        final = messages.get_final_message()
    return {
        "step": "stream",
        "text": "".join(text),
        "final_text": text_of(final),
        "model": final.model,
        "stop_reason": final.stop_reason,
        "usage": usage_dict(final.usage),
        "events": events,
    }


def stream_tools(client, model):
    with client.messages.stream(
        model=model,
        max_tokens=200,
        tools=[WEATHER_TOOL],
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    ) as messages:
        final = messages.get_final_message()
    return {
        "step": "stream_tools",
        "text": text_of(final),
        "tool_calls": tool_calls_of(final),
        "stop_reason": final.stop_reason,
    }


CLAUDE_CODE_BETAS = ["context-management-2025-06-27", "effort-2025-11-24", "interleaved-thinking-2025-05-14"]
CLEAR_THINKING = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}


def beta(client, model):
    raw = client.beta.messages.with_raw_response.create(
        model=model,
        max_tokens=2048,
        betas=CLAUDE_CODE_BETAS,
        context_management=CLEAR_THINKING,
        output_config={"effort": "low"},
        thinking={"type": "adaptive", "display": "omitted"},
        metadata={"user_id": "python-user-1"},
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    message = raw.parse()
    blocks = [
        {"type": block.type, "thinking": getattr(block, "thinking", None), "signature": getattr(block, "signature", None)}
        for block in message.content
    ]
    return {
        "step": "beta",
        "text": text_of(message),
        "blocks": blocks,
        "stop_reason": message.stop_reason,
        "dropped_fields": raw.headers.get("x-weir-dropped-fields"),
    }


def count(client, model):
    plain_raw = client.messages.with_raw_response.count_tokens(
        model=model,
        system="Answer briefly.",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    beta_raw = client.beta.messages.with_raw_response.count_tokens(
        model=model,
        betas=CLAUDE_CODE_BETAS,
        context_management=CLEAR_THINKING,
        tools=[WEATHER_TOOL],
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    )
    return {
        "step": "count",
        "input_tokens": plain_raw.parse().input_tokens,
        "marked": plain_raw.headers.get("x-weir-token-count"),
        "beta_input_tokens": beta_raw.parse().input_tokens,
        "beta_marked": beta_raw.headers.get("x-weir-token-count"),
        "beta_dropped_fields": beta_raw.headers.get("x-weir-dropped-fields"),
    }


WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
WEB_SEARCH_QUESTION = "What is Weir? Search the web."


def next_search_turn(client, model, blocks):
    """The turn after a web search: its answer's blocks sent back as the assistant's."""
    return client.messages.create(
        model=model,
        max_tokens=500,
        tools=[WEB_SEARCH_TOOL],
        messages=[
            {"role": "user", "content": WEB_SEARCH_QUESTION},
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": "Thanks. In one word?"},
        ],
    )


def web_search(client, model):
    raw = client.messages.with_raw_response.create(
        model=model,
        max_tokens=500,
        tools=[WEB_SEARCH_TOOL],
        messages=[{"role": "user", "content": WEB_SEARCH_QUESTION}],
    )
    message = raw.parse()
    blocks = [block.to_dict() for block in message.content]
    follow_up = next_search_turn(client, model, blocks)
    return {
        "step": "web_search",
        "blocks": blocks,
        "stop_reason": message.stop_reason,
        "usage": usage_dict(message.usage),
        "dropped_tools": raw.headers.get("x-weir-dropped-tools"),
        "answer": text_of(follow_up),
    }


def read_search_stream(client, model, gate=None):
    """The first web search turn through `client.messages.stream(...)`: the final message,
    the event types, the delta types and the first text delta's text. With `gate`, that
    file is created once the first text delta has been read."""
    events = []
    deltas = []
    first_text = None
    with client.messages.stream(
        model=model,
        max_tokens=500,
        tools=[WEB_SEARCH_TOOL],
        messages=[{"role": "user", "content": WEB_SEARCH_QUESTION}],
    ) as stream:
        for event in stream:
            if event.type in ("message_start", "content_block_start", "content_block_delta",
                              "content_block_stop", "message_delta", "message_stop"):
                events.append(event.type)
            if event.type == "content_block_delta":
                deltas.append(event.delta.type)
                if event.delta.type == "text_delta" and first_text is None:
                    first_text = event.delta.text
                    if gate is not None:
                        with open(gate, "w") as opened:
                            opened.write("read")
        final = stream.get_final_message()
    return final, events, deltas, first_text


def stream_web_search(client, model):
    final, events, deltas, _ = read_search_stream(client, model)
    return {
        "step": "stream_web_search",
        "blocks": [block.to_dict() for block in final.content],
        "stop_reason": final.stop_reason,
        "events": events,
        "deltas": deltas,
        "usage": usage_dict(final.usage),
    }


def live_web_search(client, model):
    final, events, deltas, first_text = read_search_stream(client, model, os.environ["WEIR_GATE_FILE"])
    blocks = [block.to_dict() for block in final.content]
    follow_up = next_search_turn(client, model, blocks)
    return {
        "step": "live_web_search",
        "blocks": blocks,
        "stop_reason": final.stop_reason,
        "events": events,
        "deltas": deltas,
        "usage": usage_dict(final.usage),
        "first_text": first_text,
        "answer": text_of(follow_up),
    }


def budgeted_web_search(client, model):
    tool = {"type": "web_search_20250305", "name": "web_search"}
    max_uses = os.environ.get("WEIR_MAX_USES", "2")
    if max_uses != "none":
        tool["max_uses"] = int(max_uses)
    try:
        raw = client.messages.with_raw_response.create(
            model=model,
            max_tokens=500,
            tools=[tool],
            messages=[{"role": "user", "content": WEB_SEARCH_QUESTION}],
        )
    except anthropic.APIStatusError as error:
        body = error.body if isinstance(error.body, dict) else {}
        inner = body.get("error", body) if isinstance(body, dict) else {}
        return {
            "step": "budgeted_web_search",
            "status": error.status_code,
            "category": inner.get("weir_category") if isinstance(inner, dict) else None,
            "message": inner.get("message") if isinstance(inner, dict) else None,
        }
    message = raw.parse()
    return {
        "step": "budgeted_web_search",
        "status": raw.status_code,
        "category": None,
        "usage": usage_dict(message.usage),
        "dropped_tools": raw.headers.get("x-weir-dropped-tools"),
    }


STEPS = {
    "budgeted_web_search": budgeted_web_search,
    "web_search": web_search,
    "stream_web_search": stream_web_search,
    "live_web_search": live_web_search,
    "plain": plain,
    "tools": tools,
    "stream": stream,
    "stream_tools": stream_tools,
    "beta": beta,
    "count": count,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url", help="e.g. http://127.0.0.1:8080")
    parser.add_argument("model", help="the model id to ask for")
    parser.add_argument("--steps", default="plain,tools",
                        help="comma-separated: plain,tools,stream,stream_tools,beta,count,web_search,stream_web_search,live_web_search,"
                             "budgeted_web_search")
    args = parser.parse_args()
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown steps: {unknown}")

    # max_retries=0: a retry inside the client would hide the gateway's own retry behaviour.
    api_key = os.environ.get("WEIR_CALLER_KEY", "unused-by-weir")
    client = Anthropic(base_url=args.base_url, api_key=api_key, max_retries=0, timeout=60)
    try:
        for step in steps:
            print(json.dumps(STEPS[step](client, args.model)), flush=True)
    except Exception as error:  # noqa: BLE001 - any failure is the verdict
        print(f"anthropic_client.py: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
