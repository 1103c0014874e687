//! # weir-provider-bedrock-retrieval
//!
//! One provider key, `bedrock-retrieval`: embeddings and reranking on Amazon
//! Bedrock Runtime's InvokeModel (`bedrock-runtime.{region}`), each model with
//! its native JSON body — Amazon Titan Text Embeddings V2, Cohere Embed v3 and
//! v4, Cohere Rerank 3.5. It serves no chat: the component exports `describe`,
//! `embeddings` and `rerank` only (world `retrieval-provider`). What every
//! Bedrock surface shares (endpoint, SigV4, model path, errors) is
//! `weir_sdk::bedrock`.
//!
//! This file only describes the component and routes calls; the family rules
//! live in `model`, the bodies in `request` and `response`, which use nothing
//! but `weir_sdk::types` and helpers, so they test natively.

mod model;
mod request;
mod response;

use weir_sdk::bedrock;
use weir_sdk::types::{
    Capabilities, CodecError, EmbeddingParams, EmbeddingResponse, ErrorClass, HttpRequest, HttpResponse, ProviderInfo,
    RerankParams, RerankResponse, StreamFraming,
};
use weir_sdk::{Describe, EmbeddingProvider, RerankProvider};

use model::{Family, family};

/// The provider key catalog entries name.
pub const BEDROCK_RETRIEVAL: &str = "bedrock-retrieval";

/// The component's provider implementation.
#[derive(Debug)]
pub struct BedrockRetrieval;

impl Describe for BedrockRetrieval {
    fn providers() -> Vec<ProviderInfo> {
        vec![info()]
    }

    /// The families it is written for are all it serves: an id of any of them,
    /// by either operation.
    fn claims(provider: &str, wire_id: &str) -> bool {
        provider == BEDROCK_RETRIEVAL && family(wire_id).is_some()
    }
}

impl EmbeddingProvider for BedrockRetrieval {
    fn serves(provider: &str, wire_id: &str) -> bool {
        provider == BEDROCK_RETRIEVAL && family(wire_id).is_some_and(Family::embeds)
    }

    /// Titan takes one input per request; Cohere up to 96 `texts`. An id this
    /// component does not embed with gets 1, the smallest batch the interface
    /// allows (the host never calls `encode` for it).
    fn max_batch(provider: &str, wire_id: &str) -> u32 {
        if provider != BEDROCK_RETRIEVAL {
            return 1;
        }
        match family(wire_id) {
            Some(Family::CohereEmbedV3 | Family::CohereEmbedV4) => request::COHERE_MAX_TEXTS,
            Some(Family::TitanEmbedV2 | Family::CohereRerank) | None => 1,
        }
    }

    /// Cohere Embed is always sent an `output_dimension`, so its entries pin
    /// the width; Titan answers its native 1024 without one.
    fn needs_dimensions(provider: &str, wire_id: &str) -> bool {
        provider == BEDROCK_RETRIEVAL && matches!(family(wire_id), Some(Family::CohereEmbedV3 | Family::CohereEmbedV4))
    }

    fn encode(provider: &str, inputs: Vec<String>, params: EmbeddingParams) -> Result<HttpRequest, CodecError> {
        let family = served_family(provider, &params.wire_model_id)?;
        request::embeddings(family, inputs, &params)
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<EmbeddingResponse, CodecError> {
        response::embeddings(&response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        bedrock::classify(&response)
    }
}

impl RerankProvider for BedrockRetrieval {
    fn serves(provider: &str, wire_id: &str) -> bool {
        provider == BEDROCK_RETRIEVAL && family(wire_id).is_some_and(Family::reranks)
    }

    fn encode(
        provider: &str,
        query: String,
        documents: Vec<String>,
        params: RerankParams,
    ) -> Result<HttpRequest, CodecError> {
        match served_family(provider, &params.wire_model_id)? {
            Family::CohereRerank => request::rerank(query, documents, &params),
            Family::TitanEmbedV2 | Family::CohereEmbedV3 | Family::CohereEmbedV4 => Err(CodecError::Unsupported(
                format!("{} is an embedding model, not a rerank model", params.wire_model_id),
            )),
        }
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<RerankResponse, CodecError> {
        response::rerank(&response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        bedrock::classify(&response)
    }
}

/// The family of a call's wire id, refusing another key or an id of no family
/// here (the host asks `serves` at load, so either means a host bug).
fn served_family(provider: &str, wire_id: &str) -> Result<Family, CodecError> {
    if provider != BEDROCK_RETRIEVAL {
        return Err(CodecError::Unsupported(format!("unknown provider key {provider:?}")));
    }
    family(wire_id)
        .ok_or_else(|| CodecError::Unsupported(format!("{wire_id} is not a model {BEDROCK_RETRIEVAL} serves")))
}

/// No chat capabilities: they describe chat calls, and this component has none.
/// The stream framing is InvokeModel's, though these models never stream.
fn info() -> ProviderInfo {
    ProviderInfo {
        key: BEDROCK_RETRIEVAL.to_owned(),
        description: "Embeddings and reranking on Amazon Bedrock InvokeModel: Amazon Titan Text Embeddings V2, \
                      Cohere Embed v3 and v4, Cohere Rerank 3.5"
            .to_owned(),
        default_endpoint: Some(bedrock::RUNTIME_ENDPOINT.to_owned()),
        credential: bedrock::credential_shape(),
        capabilities: Capabilities::empty(),
        stream_framing: StreamFraming::AwsEventStream,
    }
}

weir_sdk::export_provider!(BedrockRetrieval, embeddings, rerank);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use serde_json::{Value, json};
    use weir_sdk::types::{CredentialShape, EmbeddingPurpose, Sigv4};

    use super::*;

    #[test]
    fn describes_one_key_signed_for_bedrock_without_chat() {
        let infos = <BedrockRetrieval as Describe>::providers();
        assert_eq!(infos.len(), 1);
        let info = &infos[0];
        assert_eq!(info.key, "bedrock-retrieval");
        assert!(info.description.contains("Titan Text Embeddings V2") && info.description.contains("Rerank 3.5"));
        assert_eq!(info.default_endpoint.as_deref(), Some("https://bedrock-runtime.{region}.amazonaws.com"));
        assert_eq!(
            info.credential,
            CredentialShape::AwsSigv4(Sigv4 {
                service: "bedrock".into(),
                default_credential_id: "aws-access-key-id".into()
            })
        );
        assert_eq!(info.capabilities, Capabilities::empty());
        assert_eq!(info.stream_framing, StreamFraming::AwsEventStream);
    }

    #[test]
    fn serves_each_operation_its_families() {
        let key = BEDROCK_RETRIEVAL;
        let embeds = ["amazon.titan-embed-text-v2:0", "cohere.embed-english-v3", "eu.cohere.embed-v4:0"];
        for id in embeds {
            assert!(<BedrockRetrieval as EmbeddingProvider>::serves(key, id), "{id}");
            assert!(!<BedrockRetrieval as RerankProvider>::serves(key, id), "{id}");
            assert!(BedrockRetrieval::claims(key, id), "{id}");
        }
        assert!(<BedrockRetrieval as RerankProvider>::serves(key, "cohere.rerank-v3-5:0"));
        assert!(!<BedrockRetrieval as EmbeddingProvider>::serves(key, "cohere.rerank-v3-5:0"));
        assert!(BedrockRetrieval::claims(key, "cohere.rerank-v3-5:0"));
        for id in ["us.anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon.nova-pro-v1:0", "text-embedding-3-small"] {
            assert!(!<BedrockRetrieval as EmbeddingProvider>::serves(key, id), "{id}");
            assert!(!<BedrockRetrieval as RerankProvider>::serves(key, id), "{id}");
            assert!(!BedrockRetrieval::claims(key, id), "{id}");
        }
        assert!(!<BedrockRetrieval as EmbeddingProvider>::serves("bedrock-converse", "cohere.embed-v4:0"));
        assert!(!<BedrockRetrieval as RerankProvider>::serves("openai", "cohere.rerank-v3-5:0"));
        assert!(!BedrockRetrieval::claims("bedrock-converse", "cohere.embed-v4:0"));
    }

    #[test]
    fn cohere_embed_needs_a_pinned_width_and_titan_does_not() {
        let key = BEDROCK_RETRIEVAL;
        assert!(BedrockRetrieval::needs_dimensions(key, "cohere.embed-english-v3"));
        assert!(BedrockRetrieval::needs_dimensions(key, "us.cohere.embed-v4:0"));
        assert!(!BedrockRetrieval::needs_dimensions(key, "amazon.titan-embed-text-v2:0"));
        assert!(!BedrockRetrieval::needs_dimensions(key, "cohere.rerank-v3-5:0"));
        assert!(!BedrockRetrieval::needs_dimensions("openai", "cohere.embed-v4:0"));
    }

    #[test]
    fn max_batch_per_family() {
        let key = BEDROCK_RETRIEVAL;
        assert_eq!(BedrockRetrieval::max_batch(key, "amazon.titan-embed-text-v2:0"), 1);
        assert_eq!(BedrockRetrieval::max_batch(key, "us.amazon.titan-embed-text-v2:0"), 1);
        assert_eq!(BedrockRetrieval::max_batch(key, "cohere.embed-english-v3"), 96);
        assert_eq!(BedrockRetrieval::max_batch(key, "cohere.embed-v4:0"), 96);
        assert_eq!(BedrockRetrieval::max_batch(key, "cohere.rerank-v3-5:0"), 1);
        assert_eq!(BedrockRetrieval::max_batch(key, "nothing.here"), 1);
        assert_eq!(BedrockRetrieval::max_batch("openai", "cohere.embed-v4:0"), 1);
    }

    /// One query input to `wire_id`, 1024 wide.
    fn embed(provider: &str, wire_id: &str) -> Result<HttpRequest, CodecError> {
        let params = EmbeddingParams {
            wire_model_id: wire_id.to_owned(),
            purpose: EmbeddingPurpose::Query,
            dimensions: Some(1024),
        };
        <BedrockRetrieval as EmbeddingProvider>::encode(provider, vec!["q".into()], params)
    }

    #[test]
    fn encode_routes_by_family_and_refuses_strangers() {
        let request = embed(BEDROCK_RETRIEVAL, "cohere.embed-v4:0").unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["input_type"], json!("search_query"));

        let wrong_key = embed("bedrock-converse", "cohere.embed-v4:0");
        assert!(matches!(wrong_key, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
        let stranger = embed(BEDROCK_RETRIEVAL, "amazon.nova-pro-v1:0");
        assert!(
            matches!(stranger, Err(CodecError::Unsupported(m)) if m.contains("not a model bedrock-retrieval serves"))
        );
        let rerank_id = embed(BEDROCK_RETRIEVAL, "cohere.rerank-v3-5:0");
        assert!(matches!(rerank_id, Err(CodecError::Unsupported(m)) if m.contains("rerank model")));

        let rerank_params = RerankParams { wire_model_id: "cohere.embed-v4:0".to_owned(), top_n: None };
        let embed_id = <BedrockRetrieval as RerankProvider>::encode(
            BEDROCK_RETRIEVAL,
            "q".into(),
            vec!["d".into()],
            rerank_params,
        );
        assert!(matches!(embed_id, Err(CodecError::Unsupported(m)) if m.contains("embedding model")));
        let rerank_params = RerankParams { wire_model_id: "cohere.rerank-v3-5:0".to_owned(), top_n: Some(1) };
        let request = <BedrockRetrieval as RerankProvider>::encode(
            BEDROCK_RETRIEVAL,
            "q".into(),
            vec!["d".into()],
            rerank_params,
        )
        .unwrap();
        assert_eq!(request.path_and_query, "/model/cohere.rerank-v3-5:0/invoke");
    }

    #[test]
    fn classify_uses_the_bedrock_error_names() {
        let throttled = HttpResponse {
            status: 429,
            headers: vec![(
                "x-amzn-ErrorType".to_owned(),
                "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/".to_owned(),
            )],
            body: br#"{"message":"Too many requests, please wait before trying again."}"#.to_vec(),
        };
        assert!(matches!(
            <BedrockRetrieval as EmbeddingProvider>::classify(BEDROCK_RETRIEVAL, throttled.clone()),
            ErrorClass::RateLimited(_)
        ));
        assert!(matches!(
            <BedrockRetrieval as RerankProvider>::classify(BEDROCK_RETRIEVAL, throttled),
            ErrorClass::RateLimited(_)
        ));
        let invalid = HttpResponse {
            status: 400,
            headers: vec![("x-amzn-errortype".to_owned(), "ValidationException".to_owned())],
            body: br#"{"message":"Malformed input request"}"#.to_vec(),
        };
        assert!(matches!(
            <BedrockRetrieval as EmbeddingProvider>::classify(BEDROCK_RETRIEVAL, invalid),
            ErrorClass::InvalidRequest(_)
        ));
    }
}
