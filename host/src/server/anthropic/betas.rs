//! The `anthropic-beta` header: the betas a caller asked for. They are
//! recorded on the call (`client.betas`) so an operator can see what callers
//! expect, and carried as the call's native betas ([`NativeAsk::betas`]): a
//! provider whose component takes Anthropic's betas is sent the ones it
//! lists (`native.support`), and the others are dropped with a note
//! (`beta_dropped:NAME`, `x-weir-dropped-betas`).

use axum::http::HeaderMap;

use std::sync::Arc;

use crate::chat::{ChatRequest, NativeAsk};
use crate::record::ClientFacts;

/// The most betas recorded for one call, and the longest name kept: the head
/// limit bounds the header, this bounds what each record carries.
const MAX_BETAS: usize = 32;
const MAX_BETA_LEN: usize = 128;

/// The betas named in every `anthropic-beta` header, comma-separated, in order,
/// trimmed, each once.
pub fn betas(headers: &HeaderMap) -> Vec<String> {
    let mut betas: Vec<String> = Vec::new();
    let values = headers.get_all("anthropic-beta").into_iter().filter_map(|value| value.to_str().ok());
    for beta in values.flat_map(|value| value.split(',')).map(str::trim) {
        if !beta.is_empty() && beta.len() <= MAX_BETA_LEN && betas.len() < MAX_BETAS && !betas.iter().any(|b| b == beta)
        {
            betas.push(beta.to_owned());
        }
    }
    betas
}

/// Records the request's betas beside its `metadata`, and carries them as
/// its native betas.
pub fn take_betas(request: &mut ChatRequest, headers: &HeaderMap) {
    let betas = betas(headers);
    if betas.is_empty() {
        return;
    }
    let native =
        request.native.get_or_insert_with(|| Arc::new(NativeAsk { dialect: super::DIALECT, ..NativeAsk::default() }));
    Arc::make_mut(native).betas.clone_from(&betas);
    request.client.get_or_insert_with(ClientFacts::default).betas = betas;
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn betas_are_split_trimmed_and_kept_once_in_order() {
        let mut headers = HeaderMap::new();
        headers.append("anthropic-beta", HeaderValue::from_static("claude-code-20250219, effort-2025-11-24,,"));
        headers.append("anthropic-beta", HeaderValue::from_static("effort-2025-11-24,context-management-2025-06-27"));
        assert_eq!(betas(&headers), ["claude-code-20250219", "effort-2025-11-24", "context-management-2025-06-27"]);
        assert!(betas(&HeaderMap::new()).is_empty());
        let long = "x".repeat(MAX_BETA_LEN + 1);
        let mut many = HeaderMap::new();
        let list: Vec<String> = (0..40).map(|i| format!("b{i}")).chain([long]).collect();
        many.insert("anthropic-beta", HeaderValue::from_str(&list.join(",")).unwrap());
        assert_eq!(betas(&many).len(), MAX_BETAS, "bounded");
    }

    #[test]
    fn the_betas_are_recorded_and_carried_natively_beside_the_bodys_fields() {
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-beta", HeaderValue::from_static("effort-2025-11-24,context-1m-2025-08-07"));
        let conversation = crate::types::Conversation::user("Hi");
        let mut request = ChatRequest::new("m", conversation);
        let fields = vec![("top_k".to_owned(), serde_json::json!(3))];
        request.native = Some(Arc::new(NativeAsk { dialect: super::super::DIALECT, fields, ..NativeAsk::default() }));
        take_betas(&mut request, &headers);
        let native = request.native.as_deref().unwrap();
        assert_eq!(native.betas, ["effort-2025-11-24", "context-1m-2025-08-07"]);
        assert_eq!(native.fields, [("top_k".to_owned(), serde_json::json!(3))], "the body's fields are kept");
        assert_eq!(request.client.unwrap().betas, native.betas);

        let mut plain = ChatRequest::new("m", crate::types::Conversation::user("Hi"));
        take_betas(&mut plain, &HeaderMap::new());
        assert!(plain.native.is_none() && plain.client.is_none(), "no betas, nothing carried");
    }
}
