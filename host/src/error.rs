//! One error type for every failure a call can end in. Its variant decides, by
//! exhaustive match, the stable category a caller sees, the HTTP status, and the
//! safe message. Raw provider text never enters a message: it is logged where
//! the failure is classified.

use crate::admission::AdmissionError;
use crate::plugin::PluginError;
use crate::transport::{CredentialError, TransportError};
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
        }
    }

    /// The status the gateway answers with. Failures a client must not blindly
    /// retry use 4xx statuses the official SDKs do not retry (402, 422, 424).
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidRequest | Self::ContextOverflow | Self::CapacityExceeded => 400,
            Self::ModelNotFound => 404,
            Self::Refused => 422,
            Self::ProviderCreditExhausted => 402,
            Self::RateLimited => 429,
            Self::AuthenticationFailed | Self::CredentialMissing => 424,
            Self::Overloaded | Self::ProviderUnavailable => 503,
            Self::UpstreamUnavailable | Self::UpstreamError => 502,
            Self::Timeout => 504,
            Self::ProviderFault => 500,
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

impl UpstreamClass {
    /// How hard this signal pushes the model's throttle: a rate limit 1, an
    /// overload 3 (the whole fleet is saturated: yield hard), anything else 0 (a
    /// stray fault is no reason to slow every caller down).
    pub fn backpressure_weight(&self) -> u32 {
        match self {
            Self::RateLimited => 1,
            Self::Overloaded => 3,
            Self::QuotaExhausted
            | Self::Transient
            | Self::Refused { .. }
            | Self::InvalidRequest
            | Self::Authentication
            | Self::NotFound
            | Self::ContextOverflow
            | Self::Uncorrectable => 0,
        }
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
    Credential {
        model: String,
        source: CredentialError,
    },
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    #[error("model `{model}`: {source}")]
    Plugin { model: String, source: PluginError },
    #[error("model `{model}` via `{provider}`: {source}")]
    Transport {
        model: String,
        provider: String,
        source: TransportError,
    },
    #[error("model `{model}` via `{provider}`: upstream answered HTTP {status} ({class:?})")]
    Upstream {
        model: String,
        provider: String,
        status: u16,
        class: UpstreamClass,
        retry_hint: Option<RetryHint>,
    },
}

impl WeirError {
    pub fn category(&self) -> Category {
        match self {
            Self::UnknownModel(_) => Category::ModelNotFound,
            Self::InvalidRequest(_) | Self::OutputUndeclared { .. } => Category::InvalidRequest,
            Self::ProviderUnavailable { .. } => Category::ProviderUnavailable,
            Self::Credential { .. } => Category::CredentialMissing,
            Self::Admission(error) => match error {
                AdmissionError::NeverFits { .. } => Category::CapacityExceeded,
                AdmissionError::DeadlineBeforeFit { .. }
                | AdmissionError::DeadlinePassed { .. } => Category::Timeout,
            },
            Self::Plugin { source, .. } => match source {
                PluginError::Fault { .. } => Category::ProviderFault,
                PluginError::Codec { error, .. } => match error {
                    crate::types::CodecError::Unsupported(_) => Category::InvalidRequest,
                    crate::types::CodecError::Malformed(_) => Category::UpstreamError,
                },
            },
            Self::Transport { source, .. } => match source {
                TransportError::Timeout => Category::Timeout,
                TransportError::Connect(_)
                | TransportError::Io(_)
                | TransportError::BodyTooLarge { .. } => Category::UpstreamUnavailable,
                TransportError::InvalidRequest(_) => Category::ProviderFault,
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

    /// A message safe to show a caller: our own identifiers and the category's
    /// guidance, never a provider's words or a secret.
    pub fn safe_message(&self) -> String {
        match self {
            Self::UnknownModel(_)
            | Self::InvalidRequest(_)
            | Self::OutputUndeclared { .. }
            | Self::ProviderUnavailable { .. }
            | Self::Credential { .. }
            | Self::Admission(_)
            | Self::Transport { .. } => self.to_string(),
            Self::Plugin { model, source } => match source {
                PluginError::Fault { provider, .. } => {
                    format!(
                        "model `{model}`: provider component `{provider}` failed; see the server log"
                    )
                }
                PluginError::Codec { .. } => self.to_string(),
            },
            Self::Upstream {
                model,
                provider,
                class,
                ..
            } => upstream_message(model, provider, class),
        }
    }
}

fn upstream_message(model: &str, provider: &str, class: &UpstreamClass) -> String {
    let what = match class {
        UpstreamClass::RateLimited => "the provider rate-limited the call; retry later",
        UpstreamClass::Overloaded => "the provider is overloaded; retry later",
        UpstreamClass::QuotaExhausted => {
            "the provider account is out of credit or quota; top up the balance or raise the \
             spend limit of the credential this model uses, or choose another model"
        }
        UpstreamClass::Transient => "the provider failed transiently; retry later",
        UpstreamClass::Refused { .. } => {
            "the provider refused the request; it will not be retried on this model"
        }
        UpstreamClass::InvalidRequest => "the provider rejected the request as invalid",
        UpstreamClass::Authentication => {
            "the provider rejected the gateway's credential for this model"
        }
        UpstreamClass::NotFound => "the provider does not know this model's wire id",
        UpstreamClass::ContextOverflow => "the conversation exceeds the model's context window",
        UpstreamClass::Uncorrectable => "the provider failed in a way that retrying will not fix",
    };
    format!("model `{model}` via `{provider}`: {what}")
}
