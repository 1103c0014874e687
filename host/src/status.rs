//! What an operator asks about a running Weir: which providers are loaded from
//! where, whether each has its credential, which models are callable.

use serde::Serialize;

use crate::Weir;
use crate::plugin::Provider;
use crate::transport::EnvSecretStore;
use crate::types::{Capabilities, CredentialShape};

/// One loaded provider.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProviderStatus {
    pub key: String,
    pub description: String,
    /// `embedded:<name>` or the component file's path.
    pub source: String,
    pub digest: String,
    pub world_version: String,
    pub capabilities: Vec<&'static str>,
    /// Where the host puts the secret, e.g. `header authorization: Bearer <openai-api-key>`.
    pub credential: String,
    /// Whether a call could be authenticated now (its secret is set or not needed).
    pub configured: bool,
    pub default_endpoint: Option<String>,
}

/// One catalog model.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelStatus {
    pub id: String,
    pub provider: String,
    pub wire_id: String,
    pub endpoint: Option<String>,
    /// Whether its provider is loaded.
    pub available: bool,
}

impl Weir {
    pub fn provider_statuses(&self) -> Vec<ProviderStatus> {
        self.registry().providers().map(|provider| self.provider_status(provider)).collect()
    }

    pub fn model_statuses(&self) -> Vec<ModelStatus> {
        let registry = self.registry();
        self.catalog()
            .models()
            .map(|model| {
                let provider = registry.get(&model.provider);
                ModelStatus {
                    id: model.id.clone(),
                    provider: model.provider.clone(),
                    wire_id: model.wire_id.clone(),
                    endpoint: provider
                        .and_then(|provider| model.endpoint_for(provider.info()))
                        .or(model.endpoint.clone()),
                    available: provider.is_some(),
                }
            })
            .collect()
    }

    fn provider_status(&self, provider: &Provider) -> ProviderStatus {
        let info = provider.info();
        let component = provider.component();
        ProviderStatus {
            key: info.key.clone(),
            description: info.description.clone(),
            source: component.source.to_string(),
            digest: component.digest.clone(),
            world_version: component.world_version.to_owned(),
            capabilities: capability_names(info.capabilities),
            credential: describe_credential(&info.credential),
            configured: self.is_configured(&info.credential),
            default_endpoint: info.default_endpoint.clone(),
        }
    }

    fn is_configured(&self, shape: &CredentialShape) -> bool {
        match shape {
            CredentialShape::None => true,
            CredentialShape::Header(header) => {
                !header.required || self.secrets().get(&header.default_credential_id).is_some()
            }
            CredentialShape::AwsSigv4(_) => false,
        }
    }
}

fn describe_credential(shape: &CredentialShape) -> String {
    match shape {
        CredentialShape::None => "none".to_owned(),
        CredentialShape::Header(header) => format!(
            "header {}: {}<{}> ({}{})",
            header.header_name,
            header.prefix,
            header.default_credential_id,
            EnvSecretStore::variable(&header.default_credential_id),
            if header.required { "" } else { ", optional" }
        ),
        CredentialShape::AwsSigv4(sigv4) => format!("aws-sigv4 service {}", sigv4.service),
    }
}

fn capability_names(capabilities: Capabilities) -> Vec<&'static str> {
    [
        (Capabilities::STREAMING, "streaming"),
        (Capabilities::NATIVE_TOOLS, "native-tools"),
        (Capabilities::IMAGES, "images"),
        (Capabilities::DOCUMENTS, "documents"),
        (Capabilities::THINKING, "thinking"),
        (Capabilities::PROMPT_CACHE, "prompt-cache"),
        (Capabilities::STRUCTURED_OUTPUT, "structured-output"),
    ]
    .into_iter()
    .filter(|(flag, _)| capabilities.contains(*flag))
    .map(|(_, name)| name)
    .collect()
}
