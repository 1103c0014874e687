//! What a failure *is*, as data every layer shares: the stable category a
//! caller can act on (and its HTTP status), how an upstream's answer was
//! classified, and how the retry loop treats each signal. The errors
//! themselves are each layer's own; the call's error ([`crate::error`])
//! composes them and maps each to a category here.

use std::time::Duration;

/// The stable failure categories callers can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    InvalidRequest,
    ModelNotFound,
    ContextOverflow,
    Refused,
    ProviderCreditExhausted,
    RateLimited,
    Overloaded,
    UpstreamUnavailable,
    Timeout,
    AuthenticationFailed,
    CredentialMissing,
    ProviderUnavailable,
    ProviderFault,
    UpstreamError,
    CapacityExceeded,
    OutputTruncated,
    ProviderEmptyResponseExhausted,
    InvalidResponse,
    /// The compliance envelope does not permit this model or this request.
    ComplianceRefused,
    /// The request needs a capability its model's entry does not have (an
    /// image, a document, tools, a schema, a thinking budget): refused before
    /// the call, nothing sent.
    CapabilityMismatch,
    /// No caller key, or one that is unknown or expired.
    InvalidApiKey,
    /// The caller's key may not call this model, or this endpoint.
    PermissionDenied,
    /// The request body is larger than the gateway's `max_body_bytes`.
    PayloadTooLarge,
    /// A call's body is not declared `application/json`.
    UnsupportedMediaType,
    /// The request carries a browser `Origin` the gateway does not allow.
    ForbiddenOrigin,
    /// A keyless gateway reached over loopback was asked for a `Host` that is
    /// not loopback: a page whose name was rebound to 127.0.0.1 (DNS rebinding).
    MisdirectedRequest,
    /// The request line and headers are larger than the gateway accepts.
    HeadTooLarge,
    /// The client did not send its request body within the gateway's body timeout.
    RequestTimeout,
    /// The gateway itself is at capacity (calls in flight, component instances)
    /// or draining: nothing was sent upstream; retry shortly.
    GatewayBusy,
    /// The call ledger cannot be written and `[ledger] on_error = "refuse"`:
    /// an unrecorded call cannot be accounted, so none is made (or answered).
    LedgerUnavailable,
    /// The role named has no entry that can serve it now; nothing else is
    /// substituted.
    RoleUnavailable,
    /// A budget of the caller's key, member or team has not enough left for
    /// the call's worst case: nothing was sent; it resets at a known time.
    BudgetExhausted,
    /// The call's worst case is above a per-call ceiling (`max_call_tokens`,
    /// `max_call_usd`): nothing was sent; a smaller call may pass.
    CallBudgetExceeded,
    /// The fleet's shared limits (Redis) cannot be reached and
    /// `[fleet] on_shared_error = "refuse"`: nothing was sent; retry shortly.
    SharedStateUnavailable,
    /// A stored object (a response) is not there for this caller: never made,
    /// expired, deleted, or another caller's (the four read the same).
    NotFound,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::ModelNotFound => "model_not_found",
            Self::ContextOverflow => "context_overflow",
            Self::Refused => "refused",
            Self::ProviderCreditExhausted => "provider_credit_exhausted",
            Self::RateLimited => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::UpstreamUnavailable => "upstream_unavailable",
            Self::Timeout => "timeout",
            Self::AuthenticationFailed => "authentication_failed",
            Self::CredentialMissing => "credential_missing",
            Self::ProviderUnavailable => "provider_unavailable",
            Self::ProviderFault => "provider_fault",
            Self::UpstreamError => "upstream_error",
            Self::CapacityExceeded => "capacity_exceeded",
            Self::OutputTruncated => "output_truncated",
            Self::ProviderEmptyResponseExhausted => "provider_empty_response_exhausted",
            Self::InvalidResponse => "invalid_response",
            Self::ComplianceRefused => "compliance_refused",
            Self::CapabilityMismatch => "capability_mismatch",
            Self::InvalidApiKey => "invalid_api_key",
            Self::PermissionDenied => "permission_denied",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::ForbiddenOrigin => "forbidden_origin",
            Self::MisdirectedRequest => "misdirected_request",
            Self::HeadTooLarge => "request_head_too_large",
            Self::RequestTimeout => "request_timeout",
            Self::GatewayBusy => "gateway_busy",
            Self::LedgerUnavailable => "ledger_unavailable",
            Self::RoleUnavailable => "role_unavailable",
            Self::BudgetExhausted => "budget_exhausted",
            Self::CallBudgetExceeded => "call_budget_exceeded",
            Self::SharedStateUnavailable => "shared_state_unavailable",
            Self::NotFound => "not_found",
        }
    }

    /// The status the gateway answers with. Failures a client must not blindly
    /// retry use 4xx statuses the official SDKs do not retry (402, 422, 424).
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidRequest
            | Self::ContextOverflow
            | Self::CapacityExceeded
            | Self::CapabilityMismatch
            | Self::CallBudgetExceeded => 400,
            Self::ModelNotFound | Self::NotFound => 404,
            Self::Refused | Self::OutputTruncated | Self::InvalidResponse => 422,
            Self::ProviderCreditExhausted => 402,
            Self::RateLimited | Self::BudgetExhausted => 429,
            Self::AuthenticationFailed | Self::CredentialMissing => 424,
            Self::Overloaded
            | Self::ProviderUnavailable
            | Self::GatewayBusy
            | Self::LedgerUnavailable
            | Self::RoleUnavailable
            | Self::SharedStateUnavailable => 503,
            Self::UpstreamUnavailable | Self::UpstreamError | Self::ProviderEmptyResponseExhausted => 502,
            Self::Timeout => 504,
            Self::ProviderFault => 500,
            Self::ComplianceRefused | Self::PermissionDenied | Self::ForbiddenOrigin => 403,
            Self::InvalidApiKey => 401,
            Self::MisdirectedRequest => 421,
            Self::HeadTooLarge => 431,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::RequestTimeout => 408,
        }
    }
}

/// What an upstream's failed response means, without its raw text.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamClass {
    RateLimited,
    Overloaded,
    QuotaExhausted,
    Transient,
    Refused { category: Option<String> },
    InvalidRequest,
    Authentication,
    NotFound,
    ContextOverflow,
    Uncorrectable,
}

/// How the one retry loop treats an upstream signal: data, not code paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalPolicy {
    /// The window the wait before the next attempt is drawn from (it doubles
    /// with each retry; an upstream `retry-after` wins when longer).
    pub jitter_min: Duration,
    pub jitter_max: Duration,
    /// How hard the signal pushes the model's throttle.
    pub backpressure_weight: u32,
}

impl SignalPolicy {
    /// A 429: the account's limit; it clears in seconds.
    pub const RATE_LIMITED: Self =
        Self { jitter_min: Duration::from_millis(500), jitter_max: Duration::from_secs(2), backpressure_weight: 1 };
    /// An overload: the whole fleet is saturated, episodes last minutes; wait in a
    /// wider window and yield hard.
    pub const OVERLOADED: Self =
        Self { jitter_min: Duration::from_secs(2), jitter_max: Duration::from_secs(10), backpressure_weight: 3 };
    /// A fault (5xx, reset, timeout before a response): retry soon; a stray fault
    /// is no reason to slow every caller down.
    pub const TRANSIENT: Self =
        Self { jitter_min: Duration::from_millis(100), jitter_max: Duration::from_secs(1), backpressure_weight: 0 };
}

impl UpstreamClass {
    /// The retry policy of a retryable signal; `None` is never retried.
    pub fn retry_policy(&self) -> Option<SignalPolicy> {
        match self {
            Self::RateLimited => Some(SignalPolicy::RATE_LIMITED),
            Self::Overloaded => Some(SignalPolicy::OVERLOADED),
            Self::Transient => Some(SignalPolicy::TRANSIENT),
            Self::QuotaExhausted
            | Self::Refused { .. }
            | Self::InvalidRequest
            | Self::Authentication
            | Self::NotFound
            | Self::ContextOverflow
            | Self::Uncorrectable => None,
        }
    }

    /// The throttle weight this signal feeds (0 for anything not a slow-down).
    pub fn backpressure_weight(&self) -> u32 {
        self.retry_policy().map_or(0, |policy| policy.backpressure_weight)
    }
}
