"""The stream decoder: markup split across chunks, errors in a 200 stream, endings."""

import json
import unittest

from hermes.model import CodecError, StopInfo, ToolCallFragment, Usage
from hermes.stream import StreamDecoder


def chunk(content=None, finish_reason=None, **delta):
    if content is not None:
        delta["content"] = content
    return json.dumps({"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "qwen3",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}).encode()


USAGE = json.dumps({"id": "chatcmpl-s", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()


def run(events, finish=True):
    decoder = StreamDecoder("hermes-text")
    out = []
    for event in events:
        name, data = event if isinstance(event, tuple) else (None, event)
        out.extend(decoder.feed(name, data))
    if finish:
        out.extend(decoder.finish())
    return out


def merged(deltas, case):
    return "".join(payload for kind, payload in deltas if kind == case)


class Stream(unittest.TestCase):
    def test_think_text_and_a_tool_call_split_at_every_character(self):
        content = ('<think>\nweather?\n</think>\n\nChecking.<tool_call>\n'
                   '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
        events = [chunk(role="assistant", content="")] + [chunk(c) for c in content]
        deltas = run(events + [chunk(finish_reason="stop"), USAGE, b"[DONE]"])
        self.assertEqual(deltas[:2], [("request-id", "chatcmpl-s"), ("served-model", "qwen3")])
        self.assertEqual(merged(deltas, "thinking"), "\nweather?\n")
        self.assertEqual(merged(deltas, "text"), "Checking.")
        kinds = [kind for kind, _ in deltas if kind.startswith("tool-call") or kind in ("stop", "usage")]
        self.assertEqual(kinds, ["tool-call-start", "tool-call-fragment", "tool-call-end", "stop", "usage"])
        start = next(payload for kind, payload in deltas if kind == "tool-call-start")
        self.assertEqual((start.index, start.name), (0, "get_weather"))
        fragment = next(payload for kind, payload in deltas if kind == "tool-call-fragment")
        self.assertEqual(json.loads(fragment.json), {"city": "Paris"})
        self.assertEqual(deltas[-2], ("stop", StopInfo("tool-use", "stop")))
        self.assertEqual(deltas[-1], ("usage", Usage(10, 5, 0, 0, None)))

    def test_plain_text_is_sent_at_once_and_a_partial_tag_is_held_back(self):
        decoder = StreamDecoder("hermes-text")
        self.assertEqual(decoder.feed(None, chunk("Hello <"))[-1], ("text", "Hello "))
        self.assertEqual(decoder.feed(None, chunk("b> there")), [("text", "<b> there")])
        self.assertEqual(decoder.feed(None, chunk("<tool")), [])
        self.assertEqual(decoder.finish_seen, False)
        self.assertEqual(decoder.feed(None, chunk(finish_reason="stop")),
                         [("text", "<tool"), ("stop", StopInfo("end-turn", "stop"))])
        self.assertEqual(decoder.finish(), [])

    def test_finish_flushes_an_unterminated_call_and_held_text(self):
        deltas = run([chunk('<tool_call>{"name": "f", "arguments": {"x": 1}}'), b"[DONE]"])
        self.assertEqual([kind for kind, _ in deltas],
                         ["request-id", "served-model", "tool-call-start", "tool-call-fragment", "tool-call-end", "stop"])
        self.assertEqual(deltas[-1], ("stop", StopInfo("other", None)), "no finish_reason said why it ended")
        deltas = run([chunk("<tool_call>garbage"), chunk(finish_reason="length")])
        self.assertEqual(merged(deltas, "text"), "<tool_call>garbage")
        self.assertEqual(deltas[-1], ("stop", StopInfo("max-tokens", "length")))

    def test_qwen_xml_call_and_reasoning_field(self):
        xml = "<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"
        deltas = run([chunk(reasoning="thinking via field"), chunk(xml), chunk(finish_reason="stop")])
        self.assertEqual(merged(deltas, "thinking"), "thinking via field")
        self.assertIn(("tool-call-fragment", ToolCallFragment(0, '{"n": 3}')), deltas)

    def test_native_tool_call_deltas(self):
        deltas = run([
            chunk(tool_calls=[{"index": 0, "id": "chatcmpl-tool-1", "function": {"name": "f", "arguments": ""}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"a":1}'}}]),
            chunk(tool_calls=[{"index": 1, "id": "chatcmpl-tool-2", "function": {"name": "g"}}]),
            chunk(finish_reason="tool_calls"),
        ])
        calls = [(kind, payload) for kind, payload in deltas if kind.startswith("tool-call")]
        self.assertEqual([kind for kind, _ in calls], ["tool-call-start", "tool-call-fragment", "tool-call-start",
                                                       "tool-call-end", "tool-call-fragment", "tool-call-end"])
        self.assertEqual(calls[4][1], ToolCallFragment(1, "{}"))

    def test_error_frames(self):
        deltas = run([chunk("partial"), b'{"error":{"message":"boom","type":"InternalServerError","code":500}}',
                      b"[DONE]"])
        error = deltas[-1][1]
        self.assertEqual((deltas[-1][0], error.status, error.error_class.case), ("error", 500, "transient"))
        llama = ("error", b'{"code":400,"message":"the request exceeds the available context size",'
                          b'"type":"exceed_context_size_error"}')
        error = run([llama])[-1][1]
        self.assertEqual((error.status, error.error_class.case), (400, "context-overflow"))
        flat = run([b'{"object":"error","message":"x","type":"BadRequestError","code":400}'])[-1][1]
        self.assertEqual(flat.error_class.case, "invalid-request")

    def test_truncated_and_garbage_streams_are_malformed(self):
        with self.assertRaises(CodecError):
            run([chunk("cut off")])
        for garbage in [b"not json", b"\xff\xfe", b"[" * 100_000, b'{"choices":', b"42"]:
            with self.assertRaises(CodecError, msg=garbage[:20]) as raised:
                run([garbage], finish=False)
            self.assertEqual(raised.exception.case, "malformed")

    def test_odd_chunks_do_not_crash(self):
        odd = [b'{"choices": [{"delta": {"tool_calls": [{"index": {}, "function": {"name": "f"}}]}}]}',
               b'{"choices": "x"}', b'{"choices": [null, {"index": 0, "delta": null}]}', b"   "]
        run(odd + [b"[DONE]"])


if __name__ == "__main__":
    unittest.main()
