//! Anthropic's own request fields and betas (WIT 0.4.0's `native`), per
//! surface, and the direct API's token count.
//!
//! What each surface takes ([`support`]):
//!
//! * Direct: `top_k`, `context_management`, `container`, `mcp_servers`,
//!   `service_tier` and the cache TTL; any beta, in the `anthropic-beta`
//!   header; and `POST /v1/messages/count_tokens`.
//! * Bedrock InvokeModel: `top_k`, `context_management` and the cache TTL
//!   (its request schema refuses `container`, `mcp_servers`, `service_tier`,
//!   `metadata` and `inference_geo` as extra inputs); the betas AWS lists for
//!   the Claude model the wire id names ([`bedrock_betas::for_wire_id`]), as
//!   `anthropic_beta` in the body (a beta the model does not take is a 400
//!   there). No count endpoint through this codec.
//! * Mantle: as InvokeModel (it is Bedrock's front door), betas in the header.
//! * Vertex: `top_k`, `context_management` and the cache TTL; any beta, in the
//!   header (Vertex judges its own); and, for Claude 4 and later, Anthropic's
//!   web search tool (`web_search_20250305`, the one version Google's "Web
//!   search with Anthropic Claude models" page documents, a Preview there) with
//!   the history blocks a web search answers with, named by type
//!   ([`hosted::VERTEX_BLOCKS`]): no other server tool or own block.
//!
//! A field or beta outside the surface's list is refused, never written: the
//! host cuts a caller's fields to [`support`]'s answer before it encodes, so
//! one arriving here is a host bug, and sending it would be a 400 upstream.

use serde_json::{Map, Value, json};

use super::hosted::{self, NATIVE_BLOCKS};
use super::request::encode_with;
use super::{Surface, bedrock_betas};
use crate::json::{from_body, parse_value};
use crate::types::{
    CallParams, CodecError, Headers, HttpRequest, HttpResponse, NativeRequest, NativeSupport, PreparedConversation,
};

/// The dialect name the host's Messages route gives Anthropic's fields.
pub const DIALECT: &str = "anthropic-messages";

/// The native field naming the TTL of every prompt-cache breakpoint written.
const CACHE_TTL: &str = "cache_control.ttl";

/// Any beta (the direct API judges its own).
const ANY_BETA: &str = "*";

/// The count endpoint's path under the direct API's base URL.
const COUNT_PATH: &str = "/v1/messages/count_tokens";

/// The body fields a count request takes: the count endpoint refuses the
/// sampling and output fields a call carries.
const COUNTED_FIELDS: &[&str] =
    &["model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers", "context_management"];

/// What `surface` takes natively for `wire_id`; `None` for an id it does not serve.
pub fn support(surface: Surface, wire_id: &str) -> Option<NativeSupport> {
    if !surface.serves(wire_id) {
        return None;
    }
    let owned = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>();
    let (fields, betas, count_tokens) = match surface {
        Surface::Direct => (
            owned(&[
                "top_k",
                "context_management",
                "container",
                "mcp_servers",
                "service_tier",
                CACHE_TTL,
                NATIVE_BLOCKS,
            ])
            .into_iter()
            .chain(hosted::server_tool_fields())
            .collect(),
            owned(&[ANY_BETA]),
            true,
        ),
        Surface::BedrockInvoke | Surface::Mantle => {
            (owned(&["top_k", "context_management", CACHE_TTL]), owned(bedrock_betas::for_wire_id(wire_id)), false)
        }
        // Vertex takes the `anthropic-beta` header and answers a beta it does
        // not serve with its own 400; no list is kept here.
        Surface::Vertex => {
            let mut fields = owned(&["top_k", "context_management", CACHE_TTL]);
            if hosted::vertex_searches(wire_id) {
                fields.extend(hosted::vertex_search_fields());
            }
            (fields, owned(&[ANY_BETA]), false)
        }
    };
    Some(NativeSupport { dialect: DIALECT.to_owned(), fields, betas, count_tokens })
}

/// The call's request with `native`'s fields and betas added.
pub fn encode(
    surface: Surface,
    conversation: &PreparedConversation,
    params: &CallParams,
    native: &NativeRequest,
) -> Result<HttpRequest, CodecError> {
    let mut asked = Asked::checked(surface, params, native)?;
    encode_with(surface, conversation, params, |body, headers| {
        hosted::apply(&mut asked.fields, body)?;
        asked.apply(surface, body, headers);
        Ok(())
    })
}

/// The direct API's count request for the call's conversation: the call's
/// body cut to what the count endpoint takes.
pub fn count_tokens_encode(
    surface: Surface,
    conversation: &PreparedConversation,
    params: &CallParams,
    native: &NativeRequest,
) -> Result<HttpRequest, CodecError> {
    if surface != Surface::Direct {
        return Err(CodecError::Unsupported(format!("{} has no token count through this component", surface.key())));
    }
    let mut asked = Asked::checked(surface, params, native)?;
    let whole = CallParams { stream: false, ..params.clone() };
    let mut request = encode_with(surface, conversation, &whole, |body, headers| {
        hosted::apply(&mut asked.fields, body)?;
        asked.apply(surface, body, headers);
        body.retain(|name, _| COUNTED_FIELDS.contains(&name.as_str()));
        Ok(())
    })?;
    request.path_and_query = COUNT_PATH.to_owned();
    Ok(request)
}

/// The input tokens of a 2xx count answer: `{"input_tokens": N}`.
pub fn count_tokens_decode(response: &HttpResponse) -> Result<u64, CodecError> {
    #[derive(serde::Deserialize)]
    struct Counted {
        input_tokens: u64,
    }
    Ok(from_body::<Counted>(&response.body)?.input_tokens)
}

/// A native request checked against the surface's [`support`].
struct Asked {
    fields: Map<String, Value>,
    ttl: Option<String>,
    betas: Vec<String>,
}

impl Asked {
    fn checked(surface: Surface, params: &CallParams, native: &NativeRequest) -> Result<Self, CodecError> {
        let Some(support) = support(surface, &params.wire_model_id).filter(|_| native.dialect == DIALECT) else {
            return Err(CodecError::Unsupported(format!("no native {:?} fields for this model", native.dialect)));
        };
        let Value::Object(mut fields) = parse_value(&native.fields_json, "the native fields")? else {
            return Err(CodecError::Unsupported("the native fields are not a JSON object".to_owned()));
        };
        if let Some(name) = fields.keys().find(|name| !support.fields.contains(name) && *name != NATIVE_BLOCKS) {
            return Err(CodecError::Unsupported(format!("{} does not take the field {name:?}", surface.key())));
        }
        if let Some(blocks) = fields.get(NATIVE_BLOCKS)
            && let Some(kind) = hosted::block_not_taken(&support.fields, blocks)
        {
            return Err(CodecError::Unsupported(format!("{} does not take a history's {kind:?} block", surface.key())));
        }
        let any_beta = support.betas.iter().any(|beta| beta == ANY_BETA);
        if let Some(beta) = native.betas.iter().find(|beta| !any_beta && !support.betas.contains(beta)) {
            return Err(CodecError::Unsupported(format!("{} does not take the beta {beta:?}", surface.key())));
        }
        let ttl = match fields.remove(CACHE_TTL) {
            None => None,
            Some(Value::String(ttl)) if ttl == "5m" || ttl == "1h" => Some(ttl),
            Some(other) => return Err(CodecError::Unsupported(format!("cache TTL {other} is not \"5m\" or \"1h\""))),
        };
        Ok(Self { fields, ttl, betas: native.betas.clone() })
    }

    /// Writes the fields into the body, the TTL into every breakpoint, and
    /// the betas where the surface carries them.
    fn apply(&self, surface: Surface, body: &mut Map<String, Value>, headers: &mut Headers) {
        body.extend(self.fields.iter().map(|(name, value)| (name.clone(), value.clone())));
        if let Some(ttl) = &self.ttl {
            set_ttl(body, ttl);
        }
        if self.betas.is_empty() {
            return;
        }
        match surface {
            Surface::Direct | Surface::Mantle | Surface::Vertex => {
                headers.push(("anthropic-beta".to_owned(), self.betas.join(",")))
            }
            Surface::BedrockInvoke => drop(body.insert("anthropic_beta".to_owned(), json!(self.betas))),
        }
    }
}

/// Sets `ttl` on every `cache_control` the codec wrote (system blocks,
/// message blocks, tools).
fn set_ttl(body: &mut Map<String, Value>, ttl: &str) {
    let mark = |block: &mut Value| {
        if let Some(Value::Object(cache)) = block.get_mut("cache_control") {
            cache.insert("ttl".to_owned(), json!(ttl));
        }
    };
    for name in ["system", "tools"] {
        body.get_mut(name).and_then(Value::as_array_mut).into_iter().flatten().for_each(mark);
    }
    let messages = body.get_mut("messages").and_then(Value::as_array_mut).into_iter().flatten();
    let contents = messages.filter_map(|message| message.get_mut("content")).filter_map(Value::as_array_mut);
    contents.flatten().for_each(mark);
}

/// Serializes a body (for the tests' fixtures).
#[cfg(test)]
fn body_json(request: &HttpRequest) -> Value {
    serde_json::from_slice(&request.body).unwrap_or(Value::Null)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::http::header;
    use crate::types::{ContentBlock, Turn, TurnRole};

    fn conversation() -> PreparedConversation {
        PreparedConversation {
            system: vec!["Be brief.".into()],
            cache_system: true,
            turns: vec![Turn { role: TurnRole::User, content: vec![ContentBlock::Text("Hi".into())], cache: true }],
            tools: Vec::new(),
            tool_choice: None,
        }
    }

    fn params(wire_id: &str) -> CallParams {
        CallParams {
            wire_model_id: wire_id.into(),
            max_tokens: 512,
            thinking_budget: None,
            reasoning_effort: None,
            temperature: Some(0.5),
            stop: Vec::new(),
            response_schema: None,
            stream: false,
        }
    }

    fn native(fields: Value, betas: &[&str]) -> NativeRequest {
        NativeRequest {
            dialect: DIALECT.into(),
            fields_json: fields.to_string(),
            betas: betas.iter().map(|beta| (*beta).to_owned()).collect(),
        }
    }

    #[test]
    fn the_direct_api_takes_every_server_tool_and_vertex_web_search_on_claude_4() {
        let wire_ids = [
            (Surface::Direct, "claude-sonnet-4-5", true),
            (Surface::BedrockInvoke, "anthropic.claude-sonnet-4-5-20250929-v1:0", false),
            (Surface::Mantle, "anthropic.claude-sonnet-4-5-20250929-v1:0", false),
            (Surface::Vertex, "claude-sonnet-4-5@20250929", true),
            (Surface::Vertex, "claude-opus-4@20250514", true),
            (Surface::Vertex, "claude-3-7-sonnet@20250219", false),
            (Surface::Vertex, "claude-3-5-haiku@20241022", false),
        ];
        for (surface, wire_id, searches) in wire_ids {
            let fields = support(surface, wire_id).unwrap().fields;
            let takes = |name: &str| fields.iter().any(|field| field == name);
            assert_eq!(takes("server_tools.web_search_20250305"), searches, "{wire_id}");
            assert_eq!(takes("server_tools.code_execution_20250825"), surface == Surface::Direct, "{wire_id}");
            assert_eq!(takes(NATIVE_BLOCKS), surface == Surface::Direct, "every own block: {wire_id}");
            let typed = takes("native_blocks.web_search_tool_result");
            assert_eq!(typed, searches && surface == Surface::Vertex, "{wire_id}");
        }
    }

    #[test]
    fn vertex_is_sent_a_web_search_and_its_history_blocks_and_refuses_other_blocks() {
        let tool = json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2});
        let call =
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}});
        let fields = json!({
            "server_tools.web_search_20250305": [tool],
            "native_blocks": [{"turn": 0, "at": 0, "block": call}]
        });
        let wire_id = "claude-sonnet-4-5@20250929";
        let request = encode(Surface::Vertex, &conversation(), &params(wire_id), &native(fields, &[])).unwrap();
        let body = body_json(&request);
        assert_eq!(body["tools"], json!([tool]));
        assert_eq!(body["messages"][0]["content"][0], call);
        let execution = json!({"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_2", "content": {}});
        let other = json!({"native_blocks": [{"turn": 0, "at": 0, "block": execution}]});
        let refused = encode(Surface::Vertex, &conversation(), &params(wire_id), &native(other, &[])).unwrap_err();
        assert!(matches!(&refused, CodecError::Unsupported(reason) if reason.contains("code_execution_tool_result")));
        let older = json!({"server_tools.web_search_20250305": [tool]});
        let on_claude_3 =
            encode(Surface::Vertex, &conversation(), &params("claude-3-7-sonnet@20250219"), &native(older, &[]));
        assert!(on_claude_3.is_err(), "Vertex runs web search for Claude 4 and later only");
    }

    #[test]
    fn the_direct_api_gets_the_fields_the_ttl_and_the_betas_header() {
        let asked = native(
            json!({"top_k": 7, "context_management": {"edits": []}, "cache_control.ttl": "1h"}),
            &["context-management-2025-06-27", "claude-code-20250219"],
        );
        let request = encode(Surface::Direct, &conversation(), &params("claude-sonnet-4-5"), &asked).unwrap();
        let body = body_json(&request);
        assert_eq!(body["top_k"], 7);
        assert_eq!(body["context_management"], json!({"edits": []}));
        assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral", "ttl": "1h"}));
        assert_eq!(body["messages"][0]["content"][0]["cache_control"], json!({"type": "ephemeral", "ttl": "1h"}));
        assert!(body.get("cache_control.ttl").is_none());
        assert_eq!(
            header(&request.headers, "anthropic-beta"),
            Some("context-management-2025-06-27,claude-code-20250219")
        );
    }

    #[test]
    fn invoke_model_carries_betas_in_the_body_and_refuses_what_bedrock_refuses() {
        let wire_id = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
        let asked = native(json!({"top_k": 3}), &["interleaved-thinking-2025-05-14"]);
        let request = encode(Surface::BedrockInvoke, &conversation(), &params(wire_id), &asked).unwrap();
        let body = body_json(&request);
        assert_eq!(body["anthropic_beta"], json!(["interleaved-thinking-2025-05-14"]));
        assert_eq!(body["top_k"], 3);
        assert!(header(&request.headers, "anthropic-beta").is_none());

        let unlisted = native(json!({}), &["claude-code-20250219"]);
        let refused = encode(Surface::BedrockInvoke, &conversation(), &params(wire_id), &unlisted).unwrap_err();
        assert!(matches!(refused, CodecError::Unsupported(reason) if reason.contains("claude-code-20250219")));
        let container = native(json!({"container": "c"}), &[]);
        assert!(encode(Surface::BedrockInvoke, &conversation(), &params(wire_id), &container).is_err());
    }

    #[test]
    fn mantle_carries_its_betas_in_the_header() {
        let asked = native(json!({}), &["context-1m-2025-08-07"]);
        let wire_id = "anthropic.claude-sonnet-4-5-20250929-v1:0";
        let request = encode(Surface::Mantle, &conversation(), &params(wire_id), &asked).unwrap();
        assert_eq!(header(&request.headers, "anthropic-beta"), Some("context-1m-2025-08-07"));
        assert!(body_json(&request).get("anthropic_beta").is_none());
    }

    #[test]
    fn bedrock_betas_follow_the_model_the_wire_id_names() {
        let betas = |surface: Surface, wire_id: &str| support(surface, wire_id).unwrap().betas;
        for surface in [Surface::BedrockInvoke, Surface::Mantle] {
            let opus = betas(surface, "anthropic.claude-opus-4-5-20251101-v1:0");
            assert!(opus.contains(&"effort-2025-11-24".into()) && !opus.contains(&"context-1m-2025-08-07".into()));
            let sonnet = betas(surface, "anthropic.claude-sonnet-4-5-20250929-v1:0");
            assert!(sonnet.contains(&"context-1m-2025-08-07".into()) && !sonnet.contains(&"effort-2025-11-24".into()));
        }
        let profiled = betas(Surface::BedrockInvoke, "us.anthropic.claude-opus-4-5-20251101-v1:0");
        assert_eq!(profiled, betas(Surface::BedrockInvoke, "anthropic.claude-opus-4-5-20251101-v1:0"));
        // A beta the model does not take, arriving anyway, is refused rather than sent.
        let asked = native(json!({}), &["context-1m-2025-08-07"]);
        let wire_id = "us.anthropic.claude-opus-4-5-20251101-v1:0";
        let refused = encode(Surface::BedrockInvoke, &conversation(), &params(wire_id), &asked).unwrap_err();
        assert!(matches!(refused, CodecError::Unsupported(reason) if reason.contains("context-1m-2025-08-07")));
    }

    #[test]
    fn support_follows_the_surface_and_the_wire_id() {
        let direct = support(Surface::Direct, "claude-opus-4-5").unwrap();
        assert!(direct.count_tokens && direct.betas == [ANY_BETA] && direct.fields.contains(&"mcp_servers".into()));
        let bedrock = support(Surface::BedrockInvoke, "us.anthropic.claude-opus-4-5").unwrap();
        assert!(!bedrock.count_tokens && !bedrock.fields.contains(&"service_tier".into()));
        assert!(support(Surface::Direct, "anthropic.claude-opus-4-5").is_none(), "not an id the direct API serves");
    }

    #[test]
    fn malformed_or_foreign_native_requests_are_refused() {
        let p = params("claude-sonnet-4-5");
        let not_json = NativeRequest { dialect: DIALECT.into(), fields_json: "{".into(), betas: Vec::new() };
        assert!(encode(Surface::Direct, &conversation(), &p, &not_json).is_err());
        let foreign = NativeRequest { dialect: "openai-responses".into(), fields_json: "{}".into(), betas: Vec::new() };
        assert!(encode(Surface::Direct, &conversation(), &p, &foreign).is_err());
        let bad_ttl = native(json!({"cache_control.ttl": "2d"}), &[]);
        assert!(encode(Surface::Direct, &conversation(), &p, &bad_ttl).is_err());
    }

    #[test]
    fn the_count_request_carries_only_what_the_count_endpoint_takes() {
        let asked =
            native(json!({"top_k": 7, "context_management": {"edits": []}}), &["context-management-2025-06-27"]);
        let request =
            count_tokens_encode(Surface::Direct, &conversation(), &params("claude-sonnet-4-5"), &asked).unwrap();
        assert_eq!(request.path_and_query, COUNT_PATH);
        let body = body_json(&request);
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["context_management"], json!({"edits": []}));
        for absent in ["max_tokens", "temperature", "top_k", "stream"] {
            assert!(body.get(absent).is_none(), "{absent} is not a count's");
        }
        assert_eq!(header(&request.headers, "anthropic-beta"), Some("context-management-2025-06-27"));
        let bedrock =
            count_tokens_encode(Surface::BedrockInvoke, &conversation(), &params("anthropic.claude-x"), &asked);
        assert!(bedrock.is_err());
    }

    #[test]
    fn the_count_answer_is_read_or_refused_as_malformed() {
        let answer = |body: &str| HttpResponse { status: 200, headers: Vec::new(), body: body.as_bytes().to_vec() };
        assert_eq!(count_tokens_decode(&answer(r#"{"input_tokens": 1234}"#)).unwrap(), 1234);
        assert!(matches!(count_tokens_decode(&answer(r#"{"tokens": 1}"#)), Err(CodecError::Malformed(_))));
    }
}
