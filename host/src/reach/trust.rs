//! Whether the operator vouched for a component: what decides if its own
//! defaults (endpoint, credential id) may be used (see [`super`]).

use serde::Serialize;

/// Whether the operator vouched for a component, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trust {
    /// Built into this binary.
    Embedded,
    /// A dropped file whose digest is in `allowed_digests`.
    AllowListed,
    /// Any other dropped file: its defaults are ignored.
    Untrusted,
}

impl Trust {
    /// Whether the component's own endpoint and credential id may be used.
    pub fn honours_defaults(self) -> bool {
        match self {
            Self::Embedded | Self::AllowListed => true,
            Self::Untrusted => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::AllowListed => "allow-listed",
            Self::Untrusted => "untrusted",
        }
    }
}
