//! `weir check FILE.wasm`: validate a component against the world this host speaks,
//! then run the conformance kit on it — through the same engine, linker and limits
//! that serve calls, so a component that passes here behaves the same in `serve`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use weir_conformance::fixture::{Classified, Conversation, Decoded, Params, ProviderSummary, Response, WireRequest};
use weir_conformance::{Answer, Fault, FixtureError, Report, Subject, dialect};

use crate::plugin::{ComponentSource, PluginEngine, PluginError, Provider, component_digest};
use crate::reach::Trust;
use crate::types::ProviderInfo;

weir_conformance::boundary_conversions!(crate::plugin::wit_types);

/// Why a check could not run at all (as opposed to checks that failed).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// Not a component this host can load: garbage bytes, another world or version,
    /// an import this host does not grant, a `describe` that fails.
    #[error("{path} is rejected: {reason}")]
    Rejected { path: PathBuf, reason: String },
    #[error("fixtures: {0}")]
    Fixtures(#[from] FixtureError),
    #[error("cannot start the component engine: {0:#}")]
    Engine(anyhow::Error),
}

/// What `weir check` found: the component's identity and the kit's report.
#[derive(Debug)]
pub struct CheckOutcome {
    pub digest: String,
    pub world_version: &'static str,
    pub report: Report,
}

/// Loads `path` as a provider component and runs the generic checks plus the
/// fixtures in `fixtures`, if given.
pub async fn check_component(
    path: &Path,
    fixtures: Option<&Path>,
    cache_dir: Option<PathBuf>,
) -> Result<CheckOutcome, CheckError> {
    let cases = fixtures.map(dialect::load_dir).transpose()?.unwrap_or_default();
    let bytes = std::fs::read(path).map_err(|source| CheckError::Read { path: path.to_owned(), source })?;
    let engine = PluginEngine::new(cache_dir).map_err(CheckError::Engine)?;
    let digest = component_digest(&bytes);
    let component = engine
        .load(ComponentSource::File(path.to_owned()), &bytes, digest.clone())
        .map_err(|reason| CheckError::Rejected { path: path.to_owned(), reason })?;
    let world_version = component.world_version;
    let component = std::sync::Arc::new(component);
    let providers = component
        .providers
        .iter()
        .map(|info| {
            (info.key.clone(), Provider::new(info.clone(), std::sync::Arc::clone(&component), Trust::Untrusted))
        })
        .collect();
    let subject = HostSubject { infos: component.providers.clone(), providers };
    let report = weir_conformance::run(&subject, cases).await;
    Ok(CheckOutcome { digest, world_version, report })
}

/// The kit's view of a loaded component: every call is a fresh instance, as in `serve`.
struct HostSubject {
    /// As the component described itself, duplicates and all: the kit checks them.
    infos: Vec<ProviderInfo>,
    providers: HashMap<String, Provider>,
}

impl HostSubject {
    fn provider(&self, key: &str) -> Result<&Provider, Fault> {
        self.providers.get(key).ok_or_else(|| Fault(format!("the component does not serve `{key}`")))
    }
}

/// A fault ends the call; a codec error is the component's answer.
fn answer<T, U>(result: Result<T, PluginError>, convert: impl FnOnce(T) -> U) -> Answer<U> {
    match result {
        Ok(value) => Ok(Ok(convert(value))),
        Err(PluginError::Codec { error, .. }) => Ok(Err(boundary::codec_failure(error))),
        Err(PluginError::Fault { reason, .. }) => Err(Fault(reason)),
        // Not the component's doing, but the check cannot go on without an instance.
        Err(error @ PluginError::NoFreeInstance { .. }) => Err(Fault(error.to_string())),
    }
}

impl Subject for HostSubject {
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault> {
        Ok(self.infos.iter().map(boundary::summary).collect())
    }

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest> {
        let provider = self.provider(provider)?;
        let result = provider.encode(&boundary::conversation(conversation), &boundary::params(params)).await;
        answer(result, boundary::request)
    }

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded> {
        let result = self.provider(provider)?.decode(&boundary::response(response)).await;
        answer(result, boundary::decoded)
    }

    async fn classify(&self, provider: &str, response: &Response) -> Result<Classified, Fault> {
        match self.provider(provider)?.classify(&boundary::response(response)).await {
            Ok(class) => Ok(boundary::classified(class)),
            Err(error) => Err(Fault(error.to_string())),
        }
    }
}
