"""The exported `chat` interface's resource, `stream-decoder`: componentize-py
looks resources up in a module named after their interface. It wraps the codec's
`hermes.stream.StreamDecoder` and converts its deltas to WIT."""

from typing import List

from wit_world.exports import chat
from wit_world.imports import types as wit

import convert
from hermes import stream
from hermes.model import CodecError


class StreamDecoder(chat.StreamDecoder):
    def __init__(self, provider: str) -> None:
        self.decoder = stream.StreamDecoder(provider)

    def feed(self, event: wit.StreamEvent) -> List[wit.StreamDelta]:
        return self._deltas(lambda: self.decoder.feed(event.name, bytes(event.data)))

    def finish(self) -> List[wit.StreamDelta]:
        return self._deltas(self.decoder.finish)

    def _deltas(self, step) -> List[wit.StreamDelta]:
        try:
            return [convert.stream_delta(case, payload) for case, payload in step()]
        except CodecError as error:
            raise convert.codec_error(error) from None
        except Exception as error:  # noqa: BLE001 - see convert.internal_error
            raise convert.internal_error("malformed", error) from None
