"""Tool calls and reasoning written as text markup into `message.content`.

Servers without a tool parser (vLLM without `--tool-call-parser`, llama.cpp
without `--jinja`) pass the model's raw output through, with `finish_reason:
"stop"`. Two tool-call forms are recognised (vLLM's `hermes_tool_parser.py` and
`qwen3coder_tool_parser.py`), one or several blocks each, the last possibly cut off:

    <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>

    <tool_call><function=get_weather><parameter=city>
    Paris
    </parameter></function></tool_call>

and reasoning as a leading `<think>…</think>`.
"""

import re

from .wire import dump, parse_json_text

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_FUNCTION = re.compile(r"<function=([^>\n]+)>")
# A parameter's value ends at its closing tag; like vLLM, a missing one ends at the
# next parameter, the function's end, or the text's end.
_PARAMETER = re.compile(
    r"<parameter=([^>\n]+)>(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)", re.DOTALL
)
# Values that read as JSON scalars, objects or arrays. Anything else stays a string.
_JSON_LOOKING = re.compile(r"-?\d[\d.eE+-]*|true|false|null|\{.*\}|\[.*\]", re.DOTALL)


def split_think(content: str):
    """(reasoning, rest) of a content that starts (after whitespace) with `<think>`;
    an unterminated block is all reasoning (the model was cut off mid-thought).
    `None` reasoning when there is no leading block: the content is returned as is."""
    stripped = content.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return None, content
    inner = stripped[len(THINK_OPEN):]
    end = inner.find(THINK_CLOSE)
    if end < 0:
        return inner.strip(), ""
    return inner[:end].strip(), inner[end + len(THINK_CLOSE):].lstrip()


def split_tool_calls(content: str):
    """(visible text, [(name, arguments JSON text)]) of a content. The matched
    markup is removed from the text; a block that parses as neither form stays in
    the text as written, so nothing the model said is lost. Content without any
    markup comes back unchanged."""
    if TOOL_CALL_OPEN not in content:
        return content, []
    pieces = []
    calls = []
    rest = content
    while True:
        start = rest.find(TOOL_CALL_OPEN)
        if start < 0:
            pieces.append(rest)
            break
        pieces.append(rest[:start])
        body_start = start + len(TOOL_CALL_OPEN)
        end = rest.find(TOOL_CALL_CLOSE, body_start)
        body = rest[body_start:] if end < 0 else rest[body_start:end]
        call = parse_call(body)
        if call is None:
            pieces.append(rest[start:] if end < 0 else rest[start:end + len(TOOL_CALL_CLOSE)])
        else:
            calls.append(call)
        if end < 0:
            break
        rest = rest[end + len(TOOL_CALL_CLOSE):]
    text = "\n".join(piece.strip() for piece in pieces if piece.strip())
    return text, calls


def parse_call(body: str):
    """(name, arguments JSON text) of one block's body, in either form, or None."""
    return _hermes_json(body) or _qwen_xml(body)


def _hermes_json(body: str):
    value = parse_json_text(body.strip())
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        # Some models write the arguments as JSON text already: keep it as written.
        return value["name"], arguments
    return value["name"], dump(arguments if arguments is not None else {})


def _qwen_xml(body: str):
    function = _FUNCTION.search(body)
    if function is None or not function.group(1).strip():
        return None
    arguments = {}
    for parameter in _PARAMETER.finditer(body, function.end()):
        arguments[parameter.group(1).strip()] = coerce(_strip_one_newline(parameter.group(2)))
    return function.group(1).strip(), dump(arguments)


def _strip_one_newline(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def coerce(value: str):
    """A parameter's raw text as a JSON value. The server would coerce by the tool's
    JSON schema, which the decoder does not have (decode sees only the response),
    so values that read as JSON numbers, booleans, null, objects or arrays become
    those, and everything else stays a string. A string parameter whose value looks
    like a number ("42") therefore arrives as a number."""
    if _JSON_LOOKING.fullmatch(value.strip()) is None:
        return value
    parsed = parse_json_text(value.strip())
    return value if parsed is None else parsed


def held_back(text: str, *tags: str) -> int:
    """How many trailing characters of `text` could be the start of one of `tags`
    (a tag split across stream chunks), which a stream must hold back."""
    longest = 0
    for tag in tags:
        for size in range(min(len(tag) - 1, len(text)), longest, -1):
            if text.endswith(tag[:size]):
                longest = size
                break
    return longest
