//! A fake AWS Bedrock on loopback that speaks the real wire: SigV4-signed requests, `restJson1`
//! errors, and the binary `application/vnd.amazon.eventstream` (reference
//! `shared/reference/provider-wire.md` section 3).
//!
//! # What it verifies, and why it is independent of the product
//!
//! Every request is checked by [`Verifier`] before anything else, the way AWS does: the
//! `Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…` header,
//! `x-amz-date` (within [`CLOCK_SKEW`] of the fake's own clock), the credential scope (date,
//! region, service `bedrock`, `aws4_request`), `x-amz-security-token` (must match the
//! configured session token and be signed), `x-amz-content-sha256` when present and signed
//! (must be the body's real hash), and finally the signature recomputed from the canonical
//! request (reference 3.2: the path as received percent-encoded once more, keeping `/` and
//! the unreserved characters, as botocore does; sorted query; the signed headers, lowercase,
//! trimmed; the body's SHA-256), compared in constant time.
//!
//! The product signs with the `aws-sigv4` crate. This verifier is written from the reference
//! with only `hmac`, `sha2` and `hex`, and checked against the official AWS SigV4 test-suite
//! vectors (`get-vanilla`, `post-vanilla`, query order, UTF-8 and space in the path), so a
//! misunderstanding cannot be mirrored on both sides: a product request the fake accepts was
//! signed the way AWS computes it. Likewise event-stream frames are written here by hand
//! with `crc32fast` (the host decodes with `aws-smithy-eventstream`; this crate's own tests
//! read the fake's frames back with that decoder, which cross-checks the writer).
//!
//! Rejections answer as AWS does (403, `x-amzn-ErrorType`, `{"message":…}`) and do **not**
//! consume a scripted answer, since a real model is never reached:
//!
//! | case | error type |
//! |---|---|
//! | no `Authorization` | `MissingAuthenticationTokenException` |
//! | not `AWS4-HMAC-SHA256`, parts missing, no `x-amz-date`, `host` unsigned | `IncompleteSignatureException` |
//! | unknown access key id, wrong or missing session token | `UnrecognizedClientException` |
//! | wrong region, service, scope date or terminator, date skewed (`Signature expired`), body hash header wrong, bad signature | `InvalidSignatureException` |
//!
//! # Routes
//!
//! All `POST`: `/model/{modelId}/invoke`, `/model/{modelId}/invoke-with-response-stream`,
//! `/model/{modelId}/converse`, `/model/{modelId}/converse-stream` (the model id may be sent
//! with `:` raw or as `%3A`, an ARN with `%2F`; [`BedrockRequest::model_id`] is decoded), and
//! the Mantle surface `/anthropic/v1/messages` (native Anthropic Messages;
//! [`BedrockRequest::header`] reads its `anthropic-workspace-id`). Anything else is 404
//! `UnknownOperationException`.
//!
//! InvokeModel for an embedding or rerank model id (Titan Text Embeddings V2, Cohere
//! Embed v3 / v4, Cohere Rerank) answers from the request body: see [`retrieval`] for the
//! vectors, scores, token counts and the `ValidationException`s, and
//! [`FakeBedrock::answer_wrong_length_vectors`] for vectors one value short.
//!
//! # Answers
//!
//! Like [`crate::FakeUpstream`]: [`FakeBedrock::push`] queues [`Scripted`] answers consumed in
//! FIFO order by signed requests on any route. Builders here make the Bedrock ones: JSON 200s
//! ([`invoke_message`], [`converse`], [`mantle_message`]), AWS errors ([`aws_error`],
//! [`throttling`], …), event streams ([`event_stream`], [`event_stream_split`] for small TCP
//! writes, [`event_stream_then_drop`]) of frames from [`invoke_chunk`], [`converse_event`],
//! [`exception`], [`error_frame`] (and [`corrupt_message_crc`]), Mantle SSE
//! ([`mantle_stream`]); `Scripted::Drop` and [`Scripted::after`] work as usual. With the queue
//! empty each route answers a canned success ([`claude_stream_frames`],
//! [`converse_stream_frames`], [`invoke_body`], [`converse_body`]), and an embedding or
//! rerank model its computed answer ([`retrieval::answer`]).
//!
//! ```no_run
//! # async fn demo() {
//! use weir_tests::bedrock_wire::{self, FakeBedrock, Operation};
//! let bedrock = FakeBedrock::start().await; // AKID/secret: bedrock_wire::ACCESS_KEY_ID, SECRET_ACCESS_KEY
//! bedrock.push(bedrock_wire::event_stream_split(bedrock_wire::converse_stream_frames(), 7));
//! // ... point the product at bedrock.base_url() with region bedrock_wire::REGION ...
//! let request = &bedrock.received()[0];
//! assert!(request.verdict.is_ok(), "{:?}", request.verdict);
//! assert_eq!(request.operation, Operation::ConverseStream);
//! assert_eq!(request.model_id.as_deref(), Some(bedrock_wire::MODEL_ID));
//! # }
//! ```

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{Request, Response};
use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};

use crate::anthropic_wire;
use crate::fake_upstream::{Scripted, play, serve_connection};

pub mod retrieval;

/// The access key id the fake knows by default.
pub const ACCESS_KEY_ID: &str = "AKIAWEIRFAKE7EXAMPLE";
/// The secret of [`ACCESS_KEY_ID`].
pub const SECRET_ACCESS_KEY: &str = "weirFakeSecret/K7MDENG+bPxRfiCYEXAMPLEKEY";
/// A session token for [`Credentials::fake_temporary`] (temporary credentials).
pub const SESSION_TOKEN: &str = "IQoJb3JpZ2luX2VjEWeirFakeSessionToken//////////wEaCXVzLWVhc3QtMSJHMEUCIQ==";
/// The access key id of [`Credentials::fake_temporary`] (temporary keys start with `ASIA`).
pub const TEMPORARY_ACCESS_KEY_ID: &str = "ASIAWEIRFAKE7EXAMPLE";
/// The region the fake serves by default.
pub const REGION: &str = "us-east-1";
/// The SigV4 signing name of Bedrock Runtime (not the host prefix `bedrock-runtime`).
pub const SERVICE: &str = "bedrock";
/// How far `x-amz-date` may be from the fake's clock, either way.
pub const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);
/// The `x-amzn-requestid` every answer carries.
pub const REQUEST_ID: &str = "3f1c2b7e-weir-fake-b3d0-0c5e8a9f1d2a";
/// A model id as a product sends it: a US inference profile (with the `:` that needs care).
pub const MODEL_ID: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
/// The message id Claude-on-Bedrock answers carry (Bedrock's `msg_bdrk_` prefix).
pub const MESSAGE_ID: &str = "msg_bdrk_01WeirFakeBedrockXYZ";
/// The namespace after the error name in `x-amzn-ErrorType`.
pub const ERROR_TYPE_NAMESPACE: &str = "http://internal.amazon.com/coral/com.amazon.bedrock/";
/// The content type of an event-stream body.
pub const EVENT_STREAM_CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";
/// AWS's message for an unknown access key id or a wrong session token.
pub const INVALID_TOKEN_MESSAGE: &str = "The security token included in the request is invalid.";
/// AWS's message for a signature that does not match.
pub const SIGNATURE_MISMATCH_MESSAGE: &str = "The request signature we calculated does not match the signature you \
                                              provided. Check your AWS Secret Access Key and signing method. Consult \
                                              the service documentation for details.";

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const TERMINATOR: &str = "aws4_request";

// ---------------------------------------------------------------------------------------
// Credentials and the verifier
// ---------------------------------------------------------------------------------------

/// An AWS key: access key id, secret, and a session token for temporary credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl Credentials {
    #[must_use]
    pub fn new(access_key_id: &str, secret_access_key: &str) -> Credentials {
        Credentials {
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret_access_key.to_owned(),
            session_token: None,
        }
    }

    /// The same key with a session token.
    #[must_use]
    pub fn with_session_token(mut self, token: &str) -> Credentials {
        self.session_token = Some(token.to_owned());
        self
    }

    /// [`ACCESS_KEY_ID`] / [`SECRET_ACCESS_KEY`], no session token.
    #[must_use]
    pub fn fake() -> Credentials {
        Credentials::new(ACCESS_KEY_ID, SECRET_ACCESS_KEY)
    }

    /// [`TEMPORARY_ACCESS_KEY_ID`] / [`SECRET_ACCESS_KEY`] with [`SESSION_TOKEN`].
    #[must_use]
    pub fn fake_temporary() -> Credentials {
        Credentials::new(TEMPORARY_ACCESS_KEY_ID, SECRET_ACCESS_KEY).with_session_token(SESSION_TOKEN)
    }
}

/// An AWS error as `restJson1` sends it: status, the name for `x-amzn-ErrorType`, the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsError {
    pub status: u16,
    pub error_type: String,
    pub message: String,
}

impl AwsError {
    #[must_use]
    pub fn new(status: u16, error_type: &str, message: &str) -> AwsError {
        AwsError { status, error_type: error_type.to_owned(), message: message.to_owned() }
    }

    fn forbidden(error_type: &str, message: impl Into<String>) -> AwsError {
        AwsError { status: 403, error_type: error_type.to_owned(), message: message.into() }
    }

    /// This error as a ready answer.
    #[must_use]
    pub fn scripted(&self) -> Scripted {
        aws_error(self.status, &self.error_type, &self.message)
    }
}

/// A request the verifier accepted: who signed it, for what, and which headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub access_key_id: String,
    /// `x-amz-date` as sent.
    pub amz_date: String,
    pub region: String,
    pub service: String,
    /// The `SignedHeaders` list, in the order sent.
    pub signed_headers: Vec<String>,
    /// Whether an `x-amz-security-token` was sent (and signed).
    pub session_token: bool,
}

/// A request the verifier refused: the error it answered and, once the signature itself
/// was compared, the canonical request and string to sign the fake computed (what a
/// correct signer would have signed), for diagnosing a product's signing bug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub error: AwsError,
    pub canonical_request: Option<String>,
    pub string_to_sign: Option<String>,
}

impl From<AwsError> for Rejection {
    fn from(error: AwsError) -> Rejection {
        Rejection { error, canonical_request: None, string_to_sign: None }
    }
}

/// The parts of an HTTP request the signature covers, as received.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    pub method: &'a str,
    /// The path exactly as on the wire (still percent-encoded).
    pub path: &'a str,
    /// The raw query string, without `?`.
    pub query: Option<&'a str>,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

/// Checks SigV4 signatures for one key, one region and one service.
#[derive(Debug, Clone)]
pub struct Verifier {
    pub credentials: Credentials,
    pub region: String,
    pub service: String,
    pub clock_skew: Duration,
}

impl Verifier {
    /// A verifier for `credentials` in `region`, service [`SERVICE`], skew [`CLOCK_SKEW`].
    #[must_use]
    pub fn new(credentials: Credentials, region: &str) -> Verifier {
        Verifier { credentials, region: region.to_owned(), service: SERVICE.to_owned(), clock_skew: CLOCK_SKEW }
    }

    /// Another signing name (the AWS test suite signs for `service`).
    #[must_use]
    pub fn with_service(mut self, service: &str) -> Verifier {
        service.clone_into(&mut self.service);
        self
    }

    /// Verifies `request` as AWS would at time `now`.
    ///
    /// # Errors
    /// The [`Rejection`] AWS would answer, see the module docs for the cases.
    pub fn verify(&self, request: &RequestParts<'_>, now: SystemTime) -> Result<Accepted, Rejection> {
        let Some(authorization) = header_values(request.headers, "authorization") else {
            return Err(
                AwsError::forbidden("MissingAuthenticationTokenException", "Missing Authentication Token").into()
            );
        };
        let auth = parse_authorization(&authorization)?;
        let Some(amz_date) = header_values(request.headers, "x-amz-date") else {
            return Err(AwsError::forbidden(
                "IncompleteSignatureException",
                "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
            )
            .into());
        };

        // Who: the key, then the session token (both answer UnrecognizedClient, as AWS does).
        if auth.access_key_id != self.credentials.access_key_id {
            return Err(AwsError::forbidden("UnrecognizedClientException", INVALID_TOKEN_MESSAGE).into());
        }
        let token = header_values(request.headers, "x-amz-security-token");
        if token != self.credentials.session_token {
            return Err(AwsError::forbidden("UnrecognizedClientException", INVALID_TOKEN_MESSAGE).into());
        }

        // The scope: date, region, service, terminator.
        let invalid =
            |message: String| -> Rejection { AwsError::forbidden("InvalidSignatureException", message).into() };
        if amz_date.get(..8) != Some(auth.date.as_str()) {
            return Err(invalid(format!(
                "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: \
                 '{}' != '{}', from '{amz_date}'.",
                auth.date,
                amz_date.get(..8).unwrap_or(&amz_date)
            )));
        }
        if auth.region != self.region {
            return Err(invalid(format!(
                "Credential should be scoped to a valid region, not '{}'. Credential should be scoped to correct \
                 region: '{}'.",
                auth.region, self.region
            )));
        }
        if auth.service != self.service {
            return Err(invalid(format!("Credential should be scoped to correct service: '{}'. ", self.service)));
        }
        if auth.terminator != TERMINATOR {
            return Err(invalid(format!(
                "Credential should be scoped with a valid terminator: 'aws4_request', not '{}'.",
                auth.terminator
            )));
        }

        // When: within the skew of our clock.
        let Some(signed_at) = parse_amz_date(&amz_date) else {
            return Err(AwsError::forbidden(
                "IncompleteSignatureException",
                format!("Date must be in ISO-8601 'basic format'. Got '{amz_date}'."),
            )
            .into());
        };
        let skew_minutes = self.clock_skew.as_secs() / 60;
        if signed_at + self.clock_skew < now {
            return Err(invalid(format!(
                "Signature expired: {amz_date} is now earlier than {} ({} - {skew_minutes} min.)",
                format_amz_date(now - self.clock_skew),
                format_amz_date(now)
            )));
        }
        if signed_at > now + self.clock_skew {
            return Err(invalid(format!(
                "Signature not yet current: {amz_date} is still later than {} ({} + {skew_minutes} min.)",
                format_amz_date(now + self.clock_skew),
                format_amz_date(now)
            )));
        }

        // What is signed: host and date always, the token when sent.
        let signed: Vec<&str> = auth.signed_headers.iter().map(String::as_str).collect();
        if !signed.contains(&"host") {
            return Err(AwsError::forbidden(
                "IncompleteSignatureException",
                "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.",
            )
            .into());
        }
        if !signed.contains(&"x-amz-date") {
            return Err(invalid("'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization.".to_owned()));
        }
        if token.is_some() && !signed.contains(&"x-amz-security-token") {
            return Err(invalid(
                "'X-Amz-Security-Token' must be a 'SignedHeader' in the AWS Authorization.".to_owned(),
            ));
        }
        let body_hash = hex::encode(Sha256::digest(request.body));
        if signed.contains(&"x-amz-content-sha256")
            && header_values(request.headers, "x-amz-content-sha256").as_deref() != Some(body_hash.as_str())
        {
            return Err(invalid("The provided 'x-amz-content-sha256' header does not match what was computed.".into()));
        }

        // The signature itself.
        let canonical = canonical_request(request, &signed, &body_hash);
        let scope = format!("{}/{}/{}/{TERMINATOR}", auth.date, auth.region, auth.service);
        let to_sign = string_to_sign(&amz_date, &scope, &canonical);
        let key = signing_key(&self.credentials.secret_access_key, &auth.date, &auth.region, &auth.service);
        let expected = signature(&key, &to_sign);
        if !constant_time_eq(expected.as_bytes(), auth.signature.as_bytes()) {
            return Err(Rejection {
                error: AwsError::forbidden("InvalidSignatureException", SIGNATURE_MISMATCH_MESSAGE),
                canonical_request: Some(canonical),
                string_to_sign: Some(to_sign),
            });
        }
        Ok(Accepted {
            access_key_id: auth.access_key_id,
            amz_date,
            region: auth.region,
            service: auth.service,
            signed_headers: auth.signed_headers,
            session_token: token.is_some(),
        })
    }
}

struct Authorization {
    access_key_id: String,
    date: String,
    region: String,
    service: String,
    terminator: String,
    signed_headers: Vec<String>,
    signature: String,
}

fn parse_authorization(value: &str) -> Result<Authorization, AwsError> {
    let incomplete = |message: String| AwsError::forbidden("IncompleteSignatureException", message);
    let rest = value
        .strip_prefix(ALGORITHM)
        .filter(|rest| rest.starts_with(' '))
        .ok_or_else(|| incomplete(format!("Authorization header must use the '{ALGORITHM}' algorithm.")))?;
    let (mut credential, mut signed_headers, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let Some((name, value)) = part.trim().split_once('=') else { continue };
        match name {
            "Credential" => credential = Some(value),
            "SignedHeaders" => signed_headers = Some(value),
            "Signature" => signature = Some(value),
            _ => {}
        }
    }
    let mut missing = String::new();
    for (name, part) in [("Credential", credential), ("Signature", signature), ("SignedHeaders", signed_headers)] {
        if part.is_none() {
            let _ = write!(missing, "Authorization header requires '{name}' parameter. ");
        }
    }
    let (Some(credential), Some(signed_headers), Some(signature)) = (credential, signed_headers, signature) else {
        return Err(incomplete(missing.trim_end().to_owned()));
    };
    let scope: Vec<&str> = credential.split('/').collect();
    let [access_key_id, date, region, service, terminator] = scope.as_slice() else {
        return Err(incomplete(format!(
            "Credential should have five parts (key id/date/region/service/aws4_request), got '{credential}'."
        )));
    };
    Ok(Authorization {
        access_key_id: (*access_key_id).to_owned(),
        date: (*date).to_owned(),
        region: (*region).to_owned(),
        service: (*service).to_owned(),
        terminator: (*terminator).to_owned(),
        signed_headers: signed_headers.split(';').map(str::to_owned).collect(),
        signature: signature.to_owned(),
    })
}

/// All values of header `name` (case-insensitive), each trimmed with inner runs of spaces
/// collapsed, joined with `,`; `None` when absent.
fn header_values(headers: &[(String, String)], name: &str) -> Option<String> {
    let values: Vec<String> = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

// ---------------------------------------------------------------------------------------
// SigV4 steps (reference 3.2), public so tests can show what the fake computed
// ---------------------------------------------------------------------------------------

fn percent_encode(input: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(input.len());
    for &byte in input.as_bytes() {
        if byte.is_ascii_alphanumeric() || keep.contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

fn percent_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let hex_pair = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (byte, hex_pair.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The canonical URI: the path as received, percent-encoded once more keeping `/` and the
/// unreserved characters (so `:` becomes `%3A` and `%3A` becomes `%253A`); `/` when empty.
#[must_use]
pub fn canonical_uri(path: &str) -> String {
    if path.is_empty() { "/".to_owned() } else { percent_encode(path, b"-_.~/") }
}

/// The canonical query: each `name=value` decoded then RFC 3986 encoded, sorted; `""` when none.
#[must_use]
pub fn canonical_query(query: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> = query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_encode(&percent_decode(name), b"-_.~"), percent_encode(&percent_decode(value), b"-_.~"))
        })
        .collect();
    pairs.sort();
    pairs.iter().map(|(name, value)| format!("{name}={value}")).collect::<Vec<_>>().join("&")
}

/// The canonical request over `signed` headers (lowercase names, in the given order) and a
/// hex payload hash.
#[must_use]
pub fn canonical_request(request: &RequestParts<'_>, signed: &[&str], payload_hash: &str) -> String {
    let mut headers = String::new();
    for name in signed {
        let value = header_values(request.headers, name).unwrap_or_default();
        let _ = writeln!(headers, "{name}:{value}");
    }
    format!(
        "{}\n{}\n{}\n{headers}\n{}\n{payload_hash}",
        request.method,
        canonical_uri(request.path),
        canonical_query(request.query),
        signed.join(";")
    )
}

/// `AWS4-HMAC-SHA256\n<amz date>\n<scope>\n<hex sha256 of the canonical request>`.
#[must_use]
pub fn string_to_sign(amz_date: &str, scope: &str, canonical_request: &str) -> String {
    format!("{ALGORITHM}\n{amz_date}\n{scope}\n{}", hex::encode(Sha256::digest(canonical_request.as_bytes())))
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// `kSigning` derived from the secret through date, region, service and `aws4_request`.
#[must_use]
pub fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k_date = hmac_sha256(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac_sha256(&k_date, region.as_bytes());
    let k_service = hmac_sha256(&k_region, service.as_bytes());
    hmac_sha256(&k_service, TERMINATOR.as_bytes())
}

/// The hex signature of `string_to_sign` under `key`.
#[must_use]
pub fn signature(key: &[u8; 32], string_to_sign: &str) -> String {
    hex::encode(hmac_sha256(key, string_to_sign.as_bytes()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Signs requests for the fake's own tests. The product never uses this (it signs with
/// `aws-sigv4`); it shares the canonicalization with [`Verifier`], which the AWS test-suite
/// vectors pin independently.
#[derive(Debug, Clone)]
pub struct TestSigner {
    pub credentials: Credentials,
    pub region: String,
    pub service: String,
}

impl TestSigner {
    /// A signer for `credentials` in `region`, service [`SERVICE`].
    #[must_use]
    pub fn new(credentials: Credentials, region: &str) -> TestSigner {
        TestSigner { credentials, region: region.to_owned(), service: SERVICE.to_owned() }
    }

    /// Adds `x-amz-date` (from `at`) and, with a session token, `x-amz-security-token` to
    /// `headers`, then an `authorization` signing every header present (include `host`).
    pub fn sign(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &mut Vec<(String, String)>,
        body: &[u8],
        at: SystemTime,
    ) {
        let amz_date = format_amz_date(at);
        headers.push(("x-amz-date".to_owned(), amz_date.clone()));
        if let Some(token) = &self.credentials.session_token {
            headers.push(("x-amz-security-token".to_owned(), token.clone()));
        }
        let mut names: Vec<String> = headers.iter().map(|(name, _)| name.to_ascii_lowercase()).collect();
        names.sort();
        names.dedup();
        let signed: Vec<&str> = names.iter().map(String::as_str).collect();
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        let parts = RequestParts { method, path, query, headers, body };
        let canonical = canonical_request(&parts, &signed, &hex::encode(Sha256::digest(body)));
        let date = &amz_date[..8];
        let scope = format!("{date}/{}/{}/{TERMINATOR}", self.region, self.service);
        let key = signing_key(&self.credentials.secret_access_key, date, &self.region, &self.service);
        let sig = signature(&key, &string_to_sign(&amz_date, &scope, &canonical));
        let authorization = format!(
            "{ALGORITHM} Credential={}/{scope}, SignedHeaders={}, Signature={sig}",
            self.credentials.access_key_id,
            signed.join(";")
        );
        headers.push(("authorization".to_owned(), authorization));
    }
}

// ---------------------------------------------------------------------------------------
// Dates (`YYYYMMDD'T'HHMMSS'Z'`, UTC)
// ---------------------------------------------------------------------------------------

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

/// `time` as `x-amz-date` writes it.
#[must_use]
pub fn format_amz_date(time: SystemTime) -> String {
    let secs = i64::try_from(time.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()).unwrap_or(i64::MAX);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let of_day = secs.rem_euclid(86_400);
    format!("{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z", of_day / 3600, of_day / 60 % 60, of_day % 60)
}

/// Parses an `x-amz-date`; `None` unless exactly `YYYYMMDD'T'HHMMSS'Z'`.
#[must_use]
pub fn parse_amz_date(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    if bytes.len() != 16 || bytes[8] != b'T' || bytes[15] != b'Z' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = text.get(range)?;
        digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse().ok())?
    };
    let (year, month, day) = (number(0..4)?, number(4..6)?, number(6..8)?);
    let (hour, minute, second) = (number(9..11)?, number(11..13)?, number(13..15)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

// ---------------------------------------------------------------------------------------
// Event-stream frames (reference 3.4), written by hand
// ---------------------------------------------------------------------------------------

/// A typed event-stream header value (reference 3.4 lists the wire types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameHeaderValue {
    Bool(bool),
    Byte(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Bytes(Vec<u8>),
    String(String),
    /// Milliseconds since the epoch.
    Timestamp(i64),
    Uuid([u8; 16]),
}

impl FrameHeaderValue {
    fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            FrameHeaderValue::Bool(true) => out.push(0),
            FrameHeaderValue::Bool(false) => out.push(1),
            FrameHeaderValue::Byte(v) => {
                out.push(2);
                out.extend(v.to_be_bytes());
            }
            FrameHeaderValue::Int16(v) => {
                out.push(3);
                out.extend(v.to_be_bytes());
            }
            FrameHeaderValue::Int32(v) => {
                out.push(4);
                out.extend(v.to_be_bytes());
            }
            FrameHeaderValue::Int64(v) => {
                out.push(5);
                out.extend(v.to_be_bytes());
            }
            FrameHeaderValue::Bytes(v) => {
                out.push(6);
                out.extend(u16::try_from(v.len()).expect("header value under 64 KiB").to_be_bytes());
                out.extend(v);
            }
            FrameHeaderValue::String(v) => {
                out.push(7);
                out.extend(u16::try_from(v.len()).expect("header value under 64 KiB").to_be_bytes());
                out.extend(v.as_bytes());
            }
            FrameHeaderValue::Timestamp(v) => {
                out.push(8);
                out.extend(v.to_be_bytes());
            }
            FrameHeaderValue::Uuid(v) => {
                out.push(9);
                out.extend(v);
            }
        }
    }
}

/// One frame with typed headers: prelude (total length, headers length, CRC-32 of both),
/// headers, payload, CRC-32 of everything before it.
#[must_use]
pub fn frame_typed(headers: &[(&str, FrameHeaderValue)], payload: &[u8]) -> Bytes {
    let mut header_bytes = Vec::new();
    for (name, value) in headers {
        header_bytes.push(u8::try_from(name.len()).expect("header name under 256 bytes"));
        header_bytes.extend(name.as_bytes());
        value.write_to(&mut header_bytes);
    }
    let total = 12 + header_bytes.len() + payload.len() + 4;
    let mut out = Vec::with_capacity(total);
    out.extend(u32::try_from(total).expect("frame under 4 GiB").to_be_bytes());
    out.extend(u32::try_from(header_bytes.len()).expect("headers under 4 GiB").to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend(prelude_crc.to_be_bytes());
    out.extend(header_bytes);
    out.extend(payload);
    let message_crc = crc32fast::hash(&out);
    out.extend(message_crc.to_be_bytes());
    Bytes::from(out)
}

/// One frame with string headers.
#[must_use]
pub fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Bytes {
    let typed: Vec<(&str, FrameHeaderValue)> =
        headers.iter().map(|(name, value)| (*name, FrameHeaderValue::String((*value).to_owned()))).collect();
    frame_typed(&typed, payload)
}

/// Deterministic padding for the `p` key: its length varies with `seed` (1 to 30
/// characters), as Bedrock's random padding does.
#[must_use]
pub fn padding(seed: usize) -> String {
    const ALPHABET: &str = "abcdefghijklmnopqrstuvwxyzABCD";
    ALPHABET[..seed % ALPHABET.len() + 1].to_owned()
}

/// An InvokeModelWithResponseStream `chunk` event: payload `{"bytes": base64(event), "p": …}`.
#[must_use]
pub fn invoke_chunk(event: &Value) -> Bytes {
    let event_text = event.to_string();
    let payload = json!({
        "bytes": base64::engine::general_purpose::STANDARD.encode(&event_text),
        "p": padding(event_text.len()),
    });
    frame(
        &[(":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event")],
        payload.to_string().as_bytes(),
    )
}

/// A ConverseStream event named `name` (`messageStart`, `contentBlockDelta`, …): the
/// payload is `event` itself with a `p` padding key added.
#[must_use]
pub fn converse_event(name: &str, event: &Value) -> Bytes {
    let mut payload = event.clone();
    if let Some(object) = payload.as_object_mut() {
        object.insert("p".to_owned(), Value::String(padding(name.len() + event.to_string().len())));
    }
    frame(
        &[(":event-type", name), (":content-type", "application/json"), (":message-type", "event")],
        payload.to_string().as_bytes(),
    )
}

fn lowercase_first(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map(|first| first.to_ascii_lowercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// An in-stream exception (`:message-type exception`), payload `{"message": …}`. The
/// `:exception-type` is `name` with its first letter lowercased, as Bedrock sends it
/// (`ThrottlingException` and `throttlingException` both give `throttlingException`).
#[must_use]
pub fn exception(name: &str, message: &str) -> Bytes {
    exception_with(name, &json!({"message": message}))
}

/// An in-stream exception with any payload (e.g. `modelStreamErrorException`'s
/// `originalStatusCode` / `originalMessage`).
#[must_use]
pub fn exception_with(name: &str, payload: &Value) -> Bytes {
    let name = lowercase_first(name);
    frame(
        &[(":exception-type", &name), (":content-type", "application/json"), (":message-type", "exception")],
        payload.to_string().as_bytes(),
    )
}

/// `modelStreamErrorException` with the model's original status and message.
#[must_use]
pub fn model_stream_error(message: &str, original_status: u16, original_message: &str) -> Bytes {
    exception_with(
        "modelStreamErrorException",
        &json!({"message": message, "originalStatusCode": original_status, "originalMessage": original_message}),
    )
}

/// A `:message-type error` frame (`:error-code`, `:error-message`, empty payload).
#[must_use]
pub fn error_frame(code: &str, message: &str) -> Bytes {
    frame(&[(":message-type", "error"), (":error-code", code), (":error-message", message)], b"")
}

/// `frame` with one byte before its message CRC flipped (the last payload byte, or a CRC
/// byte when the frame has no headers or payload): the prelude stays valid, the message
/// CRC check fails.
#[must_use]
pub fn corrupt_message_crc(frame: &Bytes) -> Bytes {
    let mut bytes = frame.to_vec();
    let at = if bytes.len() > 16 { bytes.len() - 5 } else { bytes.len() - 1 };
    bytes[at] ^= 0x20;
    Bytes::from(bytes)
}

/// `frame` with its prelude CRC broken.
#[must_use]
pub fn corrupt_prelude_crc(frame: &Bytes) -> Bytes {
    let mut bytes = frame.to_vec();
    bytes[8] ^= 0x01;
    Bytes::from(bytes)
}

/// All `frames` as one byte string cut into pieces of `size` bytes (the last may be
/// shorter), regardless of frame boundaries.
#[must_use]
pub fn split_bytes(frames: &[Bytes], size: usize) -> Vec<Bytes> {
    let joined: Vec<u8> = frames.iter().flat_map(|frame| frame.iter().copied()).collect();
    joined.chunks(size.max(1)).map(Bytes::copy_from_slice).collect()
}

// ---------------------------------------------------------------------------------------
// Ready-made streams and bodies
// ---------------------------------------------------------------------------------------

/// A Claude `message` object as InvokeModel returns it (Bedrock's `msg_bdrk_` id).
#[must_use]
pub fn claude_message_body(content: Vec<Value>, stop_reason: &str, usage: Value) -> Value {
    let mut body = anthropic_wire::message_body(content, stop_reason, None, usage);
    body["id"] = json!(MESSAGE_ID);
    body
}

/// The canned InvokeModel body: text then a `tool_use`, stop `tool_use`, cached usage.
#[must_use]
pub fn invoke_body() -> Value {
    claude_message_body(
        vec![
            anthropic_wire::text_block("Let me check the weather."),
            anthropic_wire::tool_use_block("toolu_bdrk_01A", "get_weather", json!({"city": "Paris"})),
        ],
        "tool_use",
        anthropic_wire::usage_json(25, 42, 7, 2048),
    )
}

/// The Anthropic streaming events (as JSON) of a Claude answer over
/// InvokeModelWithResponseStream: `message_start` (input 25, cache write 7, cache read
/// 2048), a text block in two deltas ("Let me check" + " the weather."), a `tool_use`
/// block `get_weather` with its input `{"city":"Paris"}` in two fragments, `message_delta`
/// (`tool_use`, 42 output tokens) and a `message_stop` carrying
/// `amazon-bedrock-invocationMetrics`.
#[must_use]
pub fn claude_stream_events() -> Vec<Value> {
    let mut message = claude_message_body(vec![], "", anthropic_wire::usage_json(25, 1, 7, 2048));
    message["stop_reason"] = Value::Null;
    vec![
        json!({"type": "message_start", "message": message}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me check"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " the weather."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1,
               "content_block": {"type": "tool_use", "id": "toolu_bdrk_01A", "name": "get_weather", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1,
               "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Par"}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "is\"}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
               "usage": {"output_tokens": 42}}),
        json!({"type": "message_stop", "amazon-bedrock-invocationMetrics":
               {"inputTokenCount": 25, "outputTokenCount": 42, "invocationLatency": 1234, "firstByteLatency": 321}}),
    ]
}

/// [`claude_stream_events`] as `chunk` frames.
#[must_use]
pub fn claude_stream_frames() -> Vec<Bytes> {
    claude_stream_events().iter().map(invoke_chunk).collect()
}

/// A text-only Claude stream: `message_start`, one text block with one delta per piece,
/// `message_delta` with `stop_reason` and `output` tokens, `message_stop`; as frames.
#[must_use]
pub fn claude_text_stream_frames(texts: &[&str], stop_reason: &str, input: u64, output: u64) -> Vec<Bytes> {
    let mut message = claude_message_body(vec![], "", anthropic_wire::usage_json(input, 1, 0, 0));
    message["stop_reason"] = Value::Null;
    let mut events = vec![
        json!({"type": "message_start", "message": message}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ];
    for text in texts {
        events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}));
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                       "usage": {"output_tokens": output}}));
    events.push(json!({"type": "message_stop", "amazon-bedrock-invocationMetrics":
                       {"inputTokenCount": input, "outputTokenCount": output, "invocationLatency": 500,
                        "firstByteLatency": 100}}));
    events.iter().map(invoke_chunk).collect()
}

/// Converse `usage`. `totalTokens` here counts every input and output token, the cached
/// ones included (an assumption: the reference does not pin it down).
#[must_use]
pub fn converse_usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Value {
    json!({
        "inputTokens": input,
        "outputTokens": output,
        "totalTokens": input + output + cache_read + cache_write,
        "cacheReadInputTokens": cache_read,
        "cacheWriteInputTokens": cache_write,
    })
}

/// A whole Converse response.
#[must_use]
pub fn converse_response_body(content: Vec<Value>, stop_reason: &str, usage: Value) -> Value {
    json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": usage,
        "metrics": {"latencyMs": 1175},
    })
}

/// The canned Converse body: text then a `toolUse`, stop `tool_use`, cached usage.
#[must_use]
pub fn converse_body() -> Value {
    converse_response_body(
        vec![
            json!({"text": "Let me check the weather."}),
            json!({"toolUse": {"toolUseId": "tooluse_abc123", "name": "get_weather", "input": {"city": "Paris"}}}),
        ],
        "tool_use",
        converse_usage(30, 48, 1024, 12),
    )
}

/// The events (name, JSON) of a ConverseStream answer: `messageStart`, text in two
/// `contentBlockDelta`s ("Let me check" + " the weather."), `contentBlockStop`, a
/// `contentBlockStart` for `toolUse` `get_weather`, its input `{"city": "Paris"}` in two
/// fragments, `contentBlockStop`, `messageStop` (`tool_use`), `metadata` with usage
/// (30 in, 48 out, 1024 cache read, 12 cache write) and metrics.
#[must_use]
pub fn converse_stream_events() -> Vec<(&'static str, Value)> {
    vec![
        ("messageStart", json!({"role": "assistant"})),
        ("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": "Let me check"}})),
        ("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": " the weather."}})),
        ("contentBlockStop", json!({"contentBlockIndex": 0})),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tooluse_abc123", "name": "get_weather"}}}),
        ),
        ("contentBlockDelta", json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"city\": \"Par"}}})),
        ("contentBlockDelta", json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "is\"}"}}})),
        ("contentBlockStop", json!({"contentBlockIndex": 1})),
        ("messageStop", json!({"stopReason": "tool_use"})),
        ("metadata", json!({"usage": converse_usage(30, 48, 1024, 12), "metrics": {"latencyMs": 1175}})),
    ]
}

/// [`converse_stream_events`] as frames.
#[must_use]
pub fn converse_stream_frames() -> Vec<Bytes> {
    converse_stream_events().iter().map(|(name, event)| converse_event(name, event)).collect()
}

/// A text-only ConverseStream: `messageStart`, one delta per piece, `contentBlockStop`,
/// `messageStop` with `stop_reason`, `metadata` with this usage; as frames.
#[must_use]
pub fn converse_text_stream_frames(texts: &[&str], stop_reason: &str, usage: Value) -> Vec<Bytes> {
    let mut frames = vec![converse_event("messageStart", &json!({"role": "assistant"}))];
    for text in texts {
        frames.push(converse_event("contentBlockDelta", &json!({"contentBlockIndex": 0, "delta": {"text": text}})));
    }
    frames.push(converse_event("contentBlockStop", &json!({"contentBlockIndex": 0})));
    frames.push(converse_event("messageStop", &json!({"stopReason": stop_reason})));
    frames.push(converse_event("metadata", &json!({"usage": usage, "metrics": {"latencyMs": 300}})));
    frames
}

// ---------------------------------------------------------------------------------------
// Scripted answers
// ---------------------------------------------------------------------------------------

fn header(name: &str, value: &str) -> (String, String) {
    (name.to_owned(), value.to_owned())
}

/// Headers of a JSON answer.
#[must_use]
pub fn json_headers() -> Vec<(String, String)> {
    vec![header("content-type", "application/json"), header("x-amzn-requestid", REQUEST_ID)]
}

/// Headers of an event-stream answer.
#[must_use]
pub fn event_stream_headers() -> Vec<(String, String)> {
    vec![
        header("content-type", EVENT_STREAM_CONTENT_TYPE),
        header("x-amzn-requestid", REQUEST_ID),
        header("x-amzn-bedrock-content-type", "application/json"),
    ]
}

/// A JSON answer.
#[must_use]
pub fn json_response(status: u16, body: &Value) -> Scripted {
    Scripted::Respond { status, headers: json_headers(), body: Bytes::from(body.to_string()) }
}

/// An InvokeModel 200: the Claude message, with the `x-amzn-bedrock-*` token-count headers.
#[must_use]
pub fn invoke_message(body: &Value) -> Scripted {
    let mut headers = json_headers();
    headers.push(header("x-amzn-bedrock-invocation-latency", "926"));
    for (name, pointer) in [
        ("x-amzn-bedrock-input-token-count", "/usage/input_tokens"),
        ("x-amzn-bedrock-output-token-count", "/usage/output_tokens"),
    ] {
        if let Some(count) = body.pointer(pointer).and_then(Value::as_u64) {
            headers.push(header(name, &count.to_string()));
        }
    }
    Scripted::Respond { status: 200, headers, body: Bytes::from(body.to_string()) }
}

/// A plain InvokeModel text answer (`end_turn`, small usage, no cache).
#[must_use]
pub fn invoke_text(text: &str) -> Scripted {
    invoke_message(&claude_message_body(
        vec![anthropic_wire::text_block(text)],
        "end_turn",
        anthropic_wire::usage_json(10, 5, 0, 0),
    ))
}

/// A Converse 200 with this body.
#[must_use]
pub fn converse(body: &Value) -> Scripted {
    json_response(200, body)
}

/// A plain Converse text answer (`end_turn`, 10 in, 5 out, no cache).
#[must_use]
pub fn converse_text(text: &str) -> Scripted {
    converse(&converse_response_body(vec![json!({"text": text})], "end_turn", converse_usage(10, 5, 0, 0)))
}

/// A Mantle (native Anthropic Messages) 200 with this message body.
#[must_use]
pub fn mantle_message(body: &Value) -> Scripted {
    let mut headers = anthropic_wire::json_headers(anthropic_wire::REQUEST_ID);
    headers.push(header("x-amzn-requestid", REQUEST_ID));
    Scripted::Respond { status: 200, headers, body: Bytes::from(body.to_string()) }
}

/// A Mantle SSE stream of these events (build them with [`anthropic_wire`]).
#[must_use]
pub fn mantle_stream(events: Vec<Bytes>) -> Scripted {
    let mut headers = anthropic_wire::sse_headers(anthropic_wire::REQUEST_ID);
    headers.push(header("x-amzn-requestid", REQUEST_ID));
    Scripted::Stream { status: 200, headers, chunks: events, pause: Duration::ZERO }
}

/// An AWS error: `status`, `x-amzn-ErrorType: <name>:<namespace>`, `x-amzn-requestid`,
/// body `{"message": …}`.
#[must_use]
pub fn aws_error(status: u16, error_type: &str, message: &str) -> Scripted {
    let headers = vec![
        header("content-type", "application/json"),
        header("x-amzn-requestid", REQUEST_ID),
        header("x-amzn-errortype", &format!("{error_type}:{ERROR_TYPE_NAMESPACE}")),
    ];
    Scripted::Respond { status, headers, body: Bytes::from(json!({"message": message}).to_string()) }
}

/// 429 `ThrottlingException` ("Too many requests, …").
#[must_use]
pub fn throttling() -> Scripted {
    aws_error(429, "ThrottlingException", "Too many requests, please wait before trying again.")
}

/// 400 `ValidationException` with this message.
#[must_use]
pub fn validation(message: &str) -> Scripted {
    aws_error(400, "ValidationException", message)
}

/// 400 `ValidationException` for a model that needs an inference profile.
#[must_use]
pub fn on_demand_not_supported(model_id: &str) -> Scripted {
    validation(&format!(
        "Invocation of model ID {model_id} with on-demand throughput isn't supported. Retry your request with the ID \
         or ARN of an inference profile that contains this model."
    ))
}

/// 403 `AccessDeniedException` (model access not granted).
#[must_use]
pub fn access_denied() -> Scripted {
    aws_error(403, "AccessDeniedException", "You don't have access to the model with the specified model ID.")
}

/// 429 `ModelNotReadyException`.
#[must_use]
pub fn model_not_ready() -> Scripted {
    aws_error(429, "ModelNotReadyException", "Model is not ready to serve inference requests.")
}

/// 408 `ModelTimeoutException`.
#[must_use]
pub fn model_timeout() -> Scripted {
    aws_error(408, "ModelTimeoutException", "Model has timed out in processing the request.")
}

/// 500 `InternalServerException`.
#[must_use]
pub fn internal_server() -> Scripted {
    aws_error(500, "InternalServerException", "The server encountered an internal error.")
}

/// 503 `ServiceUnavailableException`.
#[must_use]
pub fn service_unavailable() -> Scripted {
    aws_error(503, "ServiceUnavailableException", "Service is unavailable, please try again later.")
}

/// A 200 event stream, one frame per write.
#[must_use]
pub fn event_stream(frames: Vec<Bytes>) -> Scripted {
    Scripted::Stream { status: 200, headers: event_stream_headers(), chunks: frames, pause: Duration::ZERO }
}

/// A 200 event stream written in pieces of `size` bytes that ignore frame boundaries.
#[must_use]
pub fn event_stream_split(frames: Vec<Bytes>, size: usize) -> Scripted {
    Scripted::Stream {
        status: 200,
        headers: event_stream_headers(),
        chunks: split_bytes(&frames, size),
        pause: Duration::ZERO,
    }
}

/// A 200 event stream whose connection is cut after the last frame (no end of body).
#[must_use]
pub fn event_stream_then_drop(frames: Vec<Bytes>) -> Scripted {
    Scripted::StreamThenDrop { status: 200, headers: event_stream_headers(), chunks: frames }
}

// ---------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------

/// Which Bedrock operation a request addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    InvokeModel,
    InvokeModelWithResponseStream,
    Converse,
    ConverseStream,
    /// `POST /anthropic/v1/messages` on the Mantle surface.
    MantleMessages,
    /// Any other method or path (answered 404 `UnknownOperationException`).
    Unknown,
}

/// The operation and decoded model id a method and raw path address.
#[must_use]
pub fn route(method: &str, path: &str) -> (Operation, Option<String>) {
    if method != "POST" {
        return (Operation::Unknown, None);
    }
    if path == "/anthropic/v1/messages" {
        return (Operation::MantleMessages, None);
    }
    let Some(rest) = path.strip_prefix("/model/") else { return (Operation::Unknown, None) };
    let Some((model, action)) = rest.rsplit_once('/') else { return (Operation::Unknown, None) };
    let operation = match action {
        "invoke" => Operation::InvokeModel,
        "invoke-with-response-stream" => Operation::InvokeModelWithResponseStream,
        "converse" => Operation::Converse,
        "converse-stream" => Operation::ConverseStream,
        _ => return (Operation::Unknown, None),
    };
    if model.is_empty() {
        return (Operation::Unknown, None);
    }
    (operation, Some(percent_decode(model)))
}

/// One request the fake received, recorded before it was answered.
#[derive(Debug, Clone)]
pub struct BedrockRequest {
    pub method: String,
    /// The path exactly as received (still percent-encoded: `…-v1:0` or `…-v1%3A0`).
    pub path: String,
    pub query: Option<String>,
    /// In arrival order; names lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    pub operation: Operation,
    /// The model id from the path, percent-decoded; `None` for Mantle and unknown routes.
    pub model_id: Option<String>,
    /// What the SigV4 verifier decided.
    pub verdict: Result<Accepted, Rejection>,
}

impl BedrockRequest {
    /// The body as JSON; panics with the body text if it is not JSON.
    #[must_use]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("request body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The first value of header `name` (case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether the signature was accepted.
    #[must_use]
    pub fn signed_ok(&self) -> bool {
        self.verdict.is_ok()
    }
}

struct State {
    queue: VecDeque<Scripted>,
    received: Vec<BedrockRequest>,
    /// Embedding answers one value short of the width asked.
    wrong_length: bool,
}

struct Shared {
    verifier: Verifier,
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running fake Bedrock. Stops (and joins its thread) on drop.
pub struct FakeBedrock {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FakeBedrock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBedrock").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl FakeBedrock {
    /// Starts on `127.0.0.1:0` knowing [`Credentials::fake`] in [`REGION`].
    pub async fn start() -> FakeBedrock {
        FakeBedrock::start_with(Verifier::new(Credentials::fake(), REGION)).await
    }

    /// Starts with this verifier (another key, a session token, region, service or skew),
    /// on a thread and runtime of its own.
    pub async fn start_with(verifier: Verifier) -> FakeBedrock {
        let listener = StdTcpListener::bind(("127.0.0.1", 0)).expect("fake bedrock: bind");
        listener.set_nonblocking(true).expect("fake bedrock: nonblocking");
        let addr = listener.local_addr().expect("fake bedrock: bound address");
        let shared = Arc::new(Shared {
            verifier,
            state: Mutex::new(State { queue: VecDeque::new(), received: Vec::new(), wrong_length: false }),
        });
        let (shutdown, shutdown_rx) = oneshot::channel::<()>();
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("fake bedrock: runtime");
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("fake-bedrock-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else { return };
                    tokio::select! {
                        () = accept_loop(listener, thread_shared) => {}
                        _ = shutdown_rx => {}
                    }
                });
                drop(runtime);
            })
            .expect("fake bedrock: thread");
        FakeBedrock { addr, shared, shutdown: Some(shutdown), thread: Some(thread) }
    }

    /// Starts on the caller's runtime (for tests under tokio's paused clock).
    pub async fn start_local(verifier: Verifier) -> FakeBedrock {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("fake bedrock: bind");
        let addr = listener.local_addr().expect("fake bedrock: bound address");
        let shared = Arc::new(Shared {
            verifier,
            state: Mutex::new(State { queue: VecDeque::new(), received: Vec::new(), wrong_length: false }),
        });
        let (shutdown, shutdown_rx) = oneshot::channel::<()>();
        let task_shared = Arc::clone(&shared);
        tokio::spawn(async move {
            tokio::select! {
                () = accept_loop(listener, task_shared) => {}
                _ = shutdown_rx => {}
            }
        });
        FakeBedrock { addr, shared, shutdown: Some(shutdown), thread: None }
    }

    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: the endpoint URL (stands for `https://bedrock-runtime.<region>.amazonaws.com`
    /// and, for Mantle, `https://bedrock-mantle.<region>.api.aws`).
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The verifier (key, region, service, skew) this fake checks with.
    #[must_use]
    pub fn verifier(&self) -> &Verifier {
        &self.shared.verifier
    }

    /// Queues an answer for the next correctly signed request on a known route.
    pub fn push(&self, answer: Scripted) {
        self.shared.lock().queue.push_back(answer);
    }

    /// How many pushed answers are not consumed yet.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Every request so far (signed or not), in arrival order.
    #[must_use]
    pub fn received(&self) -> Vec<BedrockRequest> {
        self.shared.lock().received.clone()
    }

    #[must_use]
    pub fn request_count(&self) -> usize {
        self.shared.lock().received.len()
    }

    /// The requests whose decoded model id is `model_id`, in arrival order (e.g. how many
    /// Titan requests one embedding call made).
    #[must_use]
    pub fn received_for_model(&self, model_id: &str) -> Vec<BedrockRequest> {
        self.shared.lock().received.iter().filter(|r| r.model_id.as_deref() == Some(model_id)).cloned().collect()
    }

    /// From now on, every computed embedding answer (Titan and Cohere) carries vectors one
    /// value short of the width asked (`dimensions` / `output_dimension`, else the
    /// native width), for a client's length check; `false` restores correct widths.
    pub fn answer_wrong_length_vectors(&self, on: bool) {
        self.shared.lock().wrong_length = on;
    }

    /// Waits until at least `count` requests arrived; panics after `timeout`.
    pub async fn wait_for_requests(&self, count: usize, timeout: Duration) -> Vec<BedrockRequest> {
        let deadline = Instant::now() + timeout;
        loop {
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            assert!(
                Instant::now() < deadline,
                "fake bedrock: expected {count} requests within {timeout:?}, got {}",
                received.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for FakeBedrock {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let shared = Arc::clone(&shared);
                tokio::spawn(serve_connection(stream, move |request, kill| {
                    let shared = Arc::clone(&shared);
                    async move { handle(request, &shared, &kill).await }
                }));
            }
            Err(e) => {
                tracing::warn!("fake bedrock: accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn handle(request: Request<Incoming>, shared: &Shared, kill: &Notify) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(http_body_util::Collected::to_bytes) else {
        kill.notify_one();
        return std::future::pending().await;
    };
    let method = parts.method.to_string();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().map(str::to_owned);
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    let verdict = shared.verifier.verify(
        &RequestParts { method: &method, path: &path, query: query.as_deref(), headers: &headers, body: &body },
        SystemTime::now(),
    );
    let (operation, model_id) = route(&method, &path);
    tracing::debug!(%method, %path, ?operation, ok = verdict.is_ok(), "fake bedrock: request");
    let rejection = verdict.as_ref().err().map(|rejection| rejection.error.clone());
    let retrieval_model = model_id.as_deref().and_then(retrieval::retrieval_model);
    let request_body = body.clone();
    let request = BedrockRequest { method, path, query, headers, body, operation, model_id, verdict };
    let script = {
        let mut state = shared.lock();
        let known = request.operation != Operation::Unknown;
        let mantle_stream = request.operation == Operation::MantleMessages
            && serde_json::from_slice::<Value>(&request.body).ok().and_then(|b| b.get("stream")?.as_bool())
                == Some(true);
        let operation = request.operation;
        state.received.push(request);
        match (rejection, known) {
            (Some(error), _) => error.scripted(),
            (None, false) => aws_error(404, "UnknownOperationException", "UnknownOperationException"),
            (None, true) => match (state.queue.pop_front(), retrieval_model) {
                (Some(script), _) => script,
                (None, Some(model)) if operation == Operation::InvokeModel => {
                    retrieval::answer(model, &request_body, state.wrong_length)
                }
                (None, Some(_)) => retrieval::wrong_operation(),
                (None, None) => default_answer(operation, mantle_stream),
            },
        }
    };
    play(script, kill, None).await
}

/// What a route answers with nothing scripted.
fn default_answer(operation: Operation, streaming: bool) -> Scripted {
    match operation {
        Operation::InvokeModel => invoke_message(&invoke_body()),
        Operation::InvokeModelWithResponseStream => event_stream(claude_stream_frames()),
        Operation::Converse => converse(&converse_body()),
        Operation::ConverseStream => event_stream(converse_stream_frames()),
        Operation::MantleMessages if streaming => {
            mantle_stream(anthropic_wire::sse_text_events(&["Hello", " from Mantle."], "end_turn", 10, 5))
        }
        Operation::MantleMessages => mantle_message(&anthropic_wire::message_body(
            vec![anthropic_wire::text_block("Hello from Mantle.")],
            "end_turn",
            None,
            anthropic_wire::usage_json(10, 5, 0, 0),
        )),
        Operation::Unknown => aws_error(404, "UnknownOperationException", "UnknownOperationException"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUITE_DATE: &str = "20150830T123600Z";
    const EMPTY_HASH: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn suite_verifier() -> Verifier {
        Verifier::new(Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), "us-east-1")
            .with_service("service")
    }

    fn suite_now() -> SystemTime {
        parse_amz_date(SUITE_DATE).unwrap()
    }

    fn owned(headers: &[(&str, &str)]) -> Vec<(String, String)> {
        headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    /// An AWS SigV4 test-suite vector (`host`, `x-amz-date` signed, empty body): the
    /// verifier accepts the suite's signature, and the test signer produces exactly it.
    fn check_vector(method: &str, path: &str, query: Option<&str>, expected_signature: &str) {
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature={expected_signature}"
        );
        let headers =
            owned(&[("Host", "example.amazonaws.com"), ("X-Amz-Date", SUITE_DATE), ("Authorization", &authorization)]);
        let parts = RequestParts { method, path, query, headers: &headers, body: b"" };
        let accepted = suite_verifier().verify(&parts, suite_now()).unwrap_or_else(|r| panic!("{path}: {r:#?}"));
        assert_eq!(accepted.signed_headers, ["host", "x-amz-date"]);

        let verifier = suite_verifier();
        let signer = TestSigner {
            credentials: verifier.credentials.clone(),
            region: verifier.region.clone(),
            service: verifier.service.clone(),
        };
        let mut signed = owned(&[("host", "example.amazonaws.com")]);
        let path_and_query = match query {
            Some(query) => format!("{path}?{query}"),
            None => path.to_owned(),
        };
        signer.sign(method, &path_and_query, &mut signed, b"", suite_now());
        assert_eq!(signed.last().unwrap().1, authorization, "{path}");
    }

    #[test]
    fn aws_suite_get_vanilla() {
        check_vector("GET", "/", None, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
        let headers = owned(&[("host", "example.amazonaws.com"), ("x-amz-date", SUITE_DATE)]);
        let parts = RequestParts { method: "GET", path: "/", query: None, headers: &headers, body: b"" };
        assert_eq!(
            canonical_request(&parts, &["host", "x-amz-date"], EMPTY_HASH),
            format!("GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:{SUITE_DATE}\n\nhost;x-amz-date\n{EMPTY_HASH}")
        );
    }

    #[test]
    fn aws_suite_post_vanilla() {
        check_vector("POST", "/", None, "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
    }

    #[test]
    fn aws_suite_query_order_and_path_encoding() {
        // get-vanilla-query-order-key-case: parameters are sorted.
        check_vector(
            "GET",
            "/",
            Some("Param2=value2&Param1=value1"),
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        );
        // post-vanilla-query.
        check_vector(
            "POST",
            "/",
            Some("Param1=value1"),
            "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
        );
        // get-utf8 and get-space: the raw path encoded once.
        check_vector("GET", "/ሴ", None, "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
        check_vector(
            "GET",
            "/example space/",
            None,
            "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741",
        );
    }

    #[test]
    fn the_canonical_uri_encodes_the_wire_path_once_more() {
        assert_eq!(
            canonical_uri("/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke"),
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke"
        );
        assert_eq!(
            canonical_uri("/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke"),
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%253A0/invoke"
        );
        assert_eq!(
            canonical_uri("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.x/converse"),
            "/model/arn%253Aaws%253Abedrock%253Aus-east-1%253A123%253Ainference-profile%252Fus.x/converse"
        );
        assert_eq!(canonical_uri(""), "/");
        assert_eq!(canonical_query(Some("b=2&a=x y&a=1")), "a=1&a=x%20y&b=2");
    }

    #[test]
    fn routes_decode_the_model_id() {
        for path in [
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke",
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke",
        ] {
            assert_eq!(route("POST", path), (Operation::InvokeModel, Some(MODEL_ID.to_owned())));
        }
        let arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123";
        let path = "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fabc123";
        assert_eq!(
            route("POST", &format!("{path}/converse-stream")),
            (Operation::ConverseStream, Some(arn.to_owned()))
        );
        assert_eq!(route("POST", "/model/x/invoke-with-response-stream").0, Operation::InvokeModelWithResponseStream);
        assert_eq!(route("POST", "/model/x/converse").0, Operation::Converse);
        assert_eq!(route("POST", "/anthropic/v1/messages"), (Operation::MantleMessages, None));
        assert_eq!(route("GET", "/model/x/invoke").0, Operation::Unknown);
        assert_eq!(route("POST", "/model//invoke").0, Operation::Unknown);
        assert_eq!(route("POST", "/model/x/chat").0, Operation::Unknown);
    }

    #[test]
    fn dates_round_trip() {
        for text in ["20150830T123600Z", "20000229T000000Z", "19700101T000000Z", "20991231T235959Z"] {
            assert_eq!(format_amz_date(parse_amz_date(text).unwrap()), text);
        }
        assert_eq!(parse_amz_date("20150830T123600Z").unwrap(), UNIX_EPOCH + Duration::from_secs(1_440_938_160));
        for bad in ["", "2015-08-30T12:36:00Z", "20151330T123600Z", "20150830T123600", "2015083OT123600Z"] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
    }

    // --- Rejections, with requests signed by the test signer --------------------------

    fn now() -> SystemTime {
        parse_amz_date("20250101T120000Z").unwrap()
    }

    struct Signed {
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Signed {
        fn parts(&self) -> RequestParts<'_> {
            RequestParts { method: "POST", path: &self.path, query: None, headers: &self.headers, body: &self.body }
        }
    }

    fn signed_by(signer: &TestSigner, at: SystemTime) -> Signed {
        let path = format!("/model/{MODEL_ID}/invoke");
        let body = br#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":16,"messages":[]}"#.to_vec();
        let mut headers = owned(&[
            ("host", "bedrock-runtime.us-east-1.amazonaws.com"),
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ]);
        signer.sign("POST", &path, &mut headers, &body, at);
        Signed { path, headers, body }
    }

    fn verifier() -> Verifier {
        Verifier::new(Credentials::fake(), REGION)
    }

    fn signer() -> TestSigner {
        TestSigner::new(Credentials::fake(), REGION)
    }

    fn rejected(verifier: &Verifier, request: &Signed) -> Rejection {
        verifier.verify(&request.parts(), now()).expect_err("should be rejected")
    }

    fn assert_error(rejection: &Rejection, error_type: &str, message_part: &str) {
        assert_eq!(rejection.error.status, 403, "{rejection:?}");
        assert_eq!(rejection.error.error_type, error_type, "{rejection:?}");
        assert!(rejection.error.message.contains(message_part), "{rejection:?}");
    }

    fn set_header(headers: &mut [(String, String)], name: &str, value: &str) {
        headers.iter_mut().find(|(k, _)| k == name).unwrap().1 = value.to_owned();
    }

    #[test]
    fn a_signed_request_is_accepted() {
        let request = signed_by(&signer(), now());
        let accepted = verifier().verify(&request.parts(), now()).unwrap();
        assert_eq!(accepted.access_key_id, ACCESS_KEY_ID);
        assert_eq!(accepted.signed_headers, ["accept", "content-type", "host", "x-amz-date"]);
        assert!(!accepted.session_token);
    }

    #[test]
    fn a_tampered_body_is_rejected() {
        let mut request = signed_by(&signer(), now());
        request.body[20] ^= 1;
        let rejection = rejected(&verifier(), &request);
        assert_error(&rejection, "InvalidSignatureException", "does not match the signature you provided");
        assert!(rejection.canonical_request.unwrap().starts_with("POST\n/model/us.anthropic."));
    }

    #[test]
    fn a_tampered_signed_header_is_rejected_an_unsigned_one_is_not() {
        let mut request = signed_by(&signer(), now());
        request.headers.push(("user-agent".to_owned(), "changed after signing".to_owned()));
        assert!(verifier().verify(&request.parts(), now()).is_ok());
        set_header(&mut request.headers, "content-type", "text/plain");
        assert_error(&rejected(&verifier(), &request), "InvalidSignatureException", "does not match");
    }

    #[test]
    fn a_tampered_path_is_rejected() {
        let mut request = signed_by(&signer(), now());
        request.path = request.path.replace(':', "%3A");
        assert_error(&rejected(&verifier(), &request), "InvalidSignatureException", "does not match");
    }

    #[test]
    fn a_wrong_secret_is_rejected() {
        let request = signed_by(&TestSigner::new(Credentials::new(ACCESS_KEY_ID, "not-the-secret"), REGION), now());
        assert_error(&rejected(&verifier(), &request), "InvalidSignatureException", "does not match");
    }

    #[test]
    fn an_unknown_key_is_unrecognized() {
        let request = signed_by(&TestSigner::new(Credentials::new("AKIAUNKNOWN", SECRET_ACCESS_KEY), REGION), now());
        assert_error(&rejected(&verifier(), &request), "UnrecognizedClientException", INVALID_TOKEN_MESSAGE);
    }

    #[test]
    fn a_wrong_region_or_service_is_rejected() {
        let request = signed_by(&TestSigner::new(Credentials::fake(), "eu-west-1"), now());
        let rejection = rejected(&verifier(), &request);
        assert_error(&rejection, "InvalidSignatureException", "Credential should be scoped to a valid region");
        assert!(rejection.error.message.contains("'us-east-1'"), "{rejection:?}");
        let mut wrong_service = signer();
        wrong_service.service = "bedrock-runtime".to_owned();
        let request = signed_by(&wrong_service, now());
        assert_error(&rejected(&verifier(), &request), "InvalidSignatureException", "correct service: 'bedrock'");
    }

    #[test]
    fn missing_authentication_is_rejected() {
        let mut request = signed_by(&signer(), now());
        request.headers.retain(|(k, _)| k != "authorization");
        assert_error(
            &rejected(&verifier(), &request),
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        );
        request.headers.push(("authorization".to_owned(), "Bearer bedrock-api-key-xyz".to_owned()));
        assert_error(&rejected(&verifier(), &request), "IncompleteSignatureException", "AWS4-HMAC-SHA256");
        set_header(
            &mut request.headers,
            "authorization",
            "AWS4-HMAC-SHA256 Credential=AKIA/20250101/us-east-1/bedrock/aws4_request",
        );
        assert_error(&rejected(&verifier(), &request), "IncompleteSignatureException", "'Signature' parameter");
    }

    #[test]
    fn a_skewed_date_is_rejected() {
        let six_minutes = Duration::from_secs(6 * 60);
        let old = signed_by(&signer(), now() - six_minutes);
        assert_error(
            &rejected(&verifier(), &old),
            "InvalidSignatureException",
            "Signature expired: 20250101T115400Z is now earlier than 20250101T115500Z (20250101T120000Z - 5 min.)",
        );
        let early = signed_by(&signer(), now() + six_minutes);
        assert_error(&rejected(&verifier(), &early), "InvalidSignatureException", "Signature not yet current");
        let slightly_off = signed_by(&signer(), now() - Duration::from_secs(4 * 60));
        assert!(verifier().verify(&slightly_off.parts(), now()).is_ok());
    }

    #[test]
    fn session_tokens_must_match_and_be_signed() {
        let temporary = Verifier::new(Credentials::fake_temporary(), REGION);
        let with_token = signed_by(&TestSigner::new(Credentials::fake_temporary(), REGION), now());
        let accepted = temporary.verify(&with_token.parts(), now()).unwrap();
        assert!(accepted.session_token);
        assert!(accepted.signed_headers.contains(&"x-amz-security-token".to_owned()));

        let wrong = Credentials::fake_temporary().with_session_token("expired-or-forged");
        let request = signed_by(&TestSigner::new(wrong, REGION), now());
        assert_error(&rejected(&temporary, &request), "UnrecognizedClientException", INVALID_TOKEN_MESSAGE);

        let without = Credentials::new(TEMPORARY_ACCESS_KEY_ID, SECRET_ACCESS_KEY);
        let mut request = signed_by(&TestSigner::new(without, REGION), now());
        assert_error(&rejected(&temporary, &request), "UnrecognizedClientException", INVALID_TOKEN_MESSAGE);
        request.headers.push(("x-amz-security-token".to_owned(), SESSION_TOKEN.to_owned()));
        assert_error(&rejected(&temporary, &request), "InvalidSignatureException", "'X-Amz-Security-Token' must be");

        // A token sent to a fake that expects none is as unknown as a wrong one.
        assert_error(&rejected(&verifier(), &with_token), "UnrecognizedClientException", INVALID_TOKEN_MESSAGE);
    }

    #[test]
    fn a_signed_content_hash_must_be_the_body_hash() {
        let sign_with_hash = |hash: &str| {
            let path = format!("/model/{MODEL_ID}/converse");
            let body = br#"{"messages":[]}"#.to_vec();
            let mut headers =
                owned(&[("host", "bedrock-runtime.us-east-1.amazonaws.com"), ("x-amz-content-sha256", hash)]);
            signer().sign("POST", &path, &mut headers, &body, now());
            Signed { path, headers, body }
        };
        let good = sign_with_hash(&hex::encode(Sha256::digest(br#"{"messages":[]}"#)));
        assert!(verifier().verify(&good.parts(), now()).is_ok());
        let bad = sign_with_hash(EMPTY_HASH);
        assert_error(&rejected(&verifier(), &bad), "InvalidSignatureException", "x-amz-content-sha256");
    }

    #[test]
    fn host_and_date_must_be_signed() {
        let mut request = signed_by(&signer(), now());
        let authorization = request.headers.iter().find(|(k, _)| k == "authorization").unwrap().1.clone();
        let unsigned_host = authorization.replace("content-type;host;x-amz-date", "content-type;x-amz-date");
        set_header(&mut request.headers, "authorization", &unsigned_host);
        assert_error(&rejected(&verifier(), &request), "IncompleteSignatureException", "'Host'");
    }

    // --- Frames, read back by AWS's own decoder ----------------------------------------

    fn decode_all(bytes: &[u8]) -> Vec<aws_smithy_types::event_stream::Message> {
        let mut buffer = bytes;
        let mut messages = Vec::new();
        while !buffer.is_empty() {
            messages.push(aws_smithy_eventstream::frame::read_message_from(&mut buffer).unwrap());
        }
        messages
    }

    fn string_header(message: &aws_smithy_types::event_stream::Message, name: &str) -> String {
        let header = message.headers().iter().find(|h| h.name().as_str() == name).unwrap();
        header.value().as_string().unwrap().as_str().to_owned()
    }

    #[test]
    fn an_invoke_chunk_wraps_the_event_in_base64() {
        let event = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}});
        let messages = decode_all(&invoke_chunk(&event));
        assert_eq!(messages.len(), 1);
        assert_eq!(string_header(&messages[0], ":message-type"), "event");
        assert_eq!(string_header(&messages[0], ":event-type"), "chunk");
        assert_eq!(string_header(&messages[0], ":content-type"), "application/json");
        let payload: Value = serde_json::from_slice(messages[0].payload()).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(payload["bytes"].as_str().unwrap()).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), event);
        assert!(!payload["p"].as_str().unwrap().is_empty());
    }

    #[test]
    fn exceptions_are_lowercase_first_and_typed_headers_decode() {
        let messages = decode_all(&exception("ThrottlingException", "Too many tokens"));
        assert_eq!(string_header(&messages[0], ":message-type"), "exception");
        assert_eq!(string_header(&messages[0], ":exception-type"), "throttlingException");
        assert_eq!(
            serde_json::from_slice::<Value>(messages[0].payload()).unwrap(),
            json!({"message": "Too many tokens"})
        );

        let typed = frame_typed(
            &[
                ("t", FrameHeaderValue::Bool(true)),
                ("f", FrameHeaderValue::Bool(false)),
                ("b", FrameHeaderValue::Byte(-3)),
                ("s", FrameHeaderValue::Int16(-300)),
                ("i", FrameHeaderValue::Int32(70_000)),
                ("l", FrameHeaderValue::Int64(-5_000_000_000)),
                ("y", FrameHeaderValue::Bytes(vec![0, 1, 2])),
                ("ts", FrameHeaderValue::Timestamp(1_440_938_160_000)),
                ("u", FrameHeaderValue::Uuid([7; 16])),
            ],
            b"{}",
        );
        let message = &decode_all(&typed)[0];
        let value = |name: &str| message.headers().iter().find(|h| h.name().as_str() == name).unwrap().value().clone();
        assert_eq!(value("t").as_bool(), Ok(true));
        assert_eq!(value("f").as_bool(), Ok(false));
        assert_eq!(value("b").as_byte(), Ok(-3));
        assert_eq!(value("s").as_int16(), Ok(-300));
        assert_eq!(value("i").as_int32(), Ok(70_000));
        assert_eq!(value("l").as_int64(), Ok(-5_000_000_000));
        assert_eq!(value("y").as_byte_array().unwrap().as_ref(), [0, 1, 2]);
        assert_eq!(value("ts").as_timestamp().unwrap().to_millis().unwrap(), 1_440_938_160_000);
        assert_eq!(value("u").as_uuid(), Ok(u128::from_be_bytes([7; 16])));
    }

    #[test]
    fn corrupted_frames_fail_their_checks() {
        let good = converse_event("contentBlockDelta", &json!({"contentBlockIndex": 0, "delta": {"text": "x"}}));
        let error = aws_smithy_eventstream::frame::read_message_from(&mut &corrupt_message_crc(&good)[..]).unwrap_err();
        assert!(error.to_string().to_lowercase().contains("message checksum"), "{error}");
        let error = aws_smithy_eventstream::frame::read_message_from(&mut &corrupt_prelude_crc(&good)[..]).unwrap_err();
        assert!(error.to_string().to_lowercase().contains("prelude checksum"), "{error}");
        assert_eq!(decode_all(&error_frame("ThrottlingException", "slow down")).len(), 1);
    }

    #[test]
    fn the_canned_streams_decode_whole() {
        let invoke = decode_all(&claude_stream_frames().concat());
        assert_eq!(invoke.len(), claude_stream_events().len());
        let converse = decode_all(&converse_stream_frames().concat());
        let names: Vec<String> = converse.iter().map(|m| string_header(m, ":event-type")).collect();
        let expected: Vec<&str> = converse_stream_events().iter().map(|(name, _)| *name).collect();
        assert_eq!(names, expected);
        let metadata: Value = serde_json::from_slice(converse.last().unwrap().payload()).unwrap();
        assert_eq!(metadata["usage"]["cacheReadInputTokens"], 1024);
        assert_eq!(metadata["usage"]["cacheWriteInputTokens"], 12);
        assert!(metadata["p"].is_string());
        assert_eq!(split_bytes(&converse_stream_frames(), 7).concat(), converse_stream_frames().concat());
    }
}
