//! # weir-conformance: the checks every Weir provider passes
//!
//! A provider is translation between Weir's records and one HTTP dialect; this kit
//! checks that translation from the outside, the same way whether the provider runs
//! natively or as a component inside the host:
//!
//! - [`generic`] checks hold for any dialect (no credential on the wire, the output
//!   reserve written exactly, no block silently dropped, garbage is `malformed`,
//!   status semantics, bounded error details, ...). They need no fixtures.
//! - [`dialect`] fixtures are the provider's own: JSON files of conversations with
//!   the wire shape they must give, and canned responses and error bodies with what
//!   they must mean.
//!
//! Natively (feature `native`), in a provider crate's tests:
//!
//! ```text
//! let report = weir_conformance::native::run::<MyProvider>(Some(Path::new("conformance")))?;
//! assert!(report.passed(), "{report}");
//! ```
//!
//! Through the host: `weir check my_provider.wasm --fixtures conformance/`.

mod boundary;
pub mod dialect;
pub mod fixture;
pub mod generic;
pub mod json;
#[cfg(feature = "native")]
pub mod native;
mod report;
mod subject;

pub use dialect::{Case, FixtureError};
pub use report::{Check, Outcome, Report};
pub use subject::{Answer, Fault, Subject};

/// Runs the generic checks, then `cases` (a provider's fixtures), on `subject`.
pub async fn run<S: Subject>(subject: &S, cases: Vec<Case>) -> Report {
    let mut report = Report::default();
    let providers = generic::run(subject, &mut report).await;
    let served: Vec<String> = providers.into_iter().map(|provider| provider.key).collect();
    dialect::run(subject, &served, cases, &mut report).await;
    report
}
