//! A provider's `native` interface (0.4.0 on) in an attempt's [`Session`]: the
//! chat request with a dialect's own fields added, and the provider's own
//! token count. Each `encode`'s request is capped while it is lifted, as
//! chat's is ([`super::bounded`]); what `native.support` answered is kept with
//! the component ([`Provider::native_support`]).

use tokio::time::Instant;

use super::convert::Records;
use super::exports::NativeExports;
use super::provider::{PluginError, Provider};
use super::session::Session;
use super::world::Operation;
use crate::types::{CallParams, HttpRequest, HttpResponse, NativeAnswer, NativeRequest, PreparedConversation};
use crate::wit::v0_4;
use wasmtime::component::Instance;

type Call<'s> = &'s mut wasmtime::Store<super::sandbox::CallState>;

impl Session<'_> {
    /// [`Session::encode`]'s request with `native`'s fields and betas, as the
    /// provider's surface carries them. The wait for a free instance ends at
    /// `deadline` if that comes before [`super::provider::SLOT_WAIT`].
    pub async fn encode_native(
        &mut self,
        conversation: &PreparedConversation,
        params: &CallParams,
        native: &NativeRequest,
        deadline: Option<Instant>,
    ) -> Result<HttpRequest, PluginError> {
        let exports = self.provider().native()?;
        let key = self.provider().key();
        let during = "native.encode";
        let result = match exports.records() {
            Records::Current => {
                let encode = |store: Call<'_>, instance: &Instance| exports.encode(store, instance);
                self.call(during, deadline, encode, (key, conversation, params, native)).await?
            }
            Records::V0_4 => {
                let legacy = v0_4::CallParams::from(params);
                let encode = |store: Call<'_>, instance: &Instance| exports.encode_v0_4(store, instance);
                self.call(during, deadline, encode, (key, conversation, &legacy, native)).await?
            }
        };
        result.map(HttpRequest::from).map_err(|error| self.provider().codec(error))
    }

    /// The provider's own token count request for `conversation`.
    pub async fn count_tokens_encode(
        &mut self,
        conversation: &PreparedConversation,
        params: &CallParams,
        native: &NativeRequest,
        deadline: Option<Instant>,
    ) -> Result<HttpRequest, PluginError> {
        let exports = self.provider().native()?;
        let key = self.provider().key();
        let during = "native.count-tokens-encode";
        let result = match exports.records() {
            Records::Current => {
                let encode = |store: Call<'_>, instance: &Instance| exports.count_encode(store, instance);
                self.call(during, deadline, encode, (key, conversation, params, native)).await?
            }
            Records::V0_4 => {
                let legacy = v0_4::CallParams::from(params);
                let encode = |store: Call<'_>, instance: &Instance| exports.count_encode_v0_4(store, instance);
                self.call(during, deadline, encode, (key, conversation, &legacy, native)).await?
            }
        };
        result.map(HttpRequest::from).map_err(|error| self.provider().codec(error))
    }

    /// The input tokens a successful (2xx) count response reports.
    pub async fn count_tokens_decode(&mut self, response: &HttpResponse) -> Result<u64, PluginError> {
        let exports = self.provider().native()?;
        let result = self
            .call(
                "native.count-tokens-decode",
                None,
                |store, instance| exports.count_decode(store, instance),
                (self.provider().key(), response),
            )
            .await?;
        result.map_err(|error| self.provider().codec(error))
    }
}

impl Session<'_> {
    /// Decodes a successful answer to a request that carried hosted tools or
    /// the dialect's own blocks: the neutral answer and every block in the
    /// provider's order (`native.decode-native`, 0.6.0 on). Waited for like
    /// [`Session::decode`].
    pub async fn decode_native(&mut self, response: &HttpResponse) -> Result<NativeAnswer, PluginError> {
        let exports = self.provider().native()?;
        if !exports.decodes_native() {
            return Err(self.provider().missing_function(Operation::Native, "decode-native"));
        }
        let decode = |store: Call<'_>, instance: &Instance| {
            exports.decode_native(store, instance).unwrap_or_else(|| Err(wasmtime::Error::msg("no decode-native")))
        };
        let result = self.call("native.decode-native", None, decode, (self.provider().key(), response)).await?;
        result.map_err(|error| self.provider().codec(error))
    }
}

impl Provider {
    /// Whether the component answers `native.decode-native` (0.6.0 on): only
    /// such a provider is sent hosted tools or a dialect's own blocks.
    pub fn decodes_native(&self) -> bool {
        self.component().exports.native.as_ref().is_some_and(NativeExports::decodes_native)
    }

    fn native(&self) -> Result<&NativeExports, PluginError> {
        self.component().exports.native.as_ref().ok_or_else(|| self.missing(Operation::Native))
    }
}
