//! An entry's `[[model.deployment]]`s as calls use them: each is the entry's
//! spec with its own endpoint, credential, wire id and limits, built once at
//! load; the entry's own limits become their sum (admission sees the sum).

use super::{ModelEntry, ModelSpec};
use crate::config::Config;

/// One deployment of a catalog entry.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentSpec {
    /// Its name, unique in its entry.
    pub id: String,
    /// Its share of calls when every deployment has headroom.
    pub weight: u32,
    /// The region that fills the endpoint's `{region}`, when declared.
    pub region: Option<String>,
    /// The entry as this deployment serves it: the same model, prices and
    /// policy, with this deployment's endpoint, credential, wire id and limits.
    pub spec: ModelSpec,
}

/// The deployments of `entry`, each derived from `model` (the entry's spec
/// with every load-time fact resolved).
pub(super) fn specs(entry: &ModelEntry, model: &ModelSpec, config: &Config) -> Vec<DeploymentSpec> {
    entry
        .deployments
        .iter()
        .map(|deployment| {
            let wire_id = deployment.wire_id.clone().unwrap_or_else(|| model.wire_id.clone());
            let spec = ModelSpec {
                wire_id,
                endpoint: Some(deployment.endpoint.clone()),
                credential: deployment.credential.clone(),
                minted: deployment.credential.as_deref().and_then(|id| config.token_kind(id)),
                rpm: deployment.rpm,
                tpm: deployment.tpm,
                max_concurrency: deployment.max_concurrency,
                deployments: Vec::new(),
                ..model.clone()
            };
            DeploymentSpec {
                id: deployment.id.clone(),
                weight: deployment.weight(),
                region: deployment.region.clone(),
                spec,
            }
        })
        .collect()
}

/// The sum of one limit over the deployments: `None` (unlimited) as soon as
/// one of them is unlimited on that axis.
pub(super) fn sum<T: std::ops::Add<Output = T> + Copy>(
    deployments: &[DeploymentSpec],
    limit: impl Fn(&ModelSpec) -> Option<T>,
) -> Option<T> {
    let mut limits = deployments.iter().map(|deployment| limit(&deployment.spec));
    let first = limits.next()??;
    limits.try_fold(first, |total, limit| limit.map(|limit| total + limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_limits(limits: &[(Option<u32>, Option<u64>)]) -> Vec<DeploymentSpec> {
        limits
            .iter()
            .map(|(rpm, tpm)| DeploymentSpec {
                id: "d".into(),
                weight: 1,
                region: None,
                spec: ModelSpec { rpm: *rpm, tpm: *tpm, ..ModelSpec::sample() },
            })
            .collect()
    }

    #[test]
    fn admission_sees_the_sum_and_one_unlimited_deployment_leaves_the_axis_unlimited() {
        let both = with_limits(&[(Some(10), Some(1_000)), (Some(5), None)]);
        assert_eq!(sum(&both, |spec| spec.rpm), Some(15));
        assert_eq!(sum(&both, |spec| spec.tpm), None);
        assert_eq!(sum(&[], |spec: &ModelSpec| spec.rpm), None);
    }
}
