//! Chat with token log-probabilities (`weir:provider/logprobs`): the chat
//! request with `logprobs: true` and `top_logprobs`, and the first output
//! token's candidates read from `choices[0].logprobs.content[0].top_logprobs`,
//! the shape OpenAI, vLLM and llama.cpp's server all answer in.

use serde_json::{Value, json};
use weir_sdk::json::{from_body, to_body};
use weir_sdk::types::{
    CallParams, CodecError, FirstToken, HttpRequest, HttpResponse, PreparedConversation, TokenCandidate,
};

use crate::dialect::{self, Dialect};
use crate::keys;
use crate::request;
use crate::response::{first_choice, text, usage};

/// The most candidates OpenAI lists per token (`top_logprobs` is 0 to 20).
pub const MAX_TOP: u8 = 20;

/// Whether `wire_id` answers with log-probabilities: OpenAI's reasoning
/// families refuse `logprobs`; a compatible server is taken at its word.
pub fn serves(dialect: Dialect, wire_id: &str) -> bool {
    match dialect {
        Dialect::OpenAi => !dialect::is_reasoning_family(wire_id),
        Dialect::Compatible => true,
    }
}

pub fn encode(
    dialect: Dialect,
    conversation: &PreparedConversation,
    params: &CallParams,
    top: u8,
) -> Result<HttpRequest, CodecError> {
    if params.stream {
        return Err(CodecError::Unsupported("log-probabilities are read from a whole answer, not a stream".into()));
    }
    if top == 0 || top > MAX_TOP {
        return Err(CodecError::Unsupported(format!("`top_logprobs` is 1 to {MAX_TOP}, not {top}")));
    }
    let mut body = request::body(keys::of_dialect(dialect), conversation, params)?;
    if let Value::Object(fields) = &mut body {
        fields.insert("logprobs".into(), json!(true));
        fields.insert("top_logprobs".into(), json!(top));
    }
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: request::PATH.to_owned(),
        headers: request::headers(false),
        body: to_body(&body)?,
    })
}

/// The first output token's candidates, most likely first. An answer without
/// log-probabilities (a server that ignored the request for them) is
/// malformed; one with no output token has no candidates.
pub fn decode(response: &HttpResponse) -> Result<FirstToken, CodecError> {
    let body: Value = from_body(&response.body)?;
    let tokens = first_choice(&body)?
        .get("logprobs")
        .and_then(|logprobs| logprobs.get("content"))
        .and_then(Value::as_array)
        .ok_or_else(|| CodecError::Malformed("choices[0] carries no `logprobs.content`".to_owned()))?;
    let candidates = match tokens.first() {
        Some(first) => candidates(first)?,
        None => Vec::new(),
    };
    Ok(FirstToken {
        candidates,
        usage: body.get("usage").and_then(usage),
        served_model: text(body.get("model")),
        request_id: text(body.get("id")),
    })
}

/// One token's `top_logprobs`, sorted most likely first.
fn candidates(token: &Value) -> Result<Vec<TokenCandidate>, CodecError> {
    let listed = token
        .get("top_logprobs")
        .and_then(Value::as_array)
        .ok_or_else(|| CodecError::Malformed("the first token has no `top_logprobs` list".to_owned()))?;
    let mut candidates = listed
        .iter()
        .map(|candidate| {
            let token = candidate.get("token").and_then(Value::as_str);
            let logprob = candidate.get("logprob").and_then(Value::as_f64);
            match (token, logprob) {
                (Some(token), Some(logprob)) => Ok(TokenCandidate { token: token.to_owned(), logprob }),
                _ => Err(CodecError::Malformed("a `top_logprobs` entry lacks `token` or `logprob`".to_owned())),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    candidates.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
    Ok(candidates)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    fn ok(body: &Value) -> HttpResponse {
        HttpResponse { status: 200, headers: vec![], body: body.to_string().into_bytes() }
    }

    #[test]
    fn the_request_asks_for_the_top_candidates_of_a_whole_answer() {
        let conversation = PreparedConversation::of(vec![]);
        let params = CallParams::new("gpt-4.1-mini", 1);
        let request = encode(Dialect::OpenAi, &conversation, &params, 5).unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["logprobs"], true);
        assert_eq!(body["top_logprobs"], 5);
        assert_eq!(body["max_completion_tokens"], 1);
        assert_eq!(request.path_and_query, "/chat/completions");
        assert!(encode(Dialect::OpenAi, &conversation, &params, 21).is_err());
        assert!(encode(Dialect::OpenAi, &conversation, &params, 0).is_err());
        let mut streamed = params.clone();
        streamed.stream = true;
        assert!(encode(Dialect::OpenAi, &conversation, &streamed, 5).is_err());
    }

    #[test]
    fn the_first_tokens_candidates_are_read_most_likely_first() {
        let body = json!({
            "id": "chatcmpl-1", "model": "gpt-4.1-mini-2025-04-14",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "length",
                "logprobs": {"content": [
                    {"token": "A", "logprob": -0.1, "bytes": [65], "top_logprobs": [
                        {"token": "B", "logprob": -2.5, "bytes": [66]},
                        {"token": "A", "logprob": -0.1, "bytes": [65]}
                    ]},
                    {"token": "x", "logprob": -9.0, "top_logprobs": []}
                ]}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41}
        });
        let first = decode(&ok(&body)).unwrap();
        let tokens: Vec<&str> = first.candidates.iter().map(|c| c.token.as_str()).collect();
        assert_eq!(tokens, ["A", "B"]);
        assert_eq!(first.usage.unwrap().input, 40);
        assert_eq!(first.served_model.as_deref(), Some("gpt-4.1-mini-2025-04-14"));
        assert_eq!(first.request_id.as_deref(), Some("chatcmpl-1"));
    }

    #[test]
    fn an_answer_without_log_probabilities_is_malformed() {
        let plain = json!({"choices": [{"index": 0, "message": {"content": "A"}, "logprobs": null}]});
        assert!(matches!(decode(&ok(&plain)), Err(CodecError::Malformed(m)) if m.contains("logprobs.content")));
        let empty = json!({"choices": [{"index": 0, "message": {"content": ""}, "logprobs": {"content": []}}]});
        assert!(decode(&ok(&empty)).unwrap().candidates.is_empty(), "no output token, no candidates");
        let broken =
            json!({"choices": [{"logprobs": {"content": [{"token": "A", "top_logprobs": [{"token": "A"}]}]}}]});
        assert!(decode(&ok(&broken)).is_err());
        assert!(serves(Dialect::OpenAi, "gpt-4.1") && !serves(Dialect::OpenAi, "o3-mini"));
    }
}
