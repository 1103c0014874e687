"""JSON in and out, bounded: whatever bytes arrive, parsing fails with a
`CodecError`, never with an exception the component would turn into a trap."""

import json
import re

from .model import CodecError

# Deeper nesting than any completion needs. CPython's parser recurses once per
# level; bodies nested deeper are refused before it runs (see `_too_deep`).
MAX_DEPTH = 200

# Brackets, and strings (consumed whole, so brackets inside them do not count).
_STRUCTURE = re.compile(rb'[\[\]{}]|"(?:[^"\\]|\\.)*"', re.DOTALL)


def parse_json(data: bytes, what: str):
    """Parses a body or event as JSON, or raises `CodecError("malformed")`."""
    if _too_deep(data):
        raise CodecError("malformed", f"{what} nests JSON deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise CodecError("malformed", f"{what} is not JSON: {_short(str(error))}") from None


def parse_json_text(text: str):
    """Parses JSON text the host or the model wrote; `None` when it is not JSON."""
    try:
        return parse_json(text.encode("utf-8"), "text")
    except CodecError:
        return None


def to_body(value) -> bytes:
    """Compact UTF-8 JSON. `ensure_ascii=False` keeps non-ASCII text as itself;
    JSON escaping still covers quotes, backslashes and control characters (NUL too)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def dump(value) -> str:
    """JSON text of a value, as tool arguments travel."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def text(value) -> "str | None":
    """A non-empty string field, else None."""
    return value if isinstance(value, str) and value != "" else None


def _too_deep(data: bytes) -> bool:
    # Fast path: with fewer brackets than the limit, no nesting can exceed it.
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False
    depth = 0
    for match in _STRUCTURE.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def _reject_constant(name: str):
    # Python accepts NaN and Infinity, which JSON does not have.
    raise ValueError(f"{name} is not JSON")


def _short(message: str) -> str:
    return message[:200]
