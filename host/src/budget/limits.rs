//! What a budget is: who it belongs to (a key, a member, a team), what it
//! caps (tokens or USD, per day or per month, or per call), and the amounts
//! it is counted in.

use std::fmt;

/// Who a budget belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Key(String),
    Member(String),
    Team(String),
}

impl Scope {
    /// `key`, `member` or `team`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Key(_) => "key",
            Self::Member(_) => "member",
            Self::Team(_) => "team",
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Key(name) | Self::Member(name) | Self::Team(name) => name,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.kind(), self.name())
    }
}

/// What a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Tokens,
    Usd,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tokens => "tokens",
            Self::Usd => "usd",
        }
    }
}

/// An amount of tokens or of USD.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    Tokens(u64),
    Usd(f64),
}

impl Amount {
    pub fn kind(self) -> Kind {
        match self {
            Self::Tokens(_) => Kind::Tokens,
            Self::Usd(_) => Kind::Usd,
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tokens(tokens) => write!(f, "{tokens} tokens"),
            Self::Usd(usd) => write!(f, "${usd:.6}"),
        }
    }
}

/// A call's worst case, or what it actually spent: every token kind summed
/// (input, output, cache reads and writes), and USD when the entry is priced.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    pub tokens: u64,
    pub usd: Option<f64>,
}

impl Spend {
    /// What a closed record spent.
    pub fn of(usage: &crate::record::Tokens, cost_usd: Option<f64>) -> Self {
        Self { tokens: total_tokens(usage), usd: cost_usd }
    }

    /// Both amounts together (priced where either is).
    #[must_use]
    pub fn plus(self, other: Spend) -> Spend {
        let usd = match (self.usd, other.usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        Spend { tokens: self.tokens.saturating_add(other.tokens), usd }
    }
}

/// The tokens a budget counts: every kind the provider bills (reasoning is
/// a part of output, so it is not added again).
pub fn total_tokens(usage: &crate::record::Tokens) -> u64 {
    usage.input.saturating_add(usage.output).saturating_add(usage.cache_read).saturating_add(usage.cache_write)
}

/// One scope's limits; `None` (or 0 in the config) is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub daily_tokens: Option<u64>,
    pub monthly_tokens: Option<u64>,
    pub daily_usd: Option<f64>,
    pub monthly_usd: Option<f64>,
    pub max_call_tokens: Option<u64>,
    pub max_call_usd: Option<f64>,
}

impl Limits {
    /// Limits from config fields, where 0 means unlimited.
    pub fn from_fields(fields: &crate::catalog::BudgetFields) -> Self {
        let tokens = |value: Option<u64>| value.filter(|v| *v > 0);
        let usd = |value: Option<f64>| value.filter(|v| *v > 0.0);
        Self {
            daily_tokens: tokens(fields.daily_tokens),
            monthly_tokens: tokens(fields.monthly_tokens),
            daily_usd: usd(fields.daily_usd),
            monthly_usd: usd(fields.monthly_usd),
            max_call_tokens: tokens(fields.max_call_tokens),
            max_call_usd: usd(fields.max_call_usd),
        }
    }

    /// One gateway's part of these limits in a fleet of `fleet_size` (each
    /// period limit divided, rounded down; the per-call ceilings unchanged).
    pub fn share(&self, fleet_size: u32) -> Self {
        let size = u64::from(fleet_size.max(1));
        Self {
            daily_tokens: self.daily_tokens.map(|v| v / size),
            monthly_tokens: self.monthly_tokens.map(|v| v / size),
            daily_usd: self.daily_usd.map(|v| v / size as f64),
            monthly_usd: self.monthly_usd.map(|v| v / size as f64),
            ..*self
        }
    }

    pub fn is_unlimited(&self) -> bool {
        *self == Self::default()
    }

    /// Whether any of these limits is counted in USD.
    pub fn counts_usd(&self) -> bool {
        self.daily_usd.is_some() || self.monthly_usd.is_some() || self.max_call_usd.is_some()
    }

    /// The period limits, as (period, limit).
    pub(super) fn periodic(&self) -> impl Iterator<Item = (super::Period, Amount)> {
        use super::Period::{Day, Month};
        [
            self.daily_tokens.map(|v| (Day, Amount::Tokens(v))),
            self.monthly_tokens.map(|v| (Month, Amount::Tokens(v))),
            self.daily_usd.map(|v| (Day, Amount::Usd(v))),
            self.monthly_usd.map(|v| (Month, Amount::Usd(v))),
        ]
        .into_iter()
        .flatten()
    }
}
