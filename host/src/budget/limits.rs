//! One scope's limits, as the budget book holds them: read from the config's
//! budget fields, where 0 is unlimited.

use crate::accounting::{Amount, Period};

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
    pub(super) fn periodic(&self) -> impl Iterator<Item = (Period, Amount)> {
        use Period::{Day, Month};
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
