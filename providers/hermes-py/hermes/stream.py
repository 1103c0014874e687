"""The SSE stream decoder: `chat.completion.chunk` events → normalized deltas, with
markup parsed out of the streamed text.

Text is scanned as it arrives. A leading `<think>` block becomes thinking deltas; a
`<tool_call>` block is held until its closing tag (or the stream's end) and then
sent as one tool call (start, the whole arguments as one fragment, end); any other
text is sent at once, except a trailing piece that could be the start of a tag,
which waits for the next chunk. Error frames: a top-level `error` key (or vLLM's
flat `{"object":"error"}`) in any event, and llama.cpp's `error:` line, which the
host hands over as an event named `error`.
"""

from . import markup
from .errors import ErrorFields, in_band_error, is_error_object
from .model import CodecError, StopInfo, ToolCallFragment, ToolCallStart
from .response import arguments_text, call_id, reasoning_text, stop_reason, usage
from .wire import parse_json, text

# Where the scanner is in the streamed text.
_START = "start"  # nothing visible yet: a `<think>` may still open
_THINK = "think"  # inside the leading `<think>` block
_TEXT = "text"  # ordinary text
_CALL = "call"  # inside a `<tool_call>` block


class StreamDecoder:
    """Per-stream state. `feed` and `finish` return lists of `(case, payload)`
    deltas named by their WIT `stream-delta` case."""

    def __init__(self, provider: str):
        self.provider = provider
        self.mode = _START
        # Text received and not yet sent: a possible partial tag, or an open call block.
        self.pending = ""
        self.strip_leading = False  # drop the whitespace that follows `</think>`
        self.response_id = None
        self.served_model_sent = False
        self.next_index = 0  # tool-call indexes, in order of appearance
        # A server's own tool-call index → [our index, whether arguments were sent].
        self.native_calls = {}
        self.markup_calls = 0
        self.any_calls = False
        self.finish_seen = False
        self.done_seen = False
        self.error_seen = False

    def feed(self, name, data: bytes) -> list:
        if name == "error":
            return [self._error(ErrorFields.parse(data))]
        data = data.strip()
        if not data:
            return []
        if data == b"[DONE]":
            self.done_seen = True
            return []
        chunk = parse_json(data, "stream event")
        if is_error_object(chunk):
            return [self._error(ErrorFields.from_value(chunk))]
        if not isinstance(chunk, dict):
            raise CodecError("malformed", "stream event is not a JSON object")
        return self._chunk(chunk)

    def finish(self) -> list:
        """Sends what is held back. A stream with neither a `finish_reason` nor
        `[DONE]` (nor an error frame explaining it) was cut off, which is an error,
        not an answer; one with `[DONE]` but no `finish_reason` still gets its stop."""
        if self.error_seen:
            return []
        out = self._flush()
        if self.finish_seen:
            return out
        if self.done_seen:
            out.append(("stop", StopInfo(stop_reason(None, self.any_calls), None)))
            return out
        raise CodecError("malformed", "stream ended before finish_reason")

    # ------------------------------------------------------------ chunks

    def _chunk(self, chunk: dict) -> list:
        out = []
        if self.response_id is None and text(chunk.get("id")):
            self.response_id = chunk["id"]
            out.append(("request-id", self.response_id))
        if not self.served_model_sent and text(chunk.get("model")):
            self.served_model_sent = True
            out.append(("served-model", chunk["model"]))
        choice = _first_choice(chunk)
        if choice is not None:
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta, out)
            raw = text(choice.get("finish_reason"))
            # Some servers repeat the finish on a trailing chunk: one stop is enough.
            if raw is not None and not self.finish_seen:
                out.extend(self._flush())
                self.finish_seen = True
                reason = stop_reason(raw, self.any_calls, choice.get("stop_reason"))
                out.append(("stop", StopInfo(reason, raw)))
        counted = usage(chunk.get("usage"))
        if counted is not None:
            out.append(("usage", counted))
        return out

    def _delta(self, delta: dict, out: list):
        reasoning = reasoning_text(delta)
        if reasoning:
            out.append(("thinking", reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.pending += content
            self._scan(out)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                if isinstance(call, dict):
                    self._native_call(position, call, out)

    # ------------------------------------------------------------ markup

    def _scan(self, out: list):
        """Moves through `pending` as far as the text allows."""
        while True:
            before = (self.mode, len(self.pending))
            if self.mode == _START:
                self._scan_start()
            elif self.mode == _THINK:
                self._scan_think(out)
            elif self.mode == _TEXT:
                self._scan_text(out)
            else:
                self._scan_call(out)
            if (self.mode, len(self.pending)) == before:
                return

    def _scan_start(self):
        stripped = self.pending.lstrip()
        if stripped.startswith(markup.THINK_OPEN):
            self.pending = stripped[len(markup.THINK_OPEN):]
            self.mode = _THINK
        elif not markup.THINK_OPEN.startswith(stripped):
            self.mode = _TEXT
        # else: only whitespace or part of `<think>` so far; wait.

    def _scan_think(self, out: list):
        end = self.pending.find(markup.THINK_CLOSE)
        if end >= 0:
            self._send("thinking", self.pending[:end], out)
            self.pending = self.pending[end + len(markup.THINK_CLOSE):]
            self.mode = _TEXT
            self.strip_leading = True
            return
        keep = markup.held_back(self.pending, markup.THINK_CLOSE)
        self._send("thinking", self.pending[: len(self.pending) - keep], out)
        self.pending = self.pending[len(self.pending) - keep:]

    def _scan_text(self, out: list):
        if self.strip_leading:
            self.pending = self.pending.lstrip()
            if not self.pending:
                return
            self.strip_leading = False
        start = self.pending.find(markup.TOOL_CALL_OPEN)
        if start >= 0:
            self._send("text", self.pending[:start], out)
            self.pending = self.pending[start + len(markup.TOOL_CALL_OPEN):]
            self.mode = _CALL
            return
        keep = markup.held_back(self.pending, markup.TOOL_CALL_OPEN)
        self._send("text", self.pending[: len(self.pending) - keep], out)
        self.pending = self.pending[len(self.pending) - keep:]

    def _scan_call(self, out: list):
        end = self.pending.find(markup.TOOL_CALL_CLOSE)
        if end < 0:
            return  # the block is not complete yet
        self._markup_call(self.pending[:end], closed=True, out=out)
        self.pending = self.pending[end + len(markup.TOOL_CALL_CLOSE):]
        self.mode = _TEXT

    def _markup_call(self, body: str, closed: bool, out: list):
        """One `<tool_call>` block as a whole call; a block that parses as neither
        form goes out as the text it was, so nothing is lost."""
        call = markup.parse_call(body)
        if call is None:
            closing = markup.TOOL_CALL_CLOSE if closed else ""
            out.append(("text", markup.TOOL_CALL_OPEN + body + closing))
            return
        name, arguments = call
        index = self._new_index()
        self.markup_calls += 1
        call_number = self.markup_calls - 1
        out.append(("tool-call-start", ToolCallStart(index, call_id(self.response_id, call_number, name), name)))
        out.append(("tool-call-fragment", ToolCallFragment(index, arguments)))
        out.append(("tool-call-end", index))

    def _flush(self) -> list:
        """Everything held back, at the stream's finish: an unterminated final
        `<tool_call>` block is still a call (the model was cut off after it)."""
        out = []
        if self.mode == _CALL:
            self._markup_call(self.pending, closed=False, out=out)
        elif self.mode == _THINK:
            self._send("thinking", self.pending, out)
        else:
            self._send("text", self.pending, out)
        self.pending = ""
        self.mode = _TEXT
        for index, has_arguments in self.native_calls.values():
            # A call without arguments still carries a JSON object, as in `decode`.
            if not has_arguments:
                out.append(("tool-call-fragment", ToolCallFragment(index, "{}")))
            out.append(("tool-call-end", index))
        self.native_calls.clear()
        return out

    def _send(self, case: str, piece: str, out: list):
        if piece:
            out.append((case, piece))

    # ------------------------------------------------------------ native tool calls

    def _native_call(self, position: int, call: dict, out: list):
        """A `tool_calls[]` delta from a server that does parse calls: the first
        fragment of a call carries its id and name, later ones more arguments."""
        server_index = call.get("index")
        if not isinstance(server_index, int):
            server_index = position
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        if server_index not in self.native_calls:
            name = text(function.get("name"))
            if name is None:
                raise CodecError("malformed", f"tool call {server_index} fragment arrived before its name")
            index = self._new_index()
            self.native_calls[server_index] = [index, False]
            out.append(("tool-call-start", ToolCallStart(index, text(call.get("id")) or f"call_{index}", name)))
        arguments = function.get("arguments")
        if arguments is not None and arguments != "":
            fragment = arguments if isinstance(arguments, str) else arguments_text(arguments)
            entry = self.native_calls[server_index]
            entry[1] = True
            out.append(("tool-call-fragment", ToolCallFragment(entry[0], fragment)))

    def _new_index(self) -> int:
        self.any_calls = True
        self.next_index += 1
        return self.next_index - 1

    def _error(self, fields: ErrorFields):
        self.error_seen = True
        return ("error", in_band_error(fields))


def _first_choice(chunk: dict):
    """Choice 0. With several choices a chunk may carry another first."""
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return None
