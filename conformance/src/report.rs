//! The outcome of a conformance run: one line per check, printable as is.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed(String),
}

/// One check against one provider key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub provider: String,
    pub name: String,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    pub fn record(&mut self, provider: &str, name: impl Into<String>, result: Result<(), String>) {
        let outcome = match result {
            Ok(()) => Outcome::Passed,
            Err(reason) => Outcome::Failed(reason),
        };
        self.checks.push(Check { provider: provider.to_owned(), name: name.into(), outcome });
    }

    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.failures().next().is_none()
    }

    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|check| check.outcome != Outcome::Passed)
    }

    /// The check of this name for this provider, if it ran.
    pub fn find(&self, provider: &str, name: &str) -> Option<&Check> {
        self.checks.iter().find(|check| check.provider == provider && check.name == name)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.checks {
            match &check.outcome {
                Outcome::Passed => writeln!(f, "ok    {}: {}", check.provider, check.name)?,
                Outcome::Failed(reason) => writeln!(f, "FAIL  {}: {} — {reason}", check.provider, check.name)?,
            }
        }
        let failed = self.failures().count();
        write!(f, "{} checks, {} passed, {failed} failed", self.checks.len(), self.checks.len() - failed)
    }
}
