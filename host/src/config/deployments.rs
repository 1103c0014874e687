//! `[[model.deployment]]`: the same model served on several endpoints, each
//! with its own credential, region, wire id and limits. Parsed and checked
//! here; the catalog turns each into a spec and admission gives each its own
//! buckets and throttle (see `crate::admission::deployment`).

use std::time::Duration;

use serde::Deserialize;

/// The most deployments one entry may have: a call remembers which it has
/// tried in one 64-bit mask, so choosing allocates nothing.
pub const MAX_DEPLOYMENTS: usize = 64;

/// When a deployment's circuit opens and for how long (the entry's
/// `circuit_failures`, `circuit_open_secs`, `circuit_error_rate` and
/// `circuit_window_secs`; see `crate::admission::deployment`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CircuitSettings {
    pub failures: u32,
    pub open: Duration,
    /// The share of failed attempts in a window that opens the circuit.
    pub error_rate: f64,
    pub window: Duration,
}

/// Attempts a window needs before its error rate may open the circuit: a
/// rate over two attempts says nothing.
pub const MIN_WINDOW_ATTEMPTS: u32 = 10;

impl CircuitSettings {
    pub const DEFAULT_FAILURES: u32 = 5;
    pub const DEFAULT_OPEN: Duration = Duration::from_secs(30);
    pub const DEFAULT_ERROR_RATE: f64 = 0.5;
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
}

impl Default for CircuitSettings {
    fn default() -> Self {
        Self {
            failures: Self::DEFAULT_FAILURES,
            open: Self::DEFAULT_OPEN,
            error_rate: Self::DEFAULT_ERROR_RATE,
            window: Self::DEFAULT_WINDOW,
        }
    }
}

/// One `[[model.deployment]]` of a catalog entry.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeploymentEntry {
    /// The deployment's name, unique in its entry: what the record, the logs
    /// and the metrics call it.
    pub id: String,
    /// Base URL of this deployment (required: a deployment is an endpoint).
    pub endpoint: String,
    /// The secret's id (absent: the provider's default, on the same terms as
    /// an entry's; see `crate::reach`).
    pub credential: Option<String>,
    /// The region that fills the endpoint's `{region}` (and a SigV4 signer's
    /// region); absent, the region is resolved as for an entry.
    pub region: Option<String>,
    /// The model's name on this deployment's wire (an Azure deployment name);
    /// absent, the entry's.
    pub wire_id: Option<String>,
    /// Its share of calls when every deployment has headroom (default 1).
    pub weight: Option<u32>,
    /// Requests per minute (absent: unlimited).
    pub rpm: Option<u32>,
    /// Tokens per minute (absent: unlimited).
    pub tpm: Option<u64>,
    /// Calls in flight at once (absent: unlimited).
    pub max_concurrency: Option<u32>,
}

impl DeploymentEntry {
    /// The weight a deployment without one has.
    pub const DEFAULT_WEIGHT: u32 = 1;

    pub fn weight(&self) -> u32 {
        self.weight.unwrap_or(Self::DEFAULT_WEIGHT)
    }

    fn validate(&self, allow_http: bool) -> Result<(), String> {
        if self.id.trim().is_empty() {
            return Err("a `[[model.deployment]]` has an empty `id`".to_owned());
        }
        let named = |message: &str| format!("deployment `{}`: {message}", self.id);
        if !(self.endpoint.starts_with("http://") || self.endpoint.starts_with("https://")) {
            return Err(named(&format!(
                "`endpoint` must be an http(s) URL, not `{}`",
                crate::redact::redacted_endpoint(&self.endpoint)
            )));
        }
        crate::reach::check_entry_endpoint(&self.endpoint, allow_http).map_err(|reason| named(&reason.to_string()))?;
        if self.credential.as_deref().is_some_and(|id| id.trim().is_empty()) {
            return Err(named("`credential` is empty"));
        }
        if self.wire_id.as_deref().is_some_and(|id| id.trim().is_empty()) {
            return Err(named("`wire_id` is empty"));
        }
        if let Some(region) = &self.region
            && (region.is_empty() || !region.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        {
            return Err(named("`region` is one label of letters, digits and `-` (like `eu-west-1`)"));
        }
        if self.weight == Some(0) || self.rpm == Some(0) || self.tpm == Some(0) || self.max_concurrency == Some(0) {
            return Err(named("`weight`, `rpm`, `tpm` and `max_concurrency` must be positive when set"));
        }
        Ok(())
    }
}

/// The fields an entry with deployments leaves to them: each deployment has
/// its own, and the entry's admission is their sum.
pub(super) struct EntryFields {
    pub endpoint: bool,
    pub credential: bool,
    pub rpm: bool,
    pub tpm: bool,
    pub max_concurrency: bool,
}

/// An entry's deployments: chat entries only, none of the per-deployment
/// fields on the entry itself, unique ids, at most [`MAX_DEPLOYMENTS`].
pub(super) fn validate(
    deployments: &[DeploymentEntry],
    chat: bool,
    entry: &EntryFields,
    allow_http: bool,
) -> Result<(), String> {
    if deployments.is_empty() {
        return Ok(());
    }
    if !chat {
        return Err("`[[model.deployment]]` is read only for chat entries".to_owned());
    }
    let on_entry = [
        (entry.endpoint, "endpoint"),
        (entry.credential, "credential"),
        (entry.rpm, "rpm"),
        (entry.tpm, "tpm"),
        (entry.max_concurrency, "max_concurrency"),
    ];
    if let Some((_, field)) = on_entry.iter().find(|(set, _)| *set) {
        return Err(format!(
            "`{field}` is set on each `[[model.deployment]]` of an entry that has deployments, not on the entry \
             (its admission is the sum of theirs)"
        ));
    }
    if deployments.len() > MAX_DEPLOYMENTS {
        return Err(format!("{} deployments: an entry has at most {MAX_DEPLOYMENTS}", deployments.len()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for deployment in deployments {
        deployment.validate(allow_http)?;
        if !seen.insert(deployment.id.as_str()) {
            return Err(format!("deployment id `{}` appears twice", deployment.id));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn entry(fields: &str, deployments: &str) -> Result<Config, String> {
        let output = if fields.contains("max_output_tokens") { "" } else { "max_output_tokens = 10\n" };
        let text = format!(
            "[[model]]\nid = \"m\"\nprovider = \"openai-compatible\"\n{output}context_window = 100\n{fields}\n{deployments}"
        );
        Config::from_toml(&text, "t").map_err(|error| error.to_string())
    }

    const TWO: &str = "[[model.deployment]]\nid = \"a\"\nendpoint = \"https://a.example/v1\"\nweight = 2\n\
                       [[model.deployment]]\nid = \"b\"\nendpoint = \"https://b.example/v1\"\nwire_id = \"gpt-b\"\n";

    #[test]
    fn deployments_parse_with_their_own_fields() {
        let config = entry("", TWO).unwrap();
        let deployments = &config.models[0].deployments;
        assert_eq!(deployments.len(), 2);
        assert_eq!((deployments[0].weight(), deployments[1].weight()), (2, 1));
        assert_eq!(deployments[1].wire_id.as_deref(), Some("gpt-b"));
        assert!(entry("", "").unwrap().models[0].deployments.is_empty(), "no deployments: as today");
    }

    #[test]
    fn each_mistake_is_refused_with_what_to_fix() {
        let cases = [
            ("endpoint = \"https://x.example\"", TWO, "`endpoint` is set on each `[[model.deployment]]`"),
            ("rpm = 10", TWO, "`rpm` is set on each"),
            (
                "kind = \"embedding\"\nmax_output_tokens = 0\nembedding_dimensions = 8",
                TWO,
                "read only for chat entries",
            ),
            (
                "",
                "[[model.deployment]]\nid = \"a\"\nendpoint = \"https://a.example\"\n[[model.deployment]]\nid = \"a\"\nendpoint = \"https://b.example\"\n",
                "deployment id `a` appears twice",
            ),
            ("", "[[model.deployment]]\nid = \" \"\nendpoint = \"https://a.example\"\n", "empty `id`"),
            (
                "",
                "[[model.deployment]]\nid = \"a\"\nendpoint = \"ftp://a.example\"\n",
                "deployment `a`: `endpoint` must be an http(s) URL",
            ),
            ("", "[[model.deployment]]\nid = \"a\"\nendpoint = \"http://a.example\"\n", "deployment `a`:"),
            (
                "",
                "[[model.deployment]]\nid = \"a\"\nendpoint = \"https://a.example\"\nweight = 0\n",
                "must be positive",
            ),
            (
                "",
                "[[model.deployment]]\nid = \"a\"\nendpoint = \"https://a.example\"\nregion = \"eu/west\"\n",
                "`region` is one label",
            ),
            (
                "",
                "[[model.deployment]]\nid = \"a\"\nendpoint = \"https://a.example\"\ncredential = \"\"\n",
                "`credential` is empty",
            ),
            (
                "",
                "[[model.deployment]]\nid = \"a\"\nendpoint = \"https://a.example\"\nport = 1\n",
                "unknown field `port`",
            ),
            ("circuit_failures = 3", "", "read only for an entry with deployments"),
            ("circuit_open_secs = 0", TWO, "must be positive when set"),
            ("circuit_error_rate = 0.0", TWO, "a share above 0 and at most 1"),
            ("circuit_error_rate = 1.5", TWO, "a share above 0 and at most 1"),
            ("circuit_window_secs = 30", "", "read only for an entry with deployments"),
        ];
        for (fields, deployments, expected) in cases {
            let error = entry(fields, deployments).unwrap_err();
            assert!(error.contains(expected), "{fields} / {deployments}: {error}");
        }
        let many: String = (0..=super::MAX_DEPLOYMENTS)
            .map(|i| format!("[[model.deployment]]\nid = \"d{i}\"\nendpoint = \"https://d{i}.example\"\n"))
            .collect();
        assert!(entry("", &many).unwrap_err().contains("at most 64"));
    }
}
