//! A caller's native fields ([`NativeAsk`]) against what the serving provider
//! takes of them (`native.support`, asked once per wire id): the part it
//! takes goes to `native.encode`, the rest is dropped and said so (the
//! record's notes, the stamp's [`NativeDropped`]). The provider's answer only
//! narrows what the caller sent: a component can never add a field or a beta.
//!
//! Hosted tools (`server_tools.<type>` fields) follow the same cut: one the
//! provider does not take is dropped and named as a tool (`tool_dropped:TYPE`),
//! or, under `hosted_tools = "refuse"`, refuses the call. A history's own
//! blocks (`native_blocks`) reach only a provider that takes them: for any
//! other the call is refused, except for a cited text, whose neutral text the
//! conversation already holds (its citations are then left out, as before).
//! A call that sends either has its answer decoded with its own blocks in
//! place (`native.decode-native`) when the component has that function.
//!
//! The entry's prompt cache (see [`PromptCache`]) adds one rule: a provider
//! that routes its cache by `prompt_cache_key` is sent a key scoped to the
//! caller's member (the caller's own key, if any, folded into it), so one
//! member's calls do not land on another's cache entries; `off` sends none and
//! drops the caller's. Breakpoint settings (`cache_control.ttl`) are dropped
//! where no breakpoint is rendered.

use std::sync::Arc;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::catalog::PromptCache;
use crate::chat::{
    ChatRequest, HOSTED_TOOL_CHOICE_FIELD, HOSTED_TOOL_FIELD, NATIVE_BLOCKS_FIELD, NativeAsk, NativeDropped,
};
use crate::error::WeirError;
use crate::types::{NativeRequest, NativeSupport};

use super::target::Target;

/// The most own-usage notes one record takes (see [`own_usage_notes`]).
const MAX_USAGE_NOTES: usize = 8;
/// The longest own-usage name a note takes.
const MAX_USAGE_NAME: usize = 64;

/// Any beta, in `native-support.betas`.
const ANY_BETA: &str = "*";
/// The field a provider routes its prompt cache by (OpenAI's).
const PROMPT_CACHE_KEY: &str = "prompt_cache_key";
/// The longest TTL a caller asked for its breakpoints (Anthropic's).
const CACHE_TTL: &str = "cache_control.ttl";

/// What one call sends natively, and what it drops.
#[derive(Debug, Default)]
pub(super) struct NativePlan {
    /// `None` when nothing is sent natively: the call encodes with `chat.encode`.
    pub request: Option<NativeRequest>,
    pub dropped: NativeDropped,
    /// The request carries hosted tools or a history's own blocks, so the
    /// answer is decoded with its own blocks in place.
    pub answer_native: bool,
    /// The most web searches one attempt may run (see [`super::web_search::bound`]).
    pub search_bound: u64,
    /// USD per thousand of the call's web searches (see [`super::web_search::price`]).
    pub search_price: Option<f64>,
}

/// A native request while it is planned: its fields stay a map until the plan
/// is done, so each step (the cache key, the web search cut, the checks)
/// reads and edits them without parsing them again, and they are serialized
/// once, into the [`NativeRequest`] the component is given.
#[derive(Debug)]
pub(super) struct Draft {
    pub dialect: String,
    pub fields: Map<String, Value>,
    pub betas: Vec<String>,
}

impl Draft {
    fn empty(dialect: &str) -> Self {
        Self { dialect: dialect.to_owned(), fields: Map::new(), betas: Vec::new() }
    }

    /// Whether it sends anything: a field or a beta.
    pub fn sends(&self) -> bool {
        !self.fields.is_empty() || !self.betas.is_empty()
    }

    fn into_request(self) -> NativeRequest {
        NativeRequest { dialect: self.dialect, fields_json: Value::Object(self.fields).to_string(), betas: self.betas }
    }
}

/// The caller's native ask cut to what a provider takes.
#[derive(Debug, Default)]
pub(super) struct Cut {
    /// `None` when nothing is sent natively.
    pub draft: Option<Draft>,
    pub dropped: NativeDropped,
}

/// The plan for `request`'s native fields on `target`'s provider and wire id,
/// with the prompt-cache key its entry's mode calls for.
pub(super) fn plan(target: &Target<'_>, request: &ChatRequest) -> Result<NativePlan, WeirError> {
    let mode = target.model.prompt_cache;
    if request.native.is_none() && mode == PromptCache::Off {
        return Ok(NativePlan { search_price: target.model.prices.web_search, ..NativePlan::default() });
    }
    let support = support(target)?;
    let mut cut = match request.native.as_deref() {
        Some(ask) => match withheld(ask, mode) {
            Some((kept, withheld)) => {
                let mut cut = split(&kept, support.as_deref());
                cut.dropped.fields.extend(withheld);
                cut
            }
            None => split(ask, support.as_deref()),
        },
        None => Cut::default(),
    };
    if mode != PromptCache::Off
        && let Some(support) = support.as_deref().filter(|support| takes(support, PROMPT_CACHE_KEY))
    {
        put_cache_key(&mut cut, support, member_cache_key(request));
    }
    super::web_search::cut(target, request, &mut cut)?;
    if let Some(ask) = request.native.as_deref() {
        refuse_what_cannot_go(target, ask, &mut cut)?;
    }
    let Cut { draft, dropped } = cut;
    Ok(NativePlan {
        answer_native: draft.as_ref().is_some_and(carries_own_parts) && target.provider.decodes_native(),
        search_bound: draft.as_ref().map_or(0, super::web_search::bound),
        search_price: super::web_search::price(target.model, draft.as_ref()),
        request: draft.map(Draft::into_request),
        dropped,
    })
}

/// A hosted tool dropped under `hosted_tools = "refuse"`, or a history block
/// the provider cannot take (a cited text aside: see the module's comment).
fn refuse_what_cannot_go(target: &Target<'_>, ask: &NativeAsk, plan: &mut Cut) -> Result<(), WeirError> {
    let refused = |what: String| WeirError::NativeNotTaken { model: target.model.id.clone(), what };
    if let Some(tool) = plan.dropped.tools.first().filter(|_| ask.refuse_hosted_tools) {
        return Err(refused(format!("the hosted tool `{tool}` (`hosted_tools = \"refuse\"`)")));
    }
    if let Some(forced) = unsendable_choice(ask, plan) {
        return Err(refused(format!("a `tool_choice` forcing the hosted tool `{forced}`")));
    }
    let Some(at) = plan.dropped.fields.iter().position(|field| field == NATIVE_BLOCKS_FIELD) else { return Ok(()) };
    let support = support(target)?;
    let blocks =
        ask.fields.iter().filter(|(name, _)| name == NATIVE_BLOCKS_FIELD).filter_map(|(_, value)| value.as_array());
    // A cited text's neutral text goes anyway; any other block would be lost.
    let lost: Vec<&Value> =
        blocks.flatten().filter(|placed| placed.get("replaces").and_then(Value::as_bool) != Some(true)).collect();
    // Named: the first the provider does not read (the first lost, when a
    // cited text it does not read took the others with it).
    let unread = |placed: &Value| !support.as_deref().is_some_and(|support| reads(support, placed));
    if let Some(placed) = lost.iter().copied().find(|placed| unread(placed)).or(lost.first().copied()) {
        let kind = block_type(placed);
        return Err(refused(format!("the history's `{kind}` block, which only its own provider reads,")));
    }
    plan.dropped.fields.remove(at);
    Ok(())
}

/// The hosted tool a `tool_choice` forces (`HOSTED_TOOL_CHOICE_FIELD`) when
/// the plan does not send both the choice and that tool: the provider cannot
/// be made to use it (or the budget's cut left it out), and a call sent with
/// the choice silently gone would not be the one asked for.
fn unsendable_choice(ask: &NativeAsk, plan: &Cut) -> Option<String> {
    let (_, choice) = ask.fields.iter().find(|(name, _)| name == HOSTED_TOOL_CHOICE_FIELD)?;
    let forced = choice.get("type").and_then(serde_json::Value::as_str).unwrap_or("unknown").to_owned();
    let Some(sent) = plan.draft.as_ref().map(|draft| &draft.fields) else { return Some(forced) };
    let taken =
        sent.contains_key(HOSTED_TOOL_CHOICE_FIELD) && sent.contains_key(&format!("{HOSTED_TOOL_FIELD}{forced}"));
    (!taken).then_some(forced)
}

/// The record's notes for the provider's own usage counts beside the tokens,
/// one per number: `server_tool_use.web_search_requests=2` (web searches are
/// also counted on the attempt's record and priced: see
/// [`super::web_search`]). A component's answer
/// is not trusted to be small: at most [`MAX_USAGE_NOTES`] notes, each name
/// at most [`MAX_USAGE_NAME`] characters.
pub(super) fn own_usage_notes(own: Option<&crate::chat::NativeBlocks>) -> Vec<String> {
    let Some(serde_json::Value::Object(usage)) = own.and_then(|own| own.usage.as_ref()) else { return Vec::new() };
    let mut notes = Vec::new();
    for (group, counts) in usage {
        let Some(counts) = counts.as_object() else { continue };
        for (name, count) in counts {
            let named = group.chars().count() + name.chars().count() <= MAX_USAGE_NAME;
            if let Some(count) = count.as_u64().filter(|_| named && notes.len() < MAX_USAGE_NOTES) {
                notes.push(format!("{group}.{name}={count}"));
            }
        }
    }
    notes
}

/// Whether a native request sends hosted tools or a history's own blocks.
fn carries_own_parts(draft: &Draft) -> bool {
    draft.fields.keys().any(|name| name.starts_with(HOSTED_TOOL_FIELD) || name == NATIVE_BLOCKS_FIELD)
}

/// `ask` without the cache fields `mode` does not send, and their names;
/// `None` when it sends every one `ask` has (no copy is made then).
fn withheld(ask: &NativeAsk, mode: PromptCache) -> Option<(NativeAsk, Vec<String>)> {
    let withholds = |name: &str| match mode {
        PromptCache::Off => name == PROMPT_CACHE_KEY || name == CACHE_TTL,
        PromptCache::Member => name == CACHE_TTL,
        PromptCache::Shared => false,
    };
    if !ask.fields.iter().any(|(name, _)| withholds(name)) {
        return None;
    }
    let (dropped, fields): (Vec<_>, Vec<_>) = ask.fields.iter().cloned().partition(|(name, _)| withholds(name));
    let kept = NativeAsk { fields, ..ask.clone() };
    Some((kept, dropped.into_iter().map(|(name, _)| name).collect()))
}

fn takes(support: &NativeSupport, field: &str) -> bool {
    support.fields.iter().any(|taken| taken == field)
}

/// The type of the first of a history's own blocks (the `native_blocks`
/// field's value) `support` does not take: it takes every type when it lists
/// `native_blocks`, and one type when it lists `native_blocks.<type>` (Vertex
/// AI reads back a web search's blocks and no other provider's own).
fn block_not_taken(support: &NativeSupport, blocks: &Value) -> Option<String> {
    if takes(support, NATIVE_BLOCKS_FIELD) {
        return None;
    }
    let Some(blocks) = blocks.as_array() else { return Some("unknown".to_owned()) };
    blocks.iter().find(|placed| !reads(support, placed)).map(|placed| block_type(placed).to_owned())
}

/// Whether `support` reads one placed history block: every type
/// (`native_blocks`) or its type (`native_blocks.<type>`).
fn reads(support: &NativeSupport, placed: &Value) -> bool {
    takes(support, NATIVE_BLOCKS_FIELD) || takes(support, &format!("{NATIVE_BLOCKS_FIELD}.{}", block_type(placed)))
}

fn block_type(placed: &Value) -> &str {
    placed.pointer("/block/type").and_then(Value::as_str).unwrap_or("unknown")
}

/// A key no two members share: the member (none for a library call) and the
/// caller's own `prompt_cache_key` (or none), hashed, so a caller can pick
/// which of its own conversations share a cache and never land on another
/// member's. A caller's key never reaches the provider as written.
fn member_cache_key(request: &ChatRequest) -> String {
    let member = request.caller.as_ref().map_or("", |caller| caller.member.as_str());
    let own = request
        .native
        .as_deref()
        .and_then(|ask| ask.fields.iter().find(|(name, _)| name == PROMPT_CACHE_KEY))
        .map(|(_, value)| value.as_str().map_or_else(|| value.to_string(), str::to_owned))
        .unwrap_or_default();
    let mut hasher = Sha256::new();
    for part in ["weir prompt cache", member, &own] {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part.as_bytes());
    }
    format!("weir-{}", &hex::encode(hasher.finalize())[..32])
}

/// `key` as the request's `prompt_cache_key`, in `support`'s dialect: the
/// caller's own (already cut to what the provider takes) is replaced.
fn put_cache_key(cut: &mut Cut, support: &NativeSupport, key: String) {
    let draft = cut.draft.get_or_insert_with(|| Draft::empty(&support.dialect));
    draft.fields.insert(PROMPT_CACHE_KEY.to_owned(), Value::String(key));
}

/// What `target`'s provider takes natively for its wire id (asked once and
/// kept with the component; see `Provider::native_support`).
pub(super) fn support(target: &Target<'_>) -> Result<Option<Arc<NativeSupport>>, WeirError> {
    let support = target.provider.native_support(&target.model.wire_id);
    support.map_err(|source| WeirError::Plugin { model: target.model.id.clone(), source })
}

/// Cuts `ask` to what `support` takes (nothing when it is another dialect's).
pub(super) fn split(ask: &NativeAsk, support: Option<&NativeSupport>) -> Cut {
    let support = support.filter(|support| support.dialect == ask.dialect);
    let takes_field = |name: &str, value: &Value| {
        support.is_some_and(|support| match name {
            NATIVE_BLOCKS_FIELD => block_not_taken(support, value).is_none(),
            _ => support.fields.iter().any(|field| field == name),
        })
    };
    let takes_beta =
        |name: &str| support.is_some_and(|support| support.betas.iter().any(|beta| beta == ANY_BETA || beta == name));
    let mut fields = Map::new();
    let mut dropped = NativeDropped::default();
    for (name, value) in &ask.fields {
        match takes_field(name, value) {
            true => drop(fields.insert(name.clone(), value.clone())),
            false if ask.rendered_neutrally.contains(&name.as_str()) => {}
            false => match name.strip_prefix(HOSTED_TOOL_FIELD) {
                Some(tool) => dropped.tools.push(tool.to_owned()),
                None => dropped.fields.push(name.clone()),
            },
        }
    }
    let (betas, dropped_betas): (Vec<String>, Vec<String>) =
        ask.betas.iter().cloned().partition(|beta| takes_beta(beta));
    dropped.betas = dropped_betas;
    let draft = Draft { dialect: ask.dialect.to_owned(), fields, betas };
    Cut { draft: draft.sends().then_some(draft), dropped }
}

/// [`split`] for a request sent as it is (a token count): the fields the
/// provider takes as one [`NativeRequest`] (empty when it takes none), and
/// what it leaves out.
pub(super) fn split_request(ask: &NativeAsk, support: &NativeSupport) -> (NativeRequest, NativeDropped) {
    let Cut { draft, dropped } = split(ask, Some(support));
    (draft.unwrap_or_else(|| Draft::empty(ask.dialect)).into_request(), dropped)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ask() -> NativeAsk {
        let fields = [("top_k", json!(5)), ("context_management", json!({"edits": []})), ("container", json!("c1"))];
        NativeAsk {
            dialect: "anthropic-messages",
            fields: fields.into_iter().map(|(name, value)| (name.to_owned(), value)).collect(),
            betas: vec!["context-management-2025-06-27".into(), "claude-code-20250219".into()],
            rendered_neutrally: &[],
            refuse_hosted_tools: false,
        }
    }

    fn support(fields: &[&str], betas: &[&str]) -> NativeSupport {
        NativeSupport {
            dialect: "anthropic-messages".into(),
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
            betas: betas.iter().map(|b| (*b).to_owned()).collect(),
            count_tokens: false,
        }
    }

    #[test]
    fn what_the_provider_takes_is_sent_and_the_rest_dropped() {
        let plan = split(&ask(), Some(&support(&["top_k", "context_management"], &["context-management-2025-06-27"])));
        let request = plan.draft.unwrap();
        assert_eq!(Value::Object(request.fields), json!({"top_k": 5, "context_management": {"edits": []}}));
        assert_eq!(request.betas, ["context-management-2025-06-27"]);
        assert_eq!(plan.dropped.fields, ["container"]);
        assert_eq!(plan.dropped.betas, ["claude-code-20250219"]);
        let notes: Vec<String> = plan.dropped.notes().collect();
        assert_eq!(notes, ["field_dropped:container", "beta_dropped:claude-code-20250219"]);
    }

    #[test]
    fn any_beta_passes_every_beta_the_caller_named() {
        let plan = split(&ask(), Some(&support(&[], &["*"])));
        assert_eq!(plan.draft.unwrap().betas, ["context-management-2025-06-27", "claude-code-20250219"]);
        assert_eq!(plan.dropped.fields.len(), 3);
    }

    #[test]
    fn another_dialect_or_no_support_drops_everything_and_sends_nothing_natively() {
        let mut other = support(&["top_k"], &["*"]);
        other.dialect = "openai-responses".into();
        for support in [None, Some(&other)] {
            let plan = split(&ask(), support);
            assert!(plan.draft.is_none());
            assert_eq!(plan.dropped.fields.len(), 3);
            assert_eq!(plan.dropped.betas.len(), 2);
        }
    }

    #[test]
    fn a_field_rendered_neutrally_is_not_named_as_dropped() {
        let ask = NativeAsk {
            dialect: "openai-responses",
            fields: vec![
                ("custom_tools".into(), json!([{"name": "apply_patch"}])),
                ("prompt_cache_key".into(), json!("k")),
            ],
            betas: Vec::new(),
            rendered_neutrally: &["custom_tools"],
            refuse_hosted_tools: false,
        };
        let plan = split(&ask, None);
        assert!(plan.draft.is_none());
        assert_eq!(plan.dropped.fields, ["prompt_cache_key"], "the custom tool went as a function");
    }

    #[test]
    fn a_provider_answer_cannot_add_what_the_caller_did_not_ask() {
        let ask = NativeAsk { dialect: "anthropic-messages", ..NativeAsk::default() };
        let plan = split(&ask, Some(&support(&["top_k", "mcp_servers"], &["*"])));
        assert!(plan.draft.is_none(), "nothing asked, nothing sent natively");
        assert_eq!(plan.dropped, NativeDropped::default());
    }

    #[test]
    fn a_hosted_tool_not_taken_is_dropped_as_a_tool_and_taken_one_is_sent() {
        let ask = NativeAsk {
            dialect: "anthropic-messages",
            fields: vec![
                ("server_tools.web_search_20250305".into(), json!([{"type": "web_search_20250305"}])),
                ("server_tools.bash_20250124".into(), json!([{"type": "bash_20250124"}])),
            ],
            ..NativeAsk::default()
        };
        let plan = split(&ask, Some(&support(&["server_tools.web_search_20250305"], &[])));
        let fields = Value::Object(plan.draft.unwrap().fields);
        assert_eq!(fields, json!({"server_tools.web_search_20250305": [{"type": "web_search_20250305"}]}));
        assert_eq!(plan.dropped.tools, ["bash_20250124"]);
        assert!(plan.dropped.fields.is_empty());
        assert_eq!(plan.dropped.notes().collect::<Vec<_>>(), ["tool_dropped:bash_20250124"]);
    }

    #[test]
    fn history_blocks_go_where_every_type_or_each_of_their_types_is_taken() {
        let placed = |kind: &str| json!({"turn": 1, "at": 0, "block": {"type": kind}});
        let ask = |kinds: &[&str]| NativeAsk {
            dialect: "anthropic-messages",
            fields: vec![(NATIVE_BLOCKS_FIELD.into(), Value::Array(kinds.iter().map(|kind| placed(kind)).collect()))],
            ..NativeAsk::default()
        };
        let search = ["server_tool_use", "web_search_tool_result"];
        let typed = support(&["native_blocks.server_tool_use", "native_blocks.web_search_tool_result"], &[]);
        assert!(split(&ask(&search), Some(&typed)).draft.is_some(), "each type is taken");
        let mixed = split(&ask(&["server_tool_use", "code_execution_tool_result"]), Some(&typed));
        assert!(mixed.draft.is_none(), "one type not taken keeps every block back");
        assert_eq!(mixed.dropped.fields, [NATIVE_BLOCKS_FIELD]);
        assert_eq!(block_not_taken(&typed, &ask(&["x"]).fields[0].1).as_deref(), Some("x"));
        let every = support(&[NATIVE_BLOCKS_FIELD], &[]);
        assert!(split(&ask(&["code_execution_tool_result"]), Some(&every)).draft.is_some());
    }

    #[test]
    fn own_usage_becomes_bounded_notes() {
        let own = |usage: serde_json::Value| crate::chat::NativeBlocks {
            dialect: "anthropic-messages".into(),
            blocks: Vec::new(),
            content: Vec::new(),
            usage: Some(usage),
        };
        let notes = own_usage_notes(Some(&own(json!({"server_tool_use": {"web_search_requests": 2, "note": "x"}}))));
        assert_eq!(notes, ["server_tool_use.web_search_requests=2"]);
        let many: serde_json::Map<String, serde_json::Value> = (0..20).map(|n| (format!("k{n}"), json!(n))).collect();
        assert_eq!(own_usage_notes(Some(&own(json!({"g": many})))).len(), MAX_USAGE_NOTES);
        let long = "x".repeat(80);
        assert!(own_usage_notes(Some(&own(json!({"g": {long: 1}})))).is_empty());
        assert!(own_usage_notes(None).is_empty());
    }
}
