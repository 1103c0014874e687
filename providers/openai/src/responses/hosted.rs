//! OpenAI's hosted tools on the Responses API (weir:provider 0.6.0): the tools
//! OpenAI runs itself, the output items they answer with, and those items sent
//! back in a later request's `input`.
//!
//! The host names each hosted tool as the native field `server_tools.<type>`
//! (its value: that type's tool definitions, as the caller wrote them), and a
//! history's own items as `native_blocks`, each `{turn, at, block, replaces}`:
//! the item goes to position `at` of the turn's items (a turn's blocks render
//! one item each on the assistant side), in place of the item there when
//! `replaces` (a message whose text carries `annotations`), before it otherwise.
//! The types are the hosted ones of openai-python's `ToolParam` union
//! (`src/openai/types/responses/tool_param.py`): `web_search` (and its
//! preview and dated names), `file_search`, `code_interpreter`,
//! `image_generation`, `mcp` (a remote MCP server OpenAI calls).
//!
//! An answer's blocks ([`decode_native`]) are the neutral ones `decode` reads
//! plus, in place, every output item the neutral records have no case for
//! (`web_search_call`, `file_search_call`, ...) and every message whose text
//! carries `annotations` (the whole item), each as OpenAI wrote it.

use serde_json::{Map, Value};
use weir_sdk::json::from_body;
use weir_sdk::types::{AnswerBlock, CodecError, HttpResponse, NativeAnswer, PreparedConversation};

use super::answer::decode;
use super::request::items_per_turn;

/// The prefix of the native field that carries one hosted tool type.
pub const SERVER_TOOL_FIELD: &str = "server_tools.";

/// The native field that carries a history's own items.
pub const NATIVE_BLOCKS: &str = "native_blocks";

/// The tool types OpenAI runs on its side.
pub const HOSTED_TOOLS: &[&str] = &[
    "web_search",
    "web_search_2025_08_26",
    "web_search_preview",
    "web_search_preview_2025_03_11",
    "file_search",
    "code_interpreter",
    "image_generation",
    "mcp",
];

/// The native field names of every hosted tool.
pub fn hosted_tool_fields() -> impl Iterator<Item = String> {
    HOSTED_TOOLS.iter().map(|kind| format!("{SERVER_TOOL_FIELD}{kind}"))
}

/// What the host asked of hosted tools and history items, taken out of the
/// native fields.
#[derive(Debug, Default)]
pub struct Hosted {
    tools: Vec<Value>,
    blocks: Vec<Value>,
}

impl Hosted {
    /// Takes the hosted tools and history items out of `fields`.
    pub fn take(fields: &mut Map<String, Value>) -> Result<Self, CodecError> {
        let names: Vec<String> = fields.keys().filter(|name| name.starts_with(SERVER_TOOL_FIELD)).cloned().collect();
        let mut hosted = Self::default();
        for name in names {
            match fields.remove(&name) {
                Some(Value::Array(definitions)) => hosted.tools.extend(definitions),
                _ => return Err(CodecError::Unsupported(format!("the native field {name:?} is not a list of tools"))),
            }
        }
        match fields.remove(NATIVE_BLOCKS) {
            None => {}
            Some(Value::Array(blocks)) => hosted.blocks = blocks,
            Some(_) => {
                return Err(CodecError::Unsupported(format!("the native field {NATIVE_BLOCKS:?} is not a list")));
            }
        }
        Ok(hosted)
    }

    /// Writes the tools after the neutral ones and the items in their turns.
    pub fn apply(&self, conversation: &PreparedConversation, body: &mut Map<String, Value>) -> Result<(), CodecError> {
        if !self.tools.is_empty() {
            let listed = body.entry("tools").or_insert_with(|| Value::Array(Vec::new()));
            let Some(listed) = listed.as_array_mut() else {
                return Err(CodecError::Unsupported("the request's `tools` is not a list".to_owned()));
            };
            listed.extend(self.tools.iter().cloned());
        }
        if self.blocks.is_empty() {
            return Ok(());
        }
        // Where each turn's items start in `input`, before any own item is added.
        let mut starts = Vec::with_capacity(conversation.turns.len());
        let mut next = 0;
        for count in items_per_turn(conversation)? {
            starts.push(next);
            next += count;
        }
        let input = body
            .get_mut("input")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| CodecError::Unsupported("the request has no `input` list".to_owned()))?;
        // Own items inserted into earlier turns so far, by turn.
        let mut inserted = vec![0_usize; starts.len()];
        for placed in &self.blocks {
            let index = |key: &str| {
                placed
                    .get(key)
                    .and_then(Value::as_u64)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| CodecError::Unsupported(format!("a native item has no `{key}` index")))
            };
            let (turn, at) = (index("turn")?, index("at")?);
            let Some(&start) = starts.get(turn) else {
                return Err(CodecError::Unsupported(format!("a native item names turn {turn}, which is not there")));
            };
            let item = match placed.get("block") {
                Some(item @ Value::Object(_)) => item.clone(),
                _ => return Err(CodecError::Unsupported("a native item is not a JSON object".to_owned())),
            };
            let before: usize = inserted.iter().take(turn).sum();
            let position = (start + before + at).min(input.len());
            match placed.get("replaces").and_then(Value::as_bool) == Some(true) && position < input.len() {
                true => input[position] = item,
                false => {
                    input.insert(position, item);
                    if let Some(count) = inserted.get_mut(turn) {
                        *count += 1;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A 2xx answer with its own items in place (see the module's comment).
pub fn decode_native(response: &HttpResponse) -> Result<NativeAnswer, CodecError> {
    let neutral = decode(response)?;
    let body: Value = from_body(&response.body)?;
    let output = body.get("output").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut blocks = Vec::with_capacity(output.len());
    let mut next_neutral = 0_u32;
    for item in output {
        let neutral_count = neutral_blocks_of(item);
        let own = match item.get("type").and_then(Value::as_str) {
            Some("message") => annotated(item),
            Some("reasoning" | "function_call" | "custom_tool_call") => false,
            _ => true,
        };
        match own {
            true => blocks.push(AnswerBlock::Native(item.to_string())),
            false => blocks.extend((next_neutral..next_neutral + neutral_count).map(AnswerBlock::Neutral)),
        }
        next_neutral += neutral_count;
    }
    Ok(NativeAnswer { response: neutral, blocks, usage_json: None })
}

/// How many neutral blocks `decode` makes of one output item.
fn neutral_blocks_of(item: &Value) -> u32 {
    match item.get("type").and_then(Value::as_str) {
        Some("reasoning" | "function_call" | "custom_tool_call") => 1,
        Some("message") => {
            let parts = item.get("content").and_then(Value::as_array).into_iter().flatten();
            let texts = parts.filter(|part| {
                part.get("type").and_then(Value::as_str) == Some("output_text")
                    && part.get("text").and_then(Value::as_str).is_some_and(|text| !text.is_empty())
            });
            u32::try_from(texts.count()).unwrap_or(u32::MAX)
        }
        _ => 0,
    }
}

/// A message one of whose texts carries annotations (citations of a search).
fn annotated(item: &Value) -> bool {
    let parts = item.get("content").and_then(Value::as_array).into_iter().flatten();
    parts.filter_map(|part| part.get("annotations").and_then(Value::as_array)).any(|notes| !notes.is_empty())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use serde_json::json;
    use weir_sdk::types::{ContentBlock, Turn};

    use super::*;

    fn ok(body: &Value) -> HttpResponse {
        HttpResponse { status: 200, headers: Vec::new(), body: body.to_string().into_bytes() }
    }

    #[test]
    fn an_answer_keeps_its_hosted_items_and_annotated_messages_in_place() {
        let search = json!({"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "search", "query": "weir"}});
        let cited = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
            {"type": "output_text", "text": "Weir is a gateway.", "annotations": [
                {"type": "url_citation", "url": "https://weir.example/", "title": "Weir", "start_index": 0, "end_index": 4}
            ]}
        ]});
        let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"});
        let body = json!({"id": "resp_1", "status": "completed", "model": "gpt-5", "output": [search, cited, call],
            "usage": {"input_tokens": 10, "output_tokens": 5}});
        let answer = decode_native(&ok(&body)).unwrap();
        assert_eq!(answer.response.content.len(), 2, "the cited text and the call are neutral too");
        assert_eq!(
            answer.blocks,
            [AnswerBlock::Native(search.to_string()), AnswerBlock::Native(cited.to_string()), AnswerBlock::Neutral(1)]
        );
    }

    #[test]
    fn hosted_tools_and_history_items_are_written_in_place() {
        let mut fields = Map::new();
        fields.insert("server_tools.web_search".into(), json!([{"type": "web_search"}]));
        let search = json!({"type": "web_search_call", "id": "ws_1", "status": "completed"});
        let cited = json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a",
            "annotations": [{"type": "url_citation"}]}]});
        fields.insert(
            NATIVE_BLOCKS.into(),
            json!([{"turn": 1, "at": 0, "block": search}, {"turn": 1, "at": 1, "block": cited, "replaces": true}]),
        );
        let hosted = Hosted::take(&mut fields).unwrap();
        assert!(fields.is_empty());
        let conversation = PreparedConversation::of(vec![
            Turn::user(vec![ContentBlock::Text("q".into())]),
            Turn::assistant(vec![ContentBlock::Text("a".into())]),
            Turn::user(vec![ContentBlock::Text("thanks".into())]),
        ]);
        let mut body = Map::new();
        body.insert("input".into(), json!(["q", "a", "thanks"]));
        hosted.apply(&conversation, &mut body).unwrap();
        assert_eq!(body["tools"], json!([{"type": "web_search"}]));
        assert_eq!(body["input"], json!(["q", search, cited, "thanks"]));
    }
}
