"""Encoding: the exact request a Chat Completions server receives."""

import json
import unittest

from hermes import request
from hermes.model import (
    CallParams, CodecError, Conversation, Media, ResponseSchema, Thinking, ToolDefinition, ToolResult, ToolUse, Turn,
)

WEATHER = ToolDefinition("get_weather", "Current weather",
                         '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}')


def encode(conversation, **params):
    params = {"wire_model_id": "Qwen/Qwen3-8B", "max_tokens": 1234, **params}
    sent = request.encode("hermes-text", conversation, CallParams(**params))
    return sent, json.loads(sent.body.decode("utf-8"))


def user(*blocks):
    return Turn("user", list(blocks))


class Encode(unittest.TestCase):
    def test_model_max_tokens_path_and_headers(self):
        sent, body = encode(Conversation(system=["Be brief."], turns=[user(("text", "hi"))]), max_tokens=4321)
        self.assertEqual((sent.method, sent.path_and_query), ("POST", "/chat/completions"))
        self.assertEqual(body["model"], "Qwen/Qwen3-8B")
        self.assertEqual(body["max_tokens"], 4321)
        self.assertEqual(body["messages"], [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
        self.assertEqual(sent.headers, [("content-type", "application/json")])
        self.assertNotIn("stream", body)

    def test_never_an_auth_header_and_no_line_breaks_in_headers(self):
        sent, _ = encode(Conversation(turns=[user(("text", "hi"))]), stream=True)
        for name, value in sent.headers:
            self.assertNotIn(name.lower(), ("authorization", "api-key", "x-api-key"))
            self.assertFalse(any(c in name + value for c in "\r\n"))

    def test_text_round_trips_exactly(self):
        tricky = 'quotes " backslash \\ newline \n tab \t NUL \x00 emoji 🎉 <tool_call> \u2028'
        _, body = encode(Conversation(system=[tricky], turns=[user(("text", tricky))]))
        self.assertEqual(body["messages"][0]["content"], tricky)
        self.assertEqual(body["messages"][1]["content"], tricky)

    def test_stream_temperature_stop_and_effort(self):
        sent, body = encode(Conversation(turns=[user(("text", "hi"))]), stream=True, temperature=0.3,
                            stop=["END"], reasoning_effort="max")
        self.assertEqual(body["stream"], True)
        self.assertEqual(body["stream_options"], {"include_usage": True})
        self.assertEqual(body["temperature"], 0.3)
        self.assertIn(b'"temperature":0.3,', sent.body)
        self.assertEqual(body["stop"], ["END"])
        self.assertEqual(body["reasoning_effort"], "high")
        self.assertIn(("accept", "text/event-stream"), sent.headers)

    def test_tools_and_choices(self):
        conversation = Conversation(turns=[user(("text", "weather?"))], tools=[WEATHER], tool_choice=("auto", None))
        _, body = encode(conversation)
        self.assertEqual(body["tools"][0]["type"], "function")
        self.assertEqual(body["tools"][0]["function"]["name"], "get_weather")
        self.assertEqual(body["tools"][0]["function"]["parameters"]["required"], ["city"])
        self.assertNotIn("tool_choice", body, "vLLM refuses an explicit auto without a tool parser")
        conversation.tool_choice = ("named", "get_weather")
        self.assertEqual(encode(conversation)[1]["tool_choice"],
                         {"type": "function", "function": {"name": "get_weather"}})
        conversation.tool_choice = ("required", None)
        self.assertEqual(encode(conversation)[1]["tool_choice"], "required")

    def test_tool_history_images_documents_and_thinking_are_never_dropped(self):
        image = Media("image/png", base64="AAAA")
        document = Media("application/pdf", url="https://x/d.pdf")
        conversation = Conversation(turns=[
            user(("text", "look"), ("image", image), ("document", document)),
            Turn("assistant", [("thinking", Thinking("hmm")), ("text", "calling"),
                               ("tool-use", ToolUse("call_1", "get_weather", '{"city":"Paris"}'))]),
            user(("tool-result", ToolResult("call_1", [("text", "18C")], True)), ("text", "thanks")),
        ])
        _, body = encode(conversation)
        messages = body["messages"]
        self.assertEqual(messages[0]["content"], [
            {"type": "text", "text": "look"},
            {"type": "text", "text": "[image image/png, 4 bytes of base64 not shown]"},
            {"type": "text", "text": "[document application/pdf: https://x/d.pdf]"},
        ])
        self.assertEqual(messages[1]["content"], "<thinking>hmm</thinking>\n\ncalling")
        self.assertEqual(messages[1]["tool_calls"], [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ])
        self.assertEqual(messages[2], {"role": "tool", "tool_call_id": "call_1", "content": "Error: 18C"})
        self.assertEqual(messages[3], {"role": "user", "content": "thanks"})

    def test_response_schema(self):
        _, body = encode(Conversation(turns=[user(("text", "x"))]),
                         response_schema=ResponseSchema("out", '{"type":"object"}'))
        self.assertEqual(body["response_format"],
                         {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}}})

    def test_what_cannot_be_encoded_is_refused(self):
        cases = [
            ("other-key", Conversation(), {}),
            ("hermes-text", Conversation(tools=[ToolDefinition("f", "", "{not json")]), {}),
            ("hermes-text", Conversation(turns=[Turn("assistant", [("tool-use", ToolUse("c", "f", "nope"))])]), {}),
            ("hermes-text", Conversation(), {"temperature": float("nan")}),
        ]
        for provider, conversation, extra in cases:
            with self.assertRaises(CodecError) as raised:
                request.encode(provider, conversation, CallParams("m", 1, **extra))
            self.assertEqual(raised.exception.case, "unsupported")


if __name__ == "__main__":
    unittest.main()
