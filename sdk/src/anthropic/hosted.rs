//! Anthropic's server tools (weir:provider 0.6.0): the tools Anthropic runs
//! itself, the blocks they answer with, and those blocks sent back in a later
//! turn's history.
//!
//! The host names each server tool as the native field `server_tools.<type>`
//! (its value: that type's tool definitions, as the caller wrote them), and a
//! history's own blocks as `native_blocks`, each `{turn, at, block, replaces}`:
//! the block goes to position `at` of the turn's rendered content (or last),
//! in place of the block there when `replaces` (a cited text, whose neutral
//! text the turn holds), before it otherwise. The direct API lists every one
//! in [`super::native::support`]: the server tool types are the ones the
//! `anthropic` SDK's `ToolUnionParam` lists (anthropic-sdk-python @ 00dcf921,
//! `types/tool_union_param.py`) that Anthropic runs, not the client. Vertex AI
//! lists its web search alone, and the history blocks it reads by type
//! (`native_blocks.<type>`, see [`block_not_taken`]).
//!
//! An answer's blocks ([`decode_native`]) are the neutral ones `decode` reads
//! plus, in place, every block Anthropic wrote that the neutral records have no
//! case for (`server_tool_use`, `web_search_tool_result`, ...) and every text
//! block with `citations`, each as the provider wrote it.

use serde_json::{Map, Value, json};

use super::Surface;
use super::response::{content_block, decode};
use crate::json::from_body;
use crate::types::{AnswerBlock, CodecError, HttpResponse, NativeAnswer};

/// The prefix of the native field that carries one server tool type.
pub const SERVER_TOOL_FIELD: &str = "server_tools.";

/// The native field that carries a history's own blocks.
pub const NATIVE_BLOCKS: &str = "native_blocks";

/// The tool types Anthropic runs on its side (web search, web fetch, code
/// execution), by version.
pub const SERVER_TOOLS: &[&str] = &[
    "web_search_20250305",
    "web_search_20260209",
    "web_search_20260318",
    "web_fetch_20250910",
    "web_fetch_20260209",
    "web_fetch_20260309",
    "web_fetch_20260318",
    "code_execution_20250522",
    "code_execution_20250825",
    "code_execution_20260120",
    "code_execution_20260521",
];

/// The native field names of every server tool.
pub fn server_tool_fields() -> impl Iterator<Item = String> {
    SERVER_TOOLS.iter().map(|kind| format!("{SERVER_TOOL_FIELD}{kind}"))
}

/// The server tool Vertex AI runs for Claude: Google's "Web search with
/// Anthropic Claude models" page documents this version alone.
pub const VERTEX_SEARCH: &str = "web_search_20250305";

/// The history blocks a web search answers with, which Vertex reads back: the
/// search's call, its results, and a text citing them.
pub const VERTEX_BLOCKS: &[&str] = &["server_tool_use", "web_search_tool_result", "text"];

/// How a surface names one block type it takes in `native_blocks` when it
/// does not take them all (`native_blocks.web_search_tool_result`).
fn typed_block_field(kind: &str) -> String {
    format!("{NATIVE_BLOCKS}.{kind}")
}

/// The fields Vertex takes for a model it runs web search for.
pub fn vertex_search_fields() -> impl Iterator<Item = String> {
    let tool = std::iter::once(format!("{SERVER_TOOL_FIELD}{VERTEX_SEARCH}"));
    tool.chain(VERTEX_BLOCKS.iter().map(|kind| typed_block_field(kind)))
}

/// Whether Vertex runs web search for `wire_id`: Claude 4 and later (Google
/// lists those models; Claude Code offers its web search on Vertex for them).
/// The generation is the first number in the id: `claude-sonnet-4-5@…` is 4,
/// `claude-3-7-sonnet@…` is 3.
pub fn vertex_searches(wire_id: &str) -> bool {
    let name = wire_id.split('@').next().unwrap_or(wire_id);
    let generation = name.split('-').find_map(|part| part.parse::<u32>().ok());
    generation.is_some_and(|generation| generation >= 4)
}

/// The type of the first history block in `blocks` (the `native_blocks`
/// field's value) that `taken` (a surface's native fields) does not take:
/// `native_blocks` takes every type, `native_blocks.<type>` that type.
pub fn block_not_taken(taken: &[String], blocks: &Value) -> Option<String> {
    if taken.iter().any(|field| field == NATIVE_BLOCKS) {
        return None;
    }
    let Some(blocks) = blocks.as_array() else { return Some("unknown".to_owned()) };
    blocks.iter().find_map(|placed| {
        let kind = placed.pointer("/block/type").and_then(Value::as_str).unwrap_or("unknown");
        let field = typed_block_field(kind);
        (!taken.contains(&field)).then(|| kind.to_owned())
    })
}

/// Takes the server tools and history blocks out of `fields`, and writes them
/// into `body`: tools after the neutral ones, blocks in their turns.
pub fn apply(fields: &mut Map<String, Value>, body: &mut Map<String, Value>) -> Result<(), CodecError> {
    let names: Vec<String> = fields.keys().filter(|name| name.starts_with(SERVER_TOOL_FIELD)).cloned().collect();
    let mut tools = Vec::new();
    for name in names {
        match fields.remove(&name) {
            Some(Value::Array(definitions)) => tools.extend(definitions),
            _ => return Err(CodecError::Unsupported(format!("the native field {name:?} is not a list of tools"))),
        }
    }
    if !tools.is_empty() {
        let listed = body.entry("tools").or_insert_with(|| Value::Array(Vec::new()));
        let Some(listed) = listed.as_array_mut() else {
            return Err(CodecError::Unsupported("the request's `tools` is not a list".to_owned()));
        };
        listed.extend(tools);
    }
    match fields.remove(NATIVE_BLOCKS) {
        None => Ok(()),
        Some(Value::Array(blocks)) => blocks.into_iter().try_for_each(|placed| insert_block(body, placed)),
        Some(_) => Err(CodecError::Unsupported(format!("the native field {NATIVE_BLOCKS:?} is not a list"))),
    }
}

/// One `{turn, at, block, replaces}` into its turn's content.
fn insert_block(body: &mut Map<String, Value>, placed: Value) -> Result<(), CodecError> {
    let index = |key: &str| {
        placed
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| CodecError::Unsupported(format!("a native block has no `{key}` index")))
    };
    let (turn, at) = (index("turn")?, index("at")?);
    let replaces = placed.get("replaces").and_then(Value::as_bool).unwrap_or(false);
    let block = match placed.get("block") {
        Some(block @ Value::Object(_)) => block.clone(),
        _ => return Err(CodecError::Unsupported("a native block is not a JSON object".to_owned())),
    };
    let content = body
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .and_then(|messages| messages.get_mut(turn))
        .and_then(|message| message.get_mut("content"))
        .and_then(Value::as_array_mut)
        .ok_or_else(|| CodecError::Unsupported(format!("a native block names turn {turn}, which has no content")))?;
    match content.get_mut(at) {
        Some(neutral) if replaces => *neutral = block,
        _ => content.insert(at.min(content.len()), block),
    }
    Ok(())
}

/// A 2xx answer with its own blocks in place (see the module's comment).
pub fn decode_native(surface: Surface, response: &HttpResponse) -> Result<NativeAnswer, CodecError> {
    let neutral = decode(surface, response)?;
    let body: Value = from_body(&response.body)?;
    let wire = body.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut blocks = Vec::with_capacity(wire.len());
    let mut next_neutral = 0_u32;
    for (position, block) in wire.iter().enumerate() {
        let decoded = content_block(position, block)?;
        let cited = block.get("citations").is_some_and(|citations| !citations.is_null());
        match decoded {
            Some(_) if cited => {
                next_neutral += 1;
                blocks.push(AnswerBlock::Native(block.to_string()));
            }
            Some(_) => {
                blocks.push(AnswerBlock::Neutral(next_neutral));
                next_neutral += 1;
            }
            None if is_empty_text(block) => {}
            None => blocks.push(AnswerBlock::Native(block.to_string())),
        }
    }
    let usage_json = body
        .get("usage")
        .and_then(|usage| usage.get("server_tool_use"))
        .filter(|used| used.is_object())
        .map(|used| json!({"server_tool_use": used}).to_string());
    Ok(NativeAnswer { response: neutral, blocks, usage_json })
}

/// Empty text, which the neutral decode skips and which carries nothing.
fn is_empty_text(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("text")
        && block.get("text").and_then(Value::as_str).is_some_and(str::is_empty)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn ok(body: &Value) -> HttpResponse {
        HttpResponse { status: 200, headers: Vec::new(), body: body.to_string().into_bytes() }
    }

    #[test]
    fn an_answer_keeps_its_server_tool_blocks_and_cited_text_in_place() {
        let search =
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "weir"}});
        let result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
            {"type": "web_search_result", "url": "https://example.com", "title": "Example", "encrypted_content": "Eq", "page_age": null}
        ]});
        let cited = json!({"type": "text", "text": "Weir is a gateway.", "citations": [
            {"type": "web_search_result_location", "url": "https://example.com", "title": "Example", "encrypted_index": "Eo", "cited_text": "Weir"}
        ]});
        let body = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Searching."}, search, result, cited, {"type": "text", "text": ""}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5, "server_tool_use": {"web_search_requests": 1}}
        });
        let answer = decode_native(Surface::Direct, &ok(&body)).unwrap();
        assert_eq!(answer.response.content.len(), 2, "both texts are neutral too");
        let natives: Vec<Value> = answer
            .blocks
            .iter()
            .filter_map(|block| match block {
                AnswerBlock::Native(json) => Some(serde_json::from_str(json).unwrap()),
                AnswerBlock::Neutral(_) => None,
            })
            .collect();
        assert_eq!(answer.blocks[0], AnswerBlock::Neutral(0));
        assert_eq!(answer.blocks.len(), 4, "the empty text is skipped");
        assert_eq!(natives, [search, result, cited]);
        let usage: Value = serde_json::from_str(answer.usage_json.as_deref().unwrap()).unwrap();
        assert_eq!(usage, json!({"server_tool_use": {"web_search_requests": 1}}));
    }

    #[test]
    fn server_tools_and_history_blocks_are_written_in_place() {
        let mut fields = Map::new();
        let tool = json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2});
        fields.insert("server_tools.web_search_20250305".into(), json!([tool]));
        let block = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}});
        let cited = json!({"type": "text", "text": "a", "citations": [{"type": "web_search_result_location"}]});
        fields.insert(
            NATIVE_BLOCKS.into(),
            json!([
                {"turn": 1, "at": 0, "block": block},
                {"turn": 1, "at": 1, "block": cited, "replaces": true},
                {"turn": 1, "at": 9, "block": {"type": "x"}}
            ]),
        );
        fields.insert("top_k".into(), json!(3));
        let mut body = Map::new();
        body.insert("tools".into(), json!([{"name": "f"}]));
        body.insert(
            "messages".into(),
            json!([
                {"role": "user", "content": [{"type": "text", "text": "q"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "a"}]}
            ]),
        );
        apply(&mut fields, &mut body).unwrap();
        assert_eq!(body["tools"], json!([{"name": "f"}, tool]));
        assert_eq!(body["messages"][1]["content"], json!([block, cited, {"type": "x"}]));
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["top_k"], "only the other fields are left");
    }

    #[test]
    fn a_block_naming_a_turn_that_is_not_there_is_refused() {
        let mut fields = Map::new();
        fields.insert(NATIVE_BLOCKS.into(), json!([{"turn": 4, "at": 0, "block": {"type": "x"}}]));
        let mut body = Map::new();
        body.insert("messages".into(), json!([]));
        let error = apply(&mut fields, &mut body).unwrap_err();
        assert!(matches!(error, CodecError::Unsupported(reason) if reason.contains("turn 4")));
        let mut fields = Map::new();
        fields.insert("server_tools.web_search_20250305".into(), json!({"type": "web_search_20250305"}));
        assert!(apply(&mut fields, &mut Map::new()).is_err(), "a tool field that is not a list");
    }
}
