//! # weir-conformance: the checks every Weir provider passes
//!
//! A provider is translation between Weir's records and one HTTP dialect; this kit
//! checks that translation from the outside, the same way whether the provider runs
//! natively or as a component inside the host:
//!
//! - [`generic`] checks hold for any dialect (no credential on the wire, the output
//!   reserve written exactly, no block silently dropped, garbage is `malformed`,
//!   status semantics, bounded error details, ...). They need no fixtures.
//! - [`embeddings`] and [`rerank`] checks do the same for those operations, on
//!   each wire id a key serves (the kit's own, or one a fixture names).
//! - [`stream`] checks feed every key that declares streaming the kit's own
//!   streams in its dialect (text, a split tool call, usage, an error frame, a
//!   stream cut short) through its real stream decoder.
//!
//! The kit runs the checks of each operation the subject exports, and only
//! those; the report names the operations it checked.
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
pub mod embeddings;
mod fields;
pub mod fixture;
pub mod generic;
pub mod json;
#[cfg(feature = "native")]
pub mod native;
mod report;
pub mod rerank;
pub mod sse;
pub mod stream;
mod subject;
pub mod target;
pub mod wire;

pub use dialect::{Case, FixtureError};
pub use report::{Check, Outcome, Report, Warning};
pub use subject::{Answer, Fault, NativeLevel, Operation, Subject};

/// Runs the describe checks, the generic checks of each operation `subject`
/// exports, then `cases` (a provider's fixtures), on `subject`.
pub async fn run<S: Subject>(subject: &S, cases: Vec<Case>) -> Report {
    let mut report = Report { operations: subject.operations(), ..Report::default() };
    let providers = generic::describe(subject, &mut report).await;
    for operation in report.operations.clone() {
        match operation {
            Operation::Chat => {
                generic::chat(subject, &providers, &mut report).await;
                stream::checks::run(subject, &providers, &cases, &mut report).await;
                if subject.native_level() != NativeLevel::None {
                    fields::run(subject, &providers, &cases, &mut report).await;
                }
            }
            Operation::Embeddings => {
                let targets = target::targets(operation, &providers, &cases);
                embeddings::run(subject, &providers, &targets, &mut report).await;
            }
            Operation::Rerank => {
                let targets = target::targets(operation, &providers, &cases);
                rerank::run(subject, &providers, &targets, &mut report).await;
            }
        }
    }
    dialect::run(subject, &providers, cases, &mut report).await;
    report
}
