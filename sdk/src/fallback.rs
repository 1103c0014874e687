//! Faithful text renderings of blocks a dialect cannot carry natively, so that no
//! block is ever silently dropped: the worst case is a text fallback.

use crate::types::{ContentBlock, LeafBlock, Media, MediaSource};

/// Text standing in for a block the dialect has no native form for.
pub fn block_as_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.clone(),
        ContentBlock::Image(media) => media_as_text("image", media),
        ContentBlock::Document(media) => media_as_text("document", media),
        ContentBlock::ToolUse(call) => {
            format!("[tool call {} {}: {}]", call.id, call.name, call.input_json)
        }
        ContentBlock::ToolResult(result) => {
            let body: Vec<String> = result.content.iter().map(leaf_as_text).collect();
            let status = if result.is_error { " (error)" } else { "" };
            format!("[tool result {}{status}: {}]", result.tool_use_id, body.join("\n"))
        }
        ContentBlock::Thinking(thinking) if thinking.redacted => "[redacted reasoning]".to_owned(),
        ContentBlock::Thinking(thinking) => format!("<thinking>{}</thinking>", thinking.text),
    }
}

/// Text standing in for a leaf block.
pub fn leaf_as_text(leaf: &LeafBlock) -> String {
    match leaf {
        LeafBlock::Text(text) => text.clone(),
        LeafBlock::Image(media) => media_as_text("image", media),
        LeafBlock::Document(media) => media_as_text("document", media),
    }
}

fn media_as_text(kind: &str, media: &Media) -> String {
    match &media.source {
        MediaSource::Url(url) => format!("[{kind} {}: {url}]", media.mime_type),
        MediaSource::Base64(data) => {
            format!("[{kind} {}, {} bytes of base64 not shown]", media.mime_type, data.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Thinking, ToolResult};

    #[test]
    fn every_block_renders_something() {
        let image = Media { mime_type: "image/png".into(), source: MediaSource::Url("https://x/a.png".into()) };
        assert_eq!(block_as_text(&ContentBlock::Image(image)), "[image image/png: https://x/a.png]");
        let result = ContentBlock::ToolResult(ToolResult {
            tool_use_id: "call_1".into(),
            content: vec![LeafBlock::Text("18C".into())],
            is_error: true,
        });
        assert_eq!(block_as_text(&result), "[tool result call_1 (error): 18C]");
        let redacted = ContentBlock::Thinking(Thinking { text: "opaque".into(), signature: None, redacted: true });
        assert_eq!(block_as_text(&redacted), "[redacted reasoning]");
    }
}
