//! Which loaded provider serves each catalog entry: the entry's own provider
//! when it speaks the entry's wire id, else — when no loaded component has the
//! entry's provider key — a provider *linked* by what the components declare.
//!
//! The rule (also in `wit/README.md` and the book's docs/src/configuration/catalog.md):
//!
//! - A provider's **addressing** is the endpoint family its wire ids are spelled
//!   for. WIT 0.1.0 has no field for it, so the host derives it: the host of the
//!   provider's `default-endpoint`, with the `{region}` placeholder kept
//!   (`api.anthropic.com`, `bedrock-runtime.{region}.amazonaws.com`,
//!   `bedrock-mantle.{region}.api.aws` are three). A provider without a default
//!   endpoint has none and is never linked to.
//! - A **candidate** is a loaded provider whose component the operator vouched
//!   for (embedded or allow-listed: an untrusted file takes no part in linking),
//!   that has an addressing, and that both `serves` and `claims` the wire id.
//! - An entry with an `endpoint` whose host is the addressing of a loaded
//!   (trusted) provider links only to a candidate of that addressing. An entry
//!   without an endpoint, or with one no provider's addressing names (a proxy,
//!   a private host: it says nothing about how ids are spelled), links only
//!   when exactly one candidate exists.
//! - Anything else — none, or several — leaves the entry unavailable with the
//!   reason: an ambiguity is never resolved silently.
//!
//! A linked entry is then resolved like any other (see [`crate::reach`]): its
//! endpoint, else the linked provider's default if that component is trusted.

use crate::plugin::addressing_of;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ModelSpec, RoleKind};
use crate::config::{RetentionProjects, binds_retention};
use crate::plugin::{Operation, Provider, ProviderRegistry, Route};
use crate::reach;

/// The placeholder an addressing keeps for the region label.
const REGION: &str = "{region}";

/// How an entry routes against a registry.
#[derive(Debug)]
pub(crate) enum Routing {
    Route(Route),
    /// The entry's own provider is loaded and says it does not speak the wire
    /// id: a configuration error at start (the message names all three).
    NotServed(String),
}

/// Whether `host` belongs to `addressing`: label by label, a `{region}` label
/// standing for any one region label (`us-east-1`).
fn is_of(addressing: &str, host: &str) -> bool {
    let (mut pattern, mut labels) = (addressing.split('.'), host.split('.'));
    loop {
        match (pattern.next(), labels.next()) {
            (None, None) => return true,
            (Some(REGION), Some(label)) => {
                let region_like = !label.is_empty()
                    && (label == REGION || label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
                if !region_like {
                    return false;
                }
            }
            (Some(expected), Some(label)) if expected == label => {}
            _ => return false,
        }
    }
}

/// A provider that may take the entry, as the rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate<'a> {
    pub key: &'a str,
    pub addressing: &'a str,
}

/// The rule itself, on plain data: which candidate the entry links to, or why
/// none. `addressings` are those of every trusted loaded provider;
/// `candidates` those that serve and claim the wire id.
pub(crate) fn choose<'a>(
    wire_id: &str,
    endpoint: Option<&str>,
    addressings: &[&str],
    candidates: &[Candidate<'a>],
) -> Result<&'a str, String> {
    let endpoint_addressing = endpoint
        .and_then(addressing_of)
        .and_then(|host| addressings.iter().find(|addressing| is_of(addressing, &host)).map(|_| host));
    let fitting: Vec<&Candidate<'a>> = match &endpoint_addressing {
        Some(host) => candidates.iter().filter(|candidate| is_of(candidate.addressing, host)).collect(),
        None => candidates.iter().collect(),
    };
    match (fitting.as_slice(), &endpoint_addressing) {
        ([only], _) => Ok(only.key),
        ([], Some(host)) => {
            Err(format!("no loaded provider of the endpoint's addressing ({host}) serves and claims `{wire_id}`"))
        }
        ([], None) => Err(format!("no loaded provider serves and claims `{wire_id}`")),
        (several, _) => {
            let names: Vec<String> =
                several.iter().map(|candidate| format!("`{}` ({})", candidate.key, candidate.addressing)).collect();
            Err(format!(
                "ambiguous: {} all serve and claim `{wire_id}`; name one as the entry's provider, or give it an \
                 `endpoint` of one's addressing",
                names.join(", ")
            ))
        }
    }
}

/// Routes one entry against `registry`. Asks components `serves` / `claims`
/// (answers are kept with each component, so only the first registry that
/// asks pays for a question). `retention` is the config's `[retention.*]`.
pub(crate) fn route(
    model: &ModelSpec,
    registry: &ProviderRegistry,
    retention: &BTreeMap<String, RetentionProjects>,
) -> Routing {
    if model.host_spoken() {
        return Routing::Route(Route::Host);
    }
    if model.kind != RoleKind::Chat {
        return route_retrieval(model, registry);
    }
    if let Some(provider) = registry.get(&model.provider) {
        return match provider.serves(&model.wire_id) {
            Ok(true) => Routing::Route(Route::Direct(Arc::clone(provider))),
            Ok(false) => Routing::NotServed(format!(
                "model `{}`: provider `{}` does not serve wire id `{}` (its component says it does not speak that \
                 model's request shape: an id spelled for another surface?)",
                model.id, model.provider, model.wire_id
            )),
            Err(fault) => Routing::Route(Route::Unavailable(format!(
                "provider `{}` could not say whether it serves `{}`: {fault}",
                model.provider, model.wire_id
            ))),
        };
    }
    Routing::Route(link(model, registry, retention))
}

/// An embedding, rerank or log-probability decision entry: its provider must export the operation and
/// serve the wire id for it (`embeddings.serves` / `rerank.serves`). Such
/// entries are never linked: they name their provider. An embedding entry of
/// a model only called at a pinned width must pin one; the provider's batch
/// limit is asked here, so no call asks it.
fn route_retrieval(model: &ModelSpec, registry: &ProviderRegistry) -> Routing {
    let Some(provider) = registry.get(&model.provider) else {
        return Routing::Route(Route::Unavailable(format!(
            "provider `{}` is not loaded (a {} entry is never linked to another provider)",
            model.provider,
            model.kind.as_str()
        )));
    };
    let operation = match model.kind {
        RoleKind::Embedding => Operation::Embeddings,
        RoleKind::Decision => Operation::Logprobs,
        RoleKind::Rerank | RoleKind::Chat => Operation::Rerank,
    };
    let fault = |fault: crate::plugin::PluginError| {
        Routing::Route(Route::Unavailable(format!(
            "provider `{}` could not say how it serves `{}`: {fault}",
            model.provider, model.wire_id
        )))
    };
    match provider.serves_operation(operation, &model.wire_id) {
        Ok(true) => {}
        Ok(false) => {
            return Routing::NotServed(format!(
                "model `{}`: provider `{}` does not serve wire id `{}` for {} (its component {} that operation)",
                model.id,
                model.provider,
                model.wire_id,
                operation.interface(),
                if provider.exports(operation) {
                    "says it does not speak that model's request shape for"
                } else {
                    "does not export"
                }
            ));
        }
        Err(error) => return fault(error),
    }
    if operation == Operation::Embeddings {
        if let Err(error) = provider.max_batch(&model.wire_id) {
            return fault(error);
        }
        match provider.needs_dimensions(&model.wire_id) {
            Ok(true) if model.embedding_dimensions.is_none() => {
                return Routing::NotServed(format!(
                    "model `{}`: provider `{}` calls `{}` only at a width it is asked for (e.g. Cohere Embed's \
                     `output_dimension`): pin `embedding_dimensions`",
                    model.id, model.provider, model.wire_id
                ));
            }
            Ok(_) => {}
            Err(error) => return fault(error),
        }
    }
    Routing::Route(Route::Direct(Arc::clone(provider)))
}

/// An entry whose provider key no loaded component has: linked, or unavailable.
fn link(model: &ModelSpec, registry: &ProviderRegistry, retention: &BTreeMap<String, RetentionProjects>) -> Route {
    let trusted: Vec<&Arc<Provider>> =
        registry.providers().filter(|provider| provider.trust().honours_defaults()).collect();
    let addressings: Vec<&str> = trusted.iter().filter_map(|provider| provider.addressing()).collect();
    let mut candidates = Vec::new();
    for provider in &trusted {
        let Some(addressing) = provider.addressing() else { continue };
        match provider.answers(&model.wire_id) {
            Ok(answers) if answers.serves && answers.claims => {
                candidates.push(Candidate { key: provider.key(), addressing });
            }
            Ok(_) => {}
            Err(fault) => {
                tracing::warn!(model = %model.id, provider = provider.key(), %fault, "provider skipped for links");
            }
        }
    }
    let chosen = match choose(&model.wire_id, model.endpoint.as_deref(), &addressings, &candidates) {
        Ok(key) => key,
        Err(reason) => return unlinked(model, reason),
    };
    let Some(provider) = registry.get(chosen) else {
        return unlinked(model, format!("provider `{chosen}` is no longer loaded"));
    };
    // A data-sharing entry goes only where its retention project is bound.
    if model.requires_lax && !(binds_retention(chosen) && retention.contains_key(chosen)) {
        return unlinked(
            model,
            format!(
                "it requires data sharing (`requires_lax`) and provider `{chosen}`, which serves and claims `{}`, \
                 binds no retention project (no `[retention.{chosen}]`)",
                model.wire_id
            ),
        );
    }
    // The same rules as any entry: an untrusted default is never honoured.
    let source = &provider.component().source;
    if let Err(reason) = reach::destination(model.reach(), provider.info(), provider.trust(), source) {
        return unlinked(model, format!("linking it to provider `{chosen}` would break a reach rule: {reason}"));
    }
    Route::Linked(Arc::clone(provider))
}

fn unlinked(model: &ModelSpec, reason: String) -> Route {
    Route::Unavailable(format!("provider `{}` is not loaded and the entry is not linked: {reason}", model.provider))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIRECT: &str = "api.anthropic.com";
    const RUNTIME: &str = "bedrock-runtime.{region}.amazonaws.com";
    const MANTLE: &str = "bedrock-mantle.{region}.api.aws";

    #[test]
    fn the_addressing_is_the_default_endpoints_host_with_the_region_kept() {
        assert_eq!(addressing_of("https://api.anthropic.com").as_deref(), Some(DIRECT));
        assert_eq!(addressing_of("https://bedrock-runtime.{region}.amazonaws.com").as_deref(), Some(RUNTIME));
        assert_eq!(addressing_of("https://bedrock-mantle.{region}.api.aws/anthropic").as_deref(), Some(MANTLE));
        assert_eq!(addressing_of("https://API.openai.com:443/v1?x#y").as_deref(), Some("api.openai.com"));
        assert_eq!(addressing_of("http://user:pw@127.0.0.1:8080/v1").as_deref(), Some("127.0.0.1"));
        assert_eq!(addressing_of("http://[::1]:9/v1").as_deref(), Some("::1"));
        assert_eq!(addressing_of("no-scheme.example.com"), None);
        assert_eq!(addressing_of("https:///path"), None);
    }

    #[test]
    fn a_region_label_matches_any_one_region() {
        assert!(is_of(MANTLE, "bedrock-mantle.us-east-1.api.aws"));
        assert!(is_of(MANTLE, MANTLE));
        assert!(!is_of(MANTLE, "bedrock-mantle.api.aws"));
        assert!(!is_of(MANTLE, "bedrock-mantle.a.b.api.aws"));
        assert!(!is_of(RUNTIME, "bedrock-mantle.us-east-1.api.aws"));
        assert!(is_of(DIRECT, DIRECT));
        assert!(!is_of(DIRECT, "api.anthropic.com.evil.test"));
    }

    fn candidate<'a>(key: &'a str, addressing: &'a str) -> Candidate<'a> {
        Candidate { key, addressing }
    }

    #[test]
    fn one_candidate_links_an_entry_without_an_endpoint() {
        let addressings = [DIRECT, RUNTIME, MANTLE];
        let linked = choose("claude-opus-5", None, &addressings, &[candidate("anthropic", DIRECT)]);
        assert_eq!(linked, Ok("anthropic"));
    }

    #[test]
    fn several_candidates_are_an_ambiguity_never_resolved_silently() {
        let addressings = [DIRECT, RUNTIME, MANTLE];
        let both = [candidate("anthropic-bedrock", RUNTIME), candidate("anthropic-bedrock-mantle", MANTLE)];
        let reason = choose("anthropic.claude-opus-5", None, &addressings, &both).unwrap_err();
        assert!(reason.starts_with("ambiguous:"), "{reason}");
        assert!(
            reason.contains("`anthropic-bedrock` (") && reason.contains("`anthropic-bedrock-mantle` ("),
            "{reason}"
        );
        // A proxy's endpoint says nothing about spelling: still ambiguous.
        let proxied = choose("anthropic.claude-opus-5", Some("https://llm.corp.example/x"), &addressings, &both);
        assert!(proxied.unwrap_err().starts_with("ambiguous:"));
    }

    #[test]
    fn an_endpoint_of_a_known_addressing_links_only_within_it() {
        let addressings = [DIRECT, RUNTIME, MANTLE];
        let both = [candidate("anthropic-bedrock", RUNTIME), candidate("anthropic-bedrock-mantle", MANTLE)];
        let mantle = choose(
            "anthropic.claude-opus-5",
            Some("https://bedrock-mantle.eu-west-1.api.aws/anthropic"),
            &addressings,
            &both,
        );
        assert_eq!(mantle, Ok("anthropic-bedrock-mantle"));
        let runtime = choose(
            "anthropic.claude-opus-5",
            Some("https://bedrock-runtime.eu-west-1.amazonaws.com"),
            &addressings,
            &both,
        );
        assert_eq!(runtime, Ok("anthropic-bedrock"));
        // The only candidate is of another addressing than the endpoint's: no link.
        let direct_only = [candidate("anthropic", DIRECT)];
        let reason =
            choose("claude-opus-5", Some("https://bedrock-mantle.eu-west-1.api.aws/x"), &addressings, &direct_only)
                .unwrap_err();
        assert!(reason.contains("of the endpoint's addressing (bedrock-mantle.eu-west-1.api.aws)"), "{reason}");
    }

    #[test]
    fn no_candidate_is_no_link() {
        let reason = choose("mystery-1", None, &[DIRECT], &[]).unwrap_err();
        assert_eq!(reason, "no loaded provider serves and claims `mystery-1`");
    }
}
