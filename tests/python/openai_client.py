#!/usr/bin/env python3
"""Talk to an OpenAI-compatible endpoint (Weir, or the fake upstream) with the official
`openai` package, and print what came back as JSON lines.

Usage: openai_client.py BASE_URL MODEL [--steps plain,tools,stream,stream_tools]

Steps (default: plain,tools):
  plain   a plain question; prints {"step":"plain","text":...,"usage":{...},"finish_reason":...}
  tools   one tool, get_weather(city); prints {"step":"tools","tool_calls":[...],...}
  stream  a streamed question with include_usage; prints {"step":"stream","text":...,"usage":...}
  stream_tools  a streamed tool question; reassembles the tool calls from their deltas the way
          the client's users do; prints {"step":"stream_tools","tool_calls":[...],"text":...}
  embed   embeddings.create of two texts as the client sends it by default (base64, decoded
          by the client); prints {"step":"embed","vectors":[...],"indices":[...],"usage":...}
  embed_float  embeddings.create of one text with encoding_format="float"
  tool_result  the turn after a tool call: the assistant's call (id call_PTLP8xhu3uwZk4l3nlnrrJha)
          and its result; prints {"step":"tool_result","text":...,"finish_reason":...}
  refused  a plain question the gateway is expected to refuse; prints the client's
          APIStatusError as {"step":"refused","status":...,"error":{...}} (no error: exit 1)

Exits non-zero on any exception, so a caller can treat the exit code as the verdict.
"""

import argparse
import json
import sys

from openai import APIStatusError, OpenAI

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def usage_dict(usage):
    return None if usage is None else usage.model_dump()


def plain(client, model):
    response = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
    )
    choice = response.choices[0]
    return {
        "step": "plain",
        "text": choice.message.content,
        "finish_reason": choice.finish_reason,
        "model": response.model,
        "usage": usage_dict(response.usage),
    }


def tools(client, model):
    response = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL],
    )
    choice = response.choices[0]
    calls = [
        {
            "id": call.id,
            "name": call.function.name,
            # The wire carries a JSON string; decode it so a caller compares values.
            "arguments": json.loads(call.function.arguments),
        }
        for call in (choice.message.tool_calls or [])
    ]
    return {
        "step": "tools",
        "tool_calls": calls,
        "text": choice.message.content,
        "finish_reason": choice.finish_reason,
        "usage": usage_dict(response.usage),
    }


def stream(client, model):
    text = []
    usage = None
    finish_reason = None
    with client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Count to three."}],
        stream=True,
        stream_options={"include_usage": True},
    ) as chunks:
        for chunk in chunks:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.content:
                    text.append(choice.delta.content)
                if choice.finish_reason:
                    finish_reason = choice.finish_reason
    return {
        "step": "stream",
        "text": "".join(text),
        "finish_reason": finish_reason,
        "usage": usage_dict(usage),
    }


def stream_tools(client, model):
    calls = {}
    text = []
    finish_reason = None
    with client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL],
        stream=True,
    ) as chunks:
        for chunk in chunks:
            for choice in chunk.choices:
                if choice.delta.content:
                    text.append(choice.delta.content)
                for call in choice.delta.tool_calls or []:
                    entry = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
                    if call.id:
                        entry["id"] = call.id
                    if call.function and call.function.name:
                        entry["name"] = call.function.name
                    if call.function and call.function.arguments:
                        entry["arguments"] += call.function.arguments
                if choice.finish_reason:
                    finish_reason = choice.finish_reason
    tool_calls = [
        {"id": c["id"], "name": c["name"], "arguments": json.loads(c["arguments"])} for _, c in sorted(calls.items())
    ]
    return {"step": "stream_tools", "text": "".join(text), "tool_calls": tool_calls, "finish_reason": finish_reason}


FOREIGN_CALL_ID = "call_PTLP8xhu3uwZk4l3nlnrrJha"


def tool_result(client, model):
    response = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": FOREIGN_CALL_ID,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": FOREIGN_CALL_ID, "content": "18 degrees and sunny"},
        ],
        tools=[WEATHER_TOOL],
    )
    choice = response.choices[0]
    return {"step": "tool_result", "text": choice.message.content, "finish_reason": choice.finish_reason}


def refused(client, model):
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Tell me a story."}])
    except APIStatusError as error:
        return {"step": "refused", "status": error.status_code, "error": error.body}
    raise RuntimeError("the call was answered, not refused")


EMBED_INPUTS = ["the first passage", "a second passage"]


def embed(client, model):
    """The client's default request: it asks for base64 and decodes it itself."""
    response = client.embeddings.create(model=model, input=EMBED_INPUTS)
    return {
        "step": "embed",
        "vectors": [item.embedding for item in response.data],
        "indices": [item.index for item in response.data],
        "model": response.model,
        "usage": usage_dict(response.usage),
    }


def embed_float(client, model):
    response = client.embeddings.create(model=model, input=EMBED_INPUTS[0], encoding_format="float")
    return {"step": "embed_float", "vectors": [item.embedding for item in response.data], "usage": usage_dict(response.usage)}


STEPS = {
    "plain": plain,
    "tools": tools,
    "stream": stream,
    "stream_tools": stream_tools,
    "embed": embed,
    "embed_float": embed_float,
    "tool_result": tool_result,
    "refused": refused,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url", help="e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("model", help="the model id to ask for")
    parser.add_argument("--steps", default="plain,tools", help="comma-separated: " + ",".join(STEPS))
    args = parser.parse_args()
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown steps: {unknown}")

    # max_retries=0: a retry inside the client would hide the gateway's own retry behaviour.
    client = OpenAI(base_url=args.base_url, api_key="unused-by-weir", max_retries=0, timeout=60)
    try:
        for step in steps:
            print(json.dumps(STEPS[step](client, args.model)), flush=True)
    except Exception as error:  # noqa: BLE001 - any failure is the verdict
        print(f"openai_client.py: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
