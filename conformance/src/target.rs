//! Which (provider key, wire id) pairs the embeddings and rerank checks run on.
//!
//! Unlike chat's, their generic checks need a wire id the key really serves:
//! `max-batch`, `needs-dimensions` and a family's body rules all depend on it,
//! and a component refuses an id it does not serve. So the kit tries its own
//! [`MODEL`] (what the chat checks send) and every wire id the fixtures'
//! `embeddings_encode` / `rerank_encode` cases name, and keeps those `serves`
//! answers true for.

use std::collections::HashSet;

use crate::dialect::Case;
use crate::fixture::ProviderSummary;
use crate::generic::MODEL;
use crate::report::Report;
use crate::subject::{Operation, Subject};

/// One wire id to check a provider key's operation with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub provider: String,
    pub wire_id: String,
    /// The width the fixture asks for with this id, which the dimensions check
    /// then asks for too (some models take only a few widths).
    pub dimensions: Option<u32>,
}

/// The targets of `operation` for `providers`: [`MODEL`] for every key, then
/// each wire id a fixture of that operation names, in file order.
pub fn targets(operation: Operation, providers: &[ProviderSummary], cases: &[Case]) -> Vec<Target> {
    let generic = providers.iter().map(|provider| Target {
        provider: provider.key.clone(),
        wire_id: MODEL.to_owned(),
        dimensions: None,
    });
    let named = cases.iter().filter_map(|case| match (operation, case) {
        (Operation::Embeddings, Case::EmbeddingsEncode { provider, params, .. }) => {
            Some(Target { provider: provider.clone(), wire_id: params.model.clone(), dimensions: params.dimensions })
        }
        (Operation::Rerank, Case::RerankEncode { provider, params, .. }) => {
            Some(Target { provider: provider.clone(), wire_id: params.model.clone(), dimensions: None })
        }
        _ => None,
    });
    generic.chain(named).collect()
}

/// The targets of `provider` that `operation`'s `serves` answers true for, in
/// order, each wire id once (the first fixture's width wins). A fault is
/// recorded as the failure of that wire id's `serves`.
pub async fn served<S: Subject>(
    subject: &S,
    operation: Operation,
    provider: &ProviderSummary,
    targets: &[Target],
    report: &mut Report,
) -> Vec<Target> {
    let mut seen = HashSet::new();
    let mut served = Vec::new();
    for target in targets.iter().filter(|target| target.provider == provider.key) {
        if !seen.insert(target.wire_id.clone()) {
            continue;
        }
        match subject.serves(operation, &provider.key, &target.wire_id).await {
            Ok(true) => served.push(target.clone()),
            Ok(false) => {}
            Err(fault) => report.record(
                &provider.key,
                format!("{operation} `{}`: serves answers", target.wire_id),
                Err(format!("fault: {}", fault.0)),
            ),
        }
    }
    served
}

/// The failure of an operation none of whose targets any key serves: the kit
/// checked nothing of it, and says why rather than passing.
pub fn none_served(targets: &[Target]) -> String {
    let mut ids: Vec<&str> = targets.iter().map(|target| target.wire_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    format!(
        "no provider key serves any of {ids:?}, so none of its checks ran; give fixtures (--fixtures DIR) whose \
         encode cases name the wire ids it serves"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(provider: &str, wire_id: &str) -> Target {
        Target { provider: provider.to_owned(), wire_id: wire_id.to_owned(), dimensions: None }
    }

    #[test]
    fn none_served_names_each_wire_id_once() {
        let reason = none_served(&[target("a", MODEL), target("b", MODEL), target("a", "m-2")]);
        assert!(reason.contains(&format!("[\"m-2\", \"{MODEL}\"]")), "{reason}");
        assert!(reason.contains("--fixtures"), "{reason}");
    }

    #[test]
    fn fixtures_add_their_wire_ids_to_the_generic_one() {
        let cases = crate::dialect::parse(
            r#"[{"kind": "embeddings_encode", "name": "n", "provider": "p", "inputs": ["x"],
                 "params": {"model": "embed-1", "dimensions": 512}, "expect": {}},
                {"kind": "rerank_encode", "name": "n", "provider": "p", "query": "q", "documents": ["d"],
                 "params": {"model": "rank-1"}, "expect": {}}]"#,
        )
        .unwrap();
        let providers = [ProviderSummary {
            key: "p".to_owned(),
            default_endpoint: None,
            credential_header: None,
            streaming: false,
            framing: crate::fixture::Framing::Sse,
            media: crate::fixture::MediaSources::default(),
            thinking: false,
        }];
        let embeddings = targets(Operation::Embeddings, &providers, &cases);
        assert_eq!(embeddings, vec![target("p", MODEL), Target { dimensions: Some(512), ..target("p", "embed-1") }]);
        assert_eq!(targets(Operation::Rerank, &providers, &cases), vec![target("p", MODEL), target("p", "rank-1")]);
    }
}
