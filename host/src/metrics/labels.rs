//! Label values, bounded. A label value is a new time series for every
//! scraper and every dashboard, so nothing a caller sends may become one: a
//! model the catalog does not know is `unknown`, and a value set that only the
//! code bounds (categories, members, key ids) is capped, past which values are
//! `other`.
//!
//! Values are interned as `Arc<str>`: a record's labels are built from clones
//! of those, so looking a series up allocates nothing.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};

use crate::catalog::Catalog;

/// The label of a model the catalog does not know (a caller's typo or a scan).
const UNKNOWN: &str = "unknown";
/// The label of an absent value (no provider resolved, no member).
const NONE: &str = "none";
/// The label of a value past its set's cap.
const OTHER: &str = "other";

/// Distinct categories kept as labels; the code defines a few dozen.
const CATEGORY_CAP: usize = 64;
/// Distinct members or key ids kept as labels: generous for a key list, small
/// enough that a runaway value cannot flood the exposition.
const IDENTITY_CAP: usize = 1024;

/// Every label value a record can carry.
pub(super) struct Labels {
    /// The catalog's model ids; fixed for the life of a [`crate::Weir`].
    models: HashMap<Box<str>, Label>,
    /// The providers the catalog's models name or were linked to at load.
    providers: HashMap<Box<str>, Label>,
    pub(super) unknown: Label,
    pub(super) none: Label,
    pub(super) categories: Interner,
    pub(super) members: Interner,
    pub(super) keys: Interner,
    /// Deployment names: only the catalog's reach a record, capped all the same.
    pub(super) deployments: Interner,
}

pub(super) type Label = Arc<str>;

impl Labels {
    pub(super) fn new(catalog: &Catalog) -> Self {
        let mut models = HashMap::new();
        let mut providers = HashMap::new();
        for model in catalog.models() {
            models.insert(Box::from(model.id.as_str()), Label::from(model.id.as_str()));
        }
        // Linked entries' records carry the provider they were linked to.
        for key in catalog.provider_keys() {
            providers.insert(Box::from(key), Label::from(key));
        }
        let none = Label::from(NONE);
        Self {
            models,
            providers,
            unknown: Label::from(UNKNOWN),
            none: Arc::clone(&none),
            categories: Interner::new(CATEGORY_CAP, Arc::clone(&none)),
            members: Interner::new(IDENTITY_CAP, Arc::clone(&none)),
            keys: Interner::new(IDENTITY_CAP, Arc::clone(&none)),
            deployments: Interner::new(IDENTITY_CAP, none),
        }
    }

    /// A catalog id as itself, anything else as `unknown`.
    pub(super) fn model(&self, id: &str) -> Label {
        Arc::clone(self.models.get(id).unwrap_or(&self.unknown))
    }

    /// A catalog provider as itself; absent or empty as `none`, any other as `unknown`.
    pub(super) fn provider(&self, key: Option<&str>) -> Label {
        match key.filter(|key| !key.is_empty()) {
            None => Arc::clone(&self.none),
            Some(key) => Arc::clone(self.providers.get(key).unwrap_or(&self.unknown)),
        }
    }
}

/// A capped set of label values, filled as they are first seen.
pub(super) struct Interner {
    cap: usize,
    values: RwLock<HashMap<Box<str>, Label>>,
    absent: Label,
    other: Label,
}

impl Interner {
    fn new(cap: usize, absent: Label) -> Self {
        Self { cap, values: RwLock::new(HashMap::new()), absent, other: Label::from(OTHER) }
    }

    /// `value`'s label: itself while the set has room, `other` past the cap,
    /// and the absent label for `None` or an empty value. The write lock is
    /// taken only the first time a value is seen.
    pub(super) fn get(&self, value: Option<&str>) -> Label {
        let Some(value) = value.filter(|value| !value.is_empty()) else { return Arc::clone(&self.absent) };
        if let Some(label) = self.values.read().unwrap_or_else(PoisonError::into_inner).get(value) {
            return Arc::clone(label);
        }
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(label) = values.get(value) {
            return Arc::clone(label);
        }
        if values.len() >= self.cap {
            return Arc::clone(&self.other);
        }
        let label = Label::from(value);
        values.insert(Box::from(value), Arc::clone(&label));
        label
    }
}

/// `weir_calls_total`'s labels; `member` and `key` only when the operator
/// turned them on (`[metrics] member_labels`, `key_labels`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct CallLabels {
    pub(super) model: Label,
    pub(super) provider: Label,
    pub(super) category: Label,
    pub(super) route: &'static str,
    /// `chat`, `embeddings` or `rerank`: library calls share one route.
    pub(super) operation: &'static str,
    pub(super) member: Option<Label>,
    pub(super) key: Option<Label>,
}

impl EncodeLabelSet for CallLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        ("model", &*self.model).encode(encoder.encode_label())?;
        ("provider", &*self.provider).encode(encoder.encode_label())?;
        ("category", &*self.category).encode(encoder.encode_label())?;
        ("route", self.route).encode(encoder.encode_label())?;
        ("operation", self.operation).encode(encoder.encode_label())?;
        if let Some(member) = &self.member {
            ("member", &**member).encode(encoder.encode_label())?;
        }
        if let Some(key) = &self.key {
            ("key", &**key).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ModelLabels {
    pub(super) model: Label,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct TokenLabels {
    pub(super) model: Label,
    /// `input`, `output`, `cache_read`, `cache_write`, `reasoning`.
    pub(super) kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct RetryLabels {
    pub(super) model: Label,
    /// The category of the attempt the retry followed.
    pub(super) signal: Label,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    pub(super) reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ProviderLabels {
    pub(super) provider: Label,
}

/// A deployment's series: its entry and its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct DeploymentLabels {
    pub(super) model: Label,
    pub(super) deployment: Label,
}

/// A deployment's attempts, by how each ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct DeploymentAttemptLabels {
    pub(super) model: Label,
    pub(super) deployment: Label,
    /// `ok`, or the attempt's failure category.
    pub(super) category: Label,
}
