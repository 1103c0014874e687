//! One error type for every failure a call can end in. Its variant decides, by
//! exhaustive match, the stable category a caller sees, the HTTP status, and the
//! safe message. Raw provider text never enters a message: it is logged where
//! the failure is classified.

use crate::admission::AdmissionError;
use crate::plugin::PluginError;
use crate::transport::{CredentialError, TransportError};
use std::time::Duration;

use crate::types::RetryHint;

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
    /// The request body is larger than the gateway's `max_body_bytes`.
    PayloadTooLarge,
    /// A call's body is not declared `application/json`.
    UnsupportedMediaType,
    /// The request carries a browser `Origin` the gateway does not allow.
    ForbiddenOrigin,
    /// The client did not send its request body within the gateway's body timeout.
    RequestTimeout,
    /// The gateway itself is at capacity (calls in flight, component instances)
    /// or draining: nothing was sent upstream; retry shortly.
    GatewayBusy,
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
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::ForbiddenOrigin => "forbidden_origin",
            Self::RequestTimeout => "request_timeout",
            Self::GatewayBusy => "gateway_busy",
        }
    }

    /// The status the gateway answers with. Failures a client must not blindly
    /// retry use 4xx statuses the official SDKs do not retry (402, 422, 424).
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidRequest | Self::ContextOverflow | Self::CapacityExceeded => 400,
            Self::ModelNotFound => 404,
            Self::Refused | Self::OutputTruncated | Self::InvalidResponse => 422,
            Self::ProviderCreditExhausted => 402,
            Self::RateLimited => 429,
            Self::AuthenticationFailed | Self::CredentialMissing => 424,
            Self::Overloaded | Self::ProviderUnavailable | Self::GatewayBusy => 503,
            Self::UpstreamUnavailable | Self::UpstreamError | Self::ProviderEmptyResponseExhausted => 502,
            Self::Timeout => 504,
            Self::ProviderFault => 500,
            Self::ComplianceRefused | Self::ForbiddenOrigin => 403,
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

/// Every way a call can fail.
#[derive(Debug, thiserror::Error)]
pub enum WeirError {
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error(
        "model `{model}`: no output budget is declared; set `max_tokens` or `max_completion_tokens` \
         on the request, or `output_tokens` on the catalog entry"
    )]
    OutputUndeclared { model: String },
    #[error("model `{model}`: provider `{provider}` is not loaded")]
    ProviderUnavailable { model: String, provider: String },
    #[error("model `{model}`: {source}")]
    Credential { model: String, source: CredentialError },
    /// The compliance envelope refused the call: at resolution, or as the
    /// request was about to leave.
    #[error("model `{model}` is refused by the compliance envelope: {reason}")]
    Compliance { model: String, reason: String },
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    #[error("model `{model}`: {source}")]
    Plugin { model: String, source: PluginError },
    #[error("model `{model}` via `{provider}`: {source}")]
    Transport { model: String, provider: String, source: TransportError },
    #[error("model `{model}` via `{provider}`: upstream answered HTTP {status} ({class:?})")]
    Upstream {
        model: String,
        provider: String,
        /// The credential id the call used, to name in quota messages.
        credential: Option<String>,
        status: u16,
        class: UpstreamClass,
        retry_hint: Option<RetryHint>,
    },
    #[error("model `{model}`: the provider refused to answer")]
    Refused { model: String, category: Option<String>, explanation: Option<String> },
    #[error(
        "model `{model}`: the answer was cut off at {max_tokens} output tokens and the model's ceiling \
         ({ceiling}) leaves no larger budget"
    )]
    OutputTruncated { model: String, max_tokens: u32, ceiling: u32 },
    #[error("model `{model}`: the provider answered with no content {count} times")]
    EmptyResponses { model: String, count: u32 },
    #[error(
        "model `{model}`: the answer is not the structured answer asked for after {corrections} correction(s): {reason}"
    )]
    InvalidAnswer { model: String, corrections: u32, reason: String },
    #[error("{last} (gave up after {attempts} attempts)")]
    RetriesExhausted { attempts: u32, last: Box<WeirError> },
    /// A stream failed after output reached the caller, so it was not retried.
    #[error("model `{model}`: the stream failed after {deltas} deltas ({bytes} bytes) were delivered: {source}")]
    MidStream { model: String, deltas: u64, bytes: u64, source: Box<WeirError> },
}

impl WeirError {
    pub fn category(&self) -> Category {
        match self {
            Self::UnknownModel(_) => Category::ModelNotFound,
            Self::Refused { .. } => Category::Refused,
            Self::OutputTruncated { .. } => Category::OutputTruncated,
            Self::EmptyResponses { .. } => Category::ProviderEmptyResponseExhausted,
            Self::InvalidAnswer { .. } => Category::InvalidResponse,
            Self::RetriesExhausted { last, .. } => last.category(),
            // A capacity signal after output cannot be retried transparently: it is
            // uncorrectable here. Anything else keeps its own category.
            Self::MidStream { source, .. } if source.backpressure_weight() > 0 => Category::UpstreamError,
            Self::MidStream { source, .. } => source.category(),
            Self::InvalidRequest(_) | Self::OutputUndeclared { .. } => Category::InvalidRequest,
            Self::ProviderUnavailable { .. } => Category::ProviderUnavailable,
            Self::Credential { .. } => Category::CredentialMissing,
            Self::Compliance { .. } => Category::ComplianceRefused,
            Self::Admission(error) => match error {
                AdmissionError::NeverFits { .. } => Category::CapacityExceeded,
                AdmissionError::DeadlineBeforeFit { .. } | AdmissionError::DeadlinePassed { .. } => Category::Timeout,
            },
            Self::Plugin { source, .. } => match source {
                PluginError::Fault { .. } => Category::ProviderFault,
                PluginError::NoFreeInstance { .. } => Category::GatewayBusy,
                PluginError::Codec { error, .. } => match error {
                    crate::types::CodecError::Unsupported(_) => Category::InvalidRequest,
                    crate::types::CodecError::Malformed(_) => Category::UpstreamError,
                },
            },
            Self::Transport { source, .. } => match source {
                TransportError::Timeout => Category::Timeout,
                TransportError::Connect(_) | TransportError::Io(_) | TransportError::BodyTooLarge { .. } => {
                    Category::UpstreamUnavailable
                }
                TransportError::InvalidRequest(_) | TransportError::Signing(_) => Category::ProviderFault,
            },
            Self::Upstream { class, .. } => match class {
                UpstreamClass::RateLimited => Category::RateLimited,
                UpstreamClass::Overloaded => Category::Overloaded,
                UpstreamClass::QuotaExhausted => Category::ProviderCreditExhausted,
                UpstreamClass::Transient => Category::UpstreamUnavailable,
                UpstreamClass::Refused { .. } => Category::Refused,
                UpstreamClass::InvalidRequest => Category::InvalidRequest,
                UpstreamClass::Authentication => Category::AuthenticationFailed,
                UpstreamClass::NotFound => Category::ModelNotFound,
                UpstreamClass::ContextOverflow => Category::ContextOverflow,
                UpstreamClass::Uncorrectable => Category::UpstreamError,
            },
        }
    }

    pub fn http_status(&self) -> u16 {
        self.category().http_status()
    }

    /// How hard this failure pushes the model's throttle (0 for anything that is
    /// not an upstream slow-down signal).
    pub fn backpressure_weight(&self) -> u32 {
        self.retry_policy().map_or(0, |policy| policy.backpressure_weight)
    }

    /// How the retry loop treats this failure; `None` is never retried. Transport
    /// failures before a response (refused or reset connections, timeouts) are
    /// transient.
    pub fn retry_policy(&self) -> Option<SignalPolicy> {
        match self {
            Self::Upstream { class, .. } => class.retry_policy(),
            Self::Transport { source, .. } => match source {
                TransportError::Connect(_) | TransportError::Io(_) | TransportError::Timeout => {
                    Some(SignalPolicy::TRANSIENT)
                }
                TransportError::InvalidRequest(_)
                | TransportError::BodyTooLarge { .. }
                | TransportError::Signing(_) => None,
            },
            Self::UnknownModel(_)
            | Self::InvalidRequest(_)
            | Self::OutputUndeclared { .. }
            | Self::ProviderUnavailable { .. }
            | Self::Credential { .. }
            | Self::Compliance { .. }
            | Self::Admission(_)
            | Self::Plugin { .. }
            | Self::Refused { .. }
            | Self::OutputTruncated { .. }
            | Self::EmptyResponses { .. }
            | Self::InvalidAnswer { .. }
            | Self::RetriesExhausted { .. }
            | Self::MidStream { .. } => None,
        }
    }

    /// A message safe to show a caller: our own identifiers and the category's
    /// guidance, never a provider's words or a secret.
    pub fn safe_message(&self) -> String {
        match self {
            Self::UnknownModel(_)
            | Self::InvalidRequest(_)
            | Self::OutputUndeclared { .. }
            | Self::ProviderUnavailable { .. }
            | Self::Credential { .. }
            | Self::Compliance { .. }
            | Self::Admission(_)
            | Self::Refused { .. }
            | Self::OutputTruncated { .. }
            | Self::EmptyResponses { .. }
            | Self::InvalidAnswer { .. }
            | Self::Transport { .. } => self.to_string(),
            Self::RetriesExhausted { attempts, last } => {
                format!("{} (gave up after {attempts} attempts)", last.safe_message())
            }
            Self::MidStream { model, deltas, bytes, source } => format!(
                "model `{model}`: the stream failed after {deltas} deltas ({bytes} bytes) were delivered, so it \
                 was not retried: {}",
                source.safe_message()
            ),
            Self::Plugin { model, source } => match source {
                PluginError::Fault { provider, .. } => {
                    format!("model `{model}`: provider component `{provider}` failed; see the server log")
                }
                PluginError::Codec { .. } | PluginError::NoFreeInstance { .. } => self.to_string(),
            },
            Self::Upstream { model, provider, class, credential, .. } => {
                upstream_message(model, provider, credential.as_deref(), class)
            }
        }
    }
}

fn upstream_message(model: &str, provider: &str, credential: Option<&str>, class: &UpstreamClass) -> String {
    let what = match class {
        UpstreamClass::RateLimited => "the provider rate-limited the call; retry later".to_owned(),
        UpstreamClass::Overloaded => "the provider is overloaded; retry later".to_owned(),
        UpstreamClass::QuotaExhausted => {
            let account = credential.map_or_else(String::new, |id| format!(" behind credential `{id}`"));
            format!(
                "the provider account{account} is out of credit or quota; top up its balance or raise \
                 its spend limit, or choose another model"
            )
        }
        UpstreamClass::Transient => "the provider failed transiently; retry later".to_owned(),
        UpstreamClass::Refused { .. } => {
            "the provider refused the request; it will not be retried on this model".to_owned()
        }
        UpstreamClass::InvalidRequest => "the provider rejected the request as invalid".to_owned(),
        UpstreamClass::Authentication => "the provider rejected the gateway's credential for this model".to_owned(),
        UpstreamClass::NotFound => "the provider does not know this model's wire id".to_owned(),
        UpstreamClass::ContextOverflow => "the conversation exceeds the model's context window".to_owned(),
        UpstreamClass::Uncorrectable => "the provider failed in a way that retrying will not fix".to_owned(),
    };
    format!("model `{model}` via `{provider}`: {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_categories_answer_their_own_statuses() {
        let pairs = [
            (Category::PayloadTooLarge, "payload_too_large", 413),
            (Category::UnsupportedMediaType, "unsupported_media_type", 415),
            (Category::ForbiddenOrigin, "forbidden_origin", 403),
            (Category::RequestTimeout, "request_timeout", 408),
            (Category::GatewayBusy, "gateway_busy", 503),
        ];
        for (category, name, status) in pairs {
            assert_eq!((category.as_str(), category.http_status()), (name, status));
        }
    }

    #[test]
    fn no_free_instance_is_the_gateway_being_busy_and_is_not_retried_upstream() {
        let error = WeirError::Plugin {
            model: "m".into(),
            source: PluginError::NoFreeInstance { provider: "openai".into(), waited: Duration::from_secs(10) },
        };
        assert_eq!(error.category(), Category::GatewayBusy);
        assert_eq!(error.http_status(), 503);
        assert!(error.retry_policy().is_none());
        assert!(error.safe_message().contains("every component instance"), "{}", error.safe_message());
    }
}
