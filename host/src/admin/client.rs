//! `weir admin ...`: the admin API's client. It speaks the same HTTP API a
//! console or a script does, to a running gateway (`--url`, else
//! `WEIR_ADMIN_URL`), with an admin token (`--token`, else
//! `WEIR_ADMIN_TOKEN`).

use serde_json::Value;

/// Why a request could not be made (an answer with an error status is not
/// one: it comes back with its status).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the gateway at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the gateway's answer is not JSON (status {status})")]
    NotJson { status: u16 },
}

/// One request: `method` on `url` + `path`, with `body` as JSON for a POST.
/// Answers the status and the JSON body.
pub async fn request(
    url: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<(u16, Value), ClientError> {
    let address = format!("{}{path}", url.trim_end_matches('/'));
    let unreachable = |reason: String| ClientError::Unreachable { url: url.to_owned(), reason };
    let method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
        .map_err(|error| unreachable(format!("`{method}` is not an HTTP method: {error}")))?;
    let client = reqwest::Client::builder().build().map_err(|error| unreachable(error.to_string()))?;
    let mut request = client.request(method.clone(), &address).bearer_auth(token);
    if method == reqwest::Method::POST {
        let text = body.map_or_else(|| "{}".to_owned(), Value::to_string);
        request = request.header("content-type", "application/json").body(text);
    }
    let response = request.send().await.map_err(|error| unreachable(error.to_string()))?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.map_err(|error| unreachable(error.to_string()))?;
    let json = serde_json::from_slice(&bytes).map_err(|_| ClientError::NotJson { status })?;
    Ok((status, json))
}
