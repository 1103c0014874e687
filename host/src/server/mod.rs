//! The HTTP gateway: a thin axum layer over [`Weir`]. Routes parse a dialect,
//! call the library, and answer in the same dialect.
//!
//! - `POST /v1/chat/completions` — OpenAI Chat Completions, whole or streamed (SSE)
//! - `POST /v1/messages` — the Anthropic Messages API, whole or streamed (SSE);
//!   `POST /v1/messages/count_tokens` — Weir's estimate of its input tokens
//! - `POST /v1/responses` — the OpenAI Responses API, whole or streamed (typed SSE events);
//!   `GET` / `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items` — stored responses
//! - `POST /v1/embeddings` — OpenAI embeddings; `POST /v1/rerank` — the Cohere / Jina rerank shape
//! - `GET /v1/models` — the catalog, with each model's provider facts
//! - `GET /v1/providers` — loaded providers and rejected component files
//! - `GET /v1/usage` — the ledger's sums of calls, tokens and cost (`admin`)
//! - `GET /health`
//! - `/admin/v1/...` — the admin plane: keys, member and team budgets, the audit, the ledger's
//!   calls (`admin` keys; see `admin`, `calls`)
//! - `/console` — the operator's pages, signed in with an `admin` key or by single sign-on
//!   (`[console.oidc]`; see `console`); the operator's routes again under `/console/api`, for
//!   the console's session
//! - `GET /metrics` — the Prometheus exposition (`admin` keys; see [`serve_metrics`]; absent
//!   under `[metrics] enabled = false`)
//!
//! With `[[key]]`s configured every route but `/health` needs a caller key,
//! checked on the request's head ([`auth`]); the operator's details need an
//! `admin` one.
//!
//! Any catalog model answers in either dialect: a dialect module maps its body to
//! a [`crate::chat::ChatRequest`] and the answer back; the provider behind is the
//! catalog's. Per-request knobs ride in headers, so unmodified clients can set them:
//! `x-weir-deadline-ms`, `x-weir-max-retries`, `x-weir-max-corrections` (these two
//! lower the entry's limits, never raise them: the operator pays),
//! `x-weir-accept-truncated: true`, `x-weir-stream-replay: false`. Every answer
//! and error (a stream's: as of its first output) carries the stamp as
//! `x-weir-model`, `x-weir-provider`, `x-weir-attempts`, `x-weir-max-tokens`,
//! `x-weir-latency-ms` (and `x-weir-role`, `x-weir-passed-over`, `x-weir-fallback-from` when
//! they apply).

mod admin;
mod anthropic;
mod auth;
mod calls;
mod console;
mod decisions;
mod edge;
mod error;
mod metrics;
mod openai;
mod responses;
mod retrieval;
mod sampling;
mod sse;
mod stored;
mod usage;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

pub use admin::watch as watch_admin;
use auth::Authenticated;
pub use edge::Stopped;
pub use error::ApiError;
pub use metrics::serve_metrics;

use crate::Weir;
use crate::chat::{ChatRequest, Stamp, Truncation};
use crate::record::Route;

/// The gateway's routes over a configured [`Weir`]. Served alone (without
/// [`serve`]'s edge), they authenticate each request themselves; none of the
/// edge's limits apply.
pub fn router(weir: Weir) -> Router {
    let operator = operator_routes(&weir);
    let routes = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/responses", post(responses_create))
        .route("/v1/responses/{id}", get(stored::retrieve).delete(stored::delete))
        .route("/v1/responses/{id}/input_items", get(stored::input_items))
        .route("/v1/embeddings", post(retrieval::embeddings))
        .route("/v1/rerank", post(retrieval::rerank))
        .route("/v1/decisions", post(decisions::decisions))
        .route("/health", get(health))
        .route("/console", get(console::index))
        .route("/console/console.js", get(console::script))
        .route("/console/console.css", get(console::style))
        .route("/console/session", get(console::current).post(console::sign_in).delete(console::sign_out))
        .route("/console/sign-in", get(console::sign_in_methods))
        .route("/console/oidc/login", get(console::sign_on_start))
        .route(crate::config::OIDC_CALLBACK_PATH, get(console::sign_on_callback))
        // The console's page calls the operator's routes with its session (see `console`).
        .nest("/console/api", operator.clone())
        .merge(operator);
    // Served behind the edge, every request arrives authenticated; served
    // without it, this authenticates each one (see `auth`).
    routes
        .layer(axum::middleware::from_fn_with_state(weir.clone(), auth::layer))
        .layer(axum::middleware::from_fn(console::secure_headers))
        .with_state(weir)
}

/// The operator's routes: what callers with an `admin` key read and change,
/// also served to the console under `/console/api`.
fn operator_routes(weir: &Weir) -> Router<Weir> {
    let routes = Router::new()
        .route("/v1/models", get(models))
        .route("/v1/providers", get(providers))
        .route("/v1/usage", get(usage::usage))
        .route("/admin/v1/keys", get(admin::list_keys).post(admin::create_key))
        .route("/admin/v1/keys/{id}", get(admin::get_key).post(admin::update_key))
        .route("/admin/v1/keys/{id}/{action}", post(admin::key_action))
        .route("/admin/v1/budgets", get(admin::budgets))
        .route("/admin/v1/changes", get(admin::changes))
        .route("/admin/v1/calls", get(calls::search))
        .route("/admin/v1/calls/{id}", get(calls::detail))
        .route("/admin/v1/{kind}", get(admin::list_scopes))
        .route("/admin/v1/{kind}/{name}", post(admin::put_scope).delete(admin::delete_scope));
    // Under `[metrics] enabled = false` there is nothing to expose: 404, as for any unknown path.
    if weir.metrics().is_some() { routes.route("/metrics", get(metrics::for_admin)) } else { routes }
}

/// Serves the gateway on `listener` behind its edge (client timeouts, head and
/// body limits, origin, host, key and content-type checks on the head,
/// connection and call caps; see `edge`) until
/// SIGTERM or ctrl-c, then drains for at most `[server] drain_secs`.
///
/// The caller's runtime only accepts: each connection is served, to its end,
/// on one of `serve`'s own threads (one per core, each running a
/// single-threaded runtime), whose calls use an upstream pool of their own.
/// `serve` stops them before it returns, waiting up to 2 s for each to drop
/// the connections it still holds.
pub async fn serve(weir: Weir, listener: tokio::net::TcpListener) -> std::io::Result<Stopped> {
    edge::serve(weir, listener).await
}

/// `x-weir-passed-over`: the entries of the caller's role passed over before
/// the one that served, because they could not be called now (absent when
/// none was): a role's substitution is never silent.
const PASSED_OVER_HEADER: &str = "x-weir-passed-over";
/// `x-weir-fallback-from`: the entry the role's fallback stood in for (the
/// operator's `fallback`); `x-weir-model` names the fallback that served.
const FALLBACK_FROM_HEADER: &str = "x-weir-fallback-from";

/// `x-weir-cache`: what the answer cache did for the call (`hit`, `miss`, or
/// `bypass` when the caller's `cache-control` skipped the lookup); absent
/// when the entry does not cache.
const CACHE_HEADER: &str = "x-weir-cache";

/// `x-weir-call-id`: the call's record in the ledger, on every answer and error.
const CALL_ID_HEADER: &str = "x-weir-call-id";

/// `x-weir-effort`: the call's effort, over the body's and every default.
const EFFORT_HEADER: &str = "x-weir-effort";

/// `x-weir-deadline-ms`: how long the caller will wait, in milliseconds.
const DEADLINE_HEADER: &str = "x-weir-deadline-ms";

async fn chat_completions(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = caller.caller()?;
    let openai::Ingress { mut request, stream } = openai::into_chat_request(&body)?;
    request.caller = caller;
    request.route = Route::OpenaiChat;
    apply_knobs(&mut request, &headers)?;
    if let Some(options) = stream {
        let stream = weir.chat_stream(request).await?;
        let writer = openai::ChunkWriter::new(stream.stamp(), options.include_usage);
        return Ok(sse::sse_response(stream, writer));
    }
    let response = weir.chat(request).await?;
    let mut answer = axum::Json(openai::completion_body(&response)).into_response();
    stamp_headers(answer.headers_mut(), &response.stamp);
    Ok(answer)
}

/// The Messages API (also as `/v1/messages?beta=true`, as Claude Code calls
/// it: the query is not read). `x-api-key` is the caller's gateway key when
/// the gateway has keys; `anthropic-version` is accepted and not required (the
/// gateway holds the provider credentials); `anthropic-beta` is recorded and
/// carried as native betas (see `anthropic::take_betas`). Fields, betas and
/// hosted tools the request carries that the serving provider was not handed
/// are named in `x-weir-dropped-fields`, `x-weir-dropped-betas` and
/// `x-weir-dropped-tools`. An answer with the provider's own blocks (server
/// tools) is written with them in place, whole or as a replayed stream.
async fn messages(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, anthropic::AnthropicError> {
    let caller = caller.caller()?;
    let ingress = anthropic::into_chat_request(&body, weir.config().hosted_tools, anthropic::Purpose::Call)?;
    let anthropic::Ingress { mut request, stream, omit_thinking, dropped_fields } = ingress;
    request.caller = caller;
    request.route = Route::AnthropicMessages;
    anthropic::take_betas(&mut request, &headers);
    apply_knobs(&mut request, &headers)?;
    let stop = request.stop.clone();
    let (mut answer, native_dropped) = if stream {
        let stream = weir.chat_stream(request).await?;
        let native_dropped = stream.stamp().native_dropped.clone();
        // An answer with the provider's own blocks was taken whole: it is
        // written block by block in the provider's order.
        let answer = match anthropic::OwnBlockEvents::for_stamp(stream.stamp(), stop.clone(), omit_thinking) {
            Some(writer) => sse::sse_response(stream, writer),
            None => {
                let writer = anthropic::Events::new(stream.stamp(), stop, omit_thinking);
                sse::sse_response(stream, writer)
            }
        };
        (answer, native_dropped)
    } else {
        let response = weir.chat(request).await?;
        let mut answer = axum::Json(anthropic::message_body(&response, &stop, omit_thinking)).into_response();
        stamp_headers(answer.headers_mut(), &response.stamp);
        (answer, response.stamp.native_dropped)
    };
    let dropped = Dropped { fields: &dropped_fields, tools: &[], native: &native_dropped };
    dropped.headers(answer.headers_mut());
    Ok(answer)
}

/// `x-weir-token-count` on a `count_tokens` answer: `provider` when the
/// provider counted, `estimate` when the number is Weir's own.
const TOKEN_COUNT_HEADER: &str = "x-weir-token-count";

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`. The body is read
/// as a call's (without `max_tokens`), betas included, and the model is
/// resolved as the call's would be — the key's model list, `model_choice`, an
/// unknown name — with the same errors. An entry whose provider counts (its
/// component's `native.support`: Anthropic's direct API) is asked, and the
/// answer is marked `x-weir-token-count: provider`; any other answers Weir's
/// own estimate of the input (the one its budget hold and admission use),
/// marked `estimate`, as does a provider count that failed. Nothing is
/// recorded and nothing is spent.
async fn count_tokens(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, anthropic::AnthropicError> {
    let caller = caller.caller()?;
    let ingress = anthropic::into_chat_request(&body, weir.config().hosted_tools, anthropic::Purpose::Count)?;
    let mut request = ingress.request;
    request.caller = caller;
    request.route = Route::AnthropicMessages;
    anthropic::take_betas(&mut request, &headers);
    request.native.get_or_insert_with(|| {
        std::sync::Arc::new(crate::NativeAsk { dialect: anthropic::DIALECT, ..crate::NativeAsk::default() })
    });
    let count = weir.count_input_tokens(&request).await.map_err(ApiError::from)?;
    let mut answer = axum::Json(json!({"input_tokens": count.tokens})).into_response();
    let headers = answer.headers_mut();
    let counted_by = match count.counted_by {
        crate::CountedBy::Provider => "provider",
        crate::CountedBy::Estimate => "estimate",
    };
    headers.insert(TOKEN_COUNT_HEADER, HeaderValue::from_static(counted_by));
    if let Ok(model) = HeaderValue::from_str(&count.model) {
        headers.insert("x-weir-model", model);
    }
    Dropped { fields: &ingress.dropped_fields, tools: &[], native: &count.native_dropped }.headers(headers);
    Ok(answer)
}

/// What a request asked for that the provider was not handed: fields and
/// hosted tools the route never sends, and the native fields and betas the
/// serving provider does not take.
struct Dropped<'a> {
    fields: &'a [&'static str],
    tools: &'a [String],
    native: &'a crate::NativeDropped,
}

impl Dropped<'_> {
    /// `x-weir-dropped-fields`, `x-weir-dropped-betas` and
    /// `x-weir-dropped-tools`, comma-separated; each absent when nothing was.
    fn headers(&self, headers: &mut HeaderMap) {
        let fields: Vec<&str> =
            self.fields.iter().copied().chain(self.native.fields.iter().map(String::as_str)).collect();
        let lists = [
            ("x-weir-dropped-fields", fields.join(", ")),
            ("x-weir-dropped-betas", self.native.betas.join(", ")),
            (
                "x-weir-dropped-tools",
                self.tools.iter().chain(&self.native.tools).cloned().collect::<Vec<_>>().join(", "),
            ),
        ];
        for (name, list) in lists {
            if let Some(value) = Some(list).filter(|list| !list.is_empty()).and_then(|v| HeaderValue::from_str(&v).ok())
            {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
    }
}

/// The Responses API. A continuation's stored items come first
/// (`previous_response_id`); sealed reasoning in the input is opened for the
/// entry the model resolves to (so it needs resolving first); hosted tools go
/// to a provider that runs them (its items answered in place, whole or as a
/// replayed stream) and are dropped, or refused under `hosted_tools =
/// "refuse"` (as on `/v1/messages`), for any other, before any upstream call; `store: true` keeps the answer (see `stored`).
async fn responses_create(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = caller.caller()?;
    let mut body = responses::Body::parse(&body)?;
    // What storing needs is copied only when the response will be stored
    // (Codex sends `store: false` with tens of KiB of input every turn).
    let keep = body.asks_to_store() && weir.stored_responses().is_some();
    let own_input = if keep { body.input() } else { Value::Null };
    let before = match body.previous_response_id() {
        Some(id) => stored::previous_context(&weir, caller.as_ref(), id).await?,
        None => Vec::new(),
    };
    let kept_before = if keep { before.clone() } else { Vec::new() };
    if !before.is_empty() {
        body.continue_from(before);
    }
    let entry = match body.carries_sealed_reasoning() {
        true => Some(weir.resolve(body.model(), caller.clone()).await.map_err(ApiError::from)?),
        false => None,
    };
    let unseal = entry.as_deref().map(|entry| responses::Unseal { seal: weir.reasoning_seal(), entry });
    let responses::Ingress { mut request, stream, mut echo, names } =
        responses::into_chat_request(body, unseal, weir.config().hosted_tools)?;
    echo.store = keep;
    request.caller = caller.clone();
    request.route = Route::Responses;
    apply_knobs(&mut request, &headers)?;
    let seal = weir.reasoning_seal().clone();
    let kept = move |response: Value| stored::Kept { response, input: own_input, before: kept_before };
    let (mut answer, native_dropped) = if stream {
        let stream = weir.chat_stream(request).await?;
        let native_dropped = stream.stamp().native_dropped.clone();
        let answer = responses::Answer::new(stream.stamp(), echo, names, seal);
        let mut events = responses::Events::new(answer).replaying(stream.stamp());
        if keep {
            let weir = weir.clone();
            events = events.on_end(move |response| {
                let kept = kept(response);
                tokio::spawn(async move { stored::keep(&weir, caller.as_ref(), kept).await });
            });
        }
        (sse::sse_response(stream, events), native_dropped)
    } else {
        let response = weir.chat(request).await?;
        let answer = responses::Answer::new(&response.stamp, echo, names, seal);
        let output = responses::output(&response, &answer);
        let body = responses::response_body(&response, &answer, &output);
        // Only a stored response is built as a `Value` (what the store keeps).
        let mut answer = if keep {
            let mut body = body.to_value();
            if !stored::keep(&weir, caller.as_ref(), kept(body.clone())).await {
                body["store"] = json!(false);
            }
            axum::Json(body).into_response()
        } else {
            axum::Json(body).into_response()
        };
        stamp_headers(answer.headers_mut(), &response.stamp);
        (answer, response.stamp.native_dropped)
    };
    Dropped { fields: &[], tools: &[], native: &native_dropped }.headers(answer.headers_mut());
    Ok(answer)
}

/// The caller's W3C `traceparent`, when it sent a valid one.
fn traceparent(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("traceparent")?.to_str().ok()?.trim();
    crate::record::valid_traceparent(value).then(|| value.to_owned())
}

/// The `x-weir-*` request headers, the same for every dialect.
fn apply_knobs(request: &mut ChatRequest, headers: &HeaderMap) -> Result<(), ApiError> {
    request.deadline = deadline(headers)?;
    request.max_retries = number_header(headers, "x-weir-max-retries")?;
    request.max_corrections = number_header(headers, "x-weir-max-corrections")?;
    request.truncation = truncation(headers)?;
    request.stream_replay = headers.get("x-weir-stream-replay").is_none_or(|value| value != "false");
    apply_effort(request, headers)?;
    request.traceparent = traceparent(headers);
    request.cache = cache_ask(headers);
    Ok(())
}

/// `cache-control` on a request: `no-store` skips the answer cache's lookup
/// and its store, `no-cache` only the lookup (a complete answer is still
/// stored); anything else (`max-age`, `private`, ...) is not read. A caller
/// can only narrow what the entry does: nothing here turns caching on.
fn cache_ask(headers: &HeaderMap) -> crate::answer_cache::CacheAsk {
    use crate::answer_cache::CacheAsk;
    let directives = headers
        .get_all("cache-control")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|directive| directive.trim().to_ascii_lowercase());
    let mut ask = CacheAsk::Use;
    for directive in directives {
        match directive.as_str() {
            "no-store" => return CacheAsk::NoStore,
            "no-cache" => ask = CacheAsk::NoRead,
            _ => {}
        }
    }
    ask
}

/// `x-weir-effort`: the call's effort (`minimal` … `max`), or `none` to turn
/// reasoning off; it overrides the body's.
fn apply_effort(request: &mut ChatRequest, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(EFFORT_HEADER) else { return Ok(()) };
    let word = value.to_str().unwrap_or_default().trim();
    if word == "none" {
        request.reasoning_off = true;
        request.reasoning_effort = None;
        return Ok(());
    }
    let effort = crate::types::effort_from_word(word).ok_or_else(|| {
        ApiError::invalid_request(format!("`{EFFORT_HEADER}` must be none, minimal, low, medium, high or max"))
    })?;
    request.reasoning_effort = Some(effort);
    request.reasoning_off = false;
    Ok(())
}

/// The stamp as response headers, on answers and errors alike.
fn stamp_headers(headers: &mut HeaderMap, stamp: &Stamp) {
    let values = [
        (CALL_ID_HEADER, Some(stamp.call_id.clone())),
        ("x-weir-model", Some(stamp.model.clone())),
        ("x-weir-role", stamp.role.clone()),
        ("x-weir-provider", stamp.provider.clone()),
        ("x-weir-attempts", Some(stamp.attempts.to_string())),
        ("x-weir-max-tokens", stamp.requested_max_tokens.map(|n| n.to_string())),
        ("x-weir-latency-ms", Some(stamp.latency.as_millis().to_string())),
        (PASSED_OVER_HEADER, (!stamp.passed_over.is_empty()).then(|| stamp.passed_over.join(", "))),
        (FALLBACK_FROM_HEADER, stamp.fallback_from.clone()),
        (CACHE_HEADER, stamp.cache.map(|mark| mark.as_str().to_owned())),
    ];
    for (name, value) in values {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

/// An optional number header; anything but a non-negative integer is the
/// caller's error.
fn number_header<T: std::str::FromStr>(headers: &HeaderMap, name: &str) -> Result<Option<T>, ApiError> {
    let Some(value) = headers.get(name) else { return Ok(None) };
    value
        .to_str()
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .map(Some)
        .ok_or_else(|| ApiError::invalid_request(format!("`{name}` must be a non-negative integer")))
}

/// The truncation rule (see [`Truncation`]): `x-weir-truncation`, or the
/// older `x-weir-accept-truncated: true` for `accept`; the gateway's default
/// is `keep-partial`, the gateway seed's rule.
fn truncation(headers: &HeaderMap) -> Result<Truncation, ApiError> {
    if headers.get("x-weir-accept-truncated").is_some_and(|value| value == "true") {
        return Ok(Truncation::Accept);
    }
    let Some(value) = headers.get("x-weir-truncation") else { return Ok(Truncation::KeepPartial) };
    match value.to_str().map(str::trim) {
        Ok("escalate") => Ok(Truncation::Escalate),
        Ok("keep-partial") => Ok(Truncation::KeepPartial),
        Ok("accept") => Ok(Truncation::Accept),
        _ => Err(ApiError::invalid_request("`x-weir-truncation` must be `escalate`, `keep-partial` or `accept`")),
    }
}

fn deadline(headers: &HeaderMap) -> Result<Option<tokio::time::Instant>, ApiError> {
    let millis: Option<u64> = number_header(headers, DEADLINE_HEADER)?;
    Ok(millis.map(|millis| tokio::time::Instant::now() + std::time::Duration::from_millis(millis)))
}

/// The roles and the catalog. With keys, a caller sees the roles and models
/// its key may call (no catalog ids under `model_choice = "roles"`), and only
/// an `admin` key sees the operator's details (providers, files, admission).
/// Each role says what it resolves to now, for this caller, resolved as a
/// call would resolve it.
async fn models(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
) -> Result<axum::Json<Value>, ApiError> {
    let key = caller.key()?.cloned();
    let caller = key.as_ref().map(|key| key.caller());
    let mut data = roles(&weir, caller).await;
    if let Some(key) = key.filter(|key| !key.admin) {
        if weir.config().model_choice == crate::catalog::ModelChoice::Any {
            let permitted = weir.catalog().models().filter(|model| key.permits(&model.id));
            data.extend(
                permitted.map(|model| json!({"id": model.id, "object": "model", "created": 0, "owned_by": "weir"})),
            );
        }
        return Ok(axum::Json(json!({"object": "list", "data": data})));
    }
    let providers = weir.provider_statuses().await;
    for model in weir.model_statuses() {
        let serving = model.linked_provider.as_deref().unwrap_or(&model.provider);
        let provider = providers.iter().find(|p| p.key == serving);
        let admission = match weir.admission().gate(&model.id) {
            Some(gate) => json!({
                // The limits the gate admits by (a Mantle entry's `rpm` may be derived from its `tpm`).
                "rpm": weir.catalog().get(&model.id).and_then(|spec| spec.rpm),
                "tpm": weir.catalog().get(&model.id).and_then(|spec| spec.tpm),
                "throttle_coefficient": gate.account().coefficient().await,
                "in_flight": gate.in_flight(),
                "parked": gate.parked(),
            }),
            None => Value::Null,
        };
        data.push(json!({
                "id": model.id,
                "object": "model",
                "created": 0,
                "owned_by": model.provider,
                "weir": {
                    "provider": model.provider,
                    "available": model.available,
                    "grade": model.grade,
                    "kind": model.kind,
                    "embedding_dimensions": model.embedding_dimensions,
                    "capabilities": model.capabilities,
                    "linked_provider": model.linked_provider,
                    "unavailable_reason": model.unavailable_reason,
                    "provider_source": provider.map(|p| p.source.clone()),
                "provider_digest": provider.map(|p| p.digest.clone()),
                "admission": admission,
                "prices": prices(&model),
                "deployments": deployments(&model),
            },
        }));
    }
    Ok(axum::Json(json!({"object": "list", "data": data})))
}

/// An entry's deployments and each one's health in this gateway (`[]` for an
/// entry that is one endpoint).
fn deployments(model: &crate::ModelStatus) -> Value {
    model
        .deployments
        .iter()
        .map(|deployment| {
            json!({
                "id": deployment.id,
                "endpoint": deployment.endpoint,
                "wire_id": deployment.wire_id,
                "region": deployment.region,
                "weight": deployment.weight,
                "circuit": deployment.circuit,
                "circuit_open_secs_left": deployment.circuit_open_secs_left,
                "consecutive_failures": deployment.consecutive_failures,
                "window_error_rate": deployment.window_error_rate,
                "benched": deployment.benched,
                "in_flight": deployment.in_flight,
            })
        })
        .collect()
}

/// An entry's prices (USD per million tokens; `search`, `web_search` and
/// `web_search_preview` per thousand searches) and the day they were taken;
/// `null` fields where it declares none.
fn prices(model: &crate::ModelStatus) -> Value {
    json!({
        "input": model.prices.input,
        "output": model.prices.output,
        "cache_read": model.prices.cache_read,
        "cache_write": model.prices.cache_write,
        "search": model.prices.search,
        "web_search": model.prices.web_search,
        "web_search_preview": model.prices.web_search_preview,
        "as_of": model.prices_as_of,
    })
}

/// Every role with what it resolves to now for `caller` (`null` and the
/// category when it cannot be called), as `/v1/models` entries.
async fn roles(weir: &Weir, caller: Option<crate::Caller>) -> Vec<Value> {
    let mut data = Vec::new();
    for role in weir.roles().iter() {
        let resolved = weir.resolve(&role.name, caller.clone()).await;
        let (resolves_to, unavailable) = match &resolved {
            Ok(entry) => (Some(entry.as_str()), None),
            Err(error) => (None, Some(error.category().as_str())),
        };
        if caller.is_some() && resolved.as_ref().is_err_and(|e| e.category() == crate::Category::PermissionDenied) {
            continue;
        }
        data.push(json!({
            "id": role.name,
            "object": "model",
            "created": 0,
            "owned_by": "weir",
            "weir": {"role": role.kind.as_str(), "resolves_to": resolves_to, "unavailable": unavailable},
        }));
    }
    data
}

/// Loaded and rejected providers: an operator endpoint (`admin` keys only).
async fn providers(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
) -> Result<axum::Json<Value>, ApiError> {
    caller.require_admin()?;
    let failures: Vec<Value> = weir
        .registry()
        .failures()
        .iter()
        .map(|f| json!({"path": f.path.display().to_string(), "reason": f.reason}))
        .collect();
    Ok(axum::Json(json!({"providers": weir.provider_statuses().await, "rejected": failures})))
}

async fn health(State(weir): State<Weir>) -> axum::Json<Value> {
    axum::Json(json!({
        "status": "ok",
        "models": weir.catalog().models().count(),
        "providers": weir.registry().providers().count(),
        "rejected_components": weir.registry().failures().len(),
    }))
}
