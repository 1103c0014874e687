"""The codec's own picture of the WIT records it reads and writes.

The WIT bindings only exist inside a componentize-py build, so the codec works on
these plain records instead and `app.py` converts at the boundary. Names follow the
WIT field names. A WIT variant is a `(case, payload)` pair named by its WIT case
(`("text", "hi")`, `("tool-use", ToolUse(...))`), an enum is its WIT case name
(`"tool-use"`).
"""

from dataclasses import dataclass, field
from typing import List, Optional, Tuple


@dataclass
class Media:
    """An image or document: exactly one of `base64` and `url` is set."""

    mime_type: str
    base64: Optional[str] = None
    url: Optional[str] = None


@dataclass
class ToolUse:
    id: str
    name: str
    input_json: str


@dataclass
class ToolResult:
    tool_use_id: str
    # Leaf blocks: ("text", str) | ("image", Media) | ("document", Media).
    content: List[Tuple[str, object]]
    is_error: bool


@dataclass
class Thinking:
    text: str
    signature: Optional[str] = None
    redacted: bool = False


@dataclass
class Turn:
    role: str  # "user" | "assistant"
    # ("text", str) | ("image", Media) | ("document", Media) | ("tool-use", ToolUse)
    # | ("tool-result", ToolResult) | ("thinking", Thinking)
    content: List[Tuple[str, object]]


@dataclass
class ToolDefinition:
    name: str
    description: str
    parameters_json: str


@dataclass
class Conversation:
    system: List[str] = field(default_factory=list)
    turns: List[Turn] = field(default_factory=list)
    tools: List[ToolDefinition] = field(default_factory=list)
    # ("auto", None) | ("none", None) | ("required", None) | ("named", tool name)
    tool_choice: Optional[Tuple[str, Optional[str]]] = None


@dataclass
class ResponseSchema:
    name: str
    schema_json: str


@dataclass
class CallParams:
    wire_model_id: str
    max_tokens: int
    temperature: Optional[float] = None
    stop: List[str] = field(default_factory=list)
    stream: bool = False
    reasoning_effort: Optional[str] = None  # "minimal" | "low" | "medium" | "high" | "max"
    response_schema: Optional[ResponseSchema] = None


@dataclass
class HttpRequest:
    method: str
    path_and_query: str
    headers: List[Tuple[str, str]]
    body: bytes


@dataclass
class Usage:
    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0
    reasoning: Optional[int] = None


@dataclass
class ChatResponse:
    # ("text", str) | ("thinking", Thinking) | ("tool-use", ToolUse)
    content: List[Tuple[str, object]]
    stop_reason: str
    raw_stop_reason: Optional[str]
    usage: Optional[Usage]
    served_model: Optional[str]
    request_id: Optional[str]


@dataclass
class ErrorClass:
    """One `error-class` case. `hint` is set only on the retryable cases
    (`rate-limited`, `overloaded`, `transient`): `("delay-ms", n)` or `("at-unix-ms", n)`."""

    case: str
    detail: str
    hint: Optional[Tuple[str, int]] = None


@dataclass
class InBandError:
    status: Optional[int]
    status_from_prose: bool
    error_class: ErrorClass


@dataclass
class ToolCallStart:
    index: int
    id: str
    name: str


@dataclass
class ToolCallFragment:
    index: int
    json: str


@dataclass
class StopInfo:
    reason: str
    raw: Optional[str]


class CodecError(Exception):
    """`codec-error`: `case` is "unsupported" (cannot encode what the host handed
    in) or "malformed" (the response is not what the dialect promises)."""

    def __init__(self, case: str, message: str):
        super().__init__(message)
        self.case = case
        self.message = message
