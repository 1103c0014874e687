//! The fake Bedrock's embedding and rerank models on InvokeModel (reference
//! `provider-wire.md` 3.8): Amazon Titan Text Embeddings V2, Cohere Embed v3 and v4,
//! Cohere Rerank. With nothing scripted, a signed `POST /model/{id}/invoke` for one of
//! these ids is answered from its body by [`answer`]; the same ids on the other routes
//! (streaming, Converse) are a `ValidationException`, since these models only answer
//! InvokeModel.
//!
//! # What the answers are
//!
//! * Vectors are derived from each text alone ([`titan_vector`], [`cohere_vector`]), of
//!   the width asked (`dimensions` / `output_dimension`) or the model's native one
//!   ([`TITAN_NATIVE_DIMENSIONS`], [`COHERE_V3_NATIVE_DIMENSIONS`],
//!   [`COHERE_V4_NATIVE_DIMENSIONS`]). A narrower vector is the wider one's prefix before
//!   normalizing, as with a Matryoshka model. Titan normalizes unless `normalize` is
//!   false; Cohere's vectors are not unit length. Cohere's `input_type` is part of the
//!   seed, so a text embedded as a query and as a document gives two vectors.
//! * Tokens: every text counts one token per whitespace-separated word
//!   ([`token_count`]), in the `X-Amzn-Bedrock-Input-Token-Count` header of every
//!   answer and in Titan's `inputTextTokenCount`.
//! * Rerank scores are the share of the query's words found in the document
//!   ([`relevance`]), best first, ties in document order, cut to `top_n`; one search
//!   unit per 100 documents (Cohere's billing unit) in `meta.billed_units`.
//! * [`FakeBedrock::answer_wrong_length_vectors`](super::FakeBedrock::answer_wrong_length_vectors)
//!   makes every vector one value short of the width asked, for a client's length check.
//!
//! # What is refused
//!
//! Bodies are checked the way Bedrock checks a model's input schema, and a violation is
//! a 400 `ValidationException` whose message has Bedrock's form, `Malformed input
//! request: <path>: <violation>, please reformat your input and try again.`
//! (the form Bedrock answers for schema violations; the reference gives no messages for
//! these models). Titan: `inputText` must be one string (several inputs in one request,
//! as an array or under `texts`, are refused), `dimensions` 256 / 512 / 1024, no other
//! keys than `inputText`, `dimensions`, `normalize`, `embeddingTypes`. Cohere: `texts` of
//! at most 96 strings, `input_type` required and one of the documented values,
//! `truncate` in the version's spelling (v3 `NONE|START|END`, v4 `NONE|LEFT|RIGHT`),
//! `embedding_types` among the documented types, v4's `output_dimension` 256 / 512 /
//! 1024 / 1536. The reference lists `output_dimension` for v4 only; this fake honours
//! it on v3 as well, as the width to answer, so a client that always sends it can be
//! tested. Rerank: `query` a string, `documents` a non-empty list of strings,
//! `api_version` 2 (required), `top_n` at least 1. The fake embeds texts only:
//! `images` / `inputs` are refused as unsupported by the fake, not by Bedrock's rules.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{aws_error, header, json_headers};
use crate::fake_upstream::Scripted;

/// Titan Text Embeddings V2 as a product addresses it.
pub const TITAN_EMBED_V2: &str = "amazon.titan-embed-text-v2:0";
/// Cohere Embed English v3.
pub const COHERE_EMBED_ENGLISH_V3: &str = "cohere.embed-english-v3";
/// Cohere Embed Multilingual v3.
pub const COHERE_EMBED_MULTILINGUAL_V3: &str = "cohere.embed-multilingual-v3";
/// Cohere Embed v4.
pub const COHERE_EMBED_V4: &str = "cohere.embed-v4:0";
/// Cohere Rerank 3.5.
pub const COHERE_RERANK_V3_5: &str = "cohere.rerank-v3-5:0";

/// Titan's width when no `dimensions` is sent.
pub const TITAN_NATIVE_DIMENSIONS: usize = 1024;
/// Cohere Embed v3's width when no `output_dimension` is sent.
pub const COHERE_V3_NATIVE_DIMENSIONS: usize = 1024;
/// Cohere Embed v4's width when no `output_dimension` is sent.
pub const COHERE_V4_NATIVE_DIMENSIONS: usize = 1536;
/// The most `texts` one Cohere Embed request may carry.
pub const COHERE_MAX_TEXTS: usize = 96;
/// The `id` Cohere answers carry.
pub const COHERE_RESPONSE_ID: &str = "5e1c7a0b-weir-fake-cohere-9d4f2b6a1c3e";

const TITAN_DIMENSIONS: [u64; 3] = [256, 512, 1024];
const COHERE_V4_DIMENSIONS: [u64; 4] = [256, 512, 1024, 1536];
const COHERE_INPUT_TYPES: [&str; 5] = ["search_document", "search_query", "classification", "clustering", "image"];
const COHERE_EMBEDDING_TYPES: [&str; 5] = ["float", "int8", "uint8", "binary", "ubinary"];
const TITAN_EMBEDDING_TYPES: [&str; 2] = ["float", "binary"];

/// The embedding and rerank models the fake answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetrievalModel {
    TitanEmbedV2,
    CohereEmbedV3,
    CohereEmbedV4,
    CohereRerank,
}

/// The retrieval model a decoded model id names: directly, after a geography prefix
/// (`us.`, `eu.`, `apac.`, `jp.`, `au.`, `us-gov.`, `global.`), or after the last `/`
/// of an ARN. `None` for any other model (the Claude and Converse routes answer those).
#[must_use]
pub fn retrieval_model(model_id: &str) -> Option<RetrievalModel> {
    let model = model_id.rsplit('/').next().unwrap_or(model_id);
    let model = ["us.", "eu.", "apac.", "jp.", "au.", "us-gov.", "global."]
        .iter()
        .find_map(|prefix| model.strip_prefix(prefix))
        .unwrap_or(model);
    if model.starts_with("amazon.titan-embed-text-v2") {
        Some(RetrievalModel::TitanEmbedV2)
    } else if model.starts_with("cohere.embed-v4") {
        Some(RetrievalModel::CohereEmbedV4)
    } else if model.starts_with("cohere.embed-") {
        Some(RetrievalModel::CohereEmbedV3)
    } else if model.starts_with("cohere.rerank-") {
        Some(RetrievalModel::CohereRerank)
    } else {
        None
    }
}

/// The answer to a signed InvokeModel for `model`, computed from the request body.
/// `wrong_length`: every vector one value short of the width asked.
#[must_use]
pub fn answer(model: RetrievalModel, body: &[u8], wrong_length: bool) -> Scripted {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) else {
        return malformed("#", "expected type: JSONObject, found: a body that is no JSON object");
    };
    let answered = match model {
        RetrievalModel::TitanEmbedV2 => titan(&body, wrong_length),
        RetrievalModel::CohereEmbedV3 | RetrievalModel::CohereEmbedV4 => cohere(model, &body, wrong_length),
        RetrievalModel::CohereRerank => rerank(&body),
    };
    answered.unwrap_or_else(|violation| violation)
}

/// What a retrieval model answers on a route other than InvokeModel.
#[must_use]
pub fn wrong_operation() -> Scripted {
    aws_error(400, "ValidationException", "The provided model doesn't support this operation. Use InvokeModel.")
}

// ---------------------------------------------------------------------------------------
// Ready answers (also for tests that script their own)
// ---------------------------------------------------------------------------------------

/// A 200 with Bedrock's JSON headers and `x-amzn-bedrock-input-token-count: tokens`.
#[must_use]
pub fn invoke_json(body: &Value, tokens: u64) -> Scripted {
    let mut headers = json_headers();
    headers.push(header("x-amzn-bedrock-invocation-latency", "87"));
    headers.push(header("x-amzn-bedrock-input-token-count", &tokens.to_string()));
    Scripted::Respond { status: 200, headers, body: Bytes::from(body.to_string()) }
}

/// Titan's body: `embedding`, `inputTextTokenCount`, and `embeddingsByType` with `float`
/// (always) and `binary` when `binary` is set.
#[must_use]
pub fn titan_body(vector: &[f32], tokens: u64, binary: bool) -> Value {
    let mut by_type = Map::new();
    by_type.insert("float".to_owned(), json!(vector));
    if binary {
        by_type.insert("binary".to_owned(), json!(vector.iter().map(|v| u8::from(*v > 0.0)).collect::<Vec<u8>>()));
    }
    json!({"embedding": vector, "inputTextTokenCount": tokens, "embeddingsByType": by_type})
}

/// Cohere's body for `texts` and their float `vectors`: `embeddings` as a list
/// (`embeddings_floats`) when `types` is `None`, else keyed by each of `types`
/// (`embeddings_by_type`; `int8` / `uint8` quantize the floats, `binary` / `ubinary`
/// pack their signs eight to a byte).
#[must_use]
pub fn cohere_body(texts: &[String], vectors: &[Vec<f32>], types: Option<&[String]>) -> Value {
    let Some(types) = types else {
        return json!({"id": COHERE_RESPONSE_ID, "embeddings": vectors, "response_type": "embeddings_floats",
                      "texts": texts});
    };
    let mut by_type = Map::new();
    for kind in types {
        let encoded: Vec<Value> = vectors.iter().map(|vector| encode_as(kind, vector)).collect();
        by_type.insert(kind.clone(), Value::Array(encoded));
    }
    json!({"id": COHERE_RESPONSE_ID, "embeddings": by_type, "response_type": "embeddings_by_type", "texts": texts})
}

/// Cohere Rerank's body: `results` of (index, score), and `search_units`.
#[must_use]
pub fn rerank_body(results: &[(usize, f64)], search_units: u64) -> Value {
    let results: Vec<Value> =
        results.iter().map(|(index, score)| json!({"index": index, "relevance_score": score})).collect();
    json!({"id": COHERE_RESPONSE_ID, "results": results,
           "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": search_units}}})
}

/// A 400 `ValidationException` in Bedrock's schema-violation form.
#[must_use]
pub fn malformed(path: &str, violation: &str) -> Scripted {
    aws_error(
        400,
        "ValidationException",
        &format!("Malformed input request: {path}: {violation}, please reformat your input and try again."),
    )
}

// ---------------------------------------------------------------------------------------
// Deterministic content
// ---------------------------------------------------------------------------------------

/// Values in `[-1, 1)` from a seed: FNV-1a of the seed, then SplitMix64. The first
/// `width` values of a longer vector of the same seed are this vector.
#[must_use]
pub fn seeded_values(seed: &str, width: usize) -> Vec<f32> {
    let mut state = seed
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    (0..width)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            // 24 random bits: exact in an f32.
            let unit = (z >> 40) as f32 / (1u32 << 24) as f32;
            unit * 2.0 - 1.0
        })
        .collect()
}

/// `vector` scaled to unit length (unchanged when all zero).
#[must_use]
pub fn normalized(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|v| *v /= norm);
    }
    vector
}

/// Titan's vector for `text`: unit length when `normalize`.
#[must_use]
pub fn titan_vector(text: &str, width: usize, normalize: bool) -> Vec<f32> {
    let raw = seeded_values(&format!("titan\u{0}{text}"), width);
    if normalize { normalized(raw) } else { raw }
}

/// Cohere's vector for `text` embedded as `input_type` (not normalized).
#[must_use]
pub fn cohere_vector(text: &str, input_type: &str, width: usize) -> Vec<f32> {
    seeded_values(&format!("cohere\u{0}{input_type}\u{0}{text}"), width)
}

/// The fake's token count of a text: its whitespace-separated words.
#[must_use]
pub fn token_count(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// The lowercase alphanumeric words of a text.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The share of the query's distinct words that occur in the document, in `[0, 1]`.
#[must_use]
pub fn relevance(query: &str, document: &str) -> f64 {
    let mut query_words = words(query);
    query_words.sort();
    query_words.dedup();
    if query_words.is_empty() {
        return 0.0;
    }
    let document_words = words(document);
    let found = query_words.iter().filter(|word| document_words.contains(word)).count();
    found as f64 / query_words.len() as f64
}

fn encode_as(kind: &str, vector: &[f32]) -> Value {
    match kind {
        // Cohere's int8 / uint8 are quantized floats; the fake's scale is its own.
        "int8" => json!(vector.iter().map(|v| (v.clamp(-1.0, 1.0) * 127.0).round() as i8).collect::<Vec<i8>>()),
        "uint8" => {
            json!(vector.iter().map(|v| ((v.clamp(-1.0, 1.0) + 1.0) * 127.5).round() as u8).collect::<Vec<u8>>())
        }
        "binary" | "ubinary" => {
            let packed: Vec<u8> = vector
                .chunks(8)
                .map(|chunk| {
                    chunk.iter().enumerate().fold(0u8, |byte, (bit, v)| byte | (u8::from(*v > 0.0) << (7 - bit)))
                })
                .collect();
            if kind == "binary" {
                json!(packed.iter().map(|byte| i16::from(*byte) - 128).collect::<Vec<i16>>())
            } else {
                json!(packed)
            }
        }
        _ => json!(vector),
    }
}

// ---------------------------------------------------------------------------------------
// The models
// ---------------------------------------------------------------------------------------

type Checked<T> = Result<T, Scripted>;

fn titan(body: &Map<String, Value>, wrong_length: bool) -> Checked<Scripted> {
    only_keys(body, &["inputText", "dimensions", "normalize", "embeddingTypes"])?;
    let text = match body.get("inputText") {
        Some(Value::String(text)) => text,
        Some(other) => return Err(malformed("#/inputText", &format!("expected type: String, found: {}", kind(other)))),
        None => return Err(malformed("#", "required key [inputText] not found")),
    };
    let width = match body.get("dimensions") {
        None => TITAN_NATIVE_DIMENSIONS,
        Some(value) => enum_number(value, "#/dimensions", &TITAN_DIMENSIONS)?,
    };
    let normalize = match body.get("normalize") {
        None => true,
        Some(Value::Bool(normalize)) => *normalize,
        Some(other) => {
            return Err(malformed("#/normalize", &format!("expected type: Boolean, found: {}", kind(other))));
        }
    };
    let types = string_list(body.get("embeddingTypes"), "#/embeddingTypes", &TITAN_EMBEDDING_TYPES)?;
    let binary = types.is_some_and(|types| types.iter().any(|kind| kind == "binary"));
    let vector = titan_vector(text, shortened(width, wrong_length), normalize);
    let tokens = token_count(text);
    Ok(invoke_json(&titan_body(&vector, tokens, binary), tokens))
}

fn cohere(model: RetrievalModel, body: &Map<String, Value>, wrong_length: bool) -> Checked<Scripted> {
    let v4 = model == RetrievalModel::CohereEmbedV4;
    let allowed: &[&str] = if v4 {
        &["texts", "images", "inputs", "input_type", "truncate", "embedding_types", "output_dimension", "max_tokens"]
    } else {
        &["texts", "images", "input_type", "truncate", "embedding_types", "output_dimension"]
    };
    only_keys(body, allowed)?;
    if body.contains_key("images") || body.contains_key("inputs") {
        return Err(aws_error(400, "ValidationException", "The fake Bedrock embeds `texts` only."));
    }
    let texts = match body.get("texts") {
        Some(Value::Array(items)) => {
            if items.len() > COHERE_MAX_TEXTS {
                return Err(malformed(
                    "#/texts",
                    &format!("expected maximum item count: {COHERE_MAX_TEXTS}, found: {}", items.len()),
                ));
            }
            let mut texts = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let Value::String(text) = item else {
                    return Err(malformed(
                        &format!("#/texts/{i}"),
                        &format!("expected type: String, found: {}", kind(item)),
                    ));
                };
                texts.push(text.clone());
            }
            texts
        }
        Some(other) => return Err(malformed("#/texts", &format!("expected type: JSONArray, found: {}", kind(other)))),
        None => return Err(malformed("#", "required key [texts] not found")),
    };
    let input_type = match body.get("input_type") {
        Some(Value::String(input_type)) if COHERE_INPUT_TYPES.contains(&input_type.as_str()) => input_type,
        Some(other) => return Err(malformed("#/input_type", &format!("{} is not a valid enum value", shown(other)))),
        None => return Err(malformed("#", "required key [input_type] not found")),
    };
    let truncations: &[&str] = if v4 { &["NONE", "LEFT", "RIGHT"] } else { &["NONE", "START", "END"] };
    if let Some(truncate) = body.get("truncate")
        && !truncate.as_str().is_some_and(|value| truncations.contains(&value))
    {
        return Err(malformed("#/truncate", &format!("{} is not a valid enum value", shown(truncate))));
    }
    let types = string_list(body.get("embedding_types"), "#/embedding_types", &COHERE_EMBEDDING_TYPES)?;
    let native = if v4 { COHERE_V4_NATIVE_DIMENSIONS } else { COHERE_V3_NATIVE_DIMENSIONS };
    let width = match body.get("output_dimension") {
        None => native,
        Some(value) if v4 => enum_number(value, "#/output_dimension", &COHERE_V4_DIMENSIONS)?,
        Some(value) => {
            value.as_u64().filter(|width| *width > 0).and_then(|width| usize::try_from(width).ok()).ok_or_else(
                || malformed("#/output_dimension", &format!("{} is not a positive integer", shown(value))),
            )?
        }
    };
    let width = shortened(width, wrong_length);
    let vectors: Vec<Vec<f32>> = texts.iter().map(|text| cohere_vector(text, input_type, width)).collect();
    let tokens = texts.iter().map(|text| token_count(text)).sum();
    Ok(invoke_json(&cohere_body(&texts, &vectors, types.as_deref()), tokens))
}

fn rerank(body: &Map<String, Value>) -> Checked<Scripted> {
    only_keys(body, &["query", "documents", "top_n", "api_version", "max_tokens_per_doc"])?;
    match body.get("api_version") {
        Some(version) if version.as_u64() == Some(2) => {}
        Some(version) => {
            return Err(malformed("#/api_version", &format!("{} is not a valid enum value", shown(version))));
        }
        None => return Err(malformed("#", "required key [api_version] not found")),
    }
    let query = match body.get("query") {
        Some(Value::String(query)) => query,
        Some(other) => return Err(malformed("#/query", &format!("expected type: String, found: {}", kind(other)))),
        None => return Err(malformed("#", "required key [query] not found")),
    };
    let documents = match body.get("documents") {
        Some(Value::Array(items)) if items.is_empty() => {
            return Err(malformed("#/documents", "expected minimum item count: 1, found: 0"));
        }
        Some(Value::Array(items)) => {
            let mut documents = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let Value::String(document) = item else {
                    return Err(malformed(
                        &format!("#/documents/{i}"),
                        &format!("expected type: String, found: {}", kind(item)),
                    ));
                };
                documents.push(document.as_str());
            }
            documents
        }
        Some(other) => {
            return Err(malformed("#/documents", &format!("expected type: JSONArray, found: {}", kind(other))));
        }
        None => return Err(malformed("#", "required key [documents] not found")),
    };
    let top_n = match body.get("top_n") {
        None => documents.len(),
        Some(value) => value
            .as_u64()
            .filter(|top_n| *top_n >= 1)
            .and_then(|top_n| usize::try_from(top_n).ok())
            .ok_or_else(|| malformed("#/top_n", &format!("{} is not greater or equal to 1", shown(value))))?,
    };
    let mut scored: Vec<(usize, f64)> =
        documents.iter().enumerate().map(|(index, document)| (index, relevance(query, document))).collect();
    // Stable: equal scores keep document order.
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(top_n);
    let search_units = documents.len().div_ceil(100) as u64;
    let tokens = token_count(query) + documents.iter().map(|document| token_count(document)).sum::<u64>();
    Ok(invoke_json(&rerank_body(&scored, search_units), tokens))
}

/// The width answered: one short when asked to answer wrong lengths.
fn shortened(width: usize, wrong_length: bool) -> usize {
    if wrong_length { width.saturating_sub(1) } else { width }
}

fn only_keys(body: &Map<String, Value>, allowed: &[&str]) -> Checked<()> {
    match body.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(malformed("#", &format!("extraneous key [{key}] is not permitted"))),
        None => Ok(()),
    }
}

fn enum_number(value: &Value, path: &str, allowed: &[u64]) -> Checked<usize> {
    value
        .as_u64()
        .filter(|number| allowed.contains(number))
        .and_then(|number| usize::try_from(number).ok())
        .ok_or_else(|| malformed(path, &format!("{} is not a valid enum value", shown(value))))
}

/// An optional list of strings from `allowed`.
fn string_list(value: Option<&Value>, path: &str, allowed: &[&str]) -> Checked<Option<Vec<String>>> {
    let Some(value) = value else { return Ok(None) };
    let Value::Array(items) = value else {
        return Err(malformed(path, &format!("expected type: JSONArray, found: {}", kind(value))));
    };
    let mut list = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item.as_str() {
            Some(text) if allowed.contains(&text) => list.push(text.to_owned()),
            _ => return Err(malformed(&format!("{path}/{i}"), &format!("{} is not a valid enum value", shown(item)))),
        }
    }
    Ok(Some(list))
}

/// The JSON type name Bedrock's schema messages use.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "Null",
        Value::Bool(_) => "Boolean",
        Value::Number(_) => "Number",
        Value::String(_) => "String",
        Value::Array(_) => "JSONArray",
        Value::Object(_) => "JSONObject",
    }
}

/// A value as a schema message quotes it (strings without their quotes).
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn respond(script: Scripted) -> (u16, Vec<(String, String)>, Value) {
        let Scripted::Respond { status, headers, body } = script else { panic!("not a plain answer") };
        (status, headers, serde_json::from_slice(&body).unwrap())
    }

    fn answered(model: RetrievalModel, body: &Value) -> (u16, Vec<(String, String)>, Value) {
        respond(answer(model, body.to_string().as_bytes(), false))
    }

    fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn floats(value: &Value) -> Vec<f32> {
        value.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()
    }

    fn norm(vector: &[f32]) -> f32 {
        vector.iter().map(|v| v * v).sum::<f32>().sqrt()
    }

    #[test]
    fn models_by_id() {
        assert_eq!(retrieval_model(TITAN_EMBED_V2), Some(RetrievalModel::TitanEmbedV2));
        assert_eq!(retrieval_model("us.amazon.titan-embed-text-v2:0"), Some(RetrievalModel::TitanEmbedV2));
        assert_eq!(retrieval_model(COHERE_EMBED_ENGLISH_V3), Some(RetrievalModel::CohereEmbedV3));
        assert_eq!(retrieval_model(COHERE_EMBED_MULTILINGUAL_V3), Some(RetrievalModel::CohereEmbedV3));
        assert_eq!(retrieval_model("global.cohere.embed-v4:0"), Some(RetrievalModel::CohereEmbedV4));
        assert_eq!(
            retrieval_model("arn:aws:bedrock:us-east-1::foundation-model/cohere.rerank-v3-5:0"),
            Some(RetrievalModel::CohereRerank)
        );
        assert_eq!(retrieval_model(super::super::MODEL_ID), None);
        assert_eq!(retrieval_model("amazon.nova-pro-v1:0"), None);
    }

    #[test]
    fn seeded_values_are_deterministic_and_prefix_stable() {
        let long = seeded_values("x", 64);
        assert_eq!(long, seeded_values("x", 64));
        assert_eq!(seeded_values("x", 16), long[..16]);
        assert_ne!(seeded_values("y", 64), long);
        assert!(long.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!((norm(&titan_vector("hello", 256, true)) - 1.0).abs() < 1e-4);
        assert!((norm(&titan_vector("hello", 256, false)) - 1.0).abs() > 0.1);
        assert_ne!(cohere_vector("hello", "search_query", 8), cohere_vector("hello", "search_document", 8));
    }

    #[test]
    fn titan_answers_one_vector_of_the_width_asked() {
        let (status, headers, body) = answered(
            RetrievalModel::TitanEmbedV2,
            &json!({"inputText": "hello big world", "dimensions": 256, "normalize": true}),
        );
        assert_eq!(status, 200);
        assert_eq!(header_value(&headers, "x-amzn-bedrock-input-token-count"), Some("3"));
        let vector = floats(&body["embedding"]);
        assert_eq!(vector, titan_vector("hello big world", 256, true));
        assert_eq!(body["inputTextTokenCount"], 3);
        assert_eq!(floats(&body["embeddingsByType"]["float"]), vector);
        let (_, _, native) = answered(RetrievalModel::TitanEmbedV2, &json!({"inputText": "hello"}));
        assert_eq!(native["embedding"].as_array().unwrap().len(), TITAN_NATIVE_DIMENSIONS);
        let short = respond(answer(RetrievalModel::TitanEmbedV2, br#"{"inputText":"hello","dimensions":512}"#, true));
        assert_eq!(short.2["embedding"].as_array().unwrap().len(), 511);
    }

    #[test]
    fn titan_refuses_several_inputs_and_bad_fields() {
        let cases = [
            (json!({"inputText": ["a", "b"]}), "#/inputText: expected type: String, found: JSONArray"),
            (json!({"texts": ["a", "b"]}), "#: extraneous key [texts] is not permitted"),
            (json!({"normalize": true}), "#: required key [inputText] not found"),
            (json!({"inputText": "a", "dimensions": 1536}), "#/dimensions: 1536 is not a valid enum value"),
            (json!({"inputText": "a", "normalize": "yes"}), "#/normalize: expected type: Boolean, found: String"),
            (
                json!({"inputText": "a", "embeddingTypes": ["int8"]}),
                "#/embeddingTypes/0: int8 is not a valid enum value",
            ),
        ];
        for (request, expected) in cases {
            let (status, headers, body) = answered(RetrievalModel::TitanEmbedV2, &request);
            assert_eq!(status, 400, "{request}");
            assert!(header_value(&headers, "x-amzn-errortype").unwrap().starts_with("ValidationException:"));
            let message = body["message"].as_str().unwrap();
            assert!(message.starts_with("Malformed input request: "), "{message}");
            assert!(message.contains(expected), "{request}: {message}");
            assert!(message.ends_with(", please reformat your input and try again."), "{message}");
        }
        let (status, _, body) = respond(answer(RetrievalModel::TitanEmbedV2, b"not json", false));
        assert_eq!(status, 400);
        assert!(body["message"].as_str().unwrap().contains("JSONObject"));
    }

    #[test]
    fn cohere_answers_both_shapes_with_the_requested_width() {
        let request = json!({"texts": ["one two", "three"], "input_type": "search_query", "truncate": "NONE",
                             "output_dimension": 256, "embedding_types": ["float", "int8"]});
        let (status, headers, body) = answered(RetrievalModel::CohereEmbedV4, &request);
        assert_eq!(status, 200);
        assert_eq!(header_value(&headers, "x-amzn-bedrock-input-token-count"), Some("3"));
        assert_eq!(body["response_type"], "embeddings_by_type");
        assert_eq!(body["texts"], json!(["one two", "three"]));
        let float = body["embeddings"]["float"].as_array().unwrap();
        assert_eq!(floats(&float[0]), cohere_vector("one two", "search_query", 256));
        assert_eq!(floats(&float[1]), cohere_vector("three", "search_query", 256));
        assert_eq!(body["embeddings"]["int8"][0].as_array().unwrap().len(), 256);

        let plain = json!({"texts": ["a"], "input_type": "search_document"});
        let (_, _, body) = answered(RetrievalModel::CohereEmbedV3, &plain);
        assert_eq!(body["response_type"], "embeddings_floats");
        assert_eq!(floats(&body["embeddings"][0]), cohere_vector("a", "search_document", COHERE_V3_NATIVE_DIMENSIONS));
        let (_, _, body) = answered(RetrievalModel::CohereEmbedV4, &plain);
        assert_eq!(body["embeddings"][0].as_array().unwrap().len(), COHERE_V4_NATIVE_DIMENSIONS);
        // v3 honours output_dimension too (see the module docs).
        let (_, _, body) = answered(
            RetrievalModel::CohereEmbedV3,
            &json!({"texts": ["a"], "input_type": "search_query", "output_dimension": 384}),
        );
        assert_eq!(body["embeddings"][0].as_array().unwrap().len(), 384);
        let short = respond(answer(RetrievalModel::CohereEmbedV4, plain.to_string().as_bytes(), true));
        assert_eq!(short.2["embeddings"][0].as_array().unwrap().len(), COHERE_V4_NATIVE_DIMENSIONS - 1);
    }

    #[test]
    fn cohere_refusals() {
        let many: Vec<String> = (0..97).map(|i| i.to_string()).collect();
        let cases = [
            (
                RetrievalModel::CohereEmbedV3,
                json!({"texts": many, "input_type": "search_query"}),
                "#/texts: expected maximum item count: 96, found: 97",
            ),
            (RetrievalModel::CohereEmbedV3, json!({"texts": ["a"]}), "#: required key [input_type] not found"),
            (
                RetrievalModel::CohereEmbedV3,
                json!({"texts": ["a"], "input_type": "query"}),
                "#/input_type: query is not a valid enum value",
            ),
            (
                RetrievalModel::CohereEmbedV3,
                json!({"texts": ["a"], "input_type": "search_query", "truncate": "LEFT"}),
                "#/truncate: LEFT is not a valid enum value",
            ),
            (
                RetrievalModel::CohereEmbedV4,
                json!({"texts": ["a"], "input_type": "search_query", "truncate": "END"}),
                "#/truncate: END is not a valid enum value",
            ),
            (
                RetrievalModel::CohereEmbedV4,
                json!({"texts": ["a"], "input_type": "search_query", "output_dimension": 768}),
                "#/output_dimension: 768 is not a valid enum value",
            ),
            (
                RetrievalModel::CohereEmbedV3,
                json!({"texts": ["a"], "input_type": "search_query", "max_tokens": 5}),
                "#: extraneous key [max_tokens] is not permitted",
            ),
            (
                RetrievalModel::CohereEmbedV3,
                json!({"texts": "a", "input_type": "search_query"}),
                "#/texts: expected type: JSONArray, found: String",
            ),
            (
                RetrievalModel::CohereEmbedV3,
                json!({"texts": ["a", 1], "input_type": "search_query"}),
                "#/texts/1: expected type: String, found: Number",
            ),
            (
                RetrievalModel::CohereEmbedV4,
                json!({"texts": ["a"], "input_type": "search_query", "embedding_types": ["float16"]}),
                "#/embedding_types/0: float16 is not a valid enum value",
            ),
            (RetrievalModel::CohereEmbedV4, json!({"input_type": "search_query"}), "#: required key [texts] not found"),
        ];
        for (model, request, expected) in cases {
            let (status, _, body) = answered(model, &request);
            assert_eq!(status, 400, "{request}");
            let message = body["message"].as_str().unwrap();
            assert!(message.contains(expected), "{request}: {message}");
        }
        let (status, _, body) = answered(
            RetrievalModel::CohereEmbedV4,
            &json!({"images": ["data:image/png;base64,AA=="], "input_type": "image"}),
        );
        assert_eq!(status, 400);
        assert!(body["message"].as_str().unwrap().contains("texts"));
    }

    #[test]
    fn rerank_scores_sorts_and_cuts() {
        let documents = ["Berlin is in Germany", "Paris is the capital of France", "The capital of Spain"];
        let request = json!({"query": "capital of France", "api_version": 2, "top_n": 2, "documents": documents});
        let (status, headers, body) = answered(RetrievalModel::CohereRerank, &request);
        assert_eq!(status, 200);
        assert_eq!(
            body["results"],
            json!([
                {"index": 1, "relevance_score": 1.0},
                {"index": 2, "relevance_score": relevance("capital of France", documents[2])},
            ])
        );
        assert_eq!(body["meta"]["billed_units"]["search_units"], 1);
        assert_eq!(header_value(&headers, "x-amzn-bedrock-input-token-count"), Some("17"));
        let ties = json!({"query": "zzz", "api_version": 2, "documents": ["a", "b", "c"]});
        let (_, _, body) = answered(RetrievalModel::CohereRerank, &ties);
        let order: Vec<u64> =
            body["results"].as_array().unwrap().iter().map(|r| r["index"].as_u64().unwrap()).collect();
        assert_eq!(order, [0, 1, 2]);
        let documents: Vec<String> = (0..101).map(|i| format!("doc {i}")).collect();
        let (_, _, body) =
            answered(RetrievalModel::CohereRerank, &json!({"query": "q", "api_version": 2, "documents": documents}));
        assert_eq!(body["meta"]["billed_units"]["search_units"], 2);
    }

    #[test]
    fn rerank_refusals() {
        let cases = [
            (json!({"query": "q", "documents": ["a"]}), "#: required key [api_version] not found"),
            (json!({"query": "q", "documents": ["a"], "api_version": 1}), "#/api_version: 1 is not a valid enum value"),
            (json!({"documents": ["a"], "api_version": 2}), "#: required key [query] not found"),
            (
                json!({"query": "q", "documents": [], "api_version": 2}),
                "#/documents: expected minimum item count: 1, found: 0",
            ),
            (
                json!({"query": "q", "documents": [{"text": "a"}], "api_version": 2}),
                "#/documents/0: expected type: String, found: JSONObject",
            ),
            (
                json!({"query": "q", "documents": ["a"], "api_version": 2, "top_n": 0}),
                "#/top_n: 0 is not greater or equal to 1",
            ),
            (
                json!({"query": "q", "documents": ["a"], "api_version": 2, "model": "x"}),
                "#: extraneous key [model] is not permitted",
            ),
        ];
        for (request, expected) in cases {
            let (status, _, body) = answered(RetrievalModel::CohereRerank, &request);
            assert_eq!(status, 400, "{request}");
            let message = body["message"].as_str().unwrap();
            assert!(message.contains(expected), "{request}: {message}");
        }
    }

    #[test]
    fn packed_and_quantized_types() {
        let vector = [0.5, -0.5, 1.0, -1.0, 0.1, -0.1, 0.9, -0.9, 0.2];
        assert_eq!(encode_as("ubinary", &vector), json!([0b1010_1010, 0b1000_0000]));
        assert_eq!(encode_as("binary", &vector), json!([0b1010_1010 - 128, 0]));
        assert_eq!(encode_as("int8", &[1.0, -1.0, 0.0]), json!([127, -127, 0]));
        assert_eq!(encode_as("uint8", &[1.0, -1.0]), json!([255, 0]));
    }
}
