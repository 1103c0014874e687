"""What a failure means: non-2xx responses, and error frames inside a 200 stream.

Error bodies come in three shapes here: OpenAI's `{"error":{...}}` (vLLM puts the
integer HTTP status in `code`), the flat `{"object":"error",...}` of older vLLM,
and llama.cpp's `{"error":{"code":400,"type":"exceed_context_size_error",...}}`.
Detail strings go to the server log only and are bounded.
"""

import datetime
import re

from .model import CodecError, ErrorClass, InBandError
from .wire import parse_json

# Longest detail kept for the log, in UTF-8 bytes (the ellipsis included).
DETAIL_LIMIT = 2048
# Bytes of a non-JSON body kept as its message: the rest could not fit the detail anyway.
_RAW_MESSAGE_BYTES = 4096

# Structured words (type or code) that mean the prompt does not fit the context.
_CONTEXT_WORDS = ("context_length_exceeded", "exceed_context_size_error")
# vLLM reports an over-long prompt as a plain 400 BadRequestError whose only
# signal is its message ("This model's maximum context length is 4096 tokens..."),
# so for the invalid-request statuses the message may narrow the class to
# context-overflow. Prose never picks any other class.
_CONTEXT_PROSE = re.compile(
    r"maximum context length|context length|context window|exceeds the available context size|too many tokens",
    re.IGNORECASE,
)
_INVALID_REQUEST = (400, 413, 415, 422)
_TRANSIENT = (408, 409, 425)
# The largest `u64` the WIT retry hint can carry.
_U64_MAX = 2**64 - 1


class ErrorFields:
    """What an error body says, whatever its wrapping."""

    def __init__(self, kind=None, code=None, message=None, status=None):
        self.kind = kind  # error.type
        self.code = code  # error.code as text, even when it was a number
        self.message = message
        self.status = status  # a 100..599 status carried in the body (`code: 429`)

    @classmethod
    def parse(cls, body: bytes) -> "ErrorFields":
        """Reads the fields of a body; a body that is not JSON yields only its text."""
        try:
            value = parse_json(body, "error body")
        except CodecError:
            message = body[:_RAW_MESSAGE_BYTES].decode("utf-8", "replace").strip()
            return cls(message=message or None)
        return cls.from_value(value)

    @classmethod
    def from_value(cls, value) -> "ErrorFields":
        if not isinstance(value, dict):
            return cls()
        inner = value.get("error")
        if isinstance(inner, str):
            return cls(message=inner)
        if not isinstance(inner, dict):
            inner = value  # the flat shape
        code = inner.get("code")
        status = code if _is_int(code) else inner.get("status")
        return cls(
            kind=_str(inner.get("type")),
            code=str(code) if _is_int(code) or isinstance(code, str) else None,
            message=_str(inner.get("message")),
            status=status if _is_int(status) and 100 <= status <= 599 else None,
        )

    def has_word(self, *words: str) -> bool:
        return self.kind in words or self.code in words

    def detail(self, status: int) -> str:
        """One bounded line for the server log."""
        line = f"HTTP {status}"
        for label, value in (("type", self.kind), ("code", self.code), ("message", self.message)):
            if value is not None:
                line += f" {label}={value}"
        return truncate(line)


def classify(status: int, headers, body: bytes) -> ErrorClass:
    """Classifies a non-2xx response."""
    fields = ErrorFields.parse(body)
    return _class_for(status, headers, fields, fields.detail(status))


def _class_for(status: int, headers, fields: ErrorFields, detail: str) -> ErrorClass:
    if status == 402 or fields.has_word("insufficient_quota"):
        return ErrorClass("quota-exhausted", detail)
    if status == 429:
        return ErrorClass("rate-limited", detail, retry_hint(headers))
    if status == 529:
        return ErrorClass("overloaded", detail, retry_hint(headers))
    if _is_context_overflow(status, fields):
        return ErrorClass("context-overflow", detail)
    if status == 404 or fields.has_word("model_not_found"):
        return ErrorClass("not-found", detail)
    if status in (401, 403):
        return ErrorClass("authentication", detail)
    if status in _TRANSIENT or 500 <= status <= 599:
        return ErrorClass("transient", detail, retry_hint(headers))
    if status in _INVALID_REQUEST:
        return ErrorClass("invalid-request", detail)
    return ErrorClass("uncorrectable", detail)


def _is_context_overflow(status: int, fields: ErrorFields) -> bool:
    if fields.has_word(*_CONTEXT_WORDS):
        return True
    prose = status in _INVALID_REQUEST and fields.message is not None
    return prose and _CONTEXT_PROSE.search(fields.message) is not None


def is_error_object(value) -> bool:
    """Whether a 200 body or stream frame is an error rather than a completion: a
    non-null top-level `error`, or the flat `{"object":"error"}` of older vLLM."""
    return isinstance(value, dict) and (value.get("error") is not None or value.get("object") == "error")


def in_band_error(fields: ErrorFields) -> InBandError:
    """An error frame inside a 200 stream. A structured status classifies like an
    HTTP status; one found only in the prose is reported, flagged, and never picks
    the class, which is then transient unless a structured word says otherwise."""
    detail = truncate("error frame in a 200 stream: " + fields.detail(200))
    if fields.status is not None:
        return InBandError(fields.status, False, _class_for(fields.status, [], fields, detail))
    prose_status = status_in_prose(fields.message or "")
    if fields.has_word("insufficient_quota"):
        error_class = ErrorClass("quota-exhausted", detail)
    elif fields.has_word(*_CONTEXT_WORDS):
        error_class = ErrorClass("context-overflow", detail)
    else:
        error_class = ErrorClass("transient", detail)
    return InBandError(prose_status, prose_status is not None, error_class)


# A stand-alone 4xx/5xx number: not part of a longer number, a decimal or a word.
_PROSE_STATUS = re.compile(r"(?<![\w])(?<!\d[.,])([45]\d\d)(?![\w])(?![.,]\d)")


def status_in_prose(message: str):
    match = _PROSE_STATUS.search(message)
    return int(match.group(1)) if match else None


def retry_hint(headers):
    """`retry-after-ms`, else `retry-after` in seconds or as an HTTP date. A value
    that does not parse is ignored, not guessed."""
    milliseconds = _non_negative(header(headers, "retry-after-ms"))
    if milliseconds is not None:
        return ("delay-ms", min(round(milliseconds), _U64_MAX))
    value = header(headers, "retry-after")
    if value is None:
        return None
    seconds = _non_negative(value)
    if seconds is not None:
        return ("delay-ms", min(round(seconds * 1000), _U64_MAX))
    instant = http_date_unix_ms(value)
    return ("at-unix-ms", instant) if instant is not None else None


def header(headers, name: str):
    """The first value of a header, compared case-insensitively, trimmed."""
    for key, value in headers:
        if key.lower() == name:
            return value.strip()
    return None


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_HTTP_DATE = re.compile(r"[A-Za-z]{3}, (\d{2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT")


def http_date_unix_ms(value: str):
    """An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) as Unix milliseconds. The
    component has no clock: the host turns the instant into a wait."""
    match = _HTTP_DATE.fullmatch(value.strip())
    if match is None or match.group(2) not in _MONTHS:
        return None
    day, _, year, hour, minute, second = match.groups()
    try:
        instant = datetime.datetime(
            int(year), _MONTHS.index(match.group(2)) + 1, int(day), int(hour), int(minute), int(second),
            tzinfo=datetime.timezone.utc,
        )
    except ValueError:
        return None
    milliseconds = int(instant.timestamp()) * 1000
    return milliseconds if milliseconds >= 0 else None


def truncate(text: str) -> str:
    """Cuts text to `DETAIL_LIMIT` UTF-8 bytes on a character boundary."""
    encoded = text.encode("utf-8")
    if len(encoded) <= DETAIL_LIMIT:
        return text
    ellipsis = "…"
    room = DETAIL_LIMIT - len(ellipsis.encode("utf-8"))
    return encoded[:room].decode("utf-8", "ignore") + ellipsis


def _non_negative(value):
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number >= 0 and number != float("inf") else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _str(value):
    return value if isinstance(value, str) else None
