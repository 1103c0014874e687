"""The `hermes-text` provider component: componentize-py's entry module.

`Describe` and `Chat` implement the world's exported interfaces (the resource
`stream-decoder` lives in `chat.py`, the module componentize-py looks it up in).
They only convert at the boundary and call the codec in `hermes/`; every export
catches what the codec raises, because an uncaught exception is a trap.
"""

from typing import List

from wit_world import exports
from wit_world.imports import types as wit

import convert
from hermes import errors, request, response
from hermes.model import CodecError

PROVIDER = request.PROVIDER


class Describe(exports.Describe):
    def providers(self) -> List[wit.ProviderInfo]:
        return [
            wit.ProviderInfo(
                key=PROVIDER,
                description="OpenAI-dialect servers that return tool calls as Hermes/Qwen text markup "
                "and reasoning inline in <think> (vLLM without a tool parser, llama.cpp without --jinja)",
                # Local servers: a catalog entry names the endpoint; we never invent one.
                default_endpoint=None,
                credential=wit.CredentialShape_Header(
                    wit.HeaderCredential(
                        default_credential_id="hermes-text-api-key",
                        header_name="authorization",
                        prefix="Bearer ",
                        # Local servers need no key: a missing secret sends no header.
                        required=False,
                    )
                ),
                capabilities=wit.Capabilities.STREAMING | wit.Capabilities.NATIVE_TOOLS,
                stream_framing=wit.StreamFraming.SSE,
            )
        ]

    def serves(self, provider: str, wire_id: str) -> bool:
        """Any model id: such a server hosts whatever it was started with."""
        return provider == PROVIDER

    def claims(self, provider: str, wire_id: str) -> bool:
        """No family: the dialect is a server setting, not a model's, so a catalog
        links entries to it by naming it."""
        return False


class Chat(exports.Chat):
    def encode(self, provider: str, conversation: wit.PreparedConversation, params: wit.CallParams) -> wit.HttpRequest:
        try:
            encoded = request.encode(provider, convert.conversation(conversation), convert.params(params))
            return convert.http_request(encoded)
        except CodecError as error:
            raise convert.codec_error(error) from None
        except Exception as error:  # noqa: BLE001 - see convert.internal_error
            raise convert.internal_error("unsupported", error) from None

    def decode(self, provider: str, http: wit.HttpResponse) -> wit.ChatResponse:
        try:
            return convert.chat_response(response.decode(http.status, http.headers, bytes(http.body)))
        except CodecError as error:
            raise convert.codec_error(error) from None
        except Exception as error:  # noqa: BLE001 - see convert.internal_error
            raise convert.internal_error("malformed", error) from None

    def classify(self, provider: str, http: wit.HttpResponse) -> wit.ErrorClass:
        try:
            return convert.error_class(errors.classify(http.status, http.headers, bytes(http.body)))
        except Exception as error:  # noqa: BLE001 - a class is owed whatever the body
            return wit.ErrorClass_Uncorrectable(f"HTTP {http.status}: the hermes-text codec failed: {error!r}"[:1024])
