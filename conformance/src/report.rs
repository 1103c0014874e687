//! The outcome of a conformance run: one line per check, printable as is.

use std::fmt;

use crate::subject::Operation;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// The component explicitly declined what the check offered (`codec-error.unsupported`),
    /// which the check allows: it passes, and the report says it was refused, with why.
    Refused(String),
    Failed(String),
}

/// One check against one provider key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub provider: String,
    pub name: String,
    pub outcome: Outcome,
}

/// Something the report says that is no check's failure: what a component
/// declares that nothing may ever use (e.g. `thinking` no catalog entry
/// reaches). A warning never fails the report; it is printed after the
/// checks, before the summary line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub provider: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The operations whose checks ran: those the component exports.
    pub operations: Vec<Operation>,
    pub checks: Vec<Check>,
    pub warnings: Vec<Warning>,
}

impl Report {
    pub fn record(&mut self, provider: &str, name: impl Into<String>, result: Result<(), String>) {
        let outcome = match result {
            Ok(()) => Outcome::Passed,
            Err(reason) => Outcome::Failed(reason),
        };
        self.checks.push(Check { provider: provider.to_owned(), name: name.into(), outcome });
    }

    /// Records a check the component may pass by declining, under the name that
    /// says what happened: `Ok(None)` is recorded as `sent` (it carried what the check
    /// offered), `Ok(Some(reason))` as `refused` (it declined as `unsupported`), and a
    /// failure under `sent`, the promise it broke.
    pub fn record_or_refused(
        &mut self,
        provider: &str,
        sent: &str,
        refused: &str,
        result: Result<Option<String>, String>,
    ) {
        let (name, outcome) = match result {
            Ok(None) => (sent, Outcome::Passed),
            Ok(Some(reason)) => (refused, Outcome::Refused(reason)),
            Err(reason) => (sent, Outcome::Failed(reason)),
        };
        self.checks.push(Check { provider: provider.to_owned(), name: name.to_owned(), outcome });
    }

    /// Adds a warning (it does not fail the report).
    pub fn warn(&mut self, provider: &str, message: impl Into<String>) {
        self.warnings.push(Warning { provider: provider.to_owned(), message: message.into() });
    }

    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.failures().next().is_none()
    }

    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|check| matches!(check.outcome, Outcome::Failed(_)))
    }

    /// The check of this name for this provider, if it ran.
    pub fn find(&self, provider: &str, name: &str) -> Option<&Check> {
        self.checks.iter().find(|check| check.provider == provider && check.name == name)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operations: Vec<&str> = self.operations.iter().map(|operation| operation.name()).collect();
        match operations.as_slice() {
            [] => writeln!(f, "operations checked: none")?,
            names => writeln!(f, "operations checked: {}", names.join(", "))?,
        }
        for check in &self.checks {
            match &check.outcome {
                Outcome::Passed => writeln!(f, "ok    {}: {}", check.provider, check.name)?,
                Outcome::Refused(reason) => writeln!(f, "ok    {}: {} — {reason}", check.provider, check.name)?,
                Outcome::Failed(reason) => writeln!(f, "FAIL  {}: {} — {reason}", check.provider, check.name)?,
            }
        }
        for warning in &self.warnings {
            writeln!(f, "warn  {}: {}", warning.provider, warning.message)?;
        }
        let failed = self.failures().count();
        let refused = self.checks.iter().filter(|check| matches!(check.outcome, Outcome::Refused(_))).count();
        let passed = self.checks.len() - failed;
        match refused {
            0 => write!(f, "{} checks, {passed} passed, {failed} failed", self.checks.len()),
            _ => write!(
                f,
                "{} checks, {passed} passed ({refused} by refusing as unsupported), {failed} failed",
                self.checks.len()
            ),
        }
    }
}
