//! Roles, grades, pins and the picker: what a caller names, and which catalog
//! entry serves it. Callers name a *role* (`chat`, `planner`, ...) rather than a
//! model, so a deployment changes models without touching its callers. A role
//! serves one entry or a *grade* (a rung such as `fast` or `deep`); a grade is
//! served by its `[pins]` entry (or the first permitted variant of a pinned
//! `identity`), else by the first configured entry of the grade that can be
//! called now. The [`ModelPicker`] says which entries may serve, in order; the
//! call path (`call::target`) walks them once per call, skipping what the
//! caller's key or the compliance envelope does not permit. Once resolved, an
//! entry that fails is never swapped for another.

mod picker;

use std::collections::HashMap;

pub use picker::{DefaultPicker, ModelPicker, Picks};

use crate::catalog::{Config, RoleKind};

/// One `[role.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub name: String,
    pub kind: RoleKind,
    pub serves: RoleTarget,
    /// An embedding role's lane when the caller names none.
    pub lane: Option<crate::admission::Lane>,
    /// The operator's fallback entries, in order (see `call::fallback`).
    pub fallback: Vec<String>,
}

/// What a role is served by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleTarget {
    /// A rung: its pin, else its first configured entry that can be called now.
    Grade(String),
    /// One catalog entry, and nothing else.
    Entry(String),
}

/// The configured roles by name.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    by_name: HashMap<String, Role>,
}

impl Roles {
    /// The roles of a (validated) config: each names a grade or an entry.
    pub fn from_config(config: &Config) -> Self {
        let by_name = config
            .roles
            .iter()
            .filter_map(|(name, entry)| {
                let serves = match (&entry.grade, &entry.model) {
                    (Some(grade), _) => RoleTarget::Grade(grade.clone()),
                    (None, Some(model)) => RoleTarget::Entry(model.clone()),
                    (None, None) => return None,
                };
                Some((
                    name.clone(),
                    Role {
                        name: name.clone(),
                        kind: entry.kind,
                        serves,
                        lane: entry.lane,
                        fallback: entry.fallback.clone(),
                    },
                ))
            })
            .collect();
        Self { by_name }
    }

    pub fn get(&self, name: &str) -> Option<&Role> {
        self.by_name.get(name)
    }

    /// Every role, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Role> {
        let mut roles: Vec<&Role> = self.by_name.values().collect();
        roles.sort_by(|a, b| a.name.cmp(&b.name));
        roles.into_iter()
    }
}
