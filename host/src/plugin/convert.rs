//! The one place a retired world version's records meet the current ones.
//!
//! Until 0.5.0 every version only added records, so one set of Rust types
//! (`crate::wit::records`) typed every component: the component model checks
//! function types structurally. 0.5.0 changed two records — `call-params`
//! (`temperature` is an `f64`) and `capabilities` (media by source) — so a
//! 0.1.0–0.4.0 component's functions that take or give them are typed with
//! frozen 0.4.0's records ([`crate::wit::v0_4`]) and each call converts:
//! `call-params` on its way in (every `encode`), `provider-info` on its way
//! out (`describe.providers`, once at load). Every other record did not
//! change and crosses as the current type.
//!
//! A later version that changes a record adds one [`Records`] case, one
//! frozen binding in `crate::wit`, and the conversions from its records here.

use crate::types::{CallParams, Capabilities, CredentialShape, Effort, HeaderCredential, ProviderInfo, ResponseSchema};
use crate::types::{Sigv4, StreamFraming};
use crate::wit::v0_4;

/// Which record set a component's functions take: its world version's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Records {
    /// `weir:provider@0.5.0`, 0.6.0 and 0.7.0 (which only added): the current
    /// records, no conversion.
    Current,
    /// 0.1.0 to 0.4.0: frozen 0.4.0's records, converted per call.
    V0_4,
}

impl Records {
    /// The record set of world `version` (one of `world::WORLD_VERSIONS`).
    pub fn of(version: &str) -> Self {
        match version {
            "0.1.0" | "0.2.0" | "0.3.0" | "0.4.0" => Self::V0_4,
            _ => Self::Current,
        }
    }
}

// ------------------------------------------------------------ into 0.4.0 (calls)

impl From<&CallParams> for v0_4::CallParams {
    /// The call as a 0.4.0 component takes it. `temperature` narrows to the
    /// `f32` those components always got (0.3 arrives as 0.30000001192092896,
    /// as before 0.5.0): the nearest `f32`, which is what they were built for.
    fn from(params: &CallParams) -> Self {
        Self {
            wire_model_id: params.wire_model_id.clone(),
            max_tokens: params.max_tokens,
            thinking_budget: params.thinking_budget,
            reasoning_effort: params.reasoning_effort.map(v0_4::Effort::from),
            #[allow(clippy::cast_possible_truncation, reason = "the f32 a 0.4.0 component takes; see above")]
            temperature: params.temperature.map(|temperature| temperature as f32),
            stop: params.stop.clone(),
            response_schema: params.response_schema.as_ref().map(v0_4::ResponseSchema::from),
            stream: params.stream,
        }
    }
}

impl From<Effort> for v0_4::Effort {
    fn from(effort: Effort) -> Self {
        match effort {
            Effort::Minimal => Self::Minimal,
            Effort::Low => Self::Low,
            Effort::Medium => Self::Medium,
            Effort::High => Self::High,
            Effort::Max => Self::Max,
        }
    }
}

impl From<&ResponseSchema> for v0_4::ResponseSchema {
    fn from(schema: &ResponseSchema) -> Self {
        Self { name: schema.name.clone(), schema_json: schema.schema_json.clone() }
    }
}

// ------------------------------------------------------------ from 0.4.0 (answers)

impl From<v0_4::ProviderInfo> for ProviderInfo {
    fn from(info: v0_4::ProviderInfo) -> Self {
        Self {
            key: info.key,
            description: info.description,
            default_endpoint: info.default_endpoint,
            credential: info.credential.into(),
            capabilities: info.capabilities.into(),
            stream_framing: info.stream_framing.into(),
        }
    }
}

impl From<v0_4::Capabilities> for Capabilities {
    /// 0.4.0's `images` meant any image, inline or by URL (the host refused
    /// neither), so it reads as both flags; `documents` likewise.
    fn from(old: v0_4::Capabilities) -> Self {
        let mapped = [
            (v0_4::Capabilities::STREAMING, Capabilities::STREAMING),
            (v0_4::Capabilities::NATIVE_TOOLS, Capabilities::NATIVE_TOOLS),
            (v0_4::Capabilities::IMAGES, Capabilities::INLINE_IMAGES | Capabilities::IMAGE_URLS),
            (v0_4::Capabilities::DOCUMENTS, Capabilities::INLINE_DOCUMENTS | Capabilities::DOCUMENT_URLS),
            (v0_4::Capabilities::THINKING, Capabilities::THINKING),
            (v0_4::Capabilities::PROMPT_CACHE, Capabilities::PROMPT_CACHE),
            (v0_4::Capabilities::STRUCTURED_OUTPUT, Capabilities::STRUCTURED_OUTPUT),
        ];
        mapped
            .into_iter()
            .filter(|(flag, _)| old.contains(*flag))
            .fold(Capabilities::empty(), |carried, (_, flags)| carried | flags)
    }
}

impl From<v0_4::CredentialShape> for CredentialShape {
    fn from(shape: v0_4::CredentialShape) -> Self {
        match shape {
            v0_4::CredentialShape::None => Self::None,
            v0_4::CredentialShape::Header(header) => Self::Header(HeaderCredential {
                default_credential_id: header.default_credential_id,
                header_name: header.header_name,
                prefix: header.prefix,
                required: header.required,
            }),
            v0_4::CredentialShape::AwsSigv4(sigv4) => {
                Self::AwsSigv4(Sigv4 { service: sigv4.service, default_credential_id: sigv4.default_credential_id })
            }
        }
    }
}

impl From<v0_4::StreamFraming> for StreamFraming {
    fn from(framing: v0_4::StreamFraming) -> Self {
        match framing {
            v0_4::StreamFraming::Sse => Self::Sse,
            v0_4::StreamFraming::AwsEventStream => Self::AwsEventStream,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_version_has_a_record_set() {
        for version in super::super::world::WORLD_VERSIONS {
            let current = matches!(*version, "0.5.0" | "0.6.0" | "0.7.0");
            let expected = if current { Records::Current } else { Records::V0_4 };
            assert_eq!(Records::of(version), expected, "{version}");
        }
    }

    #[test]
    fn a_legacy_component_gets_the_nearest_f32() {
        let params = CallParams { temperature: Some(0.3), ..CallParams::new("m", 10) };
        let legacy = v0_4::CallParams::from(&params);
        assert_eq!(legacy.temperature, Some(0.3_f32));
        assert_eq!(f64::from(legacy.temperature.unwrap_or_default()), 0.30000001192092896);
        assert_eq!(legacy.wire_model_id, "m");
        assert_eq!(legacy.max_tokens, 10);
    }

    #[test]
    fn legacy_media_flags_mean_both_sources() {
        let old = v0_4::Capabilities::IMAGES | v0_4::Capabilities::STREAMING;
        let new = Capabilities::from(old);
        assert_eq!(new, Capabilities::INLINE_IMAGES | Capabilities::IMAGE_URLS | Capabilities::STREAMING);
        let documents = Capabilities::from(v0_4::Capabilities::DOCUMENTS);
        assert_eq!(documents, Capabilities::INLINE_DOCUMENTS | Capabilities::DOCUMENT_URLS);
        assert_eq!(Capabilities::from(v0_4::Capabilities::all()), Capabilities::all());
        assert_eq!(Capabilities::from(v0_4::Capabilities::empty()), Capabilities::empty());
    }
}
