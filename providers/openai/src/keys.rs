//! The Chat Completions provider keys this component serves, each with what
//! differs on its wire: where the request goes, which field names it takes,
//! and the quirks its server enforces. One table, so `describe`, `encode` and
//! the tests read the same facts.
//!
//! Every difference here was taken from the provider's own documentation or
//! from its error bodies as users reported them (December 2026):
//!
//! * Azure OpenAI: a deployment's URL names the deployment and takes an
//!   `api-version` query; the body has no `model` (learn.microsoft.com,
//!   "Azure OpenAI REST API reference", data plane inference). The v1 API
//!   (`/openai/v1/…`) takes the deployment name as `model` and no version.
//!   Both authenticate with an `api-key` header.
//! * Mistral refuses any field it does not know with a 422 `extra_forbidden`:
//!   `stream_options` and `max_completion_tokens` included; and a tool call id
//!   that is not 9 characters of `a-z`, `A-Z`, `0-9` with a 400 ("Tool call id
//!   was … but must be a-z, A-Z, 0-9, with a length of 9").
//! * DeepSeek returns its reasoning as `reasoning_content`, beside `content`;
//!   an assistant message that called tools must carry it back in the same
//!   field, or the next request is a 400 (api-docs.deepseek.com, "Thinking
//!   Mode"). So thinking goes back as `reasoning_content`, never as content.
//! * Groq, xAI and Cerebras document `max_completion_tokens`; Together,
//!   OpenRouter and DeepSeek document `max_tokens`.
//! * Together, OpenRouter and Cerebras put usage on the stream's last chunk
//!   without being asked and do not document `stream_options`, so it is not sent.

use weir_sdk::types::{Capabilities, CodecError};

use crate::dialect::Dialect;

/// The GA `api-version` the deployment shape sends when the endpoint names
/// none: the latest GA release of Azure OpenAI's data plane inference API.
/// An endpoint's own `?api-version=…` wins (the host keeps the endpoint's
/// query parameters over the component's).
pub const AZURE_API_VERSION: &str = "2024-10-21";

/// The key of Azure OpenAI's deployment URL shape.
pub const AZURE_DEPLOYMENT: &str = "azure-openai";

/// Where a key's chat request goes, relative to its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `{endpoint}/chat/completions`: the endpoint already ends in the API's
    /// base path (`…/v1`).
    Appended,
    /// `{endpoint}/openai/deployments/{wire id}/chat/completions?api-version=…`:
    /// the endpoint is the Azure resource, the wire id its deployment name.
    AzureDeployment,
    /// `{endpoint}/openai/v1/chat/completions`: Azure's v1 API.
    AzureV1,
}

/// How tool call ids must look on this key's wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolIds {
    /// Sent as the conversation carries them.
    Verbatim,
    /// Exactly nine ASCII letters or digits (Mistral): any other id is mapped
    /// to one, the same way each time, so a call and its result still match.
    NineAlphanumeric,
}

/// How an assistant turn's thinking goes back to this key's server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingBack {
    /// As its text fallback inside `content` (Chat Completions has no field for it).
    AsText,
    /// In the message's own `reasoning_content` field (DeepSeek), never in `content`.
    ReasoningContent,
}

/// One provider key: its account facts and its wire's differences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    pub key: &'static str,
    pub description: &'static str,
    /// Field names and OpenAI-only features (see [`Dialect`]).
    pub dialect: Dialect,
    pub route: Route,
    pub default_endpoint: Option<&'static str>,
    pub credential_id: &'static str,
    /// The header the credential goes in and its prefix.
    pub credential_header: (&'static str, &'static str),
    pub credential_required: bool,
    /// The field the output ceiling goes in.
    pub max_tokens_field: &'static str,
    /// Whether a streamed request asks for usage with `stream_options`.
    pub stream_usage_option: bool,
    pub tool_ids: ToolIds,
    pub thinking_back: ThinkingBack,
    /// Whether the body names the model (an Azure deployment URL already does).
    pub model_in_body: bool,
    pub capabilities: Capabilities,
}

const BEARER: (&str, &str) = ("authorization", "Bearer ");
const AZURE_KEY: (&str, &str) = ("api-key", "");

const CHAT: Capabilities = Capabilities::STREAMING
    .union(Capabilities::NATIVE_TOOLS)
    .union(Capabilities::INLINE_IMAGES)
    .union(Capabilities::IMAGE_URLS)
    .union(Capabilities::THINKING)
    .union(Capabilities::STRUCTURED_OUTPUT);

/// api.openai.com: the current field names, which its newest models require.
const OPENAI: KeySpec = KeySpec {
    key: crate::dialect::OPENAI,
    description: "OpenAI Chat Completions (api.openai.com)",
    dialect: Dialect::OpenAi,
    route: Route::Appended,
    default_endpoint: Some("https://api.openai.com/v1"),
    credential_id: "openai-api-key",
    credential_header: BEARER,
    credential_required: true,
    max_tokens_field: "max_completion_tokens",
    stream_usage_option: true,
    tool_ids: ToolIds::Verbatim,
    thinking_back: ThinkingBack::AsText,
    model_in_body: true,
    capabilities: CHAT.union(Capabilities::INLINE_DOCUMENTS),
};

/// Any other server of the dialect: no default endpoint (we never invent one),
/// an optional credential (local servers need none), the older field names.
const COMPATIBLE: KeySpec = KeySpec {
    key: crate::dialect::COMPATIBLE,
    description: "Any OpenAI-dialect server (vLLM, llama.cpp, Ollama, ...), read leniently",
    dialect: Dialect::Compatible,
    default_endpoint: None,
    credential_id: "openai-compatible-api-key",
    credential_required: false,
    max_tokens_field: "max_tokens",
    capabilities: CHAT,
    ..OPENAI
};

/// OpenAI's models on an Azure resource, by deployment. No default endpoint:
/// the resource is the deployment's fact.
const AZURE: KeySpec = KeySpec {
    key: AZURE_DEPLOYMENT,
    description: "Azure OpenAI, deployment URLs (/openai/deployments/{deployment}/…?api-version=)",
    route: Route::AzureDeployment,
    default_endpoint: None,
    credential_id: "azure-openai-api-key",
    credential_header: AZURE_KEY,
    model_in_body: false,
    capabilities: CHAT,
    ..OPENAI
};

/// The same resource through Azure's v1 API.
const AZURE_V1: KeySpec = KeySpec {
    key: "azure-openai-v1",
    description: "Azure OpenAI, the v1 API (/openai/v1/chat/completions)",
    route: Route::AzureV1,
    model_in_body: true,
    ..AZURE
};

/// A hosted OpenAI-compatible service: the compatible dialect on its own
/// endpoint and key.
const fn preset(
    key: &'static str,
    description: &'static str,
    endpoint: &'static str,
    credential_id: &'static str,
) -> KeySpec {
    KeySpec {
        key,
        description,
        default_endpoint: Some(endpoint),
        credential_id,
        credential_required: true,
        ..COMPATIBLE
    }
}

const MISTRAL: KeySpec = KeySpec {
    stream_usage_option: false,
    tool_ids: ToolIds::NineAlphanumeric,
    ..preset("mistral", "Mistral AI (api.mistral.ai)", "https://api.mistral.ai/v1", "mistral-api-key")
};

const GROQ: KeySpec = KeySpec {
    max_tokens_field: "max_completion_tokens",
    ..preset("groq", "Groq (api.groq.com)", "https://api.groq.com/openai/v1", "groq-api-key")
};

const DEEPSEEK: KeySpec = KeySpec {
    thinking_back: ThinkingBack::ReasoningContent,
    ..preset("deepseek", "DeepSeek (api.deepseek.com)", "https://api.deepseek.com/v1", "deepseek-api-key")
};

const XAI: KeySpec = KeySpec {
    max_tokens_field: "max_completion_tokens",
    ..preset("xai", "xAI (api.x.ai)", "https://api.x.ai/v1", "xai-api-key")
};

const TOGETHER: KeySpec = KeySpec {
    stream_usage_option: false,
    ..preset("together", "Together AI (api.together.xyz)", "https://api.together.xyz/v1", "together-api-key")
};

const OPENROUTER: KeySpec = KeySpec {
    stream_usage_option: false,
    ..preset("openrouter", "OpenRouter (openrouter.ai)", "https://openrouter.ai/api/v1", "openrouter-api-key")
};

const CEREBRAS: KeySpec = KeySpec {
    max_tokens_field: "max_completion_tokens",
    stream_usage_option: false,
    ..preset("cerebras", "Cerebras (api.cerebras.ai)", "https://api.cerebras.ai/v1", "cerebras-api-key")
};

/// Every Chat Completions key, in the order `describe` lists them.
pub const ALL: [KeySpec; 11] =
    [OPENAI, COMPATIBLE, AZURE, AZURE_V1, MISTRAL, GROQ, DEEPSEEK, XAI, TOGETHER, OPENROUTER, CEREBRAS];

/// The spec of a Chat Completions key; `None` for any other key.
pub fn spec(key: &str) -> Option<&'static KeySpec> {
    ALL.iter().find(|spec| spec.key == key)
}

/// The key's route for `operation` (`/chat/completions`, `/embeddings`).
pub fn route(spec: &KeySpec, wire_id: &str, operation: &str) -> Result<String, CodecError> {
    match spec.route {
        Route::Appended => Ok(operation.to_owned()),
        Route::AzureV1 => Ok(format!("/openai/v1{operation}")),
        Route::AzureDeployment => azure_deployment_route(wire_id, operation),
    }
}

/// `/openai/deployments/{deployment}{operation}?api-version=…`.
pub fn azure_deployment_route(wire_id: &str, operation: &str) -> Result<String, CodecError> {
    let deployment = deployment_name(wire_id)?;
    Ok(format!("/openai/deployments/{deployment}{operation}?api-version={AZURE_API_VERSION}"))
}

/// An Azure deployment name goes into the path as it is: letters, digits, `-`,
/// `_` and `.` are all Azure allows in one, and none needs escaping. Anything
/// else is refused rather than escaped into a URL Azure never serves.
fn deployment_name(wire_id: &str) -> Result<&str, CodecError> {
    let valid = !wire_id.is_empty()
        && wire_id.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'));
    if valid {
        Ok(wire_id)
    } else {
        Err(CodecError::Unsupported(format!(
            "{wire_id:?} is not an Azure deployment name (letters, digits, '-', '_', '.')"
        )))
    }
}

/// The spec of the two keys logprobs and rerank serve, by their dialect.
pub fn of_dialect(dialect: Dialect) -> &'static KeySpec {
    match dialect {
        Dialect::OpenAi => &OPENAI,
        Dialect::Compatible => &COMPATIBLE,
    }
}

/// The id Mistral accepts for `id`: kept when it already is nine letters or
/// digits, else nine base-62 digits of its 64-bit FNV-1a hash, so the same id
/// maps to the same value in the call and in its result.
pub fn nine_alphanumeric(id: &str) -> String {
    if id.len() == 9 && id.bytes().all(|byte| byte.is_ascii_alphanumeric()) {
        return id.to_owned();
    }
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (0..9)
        .map(|_| {
            let digit = DIGITS[(hash % 62) as usize];
            hash /= 62;
            char::from(digit)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    #[test]
    fn every_key_once_and_found_by_name() {
        for each in &ALL {
            assert_eq!(spec(each.key), Some(each), "{}", each.key);
            assert_eq!(ALL.iter().filter(|other| other.key == each.key).count(), 1);
        }
        assert_eq!(spec("openai-responses"), None, "the Responses wire has its own module");
        assert_eq!(spec("anthropic"), None);
    }

    #[test]
    fn presets_have_an_endpoint_and_a_required_key_named_after_the_provider() {
        for key in ["mistral", "groq", "deepseek", "xai", "together", "openrouter", "cerebras"] {
            let spec = spec(key).unwrap();
            assert!(spec.default_endpoint.unwrap().starts_with("https://"), "{key}");
            assert_eq!(spec.credential_id, format!("{key}-api-key"));
            assert!(spec.credential_required, "{key}");
            assert_eq!(spec.dialect, Dialect::Compatible, "{key}");
            assert_eq!(spec.credential_header, BEARER, "{key}");
        }
    }

    #[test]
    fn azure_has_no_default_endpoint_and_its_own_header() {
        for key in ["azure-openai", "azure-openai-v1"] {
            let spec = spec(key).unwrap();
            assert_eq!(spec.default_endpoint, None);
            assert_eq!(spec.credential_id, "azure-openai-api-key");
            assert_eq!(spec.credential_header, ("api-key", ""));
            assert_eq!(spec.dialect, Dialect::OpenAi);
        }
        assert!(!spec("azure-openai").unwrap().model_in_body);
        assert!(spec("azure-openai-v1").unwrap().model_in_body);
    }

    #[test]
    fn routes() {
        let azure = spec("azure-openai").unwrap();
        assert_eq!(
            route(azure, "gpt-4o-prod", "/chat/completions").unwrap(),
            "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(
            route(azure, "emb.v3_small", "/embeddings").unwrap(),
            "/openai/deployments/emb.v3_small/embeddings?api-version=2024-10-21"
        );
        for bad in ["", "a/b", "d?x=1", "d e", "d%2F"] {
            let refused = route(azure, bad, "/chat/completions");
            assert!(
                matches!(refused, Err(CodecError::Unsupported(m)) if m.contains("not an Azure deployment name")),
                "{bad}"
            );
        }
        let v1 = spec("azure-openai-v1").unwrap();
        assert_eq!(route(v1, "any/thing", "/chat/completions").unwrap(), "/openai/v1/chat/completions");
        assert_eq!(route(spec("mistral").unwrap(), "m", "/chat/completions").unwrap(), "/chat/completions");
    }

    #[test]
    fn mistral_ids_are_nine_alphanumerics_and_stable() {
        assert_eq!(nine_alphanumeric("aB3xK9mP2"), "aB3xK9mP2", "an id Mistral made is kept");
        for id in ["call_PTLP8xhu3uwZk4l3nlnrrJha", "toolu_01A09q90qw90lq917835lq9", "call_0", "", "aB3xK9mP!"] {
            let mapped = nine_alphanumeric(id);
            assert_eq!(mapped.len(), 9, "{id}");
            assert!(mapped.bytes().all(|byte| byte.is_ascii_alphanumeric()), "{mapped}");
            assert_eq!(mapped, nine_alphanumeric(id), "the same id maps the same way");
        }
        assert_ne!(nine_alphanumeric("call_1"), nine_alphanumeric("call_2"));
    }
}
