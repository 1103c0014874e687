//! Runs the kit on a Rust provider natively: the [`ChatProvider`] functions are
//! called directly, so a provider crate's `cargo test` checks the same cases
//! `weir check` runs on its built component.

use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use weir_sdk::ChatProvider;

use crate::fixture::{Classified, Conversation, Decoded, Params, ProviderSummary, Response, WireRequest};
use crate::subject::{Answer, Fault, Subject};
use crate::{FixtureError, Report, dialect};

crate::boundary_conversions!(weir_sdk::types);

/// The kit's view of provider `P`, called in-process.
#[derive(Debug)]
pub struct Native<P>(PhantomData<P>);

impl<P> Native<P> {
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<P> Default for Native<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// The generic checks plus the fixtures in `fixtures` (when given), on `P`.
pub fn run<P: ChatProvider>(fixtures: Option<&Path>) -> Result<Report, FixtureError> {
    let cases = fixtures.map(dialect::load_dir).transpose()?.unwrap_or_default();
    Ok(pollster::block_on(crate::run(&Native::<P>::new(), cases)))
}

/// A panic is what a trap is in a component: the call did not return.
fn guarded<T>(call: impl FnOnce() -> T) -> Result<T, Fault> {
    catch_unwind(AssertUnwindSafe(call)).map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Fault(format!("panicked: {message}"))
    })
}

impl<P: ChatProvider> Subject for Native<P> {
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault> {
        guarded(|| P::providers().iter().map(boundary::summary).collect())
    }

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest> {
        let (conversation, params) = (boundary::conversation(conversation), boundary::params(params));
        guarded(|| P::encode(provider, conversation, params))
            .map(|result| result.map(boundary::request).map_err(boundary::codec_failure))
    }

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded> {
        let response = boundary::response(response);
        guarded(|| P::decode(provider, response))
            .map(|result| result.map(boundary::decoded).map_err(boundary::codec_failure))
    }

    async fn classify(&self, provider: &str, response: &Response) -> Result<Classified, Fault> {
        let response = boundary::response(response);
        guarded(|| P::classify(provider, response)).map(boundary::classified)
    }
}
