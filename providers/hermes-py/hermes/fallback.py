"""Faithful text renderings of blocks the dialect has no native form for, so no
block is ever silently dropped. The same words as the Rust SDK's
`sdk/src/fallback.rs`, so a conversation reads alike whichever provider renders it."""

from .model import Media, Thinking, ToolResult, ToolUse


def block_as_text(case: str, payload) -> str:
    if case == "text":
        return payload
    if case in ("image", "document"):
        return media_as_text(case, payload)
    if case == "tool-use":
        call: ToolUse = payload
        return f"[tool call {call.id} {call.name}: {call.input_json}]"
    if case == "tool-result":
        result: ToolResult = payload
        body = "\n".join(block_as_text(leaf_case, leaf) for leaf_case, leaf in result.content)
        status = " (error)" if result.is_error else ""
        return f"[tool result {result.tool_use_id}{status}: {body}]"
    if case == "thinking":
        thinking: Thinking = payload
        return "[redacted reasoning]" if thinking.redacted else f"<thinking>{thinking.text}</thinking>"
    raise ValueError(f"unknown content block {case!r}")


def media_as_text(kind: str, media: Media) -> str:
    if media.url is not None:
        return f"[{kind} {media.mime_type}: {media.url}]"
    return f"[{kind} {media.mime_type}, {len(media.base64 or '')} bytes of base64 not shown]"
