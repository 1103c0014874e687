//! A component's encoded request, lifted with its size caps checked before
//! anything is copied.
//!
//! Lifting a typed result copies the whole value out of the guest's memory into
//! host `String`s and `Vec`s. The guest's linear memory is capped
//! ([`super::sandbox::MEMORY_LIMIT_BYTES`]), but that does not bound the copy:
//! the canonical ABI lets every string of a list point at the same bytes, so
//! 100 000 headers whose values all alias one 1 MiB string cost the guest
//! ~2.6 MiB and the host ~200 GiB. A check after the lift comes too late.
//! Every result's lift (decode's, a stream's deltas, decode-native's) is
//! bounded as a whole by wasmtime's hostcall fuel
//! ([`super::sandbox::LIFT_BYTES_PER_CALL`]); an encode's is also capped here
//! field by field, so an absurd request fails naming what was absurd, before
//! anything is copied.
//!
//! So every `encode`'s result (`chat`, `embeddings` and `rerank` all return an
//! `http-request`) is lifted as [`EncodedRequest`], whose strings and
//! lists are [`Capped`]: each reads the length its pointer pair claims, refuses
//! it past the cap, and only then lets wasmtime copy the value. What the host
//! copies from one encode is then at most 64 headers × 2 × 16 KiB, two 16 KiB
//! strings and a 32 MiB body.

#![allow(unsafe_code, reason = "wasmtime's lifting traits are unsafe to implement; see `Capped`")]

use std::marker::PhantomData;

use wasmtime::ValRaw;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

use crate::types::HttpRequest;

/// More headers than any provider's request carries by two orders of magnitude.
pub struct Headers;
/// A header name or value, a method, a path and query: nginx's default for a
/// whole request line or header is 8 KiB, so twice that is no real request.
pub struct RequestText;
/// Anthropic's and Bedrock's request ceiling is 32 MB (20 MB on Bedrock's
/// Converse); no provider takes more, so a bigger encoded body is a component bug.
pub struct Body;

/// How long a capped string or list may be, and what to call it in the fault.
pub trait Cap {
    const MAX: usize;
    const WHAT: &'static str;
}

impl Cap for Headers {
    const MAX: usize = 64;
    const WHAT: &'static str = "headers";
}

impl Cap for RequestText {
    const MAX: usize = 16 << 10;
    const WHAT: &'static str = "bytes in a method, path or header";
}

impl Cap for Body {
    const MAX: usize = 32 << 20;
    const WHAT: &'static str = "bytes of body";
}

/// A method, path, header name or header value.
type Text = Capped<String, RequestText>;

/// An encode's `http-request`, as lifted from the component.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct EncodedRequest {
    method: Text,
    #[component(name = "path-and-query")]
    path_and_query: Text,
    headers: Capped<Vec<(Text, Text)>, Headers>,
    body: Capped<Vec<u8>, Body>,
}

impl From<EncodedRequest> for HttpRequest {
    fn from(request: EncodedRequest) -> Self {
        Self {
            method: request.method.0,
            path_and_query: request.path_and_query.0,
            headers: request.headers.0.into_iter().map(|(name, value)| (name.0, value.0)).collect(),
            body: request.body.0,
        }
    }
}

/// A string or list whose length is checked against `C` before it is lifted.
pub struct Capped<T, C>(T, PhantomData<C>);

/// The types lifted from a pointer pair (address, length): strings and lists.
pub trait PointerPair: Lift + ComponentType<Lower = [ValRaw; 2]> {}
impl PointerPair for String {}
impl<T: Lift> PointerPair for Vec<T> {}

/// The canonical ABI marks a UTF-16 string's length with this bit; what remains
/// counts code units, each at most 3 bytes once transcoded to UTF-8.
const UTF16_TAG: u32 = 1 << 31;

/// Refuses a length past the cap, before anything of that length is copied.
fn within<C: Cap>(claimed: u32) -> wasmtime::Result<()> {
    let len = usize::try_from(claimed & !UTF16_TAG)?;
    if len > C::MAX {
        wasmtime::bail!("returned {len} {} (at most {})", C::WHAT, C::MAX);
    }
    Ok(())
}

// SAFETY: `Capped<T, C>` claims exactly `T`'s canonical type: the same flat
// representation (`Lower`), the same layout (`ABI`, a pointer pair) and `T`'s
// typecheck, and it lifts by handing the same inputs to `T`'s own lift. The only
// addition is reading the pointer pair's length word (as wasmtime's own
// `lift_pointer_pair_from_*` do, memory32) and failing before `T` lifts.
unsafe impl<T: PointerPair, C: Cap + Send + Sync> ComponentType for Capped<T, C> {
    type Lower = [ValRaw; 2];

    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        T::typecheck(ty, types)
    }
}

// SAFETY: as for `ComponentType` above: lifting is `T`'s, after a length check.
unsafe impl<T: PointerPair, C: Cap + Send + Sync> Lift for Capped<T, C> {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        within::<C>(src[1].get_u32())?;
        T::linear_lift_from_flat(cx, ty, src).map(|value| Self(value, PhantomData))
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        let claimed = bytes
            .get(4..8)
            .and_then(|word| <[u8; 4]>::try_from(word).ok())
            .ok_or_else(|| wasmtime::format_err!("a pointer pair shorter than 8 bytes"))?;
        within::<C>(u32::from_le_bytes(claimed))?;
        T::linear_lift_from_memory(cx, ty, bytes).map(|value| Self(value, PhantomData))
    }
}
