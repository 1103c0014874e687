"""Decoding 2xx bodies, markup included, and refusing garbage without crashing."""

import json
import unittest

from hermes import response
from hermes.model import CodecError


def body(message, finish_reason="stop", **extra):
    value = {
        "id": "chatcmpl-abc", "object": "chat.completion", "created": 1, "model": "Qwen/Qwen3-8B",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason,
                     "stop_reason": None}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                  "prompt_tokens_details": {"cached_tokens": 64}},
    }
    value["choices"][0].update(extra)
    return json.dumps(value).encode()


def decode(raw, headers=()):
    return response.decode(200, list(headers), raw)


class Decode(unittest.TestCase):
    def test_hermes_markup_and_think_become_blocks(self):
        content = ("<think>\nThe user wants weather.\n</think>\n\nChecking.\n<tool_call>\n"
                   '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
        decoded = decode(body({"role": "assistant", "content": content}))
        cases = [case for case, _ in decoded.content]
        self.assertEqual(cases, ["thinking", "text", "tool-use"])
        self.assertEqual(decoded.content[0][1].text, "The user wants weather.")
        self.assertEqual(decoded.content[1][1], "Checking.")
        call = decoded.content[2][1]
        self.assertEqual((call.name, json.loads(call.input_json)), ("get_weather", {"city": "Paris"}))
        self.assertTrue(call.id.startswith("call_") and len(call.id) == 29)
        self.assertEqual((decoded.stop_reason, decoded.raw_stop_reason), ("tool-use", "stop"))
        self.assertEqual((decoded.usage.input, decoded.usage.cache_read, decoded.usage.output), (36, 64, 20))
        self.assertEqual(decoded.served_model, "Qwen/Qwen3-8B")
        self.assertEqual(decoded.request_id, "chatcmpl-abc")

    def test_ids_are_stable_per_response_and_differ_between_calls(self):
        message = {"content": '<tool_call>{"name":"f","arguments":{}}</tool_call><tool_call>{"name":"f","arguments":{}}</tool_call>'}
        first = decode(body(message))
        again = decode(body(message))
        ids = [block.id for _, block in first.content]
        self.assertEqual(len(set(ids)), 2)
        self.assertEqual(ids, [block.id for _, block in again.content])

    def test_reasoning_fields_win_over_think_tags(self):
        decoded = decode(body({"content": "Answer", "reasoning": "vLLM reasoning"}))
        self.assertEqual([(c, getattr(p, "text", p)) for c, p in decoded.content],
                         [("thinking", "vLLM reasoning"), ("text", "Answer")])
        decoded = decode(body({"content": "Answer", "reasoning_content": "llama.cpp reasoning", "reasoning": None}))
        self.assertEqual(decoded.content[0][1].text, "llama.cpp reasoning")

    def test_plain_text_native_calls_and_stop_reasons(self):
        decoded = decode(body({"content": "Hi!"}), [("X-Request-Id", "req_1")])
        self.assertEqual(decoded.content, [("text", "Hi!")])
        self.assertEqual((decoded.stop_reason, decoded.request_id), ("end-turn", "req_1"))
        native = {"content": None, "tool_calls": [
            {"id": "chatcmpl-tool-1", "type": "function", "function": {"name": "f", "arguments": ""}}]}
        decoded = decode(body(native, "tool_calls"))
        self.assertEqual(decoded.content[0][1].input_json, "{}")
        self.assertEqual(decoded.stop_reason, "tool-use")
        self.assertEqual(decode(body({"content": "x"}, "length")).stop_reason, "max-tokens")
        self.assertEqual(decode(body({"content": "x"}, stop_reason="END")).stop_reason, "stop-sequence")

    def test_error_objects_in_a_200_are_malformed(self):
        for raw in [b'{"error":{"message":"boom","type":"InternalServerError","code":500}}',
                    b'{"object":"error","message":"boom","type":"BadRequestError","code":400}']:
            with self.assertRaises(CodecError) as raised:
                decode(raw)
            self.assertEqual(raised.exception.case, "malformed")
            self.assertIn("boom", raised.exception.message)

    def test_garbage_is_malformed_never_a_crash(self):
        garbage = [b"", b"not json", b"\xff\xfe\xfd", b'{"choices": [', b"[" * 100_000 + b"]" * 100_000,
                   b'{"a":' * 100_000, b"NaN", b"[]", b"null", b'{"choices": []}', b'{"choices": [1]}',
                   b'{"choices": [{"message": "x"}]}', b'{"choices": [{"message": {"tool_calls": [{}]}}]}']
        for raw in garbage:
            with self.assertRaises(CodecError, msg=raw[:40]) as raised:
                decode(raw)
            self.assertEqual(raised.exception.case, "malformed")

    def test_odd_but_valid_fields_are_tolerated(self):
        decoded = decode(json.dumps({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]},
                                                  "finish_reason": None}], "usage": {"prompt_tokens": -1}}).encode())
        self.assertEqual(decoded.content, [("text", "ab")])
        self.assertEqual(decoded.stop_reason, "other")
        self.assertEqual(decoded.usage.input, 0)


if __name__ == "__main__":
    unittest.main()
