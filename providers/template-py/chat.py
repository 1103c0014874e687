"""The exported `chat` interface's resource, `stream-decoder`: componentize-py
looks resources up in a module named after their interface, so this file must
exist even for a provider that does not stream. This one refuses every event as
`unsupported` (as Rust's `weir_sdk::NoStreaming` does); `encode` already refuses a
streaming request, so no stream reaches it."""

from typing import List

from componentize_py_types import Err
from wit_world.exports import chat
from wit_world.imports import types as wit


class StreamDecoder(chat.StreamDecoder):
    def __init__(self, provider: str) -> None:
        self.provider = provider

    def feed(self, event: wit.StreamEvent) -> List[wit.StreamDelta]:
        raise Err(wit.CodecError_Unsupported(f"{self.provider} does not stream"))

    def finish(self) -> List[wit.StreamDelta]:
        raise Err(wit.CodecError_Unsupported(f"{self.provider} does not stream"))
