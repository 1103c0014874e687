//! The words of budget accounting, shared by the budgets, the fleet's shared
//! accounts and the call's error: who a budget belongs to (a key, a member, a
//! team), what it counts (tokens or USD), the amounts and spend it is counted
//! in, and the calendar periods and clock it counts by ([`clock`]).

mod clock;

pub use clock::{Clock, ManualClock, Period, SystemClock, Timezone};

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
