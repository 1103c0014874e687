//! Web searches a provider runs itself (Anthropic's `web_search` server tool,
//! OpenAI's hosted `web_search` on the Responses API) are billed per search on
//! top of the tokens, so a budget must see them before they are spent:
//!
//! ```text
//! native plan ─► cut: under a USD budget, a web search tool on an entry
//!                without `web_search_price` refuses the call (the budget
//!                cannot count it); one without a bound (Anthropic's
//!                `max_uses`) is a hosted tool this entry does not take:
//!                dropped, or refused under `hosted_tools = "refuse"`
//!   ─► hold: the worst case adds bound × price (each attempt's)
//!   ─► each answer: its searches counted ([`count`]) on its attempt record
//!   ─► the record's cost adds searches × price; the budget settles with it
//! ```
//!
//! OpenAI's Responses route does not carry a caller's `max_tool_calls`
//! upstream, so an OpenAI web search has no bound and is cut under a USD budget.

use serde_json::Value;

use crate::chat::{ChatRequest, HOSTED_TOOL_FIELD, NativeBlocks};
use crate::error::WeirError;
use crate::types::{AnswerBlock, NativeRequest};

use super::native::NativePlan;
use super::target::Target;

/// The type every web search tool's name starts with, in both dialects
/// (`web_search_20250305`, `web_search`, `web_search_preview`, ...).
const WEB_SEARCH: &str = "web_search";
/// The dialect whose web search tool declares its bound as `max_uses`.
const ANTHROPIC: &str = "anthropic-messages";
/// The output item OpenAI answers each web search call with.
const WEB_SEARCH_CALL: &str = "web_search_call";

/// The web searches an answer's own blocks say the provider ran: Anthropic's
/// `usage.server_tool_use.web_search_requests`, plus one per OpenAI
/// `web_search_call` item. `None` when it ran none.
pub(super) fn count(own: Option<&NativeBlocks>) -> Option<u64> {
    let own = own?;
    let reported = own
        .usage
        .as_ref()
        .and_then(|usage| usage.pointer("/server_tool_use/web_search_requests"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let calls = own.blocks.iter().filter(|block| is_web_search_call(block)).count() as u64;
    Some(reported.saturating_add(calls)).filter(|searches| *searches > 0)
}

fn is_web_search_call(block: &AnswerBlock) -> bool {
    let AnswerBlock::Native(json) = block else { return false };
    serde_json::from_str::<Value>(json)
        .is_ok_and(|item| item.get("type").and_then(Value::as_str) == Some(WEB_SEARCH_CALL))
}

/// The most web searches one attempt of `request` may run, summed over its
/// web search tools; 0 when it sends none. Only what [`cut`] kept is sent, so
/// under a USD budget every tool sent has its bound.
pub(super) fn bound(request: Option<&NativeRequest>) -> u64 {
    let Some(request) = request else { return 0 };
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(&request.fields_json) else { return 0 };
    fields
        .iter()
        .filter(|(name, _)| is_web_search(name))
        .filter_map(|(_, tools)| tool_bound(&request.dialect, tools))
        .fold(0, u64::saturating_add)
}

/// The bound of one tool field's definitions (a list, or one object): the sum
/// of their `max_uses`, `None` when one has none or the dialect has no bound.
fn tool_bound(dialect: &str, tools: &Value) -> Option<u64> {
    if dialect != ANTHROPIC {
        return None;
    }
    let definitions = match tools {
        Value::Array(definitions) => definitions.iter().collect(),
        definition => vec![definition],
    };
    definitions
        .into_iter()
        .try_fold(0u64, |sum, tool| tool.get("max_uses").and_then(Value::as_u64).map(|uses| sum.saturating_add(uses)))
}

fn is_web_search(field: &str) -> bool {
    field.strip_prefix(HOSTED_TOOL_FIELD).is_some_and(|tool| tool.starts_with(WEB_SEARCH))
}

/// Applies the budget's rule to the web search tools `plan` would send, when a
/// USD budget applies to the caller: on an entry without `web_search_price`
/// the call is refused (`invalid_request`, nothing sent); a tool without a
/// bound is moved to the plan's dropped tools (the caller's
/// `hosted_tools = "refuse"` then refuses the call, as for any hosted tool the
/// entry does not take).
pub(super) fn cut(target: &Target<'_>, request: &ChatRequest, plan: &mut NativePlan) -> Result<(), WeirError> {
    let Some(native) = plan.request.as_mut() else { return Ok(()) };
    let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(&native.fields_json) else { return Ok(()) };
    if !fields.keys().any(|name| is_web_search(name)) || !under_usd_budget(target, request) {
        return Ok(());
    }
    if target.model.prices.web_search.is_none() {
        return Err(WeirError::InvalidRequest(format!(
            "model `{}` declares no `web_search_price`, and a USD budget applies to the caller: its web searches \
             cannot be priced",
            target.model.id
        )));
    }
    let unbounded: Vec<String> = fields
        .iter()
        .filter(|(name, tools)| is_web_search(name) && tool_bound(&native.dialect, tools).is_none())
        .map(|(name, _)| name.clone())
        .collect();
    if unbounded.is_empty() {
        return Ok(());
    }
    for name in &unbounded {
        fields.remove(name);
        if let Some(tool) = name.strip_prefix(HOSTED_TOOL_FIELD) {
            plan.dropped.tools.push(tool.to_owned());
        }
    }
    tracing::info!(model = %target.model.id, tools = ?unbounded,
        "a web search without a bound cannot be held against the caller's USD budget: not sent");
    native.fields_json = Value::Object(fields).to_string();
    if native.fields_json == "{}" && native.betas.is_empty() {
        plan.request = None;
    }
    Ok(())
}

/// Whether a budget counted in USD applies to the call's caller.
fn under_usd_budget(target: &Target<'_>, request: &ChatRequest) -> bool {
    let Some(caller) = &request.caller else { return false };
    let book = target.weir.budgets();
    let scopes = book.applicable(caller.key_id.as_deref(), &caller.member, caller.team.as_deref());
    !scopes.is_empty() && book.counts_usd(&scopes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn own(usage: Option<Value>, blocks: &[Value]) -> NativeBlocks {
        NativeBlocks {
            dialect: "x".into(),
            blocks: blocks.iter().map(|block| AnswerBlock::Native(block.to_string())).collect(),
            content: Vec::new(),
            usage,
        }
    }

    fn request(dialect: &str, fields: Value) -> NativeRequest {
        NativeRequest { dialect: dialect.into(), fields_json: fields.to_string(), betas: Vec::new() }
    }

    #[test]
    fn anthropic_usage_and_openai_items_count_searches() {
        let anthropic = own(Some(json!({"server_tool_use": {"web_search_requests": 3}})), &[]);
        assert_eq!(count(Some(&anthropic)), Some(3));
        let search = json!({"type": "web_search_call", "id": "ws_1", "status": "completed"});
        let message = json!({"type": "message", "content": []});
        let openai = own(None, &[search.clone(), message, search]);
        assert_eq!(count(Some(&openai)), Some(2));
        assert_eq!(count(Some(&own(Some(json!({"server_tool_use": {}})), &[]))), None);
        assert_eq!(count(None), None);
    }

    #[test]
    fn the_bound_is_the_sum_of_max_uses_and_only_anthropic_has_one() {
        let tools = json!({
            "server_tools.web_search_20250305": [
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
                {"type": "web_search_20250305", "name": "other", "max_uses": 3}
            ],
            "server_tools.bash_20250124": [{"type": "bash_20250124"}],
            "top_k": 5
        });
        assert_eq!(bound(Some(&request(ANTHROPIC, tools))), 5);
        let unbounded = json!({"server_tools.web_search_20250305": [{"type": "web_search_20250305"}]});
        assert_eq!(bound(Some(&request(ANTHROPIC, unbounded))), 0);
        let openai = json!({"server_tools.web_search": [{"type": "web_search", "max_uses": 2}]});
        assert_eq!(bound(Some(&request("openai-responses", openai))), 0);
        assert_eq!(bound(None), 0);
    }

    #[test]
    fn a_tool_bound_needs_every_definition_bounded() {
        let mixed = json!([{"max_uses": 2}, {"name": "web_search"}]);
        assert_eq!(tool_bound(ANTHROPIC, &mixed), None);
        assert_eq!(tool_bound(ANTHROPIC, &json!({"max_uses": 4})), Some(4));
        assert!(is_web_search("server_tools.web_search_preview"));
        assert!(!is_web_search("server_tools.web_fetch_20250910"));
    }
}
