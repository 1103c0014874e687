//! One error type for every failure a call can end in. Its variant decides, by
//! exhaustive match, the stable category a caller sees, the HTTP status, and the
//! safe message. Raw provider text never enters a message: it is logged where
//! the failure is classified.
//!
//! Two renderings: `Display` is the whole story for the server log (hosts,
//! credential ids and where they were looked for, transport errors with their
//! URLs); [`WeirError::safe_message`] is what a caller sees — our own
//! identifiers (model, provider key) and a fixed sentence per kind of failure,
//! never a URL, an upstream host, an environment variable's name or an
//! upstream's words.

use crate::admission::{AdmissionError, ReserveError};
use crate::budget::BudgetError;
use crate::catalog::Capability;
use crate::identity::AuthError;
use crate::plugin::PluginError;
use crate::reach::ReachError;
use crate::transport::{CredentialError, TransportError};
use std::time::Duration;

pub use crate::failure::{Category, SignalPolicy, UpstreamClass};
use crate::types::RetryHint;

/// What a call needed one more upstream attempt for when it reached its
/// attempt ceiling (`max_attempts`).
#[derive(Debug)]
pub enum Pending {
    /// A retry of this upstream signal.
    Retry(Box<WeirError>),
    /// A correction turn for this structured-answer failure.
    Correction(Box<WeirError>),
    /// The re-run of a truncated answer at the model's output ceiling.
    Escalation,
    /// The re-run of an empty answer.
    EmptyRerun,
}

impl Pending {
    fn what(&self) -> &'static str {
        match self {
            Self::Retry(_) => "a retry",
            Self::Correction(_) => "a correction turn",
            Self::Escalation => "re-running a truncated answer at the model's output ceiling",
            Self::EmptyRerun => "re-running an empty answer",
        }
    }

    /// The failure that made another attempt necessary, when there was one.
    fn last(&self) -> Option<&WeirError> {
        match self {
            Self::Retry(last) | Self::Correction(last) => Some(last),
            Self::Escalation | Self::EmptyRerun => None,
        }
    }
}

impl std::fmt::Display for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.last() {
            Some(last) => write!(f, "{}; the last failure: {last}", self.what()),
            None => f.write_str(self.what()),
        }
    }
}

/// Every way a call can fail.
#[derive(Debug, thiserror::Error)]
pub enum WeirError {
    /// The caller's key is missing, unknown, expired or was revoked.
    #[error("{0}")]
    Unauthenticated(AuthError),
    /// The caller's key does not list this model.
    #[error("the API key `{key}` may not call model `{model}`")]
    ModelNotPermitted { key: String, model: String },
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    /// A gateway caller named a catalog entry while `model_choice = "roles"`.
    #[error("`{model}` is a catalog id, and this gateway takes roles only: name a role (see GET /v1/models)")]
    ModelChoiceRefused { model: String },
    /// No entry that may serve the role can be called now (`reason`: why the
    /// first one could not); none other is substituted.
    #[error("role `{role}` is unavailable: {reason}")]
    RoleUnavailable { role: String, reason: Box<WeirError> },
    /// The input estimate, the output reserve and the safety margin do not fit
    /// the model's context window; nothing was sent.
    #[error(
        "model `{model}`: the input (~{input} tokens, estimated) and the output reserve ({output}) with a margin \
         of {margin} exceed the context window of {window} tokens"
    )]
    ContextOverflow { model: String, input: u64, output: u32, margin: u32, window: u32 },
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The call's output reserve could not be set (see [`crate::admission::output_reserve`]).
    #[error(transparent)]
    Reserve(#[from] ReserveError),
    /// The request needs what the model's catalog entry does not have; refused
    /// before admission, nothing sent.
    #[error("model `{model}` does not have the capability `{capability}` this request needs ({needed_for})")]
    CapabilityMismatch { model: String, capability: Capability, needed_for: &'static str },
    /// The request carries a dialect's own part (a hosted tool under
    /// `hosted_tools = "refuse"`, or a history block only that dialect's
    /// provider reads) that the serving provider does not take; refused
    /// before admission, nothing sent. `what` is the caller's own words.
    #[error("model `{model}`: {what} cannot be handed to its provider")]
    NativeNotTaken { model: String, what: String },
    #[error("model `{model}`: provider `{provider}` is not loaded")]
    ProviderUnavailable { model: String, provider: String },
    #[error("model `{model}`: {source}")]
    Credential { model: String, source: CredentialError },
    /// Where the call would go is not allowed (see [`crate::reach`]); refused
    /// before anything was sent.
    #[error("model `{model}`: {source}")]
    Reach { model: String, source: ReachError },
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
    #[error(
        "model `{model}` via `{provider}`: upstream answered HTTP {status} ({class:?}; credential {})",
        credential.as_deref().unwrap_or("none")
    )]
    Upstream {
        model: String,
        provider: String,
        /// The credential id the call used, named in the log (never to a caller).
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
    /// An embeddings or rerank answer is not the one asked for (another count
    /// of vectors, another length than a pinned width, a ranking of documents
    /// that were not sent): never coerced. The reason is the host's own words.
    #[error("model `{model}`: the answer is not usable: {reason}")]
    UnusableAnswer { model: String, reason: String },
    #[error("{last} (gave up after {attempts} attempts)")]
    RetriesExhausted { attempts: u32, last: Box<WeirError> },
    /// The call made as many upstream attempts as its entry allows
    /// (`max_attempts`) and needed one more.
    #[error("model `{model}`: the call reached its ceiling of {attempts} upstream attempts before {pending}")]
    AttemptCeiling { model: String, attempts: u32, pending: Pending },
    /// One upstream attempt took longer than the attempt timeout in all (a whole
    /// answer: until its body was read; a stream: until its first output).
    #[error("model `{model}`: the upstream attempt took longer than {limit:?} in all")]
    AttemptTimedOut { model: String, limit: Duration },
    /// The caller's deadline passed while the upstream was still answering; the
    /// request was cancelled.
    #[error("model `{model}`: the caller's deadline passed while the upstream was answering")]
    DeadlineExceeded { model: String },
    /// A stream failed after output reached the caller, so it was not retried.
    #[error("model `{model}`: the stream failed after {deltas} deltas ({bytes} bytes) were delivered: {source}")]
    MidStream { model: String, deltas: u64, bytes: u64, source: Box<WeirError> },
    /// The ledger could not record the call (`[ledger] on_error = "refuse"`).
    #[error("the call ledger cannot be written: {0}")]
    LedgerUnavailable(String),
    /// A budget refused the call before anything was sent (see [`crate::budget`]).
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

impl From<crate::compliance::ComplianceRefusal> for WeirError {
    fn from(refusal: crate::compliance::ComplianceRefusal) -> Self {
        Self::Compliance { model: refusal.model, reason: refusal.reason }
    }
}

impl WeirError {
    pub fn category(&self) -> Category {
        match self {
            Self::Unauthenticated(_) => Category::InvalidApiKey,
            Self::Budget(error) => error.category(),
            Self::LedgerUnavailable(_) => Category::LedgerUnavailable,
            Self::ModelNotPermitted { .. } => Category::PermissionDenied,
            Self::UnknownModel(_) => Category::ModelNotFound,
            Self::ModelChoiceRefused { .. } => Category::PermissionDenied,
            Self::RoleUnavailable { .. } => Category::RoleUnavailable,
            Self::ContextOverflow { .. } => Category::ContextOverflow,
            Self::Refused { .. } => Category::Refused,
            Self::OutputTruncated { .. } => Category::OutputTruncated,
            Self::EmptyResponses { .. } => Category::ProviderEmptyResponseExhausted,
            Self::InvalidAnswer { .. } => Category::InvalidResponse,
            // The upstream answered something other than what was asked: its fault.
            Self::UnusableAnswer { .. } => Category::UpstreamError,
            Self::RetriesExhausted { last, .. } => last.category(),
            Self::AttemptCeiling { pending, .. } => match pending {
                Pending::Retry(last) | Pending::Correction(last) => last.category(),
                Pending::Escalation => Category::OutputTruncated,
                Pending::EmptyRerun => Category::ProviderEmptyResponseExhausted,
            },
            Self::AttemptTimedOut { .. } | Self::DeadlineExceeded { .. } => Category::Timeout,
            // A capacity signal after output cannot be retried transparently: it is
            // uncorrectable here. Anything else keeps its own category.
            Self::MidStream { source, .. } if source.backpressure_weight() > 0 => Category::UpstreamError,
            Self::MidStream { source, .. } => source.category(),
            Self::InvalidRequest(_) | Self::Reserve(_) => Category::InvalidRequest,
            Self::CapabilityMismatch { .. } | Self::NativeNotTaken { .. } => Category::CapabilityMismatch,
            Self::ProviderUnavailable { .. } => Category::ProviderUnavailable,
            Self::Credential { .. } => Category::CredentialMissing,
            Self::Reach { source, .. } => match source {
                ReachError::UntrustedDefault { .. }
                | ReachError::NoEndpoint { .. }
                | ReachError::BadEndpoint { .. }
                | ReachError::Fragment { .. }
                | ReachError::PlainHttp { .. } => Category::ProviderUnavailable,
                ReachError::SigningService { .. } | ReachError::SigningHost { .. } | ReachError::TokenHost { .. } => {
                    Category::ProviderFault
                }
            },
            Self::Compliance { .. } => Category::ComplianceRefused,
            Self::Admission(error) => error.category(),
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
                TransportError::Connect(_)
                | TransportError::Certificate(_)
                | TransportError::Io(_)
                | TransportError::BodyTooLarge { .. } => Category::UpstreamUnavailable,
                TransportError::InvalidRequest(_) | TransportError::Signing(_) => Category::ProviderFault,
                TransportError::UnknownHost(_) => Category::UpstreamError,
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

    /// When a caller may usefully come back, for failures that know: a full
    /// admission queue answers with its estimate (`retry-after`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Admission(error) | Self::Budget(BudgetError::Shared(error)) => admission_retry_after(error),
            // Whole seconds, rounded up: a client that waits them finds the budget reset.
            Self::Budget(BudgetError::Exhausted { resets_in, .. }) => {
                Some(Duration::from_secs(resets_in.as_secs() + u64::from(resets_in.subsec_nanos() > 0)))
            }
            _ => None,
        }
    }

    /// How hard this failure pushes the model's throttle (0 for anything that is
    /// not an upstream slow-down signal).
    pub fn backpressure_weight(&self) -> u32 {
        self.retry_policy().map_or(0, |policy| policy.backpressure_weight)
    }

    /// How the retry loop treats this failure; `None` is never retried. Transport
    /// failures before a response (refused or reset connections, timeouts) and an
    /// attempt over its total timeout are transient; a certificate the upstream
    /// cannot prove is not (a second handshake meets the same certificate), nor
    /// is a passed deadline.
    pub fn retry_policy(&self) -> Option<SignalPolicy> {
        match self {
            Self::Upstream { class, .. } => class.retry_policy(),
            Self::Transport { source, .. } => match source {
                TransportError::Connect(_) | TransportError::Io(_) | TransportError::Timeout => {
                    Some(SignalPolicy::TRANSIENT)
                }
                TransportError::InvalidRequest(_)
                | TransportError::UnknownHost(_)
                | TransportError::Certificate(_)
                | TransportError::BodyTooLarge { .. }
                | TransportError::Signing(_) => None,
            },
            Self::AttemptTimedOut { .. } => Some(SignalPolicy::TRANSIENT),
            Self::Unauthenticated(_)
            | Self::ModelNotPermitted { .. }
            | Self::UnknownModel(_)
            | Self::ModelChoiceRefused { .. }
            | Self::RoleUnavailable { .. }
            | Self::ContextOverflow { .. }
            | Self::InvalidRequest(_)
            | Self::Reserve(_)
            | Self::CapabilityMismatch { .. }
            | Self::NativeNotTaken { .. }
            | Self::ProviderUnavailable { .. }
            | Self::Credential { .. }
            | Self::Reach { .. }
            | Self::Compliance { .. }
            | Self::Admission(_)
            | Self::Plugin { .. }
            | Self::Refused { .. }
            | Self::OutputTruncated { .. }
            | Self::EmptyResponses { .. }
            | Self::InvalidAnswer { .. }
            | Self::UnusableAnswer { .. }
            | Self::RetriesExhausted { .. }
            | Self::AttemptCeiling { .. }
            | Self::DeadlineExceeded { .. }
            | Self::MidStream { .. }
            | Self::LedgerUnavailable(_)
            | Self::Budget(_) => None,
        }
    }

    /// A message safe to show a caller: our own identifiers and a fixed
    /// sentence per kind of failure, never a provider's words, a URL or host, a
    /// credential id or where it was looked for, or a secret. The full error is
    /// for the log (`Display`).
    pub fn safe_message(&self) -> String {
        match self {
            // Our own words about the caller's own request, with numbers and
            // our identifiers only.
            Self::Unauthenticated(_)
            | Self::ModelNotPermitted { .. }
            | Self::UnknownModel(_)
            | Self::ModelChoiceRefused { .. }
            | Self::ContextOverflow { .. }
            | Self::InvalidRequest(_)
            | Self::Reserve(_)
            | Self::CapabilityMismatch { .. }
            | Self::NativeNotTaken { .. }
            | Self::ProviderUnavailable { .. }
            | Self::Compliance { .. }
            | Self::Admission(_)
            | Self::Refused { .. }
            | Self::OutputTruncated { .. }
            | Self::EmptyResponses { .. }
            | Self::InvalidAnswer { .. }
            | Self::UnusableAnswer { .. }
            | Self::AttemptTimedOut { .. }
            | Self::DeadlineExceeded { .. }
            | Self::Budget(_) => self.to_string(),
            Self::RoleUnavailable { role, reason } => {
                format!("role `{role}` is unavailable: {}", reason.safe_message())
            }
            Self::Credential { model, source } => format!("model `{model}`: {}", credential_message(source)),
            Self::Reach { model, source } => format!("model `{model}`: {}", reach_message(source)),
            Self::Transport { model, provider, source } => {
                format!("model `{model}` via `{provider}`: {}", transport_message(source))
            }
            Self::RetriesExhausted { attempts, last } => {
                format!("{} (gave up after {attempts} attempts)", last.safe_message())
            }
            Self::AttemptCeiling { model, attempts, pending } => {
                let what = pending.what();
                let head = format!(
                    "model `{model}`: the call reached its ceiling of {attempts} upstream attempts before {what}"
                );
                match pending.last() {
                    Some(last) => format!("{head}; the last failure: {}", last.safe_message()),
                    None => head,
                }
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
                // The component's reason concerns the caller's own request.
                PluginError::Codec { error: crate::types::CodecError::Unsupported(_), .. } => self.to_string(),
                // A response the component cannot read may be anything the upstream sent.
                PluginError::Codec { provider, error: crate::types::CodecError::Malformed(_) } => {
                    format!(
                        "model `{model}` via `{provider}`: the provider's answer could not be read; see the server log"
                    )
                }
                PluginError::NoFreeInstance { .. } => self.to_string(),
            },
            Self::Upstream { model, provider, class, .. } => upstream_message(model, provider, class),
            // The reason names files and SQLite's words: the log's, not a caller's.
            Self::LedgerUnavailable(_) => {
                "the gateway cannot record calls right now, so it makes none; see the server log".to_owned()
            }
        }
    }
}

/// When a caller refused by admission may come back: a full queue's estimate,
/// or the fleet's outage advice.
fn admission_retry_after(error: &AdmissionError) -> Option<Duration> {
    match error {
        AdmissionError::QueueFull { retry_after, .. } => Some(*retry_after),
        AdmissionError::SharedStateUnavailable { .. } => Some(crate::fleet::RETRY_AFTER_OUTAGE),
        AdmissionError::NeverFits { .. }
        | AdmissionError::DeadlineBeforeFit { .. }
        | AdmissionError::DeadlinePassed { .. } => None,
    }
}

fn credential_message(error: &CredentialError) -> &'static str {
    match error {
        CredentialError::Missing { .. } | CredentialError::NotNamed { .. } => {
            "the gateway's credential for this model is not set; see the server log"
        }
        CredentialError::NoRegion { .. } => "no AWS region is chosen for this model's provider; see the server log",
        CredentialError::Aws { .. } => "the gateway found no AWS credentials for this model; see the server log",
        CredentialError::Token { .. } => {
            "the gateway could not obtain an access token for this model's provider; see the server log"
        }
        CredentialError::TokenOnSigned { .. } => {
            "the gateway's credential for this model does not fit its provider; see the server log"
        }
    }
}

fn reach_message(error: &ReachError) -> &'static str {
    match error {
        ReachError::UntrustedDefault { .. } => {
            "its provider component is not trusted to choose where the call goes, and the catalog entry does not \
             say; see the server log"
        }
        ReachError::NoEndpoint { .. } | ReachError::BadEndpoint { .. } | ReachError::Fragment { .. } => {
            "no usable endpoint is configured for this model; see the server log"
        }
        ReachError::PlainHttp { .. } => {
            "the configured endpoint is plain http off this machine, which is not allowed; see the server log"
        }
        ReachError::SigningService { .. } | ReachError::SigningHost { .. } => {
            "the provider component asked for a signature the gateway does not give; nothing was sent; see the \
             server log"
        }
        ReachError::TokenHost { .. } => {
            "the provider component's endpoint is not one the gateway sends this model's access token to; nothing \
             was sent; see the server log"
        }
    }
}

fn transport_message(error: &TransportError) -> &'static str {
    match error {
        TransportError::InvalidRequest(_) => {
            "the provider component produced a request that cannot be sent; see the server log"
        }
        TransportError::Connect(_) => "cannot connect to the provider",
        TransportError::UnknownHost(_) => {
            "the provider's endpoint names a host that does not exist; see the server log"
        }
        TransportError::Timeout => "the provider did not answer in time",
        TransportError::Io(_) => "the connection to the provider failed",
        TransportError::BodyTooLarge { .. } => "the provider's answer exceeds the gateway's size limit",
        TransportError::Signing(_) => "the request could not be signed; see the server log",
        TransportError::Certificate(_) => "the provider's TLS certificate does not verify; see the server log",
    }
}

fn upstream_message(model: &str, provider: &str, class: &UpstreamClass) -> String {
    let what = match class {
        UpstreamClass::RateLimited => "the provider rate-limited the call; retry later".to_owned(),
        UpstreamClass::Overloaded => "the provider is overloaded; retry later".to_owned(),
        UpstreamClass::QuotaExhausted => "the provider account is out of credit or quota; top up its balance, \
                                          raise its spend limit, lower the response size (`max_tokens`: a \
                                          provider may refuse a budget the balance cannot cover), or choose \
                                          another model (the server log names the credential)"
            .to_owned(),
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

/// A failed call: what went wrong, and the same stamp an answer carries.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct CallError {
    pub error: WeirError,
    pub stamp: crate::chat::Stamp,
}

impl CallError {
    pub fn category(&self) -> Category {
        self.error.category()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::CodecError;

    /// What must never reach a caller, planted in every free-text field.
    const LEAKS: [&str; 7] = [
        "https://",
        "http://",
        "api.upstream.example",
        "OPENAI_API_KEY",
        "DATABASE_URL",
        "openai-api-key",
        "upstream said",
    ];
    const URL: &str = "https://api.upstream.example/v1";
    const UPSTREAM_TEXT: &str = "upstream said: your key sk-123 for OPENAI_API_KEY at https://api.upstream.example";

    fn credential_errors() -> Vec<CredentialError> {
        vec![
            CredentialError::Missing {
                provider: "openai".into(),
                credential: "openai-api-key".into(),
                location: "environment variable OPENAI_API_KEY".into(),
            },
            CredentialError::NoRegion { provider: "p".into(), location: "environment variable DATABASE_URL".into() },
            CredentialError::Aws {
                provider: "p".into(),
                credential: "openai-api-key".into(),
                reason: UPSTREAM_TEXT.into(),
            },
            CredentialError::NotNamed { provider: "p".into() },
        ]
    }

    fn reach_errors() -> Vec<ReachError> {
        vec![
            ReachError::UntrustedDefault { provider: "p".into(), component: URL.into(), what: "endpoint" },
            ReachError::NoEndpoint { provider: "p".into() },
            ReachError::BadEndpoint { endpoint: URL.into() },
            ReachError::PlainHttp { endpoint: "http://api.upstream.example".into() },
            ReachError::SigningService { provider: "p".into(), service: "s3".into(), allowed: "`bedrock`".into() },
            ReachError::SigningHost { provider: "p".into(), host: "api.upstream.example".into(), allowed: "x".into() },
        ]
    }

    fn transport_errors() -> Vec<TransportError> {
        vec![
            TransportError::InvalidRequest(UPSTREAM_TEXT.into()),
            TransportError::Connect(format!("error sending request for url ({URL}): connection refused")),
            TransportError::Timeout,
            TransportError::Io(UPSTREAM_TEXT.into()),
            TransportError::BodyTooLarge { limit: 1 },
            TransportError::Signing(UPSTREAM_TEXT.into()),
            TransportError::Certificate(format!("invalid peer certificate for {URL}: UnknownIssuer")),
        ]
    }

    fn upstream(class: UpstreamClass) -> WeirError {
        WeirError::Upstream {
            model: "m".into(),
            provider: "p".into(),
            credential: Some("openai-api-key".into()),
            status: 400,
            class,
            retry_hint: None,
        }
    }

    /// One of every variant (and of every nested error a variant carries). The
    /// match below has no wildcard: a new variant does not compile until it is
    /// rendered here too.
    fn every_error() -> Vec<WeirError> {
        let model = || "m".to_owned();
        let mut errors = vec![
            WeirError::Unauthenticated(AuthError::Missing),
            WeirError::Unauthenticated(AuthError::Unknown),
            WeirError::Unauthenticated(AuthError::Expired { key: "old-key".into() }),
            WeirError::ModelNotPermitted { key: "bob-key".into(), model: model() },
            WeirError::UnknownModel(model()),
            WeirError::InvalidRequest("model `m`: messages[0]: unknown role".into()),
            WeirError::Reserve(ReserveError::Undeclared { model: model() }),
            WeirError::CapabilityMismatch { model: model(), capability: Capability::Vision, needed_for: "an image" },
            WeirError::ProviderUnavailable { model: model(), provider: "p".into() },
            WeirError::Compliance { model: model(), reason: "the envelope refuses data sharing".into() },
            WeirError::Admission(AdmissionError::DeadlinePassed { model: model() }),
            WeirError::Refused { model: model(), category: Some(UPSTREAM_TEXT.into()), explanation: None },
            WeirError::OutputTruncated { model: model(), max_tokens: 1, ceiling: 1 },
            WeirError::EmptyResponses { model: model(), count: 2 },
            WeirError::InvalidAnswer {
                model: model(),
                corrections: 1,
                reason: "required field `$.a` is missing".into(),
            },
            WeirError::UnusableAnswer { model: model(), reason: "vector 3 has 1024 values, not 512".into() },
            WeirError::Plugin {
                model: model(),
                source: PluginError::Fault { provider: "p".into(), reason: UPSTREAM_TEXT.into() },
            },
            WeirError::Plugin {
                model: model(),
                source: PluginError::Codec { provider: "p".into(), error: CodecError::Malformed(UPSTREAM_TEXT.into()) },
            },
            WeirError::Plugin {
                model: model(),
                source: PluginError::Codec { provider: "p".into(), error: CodecError::Unsupported("no images".into()) },
            },
        ];
        errors.extend(credential_errors().into_iter().map(|source| WeirError::Credential { model: model(), source }));
        errors.extend(reach_errors().into_iter().map(|source| WeirError::Reach { model: model(), source }));
        errors.extend(transport_errors().into_iter().map(|source| WeirError::Transport {
            model: model(),
            provider: "p".into(),
            source,
        }));
        errors.extend(
            [
                UpstreamClass::RateLimited,
                UpstreamClass::Overloaded,
                UpstreamClass::QuotaExhausted,
                UpstreamClass::Transient,
                UpstreamClass::Refused { category: Some(UPSTREAM_TEXT.into()) },
                UpstreamClass::InvalidRequest,
                UpstreamClass::Authentication,
                UpstreamClass::NotFound,
                UpstreamClass::ContextOverflow,
                UpstreamClass::Uncorrectable,
            ]
            .into_iter()
            .map(upstream),
        );
        let leaky =
            || WeirError::Transport { model: model(), provider: "p".into(), source: transport_errors().remove(1) };
        errors.push(WeirError::RetriesExhausted { attempts: 3, last: Box::new(leaky()) });
        errors.push(WeirError::AttemptCeiling {
            model: model(),
            attempts: 6,
            pending: Pending::Retry(Box::new(leaky())),
        });
        errors.push(WeirError::AttemptCeiling { model: model(), attempts: 6, pending: Pending::Escalation });
        errors.push(WeirError::AttemptTimedOut { model: model(), limit: Duration::from_secs(600) });
        errors.push(WeirError::DeadlineExceeded { model: model() });
        errors.push(WeirError::MidStream { model: model(), deltas: 1, bytes: 2, source: Box::new(leaky()) });
        errors.push(WeirError::LedgerUnavailable(format!("/var/lib/weir/ledger.db: {UPSTREAM_TEXT}")));
        errors.push(WeirError::ModelChoiceRefused { model: model() });
        errors.push(WeirError::RoleUnavailable { role: "chat".into(), reason: Box::new(leaky()) });
        errors.push(WeirError::ContextOverflow {
            model: model(),
            input: 9_000,
            output: 1_000,
            margin: 512,
            window: 8_192,
        });
        errors.push(WeirError::Budget(BudgetError::Exhausted {
            scope: crate::budget::Scope::Member("ana".into()),
            kind: crate::budget::Kind::Usd,
            period: crate::budget::Period::Month,
            remaining: crate::budget::Amount::Usd(0.25),
            needed: crate::budget::Amount::Usd(0.5),
            resets_at: std::time::UNIX_EPOCH,
            resets_in: Duration::from_secs(1),
        }));
        errors.push(WeirError::Budget(BudgetError::CallCeiling {
            scope: crate::budget::Scope::Key("k1".into()),
            ceiling: crate::budget::Amount::Tokens(10),
            needed: crate::budget::Amount::Tokens(11),
        }));
        for error in &errors {
            match error {
                WeirError::Unauthenticated(_)
                | WeirError::ModelNotPermitted { .. }
                | WeirError::UnknownModel(_)
                | WeirError::InvalidRequest(_)
                | WeirError::Reserve(_)
                | WeirError::CapabilityMismatch { .. }
                | WeirError::NativeNotTaken { .. }
                | WeirError::ProviderUnavailable { .. }
                | WeirError::Credential { .. }
                | WeirError::Reach { .. }
                | WeirError::Compliance { .. }
                | WeirError::Admission(_)
                | WeirError::Plugin { .. }
                | WeirError::Transport { .. }
                | WeirError::Upstream { .. }
                | WeirError::Refused { .. }
                | WeirError::OutputTruncated { .. }
                | WeirError::EmptyResponses { .. }
                | WeirError::InvalidAnswer { .. }
                | WeirError::UnusableAnswer { .. }
                | WeirError::RetriesExhausted { .. }
                | WeirError::AttemptCeiling { .. }
                | WeirError::AttemptTimedOut { .. }
                | WeirError::DeadlineExceeded { .. }
                | WeirError::MidStream { .. }
                | WeirError::ModelChoiceRefused { .. }
                | WeirError::RoleUnavailable { .. }
                | WeirError::ContextOverflow { .. }
                | WeirError::LedgerUnavailable(_)
                | WeirError::Budget(_) => {}
            }
        }
        errors
    }

    #[test]
    fn no_caller_message_carries_a_url_host_variable_credential_id_or_upstream_text() {
        let errors = every_error();
        assert!(errors.len() > 30, "{}", errors.len());
        for error in &errors {
            let message = error.safe_message();
            for leak in LEAKS {
                assert!(!message.contains(leak), "caller message of {error:?} contains `{leak}`: {message}");
            }
            // These concern the request or the gateway, not a model.
            let own_words = matches!(
                error,
                WeirError::InvalidRequest(_)
                    | WeirError::UnknownModel(_)
                    | WeirError::Unauthenticated(_)
                    | WeirError::LedgerUnavailable(_)
                    | WeirError::Budget(_)
            );
            assert!(own_words || message.contains("`m`"), "names the model: {message}");
        }
    }

    #[test]
    fn edge_categories_answer_their_own_statuses() {
        let pairs = [
            (Category::PayloadTooLarge, "payload_too_large", 413),
            (Category::UnsupportedMediaType, "unsupported_media_type", 415),
            (Category::ForbiddenOrigin, "forbidden_origin", 403),
            (Category::MisdirectedRequest, "misdirected_request", 421),
            (Category::HeadTooLarge, "request_head_too_large", 431),
            (Category::RequestTimeout, "request_timeout", 408),
            (Category::GatewayBusy, "gateway_busy", 503),
            (Category::LedgerUnavailable, "ledger_unavailable", 503),
            (Category::CapabilityMismatch, "capability_mismatch", 400),
            (Category::BudgetExhausted, "budget_exhausted", 429),
            (Category::CallBudgetExceeded, "call_budget_exceeded", 400),
        ];
        for (category, name, status) in pairs {
            assert_eq!((category.as_str(), category.http_status()), (name, status));
        }
    }

    #[test]
    fn the_credit_guidance_names_what_a_caller_can_correct() {
        let message = upstream(UpstreamClass::QuotaExhausted).safe_message();
        for correction in ["balance", "spend limit", "response size", "`max_tokens`", "another model"] {
            assert!(message.contains(correction), "{correction}: {message}");
        }
    }

    #[test]
    fn the_log_keeps_what_the_caller_does_not_see() {
        let missing = WeirError::Credential { model: "m".into(), source: credential_errors().remove(0) };
        assert!(missing.to_string().contains("OPENAI_API_KEY"), "{missing}");
        let quota = upstream(UpstreamClass::QuotaExhausted);
        assert!(quota.to_string().contains("openai-api-key"), "{quota}");
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
