//! The `anthropic-beta` header: the betas a caller asked for. WIT 0.1.0 has
//! no field that could carry them to a component, so no provider is sent
//! them, Anthropic's surfaces included; they are recorded on the call
//! (`client.betas`) so an operator can see what callers expect. A beta that
//! changes the request's shape (`context-management-…`, `effort-…`, adaptive
//! thinking, `interleaved-thinking-…`) is read through the body's fields,
//! which are translated or dropped one by one (see `request`).

use axum::http::HeaderMap;

use crate::chat::ChatRequest;
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

/// Records the request's betas beside its `metadata`.
pub fn record_betas(request: &mut ChatRequest, headers: &HeaderMap) {
    let betas = betas(headers);
    if betas.is_empty() {
        return;
    }
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
}
