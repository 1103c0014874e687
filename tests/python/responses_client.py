#!/usr/bin/env python3
"""Drive `POST /v1/responses` with the official `openai` package (and the `openai-agents`
SDK), and print what the clients saw as JSON lines.

Usage: responses_client.py BASE_URL MODEL --steps STEP[,STEP...]

Steps:
  create        responses.create of one question with instructions; prints the response
  stream        responses.stream of one question; prints the event types and sequence numbers
                the client saw, in order, and its final response
  tools         a function tool round trip: the call, then `function_call_output`, then the
                final answer; prints both responses
  json_schema   text.format json_schema; prints the response and the parsed output_text
  custom_namespace  a custom tool and a namespace tool offered; prints the output items, then
                sends each call's output back and prints the final response
  reasoning     turn 1 with include reasoning.encrypted_content and store false, then turn 2
                sending turn 1's output back with the tool's output; prints both responses
  reasoning_stream  as `reasoning`, turn 1 streamed: the reasoning item taken from its
                `response.output_item.done`
  tampered      turn 1 as `reasoning`, then turn 2 with the reasoning item's
                encrypted_content changed by one character; prints the client's error
  other_model   turn 1 as `reasoning` on MODEL, then turn 2 on the model named by
                $WEIR_OTHER_MODEL; prints the client's error
  hosted        a web_search tool beside a function tool; prints the x-weir-dropped-tools header
                and the response
  web_search    a web_search tool alone: the output items as the client parsed them (`to_dict()`),
                its output_text and x-weir-dropped-tools; then a second turn sending those items
                back as input; prints {"items", "output_text", "dropped", "answer"}
  stream_web_search  the same first turn through `responses.stream`; prints the event types
                with their sequence numbers and the final response's output items
                {"events": [[type, seq]...], "items": [...]}
  unknown_field an unknown top-level field (extra_body); prints the client's error
  error         a plain question expected to fail; prints the client's error
  agent         an openai-agents Agent with one function tool on its default Responses model
  agent_chat    the same agent on OpenAIChatCompletionsModel (`/v1/chat/completions`)

Exits non-zero on any unexpected exception, so a caller can treat the exit code as the verdict.
"""

import argparse
import asyncio
import json
import os
import sys

import openai
from openai import OpenAI

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def dump(response):
    return response.model_dump(mode="json")


def error_of(call):
    """Runs `call`, which must raise an openai.APIStatusError; returns what the client saw."""
    try:
        call()
    except openai.APIStatusError as error:
        return {
            "exception": type(error).__name__,
            "status": error.status_code,
            "code": error.code,
            "type": error.type,
            "message": error.message,
            "body": error.body,
        }
    raise AssertionError("the call did not fail")


def create(client, model):
    response = client.responses.create(
        model=model, instructions="Answer briefly.", input="What is the capital of France?"
    )
    return {"step": "create", "response": dump(response), "output_text": response.output_text}


def stream(client, model):
    events = []
    with client.responses.stream(model=model, input="Count to three.") as stream:
        for event in stream:
            events.append({"type": event.type, "sequence_number": event.sequence_number})
        final = stream.get_final_response()
    return {"step": "stream", "events": events, "final": dump(final), "output_text": final.output_text}


def tools(client, model):
    question = {"role": "user", "content": "Weather in Paris?"}
    first = client.responses.create(model=model, input=[question], tools=[WEATHER_TOOL])
    calls = [item for item in first.output if item.type == "function_call"]
    outputs = [{"type": "function_call_output", "call_id": call.call_id, "output": "18C and sunny"} for call in calls]
    history = [question] + [item.model_dump(exclude_none=True) for item in first.output] + outputs
    final = client.responses.create(model=model, input=history, tools=[WEATHER_TOOL])
    return {"step": "tools", "first": dump(first), "final": dump(final), "output_text": final.output_text}


def json_schema(client, model):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    response = client.responses.create(
        model=model,
        input="Name a capital.",
        text={"format": {"type": "json_schema", "name": "capital", "schema": schema, "strict": True}},
    )
    return {"step": "json_schema", "response": dump(response), "parsed": json.loads(response.output_text)}


CUSTOM_NAMESPACE_TOOLS = [
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch"},
    {
        "type": "namespace",
        "name": "crm",
        "description": "Customer records",
        "tools": [
            {
                "type": "function",
                "name": "lookup",
                "description": "Find a customer",
                "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
            }
        ],
    },
]


def custom_namespace(client, model):
    question = {"role": "user", "content": "Patch and look up."}
    first = client.responses.create(model=model, input=[question], tools=CUSTOM_NAMESPACE_TOOLS)
    outputs = []
    for item in first.output:
        if item.type == "custom_tool_call":
            outputs.append({"type": "custom_tool_call_output", "call_id": item.call_id, "output": "patched"})
        elif item.type == "function_call":
            outputs.append({"type": "function_call_output", "call_id": item.call_id, "output": "Ada"})
    history = [question] + [item.model_dump(exclude_none=True) for item in first.output] + outputs
    final = client.responses.create(model=model, input=history, tools=CUSTOM_NAMESPACE_TOOLS)
    return {"step": "custom_namespace", "first": dump(first), "final": dump(final)}


def reasoning_turn_one(client, model, streamed=False):
    question = {"role": "user", "content": "Weather in Paris?"}
    kwargs = dict(
        model=model,
        input=[question],
        tools=[WEATHER_TOOL],
        include=["reasoning.encrypted_content"],
        store=False,
        reasoning={"effort": "low", "summary": "auto"},
    )
    if not streamed:
        return question, client.responses.create(**kwargs)
    with client.responses.stream(**kwargs) as stream:
        done_items = [event.item for event in stream if event.type == "response.output_item.done"]
        final = stream.get_final_response()
    assert [item.type for item in done_items] == [item.type for item in final.output]
    return question, final


def next_turn(question, first):
    calls = [item for item in first.output if item.type == "function_call"]
    outputs = [{"type": "function_call_output", "call_id": call.call_id, "output": "18C"} for call in calls]
    return [question] + [item.model_dump(exclude_none=True) for item in first.output] + outputs


def reasoning(client, model, streamed=False):
    question, first = reasoning_turn_one(client, model, streamed)
    final = client.responses.create(
        model=model, input=next_turn(question, first), tools=[WEATHER_TOOL], include=["reasoning.encrypted_content"],
        store=False,
    )
    return {"step": "reasoning", "first": dump(first), "final": dump(final), "output_text": final.output_text}


def tampered(client, model):
    question, first = reasoning_turn_one(client, model)
    history = next_turn(question, first)
    for item in history:
        if item.get("type") == "reasoning":
            sealed = item["encrypted_content"]
            item["encrypted_content"] = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    error = error_of(lambda: client.responses.create(model=model, input=history, tools=[WEATHER_TOOL]))
    return {"step": "tampered", "first": dump(first), "error": error}


def other_model(client, model):
    question, first = reasoning_turn_one(client, model)
    other = os.environ["WEIR_OTHER_MODEL"]
    history = next_turn(question, first)
    error = error_of(lambda: client.responses.create(model=other, input=history, tools=[WEATHER_TOOL]))
    return {"step": "other_model", "error": error}


def hosted(client, model):
    raw = client.responses.with_raw_response.create(
        model=model, input="Search the web.", tools=[{"type": "web_search"}, WEATHER_TOOL]
    )
    response = raw.parse()
    return {
        "step": "hosted",
        "dropped": raw.headers.get("x-weir-dropped-tools"),
        "call_id": raw.headers.get("x-weir-call-id"),
        "response": dump(response),
    }


def web_search(client, model):
    question = {"role": "user", "content": "What is Weir? Search the web."}
    raw = client.responses.with_raw_response.create(model=model, input=[question], tools=[{"type": "web_search"}])
    response = raw.parse()
    items = [item.to_dict() for item in response.output]
    follow_up = client.responses.create(
        model=model,
        input=[question, *items, {"role": "user", "content": "Thanks. In one word?"}],
        tools=[{"type": "web_search"}],
    )
    return {
        "step": "web_search",
        "items": items,
        "output_text": response.output_text,
        "dropped": raw.headers.get("x-weir-dropped-tools"),
        "answer": follow_up.output_text,
    }


def stream_web_search(client, model):
    events = []
    with client.responses.stream(
        model=model,
        input=[{"role": "user", "content": "What is Weir? Search the web."}],
        tools=[{"type": "web_search"}],
    ) as stream:
        for event in stream:
            events.append([event.type, event.sequence_number])
        final = stream.get_final_response()
    return {"step": "stream_web_search", "events": events, "items": [item.to_dict() for item in final.output]}


def hosted_refused(client, model):
    call = lambda: client.responses.create(model=model, input="Search.", tools=[{"type": "web_search"}])
    return {"step": "hosted_refused", "error": error_of(call)}


def unknown_field(client, model):
    call = lambda: client.responses.create(model=model, input="Hi", extra_body={"frequency_penalty": 1})
    return {"step": "unknown_field", "error": error_of(call)}


def error(client, model):
    return {"step": "error", "error": error_of(lambda: client.responses.create(model=model, input="Hi"))}


def agent(client, model, chat=False):
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    async_client = openai.AsyncOpenAI(base_url=client.base_url, api_key=client.api_key, max_retries=0)

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return f"18C and sunny in {city}"

    if chat:
        agent_model = OpenAIChatCompletionsModel(model=model, openai_client=async_client)
    else:
        agent_model = OpenAIResponsesModel(model=model, openai_client=async_client)
    weather_agent = Agent(name="weather", instructions="Use the tool.", tools=[get_weather], model=agent_model)
    result = asyncio.run(Runner.run(weather_agent, "Weather in Paris?"))
    return {
        "step": "agent_chat" if chat else "agent",
        "final_output": result.final_output,
        "items": [item.type for item in result.new_items],
    }


def stored(client, model):
    """The client's stored-response surface: create (stored by default), retrieve, list the
    input items, continue with `previous_response_id`, delete, and the 404 after."""
    first = client.responses.create(model=model, input="Remember the number 42.")
    read = client.responses.retrieve(first.id)
    items = client.responses.input_items.list(first.id)
    second = client.responses.create(model=model, input="Which number?", previous_response_id=first.id)
    client.responses.delete(first.id)
    gone = error_of(lambda: client.responses.retrieve(first.id))
    return {
        "step": "stored",
        "first": dump(first),
        "read": dump(read),
        "input_texts": [part.text for item in items.data for part in item.content],
        "second": dump(second),
        "gone": gone,
    }


STEPS = {
    "web_search": web_search,
    "stream_web_search": stream_web_search,
    "stored": stored,
    "create": create,
    "stream": stream,
    "tools": tools,
    "json_schema": json_schema,
    "custom_namespace": custom_namespace,
    "reasoning": reasoning,
    "reasoning_stream": lambda client, model: {**reasoning(client, model, streamed=True), "step": "reasoning_stream"},
    "tampered": tampered,
    "other_model": other_model,
    "hosted": hosted,
    "hosted_refused": hosted_refused,
    "unknown_field": unknown_field,
    "error": error,
    "agent": agent,
    "agent_chat": lambda client, model: agent(client, model, chat=True),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("model")
    parser.add_argument("--steps", required=True)
    args = parser.parse_args()
    client = OpenAI(base_url=args.base_url, api_key=os.environ.get("WEIR_CALLER_KEY", "unused-by-weir"), max_retries=0)
    for step in args.steps.split(","):
        print(json.dumps(STEPS[step](client, args.model)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
