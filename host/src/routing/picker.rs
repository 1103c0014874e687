//! The picker: which entries may serve a role, in order of preference. A trait,
//! so an embedding service can supply its own (a rollout, a per-team choice);
//! [`DefaultPicker`] serves the pins and falls back to the grade's entries in
//! configuration order.

use std::borrow::Cow;
use std::collections::HashMap;

use super::{Role, RoleTarget};
use crate::caller::Caller;
use crate::catalog::Config;

/// The entries that may serve a role, best first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picks<'a> {
    /// Catalog ids. An id the catalog does not have is passed over.
    pub entries: Cow<'a, [String]>,
    /// A pinned choice fails closed: the first entry the caller and the
    /// compliance envelope permit serves, and if it cannot be called now the
    /// role is unavailable. An unpinned one serves the first permitted entry
    /// that can be called now (its provider loaded, its credential present).
    pub pinned: bool,
}

/// Chooses, per call, which entries may serve a role. Asked once per call; the
/// host then resolves the first that fits and never swaps it afterwards.
pub trait ModelPicker: Send + Sync {
    fn pick<'a>(&'a self, role: &Role, caller: Option<&Caller>) -> Picks<'a>;
}

/// Serves the pin of a role's grade (an entry, or every variant of a pinned
/// identity in configuration order), else the grade's entries in configuration
/// order. A role naming one entry is pinned to it. Worked out once, at build.
#[derive(Debug, Clone, Default)]
pub struct DefaultPicker {
    by_role: HashMap<String, (Vec<String>, bool)>,
}

impl DefaultPicker {
    pub fn new(config: &Config) -> Self {
        let by_role = config
            .roles
            .iter()
            .map(|(name, role)| {
                let picks = match (&role.grade, &role.model) {
                    (Some(grade), _) => grade_picks(config, grade),
                    (None, Some(model)) => (vec![model.clone()], true),
                    (None, None) => (Vec::new(), true),
                };
                (name.clone(), picks)
            })
            .collect();
        Self { by_role }
    }
}

impl ModelPicker for DefaultPicker {
    fn pick<'a>(&'a self, role: &Role, _caller: Option<&Caller>) -> Picks<'a> {
        match self.by_role.get(&role.name) {
            Some((entries, pinned)) => Picks { entries: Cow::Borrowed(entries), pinned: *pinned },
            // A role this picker was not built for (a role table swapped
            // without it): its own target, pinned.
            None => {
                let entry = match &role.serves {
                    RoleTarget::Entry(id) => vec![id.clone()],
                    RoleTarget::Grade(_) => Vec::new(),
                };
                Picks { entries: Cow::Owned(entry), pinned: true }
            }
        }
    }
}

/// A grade's candidates: its pin (the entry, or the identity's variants), else
/// its entries, in configuration order.
fn grade_picks(config: &Config, grade: &str) -> (Vec<String>, bool) {
    let ids = |keep: &dyn Fn(&crate::catalog::ModelEntry) -> bool| {
        config.models.iter().filter(|m| keep(m)).map(|m| m.id.clone()).collect::<Vec<_>>()
    };
    match config.pins.get(grade) {
        Some(pin) if config.models.iter().any(|m| &m.id == pin) => (vec![pin.clone()], true),
        Some(identity) => (ids(&|m| m.identity.as_ref().unwrap_or(&m.id) == identity), true),
        None => (ids(&|m| m.grade.as_deref() == Some(grade)), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::Roles;

    const ENTRIES: &str = "
[[model]]
id = \"mini-direct\"
provider = \"openai\"
grade = \"fast\"
max_output_tokens = 10
context_window = 100
[[model]]
id = \"opus-bedrock\"
provider = \"anthropic-bedrock\"
identity = \"opus\"
grade = \"deep\"
max_output_tokens = 10
context_window = 100
[[model]]
id = \"opus-direct\"
provider = \"anthropic\"
identity = \"opus\"
grade = \"deep\"
max_output_tokens = 10
context_window = 100
[[model]]
id = \"nano\"
provider = \"openai\"
grade = \"fast\"
max_output_tokens = 10
context_window = 100
";

    fn picks(extra: &str, role: &str) -> (Vec<String>, bool) {
        let config = Config::from_toml(&format!("{extra}\n{ENTRIES}"), "t").unwrap();
        let roles = Roles::from_config(&config);
        let picker = DefaultPicker::new(&config);
        let picks = picker.pick(roles.get(role).unwrap(), None);
        (picks.entries.into_owned(), picks.pinned)
    }

    #[test]
    fn an_unpinned_grade_offers_its_entries_in_configuration_order() {
        let roles = "[role.chat]\ngrade = \"fast\"\n";
        assert_eq!(picks(roles, "chat"), (vec!["mini-direct".to_owned(), "nano".to_owned()], false));
    }

    #[test]
    fn a_pinned_entry_is_the_only_pick() {
        let config = "[pins]\nfast = \"nano\"\n[role.chat]\ngrade = \"fast\"\n";
        assert_eq!(picks(config, "chat"), (vec!["nano".to_owned()], true));
    }

    #[test]
    fn a_pinned_identity_offers_its_variants_in_configuration_order() {
        let config = "[pins]\ndeep = \"opus\"\n[role.planner]\ngrade = \"deep\"\n";
        assert_eq!(picks(config, "planner"), (vec!["opus-bedrock".to_owned(), "opus-direct".to_owned()], true));
    }

    #[test]
    fn a_role_naming_an_entry_is_pinned_to_it() {
        let config = "[role.rewrite]\nmodel = \"nano\"\n";
        assert_eq!(picks(config, "rewrite"), (vec!["nano".to_owned()], true));
    }
}
