//! Where each function of a component's interfaces is exported, found once at
//! load, and the one place that fixes each function's Rust types.
//!
//! The host does not instantiate through a generated world (which would require
//! every interface): it looks up `describe` and each operation interface the
//! component exports by name, keeps their export indices, and calls them as
//! typed functions. The types below are the WIT records `bindgen!` generates
//! (`crate::wit`); each `encode` result is lifted as a capped
//! [`EncodedRequest`] (see [`super::bounded`]). The component model checks a
//! typed function's type structurally, so the same Rust types fit every
//! function whose records did not change since 0.1.0. The few that take or
//! give a record 0.5.0 changed (`call-params`, `provider-info`) have a second
//! typing with frozen 0.4.0's records (the `*_v0_4` functions), used for a
//! 0.1.0–0.4.0 component ([`Records`]); the caller converts (`super::convert`).
//! [`Exports::typecheck`] checks every function once at load, so a component
//! whose functions have other types is refused then, not on its first call.

use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, Instance, ResourceAny, TypedFunc};

use super::bounded::EncodedRequest;
use super::convert::Records;
use super::sandbox::CallState;
use super::world::{Operation, Targets, export_name};
use crate::types::{
    CallParams, CodecError, DecodedResponse, EmbeddingParams, EmbeddingResponse, ErrorClass, FirstToken, HttpResponse,
    NativeAnswer, NativeDelta, NativeRequest, NativeSupport, PreparedConversation, ProviderInfo, RerankParams,
    RerankResponse, StreamDelta, StreamEvent,
};
use crate::wit::v0_4;

type Call<'s> = &'s mut Store<CallState>;

/// A typed function whose result wasmtime lifts in full (no caps).
type Func<P, R> = wasmtime::Result<TypedFunc<P, (R,)>>;
/// `(provider, wire-id) -> T`: every `serves`, `claims` and `max-batch`.
pub(super) type Question<'a, T> = Func<(&'a str, &'a str), T>;
/// `(provider, response) -> T`: every `decode` and `classify`.
type Reading<'a, T> = Func<(&'a str, &'a HttpResponse), T>;
/// An encode's result, capped while it is lifted.
type Encoded = Result<EncodedRequest, CodecError>;
type Deltas = Result<Vec<StreamDelta>, CodecError>;
type NativeDeltas = Result<Vec<NativeDelta>, CodecError>;

/// Whether a component's function types were checked ([`Exports::typecheck`]).
/// Until then every lookup checks the type it is asked for; after, a call's
/// lookup takes the function by index alone (the per-call type check was a
/// measured cost: `typecheck_record` and its kin, ~1–2 % of a gateway call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Typed {
    Unchecked,
    Checked,
}

/// The function at `index` as a typed function.
fn typed<P, R>(typed: Typed, store: Call<'_>, instance: &Instance, index: ComponentExportIndex) -> Func<P, R>
where
    P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower,
    (R,): wasmtime::component::ComponentNamedList + wasmtime::component::Lift,
{
    if typed == Typed::Unchecked {
        return instance.get_typed_func(store, index);
    }
    let func = instance
        .get_func(store, index)
        .ok_or_else(|| wasmtime::Error::msg("a function the component exported at load is missing"))?;
    #[allow(unsafe_code, reason = "the type was checked once at load; see SAFETY")]
    // SAFETY: `Exports::typecheck` checked this export's type against these
    // very Rust types on an instance of the same component before any
    // `Typed::Checked` exists, and every instance of one component has the
    // same function types (they are the component's, fixed when it compiled).
    Ok(unsafe { TypedFunc::new_unchecked(func) })
}

/// Every function the component exports, by interface.
#[derive(Debug, Clone)]
pub(super) struct Exports {
    pub describe: DescribeExports,
    pub chat: Option<ChatExports>,
    pub embeddings: Option<EmbeddingExports>,
    pub rerank: Option<RerankExports>,
    pub logprobs: Option<LogprobsExports>,
    pub native: Option<NativeExports>,
}

#[derive(Debug, Clone)]
pub(super) struct DescribeExports {
    typed: Typed,
    records: Records,
    providers: ComponentExportIndex,
    serves: ComponentExportIndex,
    claims: ComponentExportIndex,
}

#[derive(Debug, Clone)]
pub(super) struct ChatExports {
    typed: Typed,
    records: Records,
    encode: ComponentExportIndex,
    decode: ComponentExportIndex,
    classify: ComponentExportIndex,
    stream_new: ComponentExportIndex,
    stream_feed: ComponentExportIndex,
    stream_finish: ComponentExportIndex,
}

#[derive(Debug, Clone)]
pub(super) struct EmbeddingExports {
    typed: Typed,
    serves: ComponentExportIndex,
    max_batch: ComponentExportIndex,
    needs_dimensions: ComponentExportIndex,
    encode: ComponentExportIndex,
    decode: ComponentExportIndex,
    classify: ComponentExportIndex,
}

#[derive(Debug, Clone)]
pub(super) struct RerankExports {
    typed: Typed,
    serves: ComponentExportIndex,
    encode: ComponentExportIndex,
    decode: ComponentExportIndex,
    classify: ComponentExportIndex,
}

#[derive(Debug, Clone)]
pub(super) struct LogprobsExports {
    typed: Typed,
    records: Records,
    serves: ComponentExportIndex,
    encode: ComponentExportIndex,
    decode: ComponentExportIndex,
}

#[derive(Debug, Clone)]
pub(super) struct NativeExports {
    typed: Typed,
    records: Records,
    support: ComponentExportIndex,
    encode: ComponentExportIndex,
    count_encode: ComponentExportIndex,
    count_decode: ComponentExportIndex,
    /// `decode-native` (0.6.0 on); `None` for a 0.4.0 or 0.5.0 component.
    decode_native: Option<ComponentExportIndex>,
    /// The `native-stream` resource (0.7.0 on); `None` before.
    stream: Option<NativeStreamExports>,
}

/// `native.native-stream`'s functions.
#[derive(Debug, Clone, Copy)]
pub(super) struct NativeStreamExports {
    open: ComponentExportIndex,
    feed: ComponentExportIndex,
    finish: ComponentExportIndex,
}

/// Finds the functions of one exported interface by name.
struct Lookup<'c> {
    component: &'c Component,
    name: String,
    interface: ComponentExportIndex,
}

impl<'c> Lookup<'c> {
    fn new(component: &'c Component, interface: &str, version: &str) -> Result<Self, String> {
        let name = export_name(interface, version);
        let index = component.get_export_index(None, &name).ok_or_else(|| format!("does not export `{name}`"))?;
        Ok(Self { component, name, interface: index })
    }

    fn func(&self, func: &str) -> Result<ComponentExportIndex, String> {
        self.component
            .get_export_index(Some(&self.interface), func)
            .ok_or_else(|| format!("`{}` has no `{func}`", self.name))
    }
}

impl Exports {
    /// The export indices of `describe` and of every operation `targets` names.
    pub fn find(component: &Component, targets: &Targets) -> Result<Self, String> {
        let version = targets.version;
        let records = Records::of(version);
        let describe = Lookup::new(component, "describe", version)?;
        let describe = DescribeExports {
            typed: Typed::Unchecked,
            records,
            providers: describe.func("providers")?,
            serves: describe.func("serves")?,
            claims: describe.func("claims")?,
        };
        let lookup = |operation: Operation| -> Result<Option<Lookup<'_>>, String> {
            match targets.operations.contains(&operation) {
                true => Lookup::new(component, operation.interface(), version).map(Some),
                false => Ok(None),
            }
        };
        let chat = lookup(Operation::Chat)?
            .map(|chat| -> Result<_, String> {
                Ok(ChatExports {
                    typed: Typed::Unchecked,
                    records,
                    encode: chat.func("encode")?,
                    decode: chat.func("decode")?,
                    classify: chat.func("classify")?,
                    stream_new: chat.func("[constructor]stream-decoder")?,
                    stream_feed: chat.func("[method]stream-decoder.feed")?,
                    stream_finish: chat.func("[method]stream-decoder.finish")?,
                })
            })
            .transpose()?;
        let embeddings = lookup(Operation::Embeddings)?
            .map(|embeddings| -> Result<_, String> {
                Ok(EmbeddingExports {
                    typed: Typed::Unchecked,
                    serves: embeddings.func("serves")?,
                    max_batch: embeddings.func("max-batch")?,
                    needs_dimensions: embeddings.func("needs-dimensions")?,
                    encode: embeddings.func("encode")?,
                    decode: embeddings.func("decode")?,
                    classify: embeddings.func("classify")?,
                })
            })
            .transpose()?;
        let rerank = lookup(Operation::Rerank)?
            .map(|rerank| -> Result<_, String> {
                Ok(RerankExports {
                    typed: Typed::Unchecked,
                    serves: rerank.func("serves")?,
                    encode: rerank.func("encode")?,
                    decode: rerank.func("decode")?,
                    classify: rerank.func("classify")?,
                })
            })
            .transpose()?;
        let logprobs = lookup(Operation::Logprobs)?
            .map(|logprobs| -> Result<_, String> {
                Ok(LogprobsExports {
                    typed: Typed::Unchecked,
                    records,
                    serves: logprobs.func("serves")?,
                    encode: logprobs.func("encode")?,
                    decode: logprobs.func("decode")?,
                })
            })
            .transpose()?;
        let native = lookup(Operation::Native)?
            .map(|native| -> Result<_, String> {
                Ok(NativeExports {
                    typed: Typed::Unchecked,
                    records,
                    support: native.func("support")?,
                    encode: native.func("encode")?,
                    count_encode: native.func("count-tokens-encode")?,
                    count_decode: native.func("count-tokens-decode")?,
                    decode_native: match has_decode_native(version) {
                        true => Some(native.func("decode-native")?),
                        false => None,
                    },
                    stream: match has_native_stream(version) {
                        true => Some(NativeStreamExports {
                            open: native.func("[static]native-stream.open")?,
                            feed: native.func("[method]native-stream.feed")?,
                            finish: native.func("[method]native-stream.finish")?,
                        }),
                        false => None,
                    },
                })
            })
            .transpose()?;
        Ok(Self { describe, chat, embeddings, rerank, logprobs, native })
    }

    pub fn exports(&self, operation: Operation) -> bool {
        match operation {
            Operation::Chat => self.chat.is_some(),
            Operation::Embeddings => self.embeddings.is_some(),
            Operation::Rerank => self.rerank.is_some(),
            Operation::Logprobs => self.logprobs.is_some(),
            Operation::Native => self.native.is_some(),
        }
    }

    /// Checks every exported function against the type the host calls it with,
    /// naming the first that differs; once all pass, lookups stop checking.
    pub fn typecheck(&mut self, store: Call<'_>, instance: &Instance) -> Result<(), String> {
        self.check_each(store, instance)?;
        self.describe.typed = Typed::Checked;
        for typed in [
            self.chat.as_mut().map(|c| &mut c.typed),
            self.embeddings.as_mut().map(|e| &mut e.typed),
            self.rerank.as_mut().map(|r| &mut r.typed),
            self.logprobs.as_mut().map(|l| &mut l.typed),
            self.native.as_mut().map(|n| &mut n.typed),
        ]
        .into_iter()
        .flatten()
        {
            *typed = Typed::Checked;
        }
        Ok(())
    }

    fn check_each(&self, store: Call<'_>, instance: &Instance) -> Result<(), String> {
        let check = |what: &str, result: wasmtime::Result<()>| {
            result.map_err(|e| format!("`{what}` does not have the world's type: {e:#}"))
        };
        let d = &self.describe;
        match d.records {
            Records::Current => check("describe.providers", d.providers(store, instance).map(drop))?,
            Records::V0_4 => check("describe.providers", d.providers_v0_4(store, instance).map(drop))?,
        }
        check("describe.serves", d.serves(store, instance).map(drop))?;
        check("describe.claims", d.claims(store, instance).map(drop))?;
        if let Some(c) = &self.chat {
            match c.records {
                Records::Current => check("chat.encode", c.encode(store, instance).map(drop))?,
                Records::V0_4 => check("chat.encode", c.encode_v0_4(store, instance).map(drop))?,
            }
            check("chat.decode", c.decode(store, instance).map(drop))?;
            check("chat.classify", c.classify(store, instance).map(drop))?;
            check("chat.stream-decoder", c.stream_new(store, instance).map(drop))?;
            check("chat.stream-decoder.feed", c.stream_feed(store, instance).map(drop))?;
            check("chat.stream-decoder.finish", c.stream_finish(store, instance).map(drop))?;
        }
        if let Some(e) = &self.embeddings {
            check("embeddings.serves", e.serves(store, instance).map(drop))?;
            check("embeddings.max-batch", e.max_batch(store, instance).map(drop))?;
            check("embeddings.needs-dimensions", e.needs_dimensions(store, instance).map(drop))?;
            check("embeddings.encode", e.encode(store, instance).map(drop))?;
            check("embeddings.decode", e.decode(store, instance).map(drop))?;
            check("embeddings.classify", e.classify(store, instance).map(drop))?;
        }
        if let Some(r) = &self.rerank {
            check("rerank.serves", r.serves(store, instance).map(drop))?;
            check("rerank.encode", r.encode(store, instance).map(drop))?;
            check("rerank.decode", r.decode(store, instance).map(drop))?;
            check("rerank.classify", r.classify(store, instance).map(drop))?;
        }
        if let Some(l) = &self.logprobs {
            check("logprobs.serves", l.serves(store, instance).map(drop))?;
            match l.records {
                Records::Current => check("logprobs.encode", l.encode(store, instance).map(drop))?,
                Records::V0_4 => check("logprobs.encode", l.encode_v0_4(store, instance).map(drop))?,
            }
            check("logprobs.decode", l.decode(store, instance).map(drop))?;
        }
        if let Some(n) = &self.native {
            check("native.support", n.support(store, instance).map(drop))?;
            match n.records {
                Records::Current => {
                    check("native.encode", n.encode(store, instance).map(drop))?;
                    check("native.count-tokens-encode", n.count_encode(store, instance).map(drop))?;
                }
                Records::V0_4 => {
                    check("native.encode", n.encode_v0_4(store, instance).map(drop))?;
                    check("native.count-tokens-encode", n.count_encode_v0_4(store, instance).map(drop))?;
                }
            }
            check("native.count-tokens-decode", n.count_decode(store, instance).map(drop))?;
            if let Some(decode_native) = n.decode_native(store, instance) {
                check("native.decode-native", decode_native.map(drop))?;
            }
            if let Some(stream) = n.stream() {
                check("native.native-stream.open", stream.open(n.typed, store, instance).map(drop))?;
                check("native.native-stream.feed", stream.feed(n.typed, store, instance).map(drop))?;
                check("native.native-stream.finish", stream.finish(n.typed, store, instance).map(drop))?;
            }
        }
        Ok(())
    }
}

impl DescribeExports {
    /// Which records `providers` gives (see [`Self::providers_v0_4`]).
    pub fn records(&self) -> Records {
        self.records
    }

    pub fn providers(&self, store: Call<'_>, instance: &Instance) -> Func<(), Vec<ProviderInfo>> {
        typed(self.typed, store, instance, self.providers)
    }

    /// `providers` of a 0.1.0–0.4.0 component, with 0.4.0's `provider-info`.
    pub fn providers_v0_4(&self, store: Call<'_>, instance: &Instance) -> Func<(), Vec<v0_4::ProviderInfo>> {
        typed(self.typed, store, instance, self.providers)
    }

    pub fn serves<'a>(&self, store: Call<'_>, instance: &Instance) -> Question<'a, bool> {
        typed(self.typed, store, instance, self.serves)
    }

    pub fn claims<'a>(&self, store: Call<'_>, instance: &Instance) -> Question<'a, bool> {
        typed(self.typed, store, instance, self.claims)
    }
}

impl ChatExports {
    /// Which records `encode` takes (see [`Self::encode_v0_4`]).
    pub fn records(&self) -> Records {
        self.records
    }

    pub fn encode<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(&'a str, &'a PreparedConversation, &'a CallParams), Encoded> {
        typed(self.typed, store, instance, self.encode)
    }

    /// `encode` of a 0.1.0–0.4.0 component, with 0.4.0's `call-params`.
    pub fn encode_v0_4<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(&'a str, &'a PreparedConversation, &'a v0_4::CallParams), Encoded> {
        typed(self.typed, store, instance, self.encode)
    }

    pub fn decode<'a>(&self, store: Call<'_>, instance: &Instance) -> Reading<'a, Result<DecodedResponse, CodecError>> {
        typed(self.typed, store, instance, self.decode)
    }

    pub fn classify<'a>(&self, store: Call<'_>, instance: &Instance) -> Reading<'a, ErrorClass> {
        typed(self.typed, store, instance, self.classify)
    }

    /// `[constructor]stream-decoder(provider) -> own<stream-decoder>`.
    pub fn stream_new<'a>(&self, store: Call<'_>, instance: &Instance) -> Func<(&'a str,), ResourceAny> {
        typed(self.typed, store, instance, self.stream_new)
    }

    /// `[method]stream-decoder.feed(self: borrow<stream-decoder>, event)`.
    pub fn stream_feed<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(ResourceAny, &'a StreamEvent), Deltas> {
        typed(self.typed, store, instance, self.stream_feed)
    }

    /// `[method]stream-decoder.finish(self: borrow<stream-decoder>)`.
    pub fn stream_finish(&self, store: Call<'_>, instance: &Instance) -> Func<(ResourceAny,), Deltas> {
        typed(self.typed, store, instance, self.stream_finish)
    }
}

impl EmbeddingExports {
    pub fn serves<'a>(&self, store: Call<'_>, instance: &Instance) -> Question<'a, bool> {
        typed(self.typed, store, instance, self.serves)
    }

    pub fn max_batch<'a>(&self, store: Call<'_>, instance: &Instance) -> Question<'a, u32> {
        typed(self.typed, store, instance, self.max_batch)
    }

    pub fn needs_dimensions<'a>(&self, store: Call<'_>, instance: &Instance) -> Question<'a, bool> {
        typed(self.typed, store, instance, self.needs_dimensions)
    }

    pub fn encode<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(&'a str, &'a [String], &'a EmbeddingParams), Encoded> {
        typed(self.typed, store, instance, self.encode)
    }

    pub fn decode<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Reading<'a, Result<EmbeddingResponse, CodecError>> {
        typed(self.typed, store, instance, self.decode)
    }

    pub fn classify<'a>(&self, store: Call<'_>, instance: &Instance) -> Reading<'a, ErrorClass> {
        typed(self.typed, store, instance, self.classify)
    }
}

impl RerankExports {
    pub fn serves<'a>(&self, store: Call<'_>, instance: &Instance) -> Question<'a, bool> {
        typed(self.typed, store, instance, self.serves)
    }

    pub fn encode<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(&'a str, &'a str, &'a [String], &'a RerankParams), Encoded> {
        typed(self.typed, store, instance, self.encode)
    }

    pub fn decode<'a>(&self, store: Call<'_>, instance: &Instance) -> Reading<'a, Result<RerankResponse, CodecError>> {
        typed(self.typed, store, instance, self.decode)
    }

    pub fn classify<'a>(&self, store: Call<'_>, instance: &Instance) -> Reading<'a, ErrorClass> {
        typed(self.typed, store, instance, self.classify)
    }
}

impl LogprobsExports {
    /// Which records `encode` takes (see [`Self::encode_v0_4`]).
    pub fn records(&self) -> Records {
        self.records
    }

    /// `encode` of a 0.3.0 or 0.4.0 component, with 0.4.0's `call-params`.
    pub fn encode_v0_4<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(&'a str, &'a PreparedConversation, &'a v0_4::CallParams, u8), Encoded> {
        typed(self.typed, store, instance, self.encode)
    }

    pub fn serves<'a>(&self, store: Call<'_>, instance: &Instance) -> Question<'a, bool> {
        typed(self.typed, store, instance, self.serves)
    }

    pub fn encode<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(&'a str, &'a PreparedConversation, &'a CallParams, u8), Encoded> {
        typed(self.typed, store, instance, self.encode)
    }

    pub fn decode<'a>(&self, store: Call<'_>, instance: &Instance) -> Reading<'a, Result<FirstToken, CodecError>> {
        typed(self.typed, store, instance, self.decode)
    }
}

/// `(provider, conversation, params, native) -> request`: `native.encode` and
/// `native.count-tokens-encode`.
type NativeEncode<'a> = Func<(&'a str, &'a PreparedConversation, &'a CallParams, &'a NativeRequest), Encoded>;
/// [`NativeEncode`] of a 0.4.0 component, with 0.4.0's `call-params`.
type NativeEncodeV04<'a> = Func<(&'a str, &'a PreparedConversation, &'a v0_4::CallParams, &'a NativeRequest), Encoded>;

impl NativeExports {
    /// Which records the encodes take (see [`Self::encode_v0_4`]).
    pub fn records(&self) -> Records {
        self.records
    }

    pub fn encode_v0_4<'a>(&self, store: Call<'_>, instance: &Instance) -> NativeEncodeV04<'a> {
        typed(self.typed, store, instance, self.encode)
    }

    pub fn count_encode_v0_4<'a>(&self, store: Call<'_>, instance: &Instance) -> NativeEncodeV04<'a> {
        typed(self.typed, store, instance, self.count_encode)
    }

    pub fn support<'a>(&self, store: Call<'_>, instance: &Instance) -> Question<'a, Option<NativeSupport>> {
        typed(self.typed, store, instance, self.support)
    }

    pub fn encode<'a>(&self, store: Call<'_>, instance: &Instance) -> NativeEncode<'a> {
        typed(self.typed, store, instance, self.encode)
    }

    pub fn count_encode<'a>(&self, store: Call<'_>, instance: &Instance) -> NativeEncode<'a> {
        typed(self.typed, store, instance, self.count_encode)
    }

    pub fn count_decode<'a>(&self, store: Call<'_>, instance: &Instance) -> Reading<'a, Result<u64, CodecError>> {
        typed(self.typed, store, instance, self.count_decode)
    }

    /// The `native-stream` resource (0.7.0 on), with the typing its calls use.
    pub fn stream(&self) -> Option<NativeStreamExports> {
        self.stream
    }

    /// How its functions are typed (see [`Typed`]).
    pub fn typed(&self) -> Typed {
        self.typed
    }

    /// Whether the component answers `decode-native` (0.6.0 on).
    pub fn decodes_native(&self) -> bool {
        self.decode_native.is_some()
    }

    /// `decode-native`, when the component has it.
    pub fn decode_native<'a>(
        &self,
        store: Call<'_>,
        instance: &Instance,
    ) -> Option<Reading<'a, Result<NativeAnswer, CodecError>>> {
        self.decode_native.map(|index| typed(self.typed, store, instance, index))
    }
}

/// `native.decode-native` came with 0.6.0; `native` itself with 0.4.0.
fn has_decode_native(version: &str) -> bool {
    !matches!(version, "0.1.0" | "0.2.0" | "0.3.0" | "0.4.0" | "0.5.0")
}

/// `native.native-stream` came with 0.7.0.
fn has_native_stream(version: &str) -> bool {
    has_decode_native(version) && version != "0.6.0"
}

impl NativeStreamExports {
    /// `[static]native-stream.open(provider) -> option<own<native-stream>>`.
    pub fn open<'a>(
        self,
        typed_as: Typed,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(&'a str,), Option<ResourceAny>> {
        typed(typed_as, store, instance, self.open)
    }

    /// `[method]native-stream.feed(self: borrow<native-stream>, event)`.
    pub fn feed<'a>(
        self,
        typed_as: Typed,
        store: Call<'_>,
        instance: &Instance,
    ) -> Func<(ResourceAny, &'a StreamEvent), NativeDeltas> {
        typed(typed_as, store, instance, self.feed)
    }

    /// `[method]native-stream.finish(self: borrow<native-stream>)`.
    pub fn finish(self, typed_as: Typed, store: Call<'_>, instance: &Instance) -> Func<(ResourceAny,), NativeDeltas> {
        typed(typed_as, store, instance, self.finish)
    }
}
