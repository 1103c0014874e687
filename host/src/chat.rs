//! A chat call as the library's callers see it: what they ask and what they
//! get. Answers and failures ([`crate::error::CallError`]) carry the same
//! [`Stamp`].

use std::time::{Duration, SystemTime};

use crate::caller::Caller;
pub use crate::record::CacheMultipliers;
use crate::record::{ClientFacts, Route};
use crate::types::{
    ContentBlock, Conversation, DecodedResponse, Effort, Refusal, ResponseSchema, StopReason, ToolUse, Usage,
};

/// What a truncated answer (a max-tokens stop) earns before it reaches the
/// caller. The two seeds differ here, so both rules are kept, each where its
/// seed speaks: the runtime's for the library, the gateway's for the gateway.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Truncation {
    /// One re-run at the model's output ceiling, then `output_truncated`: the
    /// runtime seed's rule, and the library's default.
    #[default]
    Escalate,
    /// An answer that has something — text, or tool calls whose arguments are
    /// whole JSON — is returned as it is (stop `max_tokens`); one that used its
    /// whole budget with nothing gets the one re-run at the ceiling, at the same
    /// effort, then `output_truncated`. The gateway seed's rule, and the
    /// gateway's default. A call with a response schema escalates as
    /// [`Truncation::Escalate`] does: a cut-off structure is no answer.
    KeepPartial,
    /// Any truncated answer is returned as it is.
    Accept,
}

/// One chat call, addressed to a catalog id.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The catalog id (never a provider's wire name).
    pub model: String,
    pub conversation: Conversation,
    /// The declared output budget; absent falls back to the catalog entry's.
    pub max_output_tokens: Option<u32>,
    /// The call's effort; absent: its key's default, else its member's, else
    /// the config's `default_effort` (see `call::effort`). It reaches the wire
    /// only as the entry declares (`reasoning`).
    pub reasoning_effort: Option<Effort>,
    /// The caller turned reasoning off (OpenAI's `reasoning_effort: "none"`,
    /// Anthropic's disabled `thinking`, `x-weir-effort: none`): no default applies.
    pub reasoning_off: bool,
    /// An explicit thinking budget (Anthropic's `budget_tokens`). It replaces the
    /// one the catalog books for `reasoning_effort` and counts inside
    /// `max_output_tokens`, as Anthropic's does inside `max_tokens`: nothing is
    /// added to the reserve for it.
    pub thinking_budget: Option<u32>,
    pub temperature: Option<f64>,
    /// Nucleus sampling as the caller asked. WIT 0.1.0's call parameters have no
    /// field for it, so it is never sent: absent or exactly 1.0 is accepted (a
    /// no-op), dropped on an entry whose sampling is fixed, and refused anywhere
    /// else (see `call::policy`).
    pub top_p: Option<f32>,
    pub stop: Vec<String>,
    pub response_schema: Option<ResponseSchema>,
    /// When the caller stops waiting. Admission fails at once if capacity cannot
    /// free up before it, instead of parking to find out; no retry waits past it;
    /// an upstream request still in flight at the deadline is cancelled.
    pub deadline: Option<tokio::time::Instant>,
    /// Transparent retries of upstream signals (429, overload, 5xx, resets) for
    /// the whole call; it may lower the catalog entry's limit (else 3), never
    /// raise it: a larger number is clamped to the entry's.
    pub max_retries: Option<u32>,
    /// Correction turns for a structured answer that does not parse or validate;
    /// lowers the catalog entry's limit (else 2), never raises it.
    pub max_corrections: Option<u32>,
    /// What an answer cut off at its output budget (stop reason max-tokens)
    /// earns: escalation (the library's default), kept when it has something
    /// (the gateway's), or accepted as it is.
    pub truncation: Truncation,
    /// Streams only: an in-band error before any output may replay the request
    /// once without streaming. `false` takes the stream's verdict as is.
    pub stream_replay: bool,
    /// Who is calling (the gateway sets it from the caller's key).
    pub caller: Option<Caller>,
    /// Which door the call came in by, for the record (default: the library).
    pub route: Route,
    /// The caller's W3C `traceparent`, continued by the call's span; only a
    /// valid one is kept (see [`crate::record::valid_traceparent`]).
    pub traceparent: Option<String>,
    /// What the route did to the caller's body before the call, by stable
    /// name (`field_dropped:context_management`, `tool_dropped:web_search`):
    /// the record's notes, ahead of the policy's.
    pub route_notes: Vec<String>,
    /// What the caller said about itself (its `metadata`, its betas), for the
    /// record only: never who the caller is, never sent upstream.
    pub client: Option<ClientFacts>,
    /// What the caller asked in a provider dialect's own terms (its betas,
    /// `context_management`, ...): sent to a provider whose component takes
    /// them (`native.support`), dropped with a note for any other.
    pub native: Option<std::sync::Arc<NativeAsk>>,
    /// What the caller's `cache-control` asked of the answer cache: it can
    /// skip the lookup or the store, never turn caching on (see [`crate::answer_cache`]).
    pub cache: CacheAsk,
}

/// A provider dialect's own request fields, as a caller on that dialect's
/// route wrote them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NativeAsk {
    /// The dialect, as `native.support` names it (`anthropic-messages`).
    pub dialect: &'static str,
    /// Top-level body fields, by name, as the caller wrote them (and
    /// `cache_control.ttl`, the longest TTL the caller asked anywhere), in the
    /// order the route's table lists them (what is dropped is named in it).
    pub fields: Vec<(String, serde_json::Value)>,
    pub betas: Vec<String>,
    /// The fields whose neutral rendering the request already carries (a
    /// custom tool, described as a function): a provider that does not take
    /// one loses nothing, so it is not named as dropped.
    pub rendered_neutrally: &'static [&'static str],
    /// `hosted_tools = "refuse"`: a hosted tool (a [`HOSTED_TOOL_FIELD`]
    /// field) the serving provider does not take refuses the call instead of
    /// being dropped.
    pub refuse_hosted_tools: bool,
}

/// The prefix of a native field carrying one hosted tool type, its value the
/// caller's definitions of that type (`server_tools.web_search_20250305`).
pub const HOSTED_TOOL_FIELD: &str = "server_tools.";

/// The native field (dialect `openai-responses`) carrying the caller's bound on
/// the calls to hosted tools in one response (OpenAI's `max_tool_calls`).
pub const MAX_TOOL_CALLS_FIELD: &str = "max_tool_calls";

/// The native field (dialect `openai-responses`) carrying a `tool_choice` that
/// forces one of the request's hosted tools: a provider that does not take it,
/// or is not sent the tool, cannot honour it, so the call is refused.
pub const HOSTED_TOOL_CHOICE_FIELD: &str = "hosted_tool_choice";

/// The native field carrying a history's own blocks, each
/// `{turn, at, block, replaces}`: the dialect's block at position `at` of
/// the neutral turn `turn`, inserted there, or in place of the neutral block
/// there when `replaces` (a text block that carries `citations`).
pub const NATIVE_BLOCKS_FIELD: &str = "native_blocks";

/// How many of `placed` (entries of [`NATIVE_BLOCKS_FIELD`]) are inserted into
/// turn `turn`, not in place of a neutral block: what a later block of that
/// turn counts past, since a turn's positions count both kinds.
pub fn inserted_into(placed: &[serde_json::Value], turn: usize) -> usize {
    let of_turn =
        |entry: &&serde_json::Value| entry.get("turn").and_then(serde_json::Value::as_u64) == Some(turn as u64);
    let inserted =
        |entry: &&serde_json::Value| entry.get("replaces").and_then(serde_json::Value::as_bool) != Some(true);
    placed.iter().filter(of_turn).filter(inserted).count()
}

/// The blocks of a provider's answer the neutral records have no case for,
/// in place (`native.decode-native`), for the route of the same dialect.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeBlocks {
    /// The dialect the native blocks are written in.
    pub dialect: String,
    /// The answer's content in the provider's order.
    pub blocks: Vec<crate::types::AnswerBlock>,
    /// The neutral blocks `blocks` points into, as decoded: a stream writes
    /// from them (its replayed deltas merge adjacent texts).
    pub content: Vec<ContentBlock>,
    /// The provider's own usage beyond the token counts, a JSON object
    /// (Anthropic's `{"server_tool_use": {...}}`).
    pub usage: Option<serde_json::Value>,
}

/// What a caller asked natively that the serving provider was not handed:
/// its record's notes (`field_dropped:NAME`, `beta_dropped:NAME`) and the
/// gateway's `x-weir-dropped-fields` / `x-weir-dropped-betas`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativeDropped {
    pub fields: Vec<String>,
    pub betas: Vec<String>,
    /// Hosted tools, by type (`x-weir-dropped-tools`, `tool_dropped:TYPE`).
    pub tools: Vec<String>,
}

impl NativeDropped {
    /// The record's notes for what was dropped.
    pub fn notes(&self) -> impl Iterator<Item = String> + '_ {
        let fields = self.fields.iter().map(|field| format!("field_dropped:{field}"));
        let betas = self.betas.iter().map(|beta| format!("beta_dropped:{beta}"));
        fields.chain(betas).chain(self.tools.iter().map(|tool| format!("tool_dropped:{tool}")))
    }
}

impl ChatRequest {
    pub fn new(model: impl Into<String>, conversation: Conversation) -> Self {
        Self {
            model: model.into(),
            conversation,
            max_output_tokens: None,
            reasoning_effort: None,
            reasoning_off: false,
            thinking_budget: None,
            temperature: None,
            top_p: None,
            stop: Vec::new(),
            response_schema: None,
            deadline: None,
            max_retries: None,
            max_corrections: None,
            truncation: Truncation::Escalate,
            stream_replay: true,
            caller: None,
            route: Route::Library,
            traceparent: None,
            route_notes: Vec::new(),
            client: None,
            native: None,
            cache: CacheAsk::Use,
        }
    }

    pub fn max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(tokens);
        self
    }

    /// Who is calling: an embedding service passes its own member id (and a
    /// `key_id` when a `[[key]]`'s model list and buckets should apply).
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = Some(caller);
        self
    }
}

/// What the caller's `cache-control` asked of the cache for its call. It can
/// only narrow what the entry does: a caller never turns caching on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheAsk {
    /// Read and store as the entry does.
    #[default]
    Use,
    /// `no-cache`: do not answer from the cache; a complete answer is still stored.
    NoRead,
    /// `no-store`: neither read nor store.
    NoStore,
}

/// What the cache did for a call: the answer's `x-weir-cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMark {
    /// Answered from the cache.
    Hit,
    /// Looked up, not found: the upstream answered.
    Miss,
    /// The caller's `cache-control` skipped the lookup.
    Bypass,
}

impl CacheMark {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Bypass => "bypass",
        }
    }
}

/// Facts every answer and every failure carries, set by the call template in one
/// place so no provider can forget them.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamp {
    /// The call's id in the ledger (and `x-weir-call-id`).
    pub call_id: String,
    /// The catalog id that served the call (what the caller named, when the
    /// call failed before it resolved), never the provider's echo.
    pub model: String,
    /// The role the caller named, when it named one.
    pub role: Option<String>,
    /// The provider key, once the model resolved to one.
    pub provider: Option<String>,
    /// The output ceiling of the last attempt's wire request.
    pub requested_max_tokens: Option<u32>,
    /// Upstream attempts made (0 when the call failed before any).
    pub attempts: u32,
    pub latency: Duration,
    pub ended_at: SystemTime,
    /// The model's cache billing multipliers from the catalog, once it resolved.
    pub cache_multipliers: Option<CacheMultipliers>,
    /// Native fields and betas the serving provider was not handed.
    pub native_dropped: NativeDropped,
    /// The entries of the caller's role passed over before the one that
    /// served (they could not be called now), in the role's order.
    pub passed_over: Vec<String>,
    /// The entry the role's fallback stood in for, when the operator's
    /// `fallback` served the call (`model` is the fallback that served).
    pub fallback_from: Option<String>,
    /// What the answer cache did (`x-weir-cache`); `None` when the entry does
    /// not cache (or the call failed before its lookup).
    pub cache: Option<CacheMark>,
    /// The answer's own blocks in place, when the provider was sent hosted
    /// tools or a history's own blocks and answered with `decode-native`.
    pub native_answer: Option<std::sync::Arc<NativeBlocks>>,
}

/// A normalized answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub raw_stop_reason: Option<String>,
    pub usage: Option<Usage>,
    pub refusal: Option<Refusal>,
    /// The model name the provider echoed, for the log.
    pub served_model: Option<String>,
    pub request_id: Option<String>,
    pub stamp: Stamp,
}

impl ChatResponse {
    /// A decoded answer with the call's stamp: how both the whole and the streamed
    /// paths hand an answer to their caller.
    pub(crate) fn stamped(answer: DecodedResponse, stamp: Stamp) -> Self {
        Self {
            content: answer.content,
            stop_reason: answer.stop_reason,
            raw_stop_reason: answer.raw_stop_reason,
            usage: answer.usage,
            refusal: answer.refusal,
            served_model: answer.served_model,
            request_id: answer.request_id,
            stamp,
        }
    }

    /// The input this answer bills, in input-token equivalents (see
    /// [`CacheMultipliers::billable_input`]); absent without usage.
    pub fn billable_input(&self) -> Option<f64> {
        Some(self.stamp.cache_multipliers?.billable_input(self.usage.as_ref()?))
    }

    /// The answer's text blocks, concatenated.
    pub fn text(&self) -> String {
        crate::types::text_of(&self.content)
    }

    /// The tool calls the model asked for, in order.
    pub fn tool_calls(&self) -> Vec<&ToolUse> {
        self.content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse(call) => Some(call),
                _ => None,
            })
            .collect()
    }
}
