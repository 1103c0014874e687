//! The Anthropic Messages dialect, shared by every component that speaks it.
//!
//! Behind the `anthropic` feature: components of other dialects do not compile it.
//! The codec uses nothing but the SDK's records and helpers, so it tests natively.
//!
//! Flow of a call: [`encode`] builds the request; the host sends it and hands a 2xx
//! body to [`decode`], anything else to [`classify`]; a stream's events go one by one
//! to an [`AnthropicStream`].
//!
//! The same Messages API is served in several places. A [`Surface`] decides only
//! what differs between them: the path, where the model, the stream switch and the
//! API version go, the stream's framing, the request-id header and which error
//! bodies arrive. Blocks, tools, thinking, caching, usage and stop reasons are one
//! code path for all of them, so the surfaces cannot drift apart.

mod bedrock_betas;
mod errors;
pub mod hosted;
mod invoke_stream;
pub mod native;
mod native_stream;
mod request;
mod response;
mod stream;
mod surface_provider;

pub use errors::classify;
pub use native_stream::AnthropicNativeStream;
pub use request::encode;
pub use response::decode;
pub use stream::AnthropicStream;
pub use surface_provider::SurfaceProvider;

use crate::bedrock::has_profile_prefix;
use crate::http::header;
use crate::types::Headers;

/// Where a Messages API call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// api.anthropic.com (key `anthropic`): `POST /v1/messages`, the model and
    /// `stream` in the body, the `anthropic-version` header, SSE.
    Direct,
    /// Amazon Bedrock InvokeModel (key `anthropic-bedrock`): the model and the
    /// operation in the path, `anthropic_version` in the body, AWS event-stream,
    /// AWS error types.
    BedrockInvoke,
    /// Amazon Bedrock's Mantle endpoint (key `anthropic-bedrock-mantle`): the native
    /// Messages API under `bedrock-mantle.{region}.api.aws/anthropic`, so requests
    /// and streams are the direct ones; errors come in either envelope.
    Mantle,
    /// Claude on Google Vertex AI (key `anthropic-vertex`): the model and the
    /// operation in the path (`/models/{model}:rawPredict`, `:streamRawPredict`),
    /// `anthropic_version` and `stream` in the body, SSE, Anthropic's errors or
    /// Google's envelope.
    Vertex,
}

/// Bedrock spells a Claude model `anthropic.claude-…`, with or without a profile prefix.
const BEDROCK_ANTHROPIC: &str = "anthropic.";
const BEDROCK_CLAUDE: &str = "anthropic.claude-";

/// Vertex AI versions a model after `@` (`claude-sonnet-4-5@20250929`).
const VERTEX_VERSION: char = '@';

impl Surface {
    /// The provider key of the component serving this surface.
    pub const fn key(self) -> &'static str {
        match self {
            Self::Direct => "anthropic",
            Self::BedrockInvoke => "anthropic-bedrock",
            Self::Mantle => "anthropic-bedrock-mantle",
            Self::Vertex => "anthropic-vertex",
        }
    }

    /// The surface a provider key names, if any.
    pub fn from_key(key: &str) -> Option<Self> {
        [Self::Direct, Self::BedrockInvoke, Self::Mantle, Self::Vertex].into_iter().find(|surface| surface.key() == key)
    }

    /// Whether this surface spells a model this way. Each surface refuses the
    /// others' spellings, so a catalog entry cannot reach the wrong endpoint:
    ///
    /// * Direct: any id but Bedrock's forms (`anthropic.…`, a profile prefix, an
    ///   ARN) and Vertex's (`…@version`). Anthropic's ids and aliases change too often to list.
    /// * BedrockInvoke: `anthropic.…` bare or behind a profile prefix (`us.`,
    ///   `global.`, …), or an ARN, unless the ARN names another vendor's model.
    ///   An opaque ARN (application inference profile, provisioned model) is
    ///   served: the entry that names it chose this provider.
    /// * Mantle: bare `anthropic.…` only (Claude, and any other model Anthropic
    ///   serves there, such as `anthropic.fable-5`); it takes no profile ids and
    ///   no ARNs. It claims Claude alone (see [`Surface::claims`]).
    /// * Vertex: `claude-…` ids, versioned as Google spells them
    ///   (`claude-sonnet-4-5@20250929`) or not; never Bedrock's forms.
    pub fn serves(self, wire_id: &str) -> bool {
        match self {
            Self::Direct => {
                !(wire_id.starts_with(BEDROCK_ANTHROPIC)
                    || has_profile_prefix(wire_id)
                    || is_arn(wire_id)
                    || wire_id.contains(VERTEX_VERSION))
            }
            Self::BedrockInvoke if is_arn(wire_id) => {
                arn_model(wire_id).is_none_or(|model| without_profile(model).starts_with(BEDROCK_ANTHROPIC))
            }
            Self::BedrockInvoke => without_profile(wire_id).starts_with(BEDROCK_ANTHROPIC),
            Self::Mantle => wire_id.starts_with(BEDROCK_ANTHROPIC),
            Self::Vertex => wire_id.starts_with("claude-"),
        }
    }

    /// Whether the id names a Claude model as this surface spells it. An opaque
    /// ARN is served but not claimed: nothing in it says Claude.
    pub fn claims(self, wire_id: &str) -> bool {
        match self {
            Self::Direct | Self::Vertex => wire_id.starts_with("claude-"),
            Self::BedrockInvoke if is_arn(wire_id) => {
                arn_model(wire_id).is_some_and(|model| without_profile(model).starts_with(BEDROCK_CLAUDE))
            }
            Self::BedrockInvoke => without_profile(wire_id).starts_with(BEDROCK_CLAUDE),
            Self::Mantle => wire_id.starts_with(BEDROCK_CLAUDE),
        }
    }

    /// The request id for the log: Anthropic's `request-id`, AWS's
    /// `x-amzn-requestid`; Mantle is Anthropic's API behind AWS's front door, so
    /// either may come.
    fn request_id(self, headers: &Headers) -> Option<&str> {
        let names: &[&str] = match self {
            Self::Direct | Self::Vertex => &["request-id"],
            Self::BedrockInvoke => &["x-amzn-requestid"],
            Self::Mantle => &["request-id", "x-amzn-requestid"],
        };
        names.iter().find_map(|name| header(headers, name).filter(|id| !id.is_empty()))
    }
}

fn is_arn(wire_id: &str) -> bool {
    wire_id.starts_with("arn:")
}

/// The model id an ARN's resource names (`…:foundation-model/anthropic.claude-…`,
/// `…:inference-profile/us.anthropic.claude-…`), or `None` when the resource id is
/// opaque (`…:application-inference-profile/a1b2c3d4e5f6`).
fn arn_model(arn: &str) -> Option<&str> {
    arn.rsplit('/').next().filter(|resource| resource.contains('.'))
}

/// `us.anthropic.claude-…` → `anthropic.claude-…`; other ids unchanged.
fn without_profile(wire_id: &str) -> &str {
    match wire_id.split_once('.') {
        Some((_, rest)) if has_profile_prefix(wire_id) => rest,
        _ => wire_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SURFACES: [Surface; 4] = [Surface::Direct, Surface::BedrockInvoke, Surface::Mantle, Surface::Vertex];

    #[test]
    fn keys_round_trip() {
        for surface in SURFACES {
            assert_eq!(Surface::from_key(surface.key()), Some(surface));
        }
        assert_eq!(Surface::from_key("bedrock-converse"), None);
    }

    /// Each id form is served by exactly the surfaces listed.
    #[test]
    fn each_surface_refuses_the_others_id_forms() {
        use Surface::{BedrockInvoke, Direct, Mantle, Vertex};
        let cases: [(&str, &[Surface]); 15] = [
            ("claude-opus-5", &[Direct, Vertex]),
            ("anthropic.fable-5", &[BedrockInvoke, Mantle]),
            ("claude-sonnet-4-5-20250929", &[Direct, Vertex]),
            ("claude-sonnet-4-5@20250929", &[Vertex]),
            ("fable-5", &[Direct]),
            ("anthropic.claude-opus-5", &[BedrockInvoke, Mantle]),
            ("anthropic.claude-3-5-haiku-20241022-v1:0", &[BedrockInvoke, Mantle]),
            ("us.anthropic.claude-opus-5", &[BedrockInvoke]),
            ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", &[BedrockInvoke]),
            ("us-gov.anthropic.claude-3-5-sonnet-20240620-v1:0", &[BedrockInvoke]),
            ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0", &[BedrockInvoke]),
            ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/eu.anthropic.claude-opus-5", &[BedrockInvoke]),
            ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5f6", &[BedrockInvoke]),
            ("arn:aws:bedrock:us-east-1::foundation-model/meta.llama3-70b-instruct-v1:0", &[]),
            ("us.amazon.nova-pro-v1:0", &[]),
        ];
        for (wire_id, servers) in cases {
            for surface in SURFACES {
                assert_eq!(surface.serves(wire_id), servers.contains(&surface), "{surface:?} {wire_id}");
            }
        }
    }

    #[test]
    fn claims_are_claude_ids_as_each_surface_spells_them() {
        assert!(Surface::Direct.claims("claude-opus-5"));
        assert!(!Surface::Direct.claims("gpt-4.1"));
        assert!(Surface::BedrockInvoke.claims("us.anthropic.claude-opus-5"));
        assert!(Surface::BedrockInvoke.claims("anthropic.claude-opus-5"));
        assert!(Surface::BedrockInvoke.claims("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-opus-5"));
        assert!(!Surface::BedrockInvoke.claims("arn:aws:bedrock:us-east-1:1:application-inference-profile/a1b2c3"));
        assert!(!Surface::BedrockInvoke.claims("claude-opus-5"));
        assert!(Surface::Mantle.claims("anthropic.claude-opus-5"));
        assert!(!Surface::Mantle.claims("us.anthropic.claude-opus-5"));
        assert!(!Surface::Mantle.claims("anthropic.fable-5"), "served there, but not Claude");
    }

    #[test]
    fn request_id_headers() {
        let headers: Headers = vec![("x-amzn-RequestId".into(), "3f1c".into()), ("request-id".into(), "req_1".into())];
        assert_eq!(Surface::Direct.request_id(&headers), Some("req_1"));
        assert_eq!(Surface::BedrockInvoke.request_id(&headers), Some("3f1c"));
        assert_eq!(Surface::Mantle.request_id(&headers), Some("req_1"));
        assert_eq!(Surface::Mantle.request_id(&headers[..1].to_vec()), Some("3f1c"));
    }
}
