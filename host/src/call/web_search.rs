//! Web searches a provider runs itself (Anthropic's `web_search` server tool,
//! OpenAI's hosted `web_search` on the Responses API) are billed per search on
//! top of the tokens, so a budget must see them before they are spent:
//!
//! ```text
//! native plan ─► cut: under a USD budget, a web search tool on an entry
//!                without `web_search_price` refuses the call (the budget
//!                cannot count it); one without a bound (Anthropic's
//!                `max_uses`, OpenAI's `max_tool_calls`) is a hosted tool
//!                this entry does not take:
//!                dropped, or refused under `hosted_tools = "refuse"`
//!   ─► hold: the worst case adds bound × price (each attempt's)
//!   ─► each answer: its searches counted ([`count`]) on its attempt record
//!   ─► the record's cost adds searches × price; the budget settles with it
//! ```
//!
//! A live stream with the provider's own pieces (`native.native-stream`)
//! counts as it goes ([`streamed`]): the own usage's count (Anthropic's
//! `server_tool_use.web_search_requests`, cumulative) and the search calls
//! among its blocks (an Anthropic `server_tool_use` named `web_search`, an
//! OpenAI `web_search_call`), the larger of the two. Only a stream that
//! reached its end has shown every search; one that broke, was cut by its
//! caller or hit its deadline may have run searches it never showed, so it
//! is charged at least its bound (note `web_searches_charged_at_bound`).
//!
//! An OpenAI web search is bounded by the request's `max_tool_calls` (which
//! the Responses route carries upstream); without it, it has no bound and is
//! cut under a USD budget.

use serde_json::{Map, Value};

use crate::catalog::ModelSpec;
use crate::chat::{ChatRequest, HOSTED_TOOL_FIELD, MAX_TOOL_CALLS_FIELD, NativeBlocks};
use crate::error::WeirError;
use crate::types::AnswerBlock;

use super::native::{Cut, Draft};
use super::target::Target;

/// The type every web search tool's name starts with, in both dialects
/// (`web_search_20250305`, `web_search`, `web_search_preview`, ...).
const WEB_SEARCH: &str = "web_search";
/// The dialect whose web search tool declares its bound as `max_uses`.
const ANTHROPIC: &str = "anthropic-messages";
/// The dialect whose hosted tool calls are bounded by `max_tool_calls`.
const OPENAI: &str = "openai-responses";
/// OpenAI's older web search tool, priced apart (`web_search_preview`,
/// `web_search_preview_2025_03_11`).
const WEB_SEARCH_PREVIEW: &str = "web_search_preview";
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

/// The web searches a provider's own usage (a live stream's `usage` piece)
/// reports: Anthropic's `server_tool_use.web_search_requests`.
pub(super) fn reported(usage_json: &str) -> Option<u64> {
    let usage: Value = serde_json::from_str(usage_json).ok()?;
    usage.pointer("/server_tool_use/web_search_requests").and_then(Value::as_u64)
}

/// The web searches one own block of a live stream shows ran: one for an
/// Anthropic `server_tool_use` named `web_search` or an OpenAI
/// `web_search_call`, none for any other.
pub(super) fn shown(block_json: &str) -> u64 {
    let Ok(block) = serde_json::from_str::<Value>(block_json) else { return 0 };
    let kind = block.get("type").and_then(Value::as_str);
    let name = block.get("name").and_then(Value::as_str);
    u64::from(kind == Some(WEB_SEARCH_CALL) || (kind == Some("server_tool_use") && name == Some(WEB_SEARCH)))
}

/// What a live stream's attempt is charged in web searches.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct StreamedSearches {
    /// The attempt record's `web_searches`.
    pub count: Option<u64>,
    /// The count is the bound, more than the stream showed.
    pub at_bound: bool,
}

/// A live stream's searches: the larger of what its own usage `reported`
/// and what its blocks `shown`, when it reached its end (`completed`); at
/// least `bound` when it did not (see the module's comment).
pub(super) fn streamed(reported: Option<u64>, shown: u64, completed: bool, bound: u64) -> StreamedSearches {
    let seen = reported.unwrap_or(0).max(shown);
    let at_bound = !completed && bound > seen;
    let count = if at_bound { bound } else { seen };
    StreamedSearches { count: Some(count).filter(|searches| *searches > 0), at_bound }
}

fn is_web_search_call(block: &AnswerBlock) -> bool {
    let AnswerBlock::Native(json) = block else { return false };
    serde_json::from_str::<Value>(json)
        .is_ok_and(|item| item.get("type").and_then(Value::as_str) == Some(WEB_SEARCH_CALL))
}

/// The most web searches one attempt of `request` may run, summed over its
/// web search tools; 0 when it sends none. Only what [`cut`] kept is sent, so
/// under a USD budget every tool sent has its bound.
pub(super) fn bound(draft: &Draft) -> u64 {
    bounds(&draft.dialect, &draft.fields).most
}

/// USD per thousand web searches of a call sending `draft`: the entry's
/// `web_search_price`, or its `web_search_preview_price` for OpenAI's
/// `web_search_preview` tool (see [`crate::record::Prices::for_searches`]).
pub(super) fn price(model: &ModelSpec, draft: Option<&Draft>) -> Option<f64> {
    let tools = || draft.into_iter().flat_map(|draft| draft.fields.keys()).filter(|name| is_web_search(name));
    let preview = tools().any(|name| is_preview(name));
    let plain = tools().any(|name| !is_preview(name));
    model.prices.for_searches(plain, preview).web_search
}

fn is_preview(field: &str) -> bool {
    field.strip_prefix(HOSTED_TOOL_FIELD).is_some_and(|tool| tool.starts_with(WEB_SEARCH_PREVIEW))
}

/// A request's web search tools against their bounds.
#[derive(Debug, PartialEq)]
struct Bounds {
    /// The most searches the bounded tools may run together.
    most: u64,
    /// The fields of the tools without a bound.
    unbounded: Vec<String>,
}

/// Anthropic bounds each web search tool by its `max_uses`; OpenAI bounds
/// every hosted tool call of a response together by the request's
/// `max_tool_calls`, so that one number bounds its web searches however many
/// web search tools the request names. Another dialect has no bound.
fn bounds(dialect: &str, fields: &Map<String, Value>) -> Bounds {
    let searches = fields.iter().filter(|(name, _)| is_web_search(name));
    let mut bounds = Bounds { most: 0, unbounded: Vec::new() };
    match dialect {
        ANTHROPIC => {
            for (name, tools) in searches {
                match max_uses(tools) {
                    Some(uses) => bounds.most = bounds.most.saturating_add(uses),
                    None => bounds.unbounded.push(name.clone()),
                }
            }
        }
        _ => {
            let names: Vec<String> = searches.map(|(name, _)| name.clone()).collect();
            let calls = fields.get(MAX_TOOL_CALLS_FIELD).and_then(Value::as_u64).filter(|_| dialect == OPENAI);
            match calls {
                Some(calls) if !names.is_empty() => bounds.most = calls,
                _ => bounds.unbounded = names,
            }
        }
    }
    bounds
}

/// The bound of one Anthropic tool field's definitions (a list, or one
/// object): the sum of their `max_uses`, `None` when one has none.
fn max_uses(tools: &Value) -> Option<u64> {
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
pub(super) fn cut(target: &Target<'_>, request: &ChatRequest, plan: &mut Cut) -> Result<(), WeirError> {
    let Some(native) = plan.draft.as_mut() else { return Ok(()) };
    if !native.fields.keys().any(|name| is_web_search(name)) || !under_usd_budget(target, request) {
        return Ok(());
    }
    if price(target.model, Some(native)).is_none() {
        return Err(WeirError::InvalidRequest(format!(
            "model `{}` declares no `web_search_price`, and a USD budget applies to the caller: its web searches \
             cannot be priced",
            target.model.id
        )));
    }
    let unbounded = bounds(&native.dialect, &native.fields).unbounded;
    if unbounded.is_empty() {
        return Ok(());
    }
    for name in &unbounded {
        native.fields.remove(name);
        if let Some(tool) = name.strip_prefix(HOSTED_TOOL_FIELD) {
            plan.dropped.tools.push(tool.to_owned());
        }
    }
    tracing::info!(model = %target.model.id, tools = ?unbounded,
        "a web search without a bound cannot be held against the caller's USD budget: not sent");
    if !native.sends() {
        plan.draft = None;
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

    fn request(dialect: &str, fields: Value) -> Draft {
        let Value::Object(fields) = fields else { unreachable!("a test's fields are an object") };
        Draft { dialect: dialect.into(), fields, betas: Vec::new() }
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
    fn a_live_stream_is_charged_what_it_showed_to_its_end_and_its_bound_otherwise() {
        let usage = json!({"server_tool_use": {"web_search_requests": 2}}).to_string();
        assert_eq!(reported(&usage), Some(2));
        assert_eq!(reported("{}"), None);
        let call = json!({"type": "server_tool_use", "name": "web_search", "input": {}}).to_string();
        assert_eq!(shown(&call), 1);
        assert_eq!(shown(&json!({"type": "server_tool_use", "name": "web_fetch"}).to_string()), 0);
        assert_eq!(shown(&json!({"type": "web_search_call", "id": "ws_1"}).to_string()), 1);
        assert_eq!(shown(&json!({"type": "web_search_tool_result"}).to_string()), 0);
        let whole = streamed(Some(2), 1, true, 5);
        assert_eq!(whole, StreamedSearches { count: Some(2), at_bound: false }, "the report, larger than the blocks");
        assert_eq!(streamed(None, 3, true, 5).count, Some(3), "the blocks, when nothing reported");
        assert_eq!(streamed(None, 0, true, 5).count, None, "no search ran");
        let cut = streamed(None, 1, false, 5);
        assert_eq!(cut, StreamedSearches { count: Some(5), at_bound: true }, "a cut stream pays its bound");
        assert_eq!(streamed(Some(7), 0, false, 5).count, Some(7), "never less than reported");
        assert_eq!(streamed(None, 1, false, 0).count, Some(1), "no bound: what it showed");
    }

    #[test]
    fn anthropics_bound_is_the_sum_of_max_uses() {
        let tools = json!({
            "server_tools.web_search_20250305": [
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
                {"type": "web_search_20250305", "name": "other", "max_uses": 3}
            ],
            "server_tools.bash_20250124": [{"type": "bash_20250124"}],
            "top_k": 5
        });
        assert_eq!(bound(&request(ANTHROPIC, tools)), 5);
        let unbounded = json!({"server_tools.web_search_20250305": [{"type": "web_search_20250305"}]});
        assert_eq!(bound(&request(ANTHROPIC, unbounded)), 0);
    }

    /// OpenAI's bound is the request's `max_tool_calls`, once for all its web
    /// search tools (two tools under a bound of 3 run at most 3 searches); a
    /// `max_uses` in an OpenAI tool is not OpenAI's and bounds nothing.
    #[test]
    fn openais_bound_is_max_tool_calls_once_for_every_web_search_tool() {
        let tools = json!({
            "server_tools.web_search": [{"type": "web_search"}],
            "server_tools.web_search_preview": [{"type": "web_search_preview"}],
            "max_tool_calls": 3
        });
        assert_eq!(bound(&request(OPENAI, tools)), 3);
        let unbounded = json!({"server_tools.web_search": [{"type": "web_search", "max_uses": 2}]});
        assert_eq!(bound(&request(OPENAI, unbounded.clone())), 0);
        let Value::Object(fields) = unbounded else { unreachable!() };
        assert_eq!(bounds(OPENAI, &fields).unbounded, ["server_tools.web_search"]);
        let no_search = json!({"server_tools.file_search": [{"type": "file_search"}], "max_tool_calls": 3});
        assert_eq!(bound(&request(OPENAI, no_search)), 0, "no web search: nothing to hold");
        let Value::Object(elsewhere) = json!({"server_tools.web_search": [{}], "max_tool_calls": 3}) else {
            unreachable!()
        };
        assert_eq!(bounds("other-dialect", &elsewhere).unbounded, ["server_tools.web_search"]);
    }

    #[test]
    fn a_tool_bound_needs_every_definition_bounded() {
        let mixed = json!([{"max_uses": 2}, {"name": "web_search"}]);
        assert_eq!(max_uses(&mixed), None);
        assert_eq!(max_uses(&json!({"max_uses": 4})), Some(4));
        assert!(is_web_search("server_tools.web_search_preview"));
        assert!(!is_web_search("server_tools.web_fetch_20250910"));
    }
}
