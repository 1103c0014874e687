"""The exported `chat` interface's resource, `stream-decoder`: componentize-py
looks resources up in a module named after their interface, so it lives here.

(5) The stream. Chat Completions streams `data: {chunk}` events and ends with
`data: [DONE]`: each chunk's `choices[0].delta` carries a piece of the text (or of
a tool call's arguments), the chunk with a `finish_reason` says why the answer
ended, and the last chunk (asked for with `stream_options.include_usage`) carries
the usage. Replace it with your dialect's; the contract is the guide's section 6.

One decoder serves one stream and keeps what it needs between events: whether the
stop was sent, and the tool calls opened. Like every export, it never lets an
exception out (that would be a trap): a chunk it cannot read is declined as
`malformed`, which fails the call as the component's, never retried.
"""

from typing import List

from componentize_py_types import Err
from wit_world.exports import chat
from wit_world.imports import types as wit

from app import KEY, STOP_REASONS, classify, malformed, parse_json

# Chat Completions' own word for a stop with tool calls.
STREAM_STOP_REASONS = {**STOP_REASONS, "tool_calls": wit.StopReason.TOOL_USE}


class StreamDecoder(chat.StreamDecoder):
    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.stopped = False
        self.named = False
        # Tool calls opened, by their index in the answer.
        self.calls: List[int] = []

    def feed(self, event: wit.StreamEvent) -> List[wit.StreamDelta]:
        try:
            return self.read(event.name, bytes(event.data))
        except Err:
            raise
        except Exception as error:  # noqa: BLE001 - whatever the event, never a trap
            raise malformed(f"{KEY} could not read a stream event: {type(error).__name__}: {error}") from None

    def finish(self) -> List[wit.StreamDelta]:
        # The body ended. Without a `finish_reason` the upstream closed before its
        # end: decline rather than invent a stop (the host would deliver a cut answer
        # as whole).
        if not self.stopped:
            raise malformed(f"{KEY}: the stream ended before its finish_reason")
        return self.close_calls()

    def read(self, name, data: bytes) -> List[wit.StreamDelta]:
        if data.strip() == b"[DONE]":
            return []
        chunk = parse_json(data)
        if not isinstance(chunk, dict):
            raise malformed("a stream chunk is not a JSON object")
        if name == "error" or "error" in chunk:
            return [in_band_error(chunk)]
        deltas: List[wit.StreamDelta] = []
        if not self.named:
            # What the upstream ran and its id, once (as `decode` reads them).
            self.named = True
            if isinstance(chunk.get("model"), str):
                deltas.append(wit.StreamDelta_ServedModel(chunk["model"]))
            if isinstance(chunk.get("id"), str):
                deltas.append(wit.StreamDelta_RequestId(chunk["id"]))
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            deltas.extend(self.choice(choices[0]))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int) and prompt >= 0 and completion >= 0:
                counts = wit.Usage(input=prompt, output=completion, cache_read=0, cache_write=0, reasoning=None)
                deltas.append(wit.StreamDelta_Usage(counts))
        return deltas

    def choice(self, choice: dict) -> List[wit.StreamDelta]:
        deltas: List[wit.StreamDelta] = []
        delta = choice.get("delta")
        if isinstance(delta, dict):
            text = delta.get("content")
            if isinstance(text, str) and text:
                deltas.append(wit.StreamDelta_Text(text))
            for call in delta.get("tool_calls") or []:
                deltas.extend(self.tool_call(call))
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and not self.stopped:
            self.stopped = True
            deltas.extend(self.close_calls())
            stop = STREAM_STOP_REASONS.get(reason, wit.StopReason.OTHER)
            deltas.append(wit.StreamDelta_Stop(wit.StopInfo(stop, reason, None)))
        return deltas

    def tool_call(self, call) -> List[wit.StreamDelta]:
        """A call's first piece names it (`id`, `function.name`); the others carry
        more of its arguments, under the same `index`."""
        if not isinstance(call, dict) or not isinstance(call.get("index"), int):
            raise malformed("a streamed tool call has no index")
        index = call["index"]
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        deltas: List[wit.StreamDelta] = []
        if index not in self.calls:
            if not isinstance(call.get("id"), str) or not isinstance(function.get("name"), str):
                raise malformed(f"tool call {index} has no id or name in its first piece")
            self.calls.append(index)
            deltas.append(wit.StreamDelta_ToolCallStart(wit.ToolCallStart(index, call["id"], function["name"])))
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            deltas.append(wit.StreamDelta_ToolCallFragment(wit.ToolCallFragment(index, arguments)))
        return deltas

    def close_calls(self) -> List[wit.StreamDelta]:
        ended = [wit.StreamDelta_ToolCallEnd(index) for index in self.calls]
        self.calls = []
        return ended


def in_band_error(chunk: dict) -> wit.StreamDelta:
    """An error object inside the 200 stream: its structured `code`, when it is an
    HTTP status, and the class `classify` gives that status (none: a transient
    failure). Its words go to the server log only, inside the class."""
    error = chunk.get("error") if isinstance(chunk.get("error"), dict) else {}
    code = error.get("code")
    status = code if isinstance(code, int) and 400 <= code <= 599 else None
    message = error.get("message") if isinstance(error.get("message"), str) else "an error frame"
    body = str(message).encode("utf-8")
    error_class = classify(status, [], body) if status else wit.ErrorClass_Transient(wit.Retry(None, f"in-band: {message}"[:1024]))
    return wit.StreamDelta_Error(wit.InBandError(status, False, error_class))
