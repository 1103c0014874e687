"""Tool-call and `<think>` markup, in both forms vLLM's parsers know."""

import json
import unittest

from hermes import markup


class ToolCallMarkup(unittest.TestCase):
    def test_hermes_json_blocks_are_parsed_and_stripped(self):
        content = (
            "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>"
        )
        text, calls = markup.split_tool_calls(content)
        self.assertEqual(text, "Let me check both.")
        self.assertEqual([name for name, _ in calls], ["get_weather", "get_time"])
        self.assertEqual(json.loads(calls[0][1]), {"city": "Paris"})

    def test_an_unterminated_final_block_is_still_a_call(self):
        text, calls = markup.split_tool_calls('<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n')
        self.assertEqual(text, "")
        self.assertEqual(calls, [("f", '{"x": 1}')])

    def test_qwen3_coder_xml_strips_one_newline_and_coerces_json_looking_values(self):
        content = (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n"
            "<parameter=note>\n\nline one\nline two\n\n</parameter>\n<parameter=filters>\n{\"a\": [1, 2]}\n</parameter>\n"
            "<parameter=zip>\n007\n</parameter>\n</function>\n</tool_call>"
        )
        text, calls = markup.split_tool_calls(content)
        self.assertEqual(text, "")
        name, arguments = calls[0]
        self.assertEqual(name, "get_weather")
        self.assertEqual(
            json.loads(arguments),
            {"city": "Paris", "days": 3, "metric": True, "note": "\nline one\nline two\n",
             "filters": {"a": [1, 2]}, "zip": "007"},
        )

    def test_a_block_that_is_no_call_stays_in_the_text(self):
        content = "before <tool_call>not a call</tool_call> after"
        text, calls = markup.split_tool_calls(content)
        self.assertEqual(calls, [])
        self.assertEqual(text, "before\n<tool_call>not a call</tool_call>\nafter")

    def test_content_without_markup_is_unchanged(self):
        for content in ["  spaced  \n", "", "a <b> c", 'quote " and \\ and \x00 and 🎉']:
            self.assertEqual(markup.split_tool_calls(content), (content, []))

    def test_arguments_as_json_text_are_kept(self):
        _, calls = markup.split_tool_calls('<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>')
        self.assertEqual(calls, [("f", '{"x": 1}')])


class ThinkMarkup(unittest.TestCase):
    def test_leading_think_block(self):
        self.assertEqual(markup.split_think("\n<think>\nhmm\n</think>\n\nAnswer"), ("hmm", "Answer"))

    def test_unterminated_think_is_all_reasoning(self):
        self.assertEqual(markup.split_think("<think>still going"), ("still going", ""))

    def test_think_elsewhere_is_text(self):
        self.assertEqual(markup.split_think("Answer <think>x</think>"), (None, "Answer <think>x</think>"))

    def test_held_back_tag_prefixes(self):
        self.assertEqual(markup.held_back("abc <tool_", "<tool_call>"), 6)
        self.assertEqual(markup.held_back("abc <", "<tool_call>"), 1)
        self.assertEqual(markup.held_back("abc", "<tool_call>"), 0)
        self.assertEqual(markup.held_back("x</thi", "</think>"), 5)


if __name__ == "__main__":
    unittest.main()
