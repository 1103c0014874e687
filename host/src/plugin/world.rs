//! Which `weir:provider` world version a component targets and which operations
//! it exports, read from its export names before anything is instantiated.
//!
//! A component exports `describe` and any non-empty mix of the operation
//! interfaces (`chat`, `embeddings`, `rerank`): what it exports is what it may
//! be asked to do. Every `weir:provider` export must carry the same version.

use wasmtime::Engine;
use wasmtime::component::Component;

/// The newest world version this host speaks: what `weir wit` writes.
pub const WORLD_VERSION: &str = "0.7.0";
/// Every world version this host speaks, oldest first. A 0.1.0–0.4.0
/// component is called through the same typed functions as a 0.5.0 one where
/// the records did not change (the component model checks function types
/// structurally), and through frozen 0.4.0's records, converted, where 0.5.0
/// changed them (`super::convert`). 0.6.0 only added (`native.decode-native`
/// and its records), and so did 0.7.0 (`native.native-stream` and
/// `native-delta`), so a 0.5.0 or 0.6.0 component is typed with the current
/// records.
pub const WORLD_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0"];
const PACKAGE: &str = "weir:provider/";
const DESCRIBE: &str = "describe";

/// One operation interface a component may export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    Chat,
    Embeddings,
    Rerank,
    /// Chat with token log-probabilities (0.3.0), for the decision backend.
    Logprobs,
    /// Chat with a dialect's own request fields (0.4.0), for the provider-shaped
    /// routes.
    Native,
}

impl Operation {
    pub const ALL: [Operation; 5] =
        [Operation::Chat, Operation::Embeddings, Operation::Rerank, Operation::Logprobs, Operation::Native];

    /// The interface's name in the WIT package.
    pub fn interface(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Embeddings => "embeddings",
            Self::Rerank => "rerank",
            Self::Logprobs => "logprobs",
            Self::Native => "native",
        }
    }

    /// The operations world `version` defines: 0.1.0 had chat only, 0.2.0
    /// added embeddings and rerank, 0.3.0 log-probabilities, 0.4.0 native fields
    /// (0.5.0 changed records, not operations; 0.6.0 added a function to
    /// `native`, 0.7.0 a resource).
    fn defined_in(self, version: &str) -> bool {
        match self {
            Self::Chat => true,
            Self::Embeddings | Self::Rerank => version != "0.1.0",
            Self::Logprobs => !matches!(version, "0.1.0" | "0.2.0"),
            Self::Native => !matches!(version, "0.1.0" | "0.2.0" | "0.3.0"),
        }
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.interface())
    }
}

/// What a component's export names say it targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Targets {
    /// One of [`WORLD_VERSIONS`].
    pub version: &'static str,
    /// The operation interfaces it exports, in [`Operation::ALL`]'s order; never empty.
    pub operations: Vec<Operation>,
}

/// The full export name of `interface` in world `version`.
pub fn export_name(interface: &str, version: &str) -> String {
    format!("{PACKAGE}{interface}@{version}")
}

/// Checks that the component exports `describe` and at least one operation of
/// one world version this host speaks, and says precisely what is wrong when
/// it does not.
pub fn check_exports(engine: &Engine, component: &Component) -> Result<Targets, String> {
    let exports: Vec<String> = component.component_type().exports(engine).map(|(name, _)| name.to_owned()).collect();
    // (interface, version) of every `weir:provider` export.
    let ours: Vec<(&str, &str)> =
        exports.iter().filter_map(|name| name.strip_prefix(PACKAGE)).filter_map(|rest| rest.split_once('@')).collect();
    let mut versions: Vec<&str> = ours.iter().map(|(_, version)| *version).collect();
    versions.sort_unstable();
    versions.dedup();
    let version = match versions.as_slice() {
        [] => {
            return Err(format!(
                "not a weir provider: it exports no `weir:provider` interface (exports: {})",
                if exports.is_empty() { "none".to_owned() } else { exports.join(", ") }
            ));
        }
        [one] => *one,
        several => {
            return Err(format!(
                "it mixes weir:provider versions {} (exports: {}); a component targets one",
                several.join(" and "),
                ours.iter().map(|(interface, version)| export_name(interface, version)).collect::<Vec<_>>().join(", ")
            ));
        }
    };
    let Some(version) = WORLD_VERSIONS.iter().copied().find(|known| *known == version) else {
        return Err(format!("it targets weir:provider@{version}; this host speaks weir:provider@{}", spoken()));
    };
    let exported = |interface: &str| ours.iter().any(|(name, _)| *name == interface);
    if let Some((unknown, _)) =
        ours.iter().find(|(name, _)| *name != DESCRIBE && !Operation::ALL.iter().any(|op| op.interface() == *name))
    {
        return Err(format!(
            "it exports `{}`, which weir:provider@{version} does not define",
            export_name(unknown, version)
        ));
    }
    if !exported(DESCRIBE) {
        return Err(format!("it does not export `{}`", export_name(DESCRIBE, version)));
    }
    if let Some(undefined) = Operation::ALL.iter().find(|op| exported(op.interface()) && !op.defined_in(version)) {
        return Err(format!(
            "it exports `{}`, which weir:provider@{version} does not define",
            export_name(undefined.interface(), version)
        ));
    }
    let operations: Vec<Operation> = Operation::ALL.into_iter().filter(|op| exported(op.interface())).collect();
    let needs_chat = [Operation::Logprobs, Operation::Native];
    if let Some(without) =
        needs_chat.iter().find(|op| operations.contains(op) && !operations.contains(&Operation::Chat))
    {
        return Err(format!(
            "it exports `{}` without `{}`: its failures are classified by chat's `classify`",
            export_name(without.interface(), version),
            export_name("chat", version)
        ));
    }
    if operations.is_empty() {
        // A 0.1.0 component always needed chat; say it in 0.1.0's terms.
        if version == "0.1.0" {
            return Err(format!("it does not export `{}`", export_name("chat", version)));
        }
        let defined: Vec<&str> =
            Operation::ALL.iter().filter(|op| op.defined_in(version)).map(|op| op.interface()).collect();
        let none_of = match defined.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => defined.join(""),
        };
        return Err(format!(
            "it exports no operation: only `{}`, and none of {none_of}",
            export_name(DESCRIBE, version)
        ));
    }
    Ok(Targets { version, operations })
}

/// The versions this host speaks, as messages name them: "0.1.0, 0.2.0, ... and 0.7.0".
fn spoken() -> String {
    match WORLD_VERSIONS.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spoken_versions_read_as_a_list() {
        assert_eq!(spoken(), "0.1.0, 0.2.0, 0.3.0, 0.4.0, 0.5.0, 0.6.0 and 0.7.0");
        assert_eq!(WORLD_VERSIONS.last(), Some(&WORLD_VERSION), "the newest is the one `weir wit` writes");
    }
}
