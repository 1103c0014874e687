//! The answers a fleet shares, in the `[fleet]` Redis (one server or a
//! cluster: each answer is one key, hashed whole to its slot): one value per key,
//! LZ4-compressed, written with `SET … EX ttl` so Redis itself bounds how long
//! (and so how much) it keeps. Redis here is an accelerator, never a
//! dependency: every failure (unreachable, slow, a value that does not
//! decode) is a miss for the call, a log line and a metric.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::codec::{self, StoredAnswer, StoredRanking, StoredVector};
use super::key::CacheKey;
use crate::fleet::{Connection, RedisTarget, Timeouts};

/// The longest a lookup or a store may take (connecting included): a hit
/// that waits longer than this is not worth waiting for.
const OPERATION_TIMEOUT: Duration = Duration::from_millis(500);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(400);
/// After a failure, calls skip Redis this long (one log line per outage).
const RETRY_AFTER_OUTAGE: Duration = Duration::from_secs(1);

/// Why the shared store gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("redis did not answer within {OPERATION_TIMEOUT:?}")]
    Timeout,
    #[error("redis was out moments ago; not asked")]
    Resting,
    #[error("the stored value does not decompress: {0}")]
    Compression(#[from] lz4_flex::block::DecompressError),
    #[error(transparent)]
    Decode(#[from] codec::DecodeError),
}

/// The fleet's shared answers.
pub struct SharedAnswers {
    target: RedisTarget,
    connection: tokio::sync::OnceCell<Connection>,
    prefix: String,
    retry_at: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for SharedAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedAnswers").field("redis", &self.target.shown()).field("prefix", &self.prefix).finish()
    }
}

impl SharedAnswers {
    /// Answers in the Redis at `target`, under `{prefix}:answer:`.
    /// Connects on first use.
    pub fn new(target: RedisTarget, prefix: &str) -> Self {
        Self { target, connection: tokio::sync::OnceCell::new(), prefix: prefix.to_owned(), retry_at: Mutex::new(None) }
    }

    fn redis_key(&self, key: &CacheKey) -> String {
        format!("{}:answer:{}", self.prefix, key.hex())
    }

    /// The answer under `key`: `Ok(None)` when there is none.
    pub async fn get(&self, key: &CacheKey) -> Result<Option<StoredAnswer>, SharedError> {
        let Some(json) = self.get_bytes(key).await? else { return Ok(None) };
        Ok(Some(codec::decode(&json)?))
    }

    /// The vector under `key`: `Ok(None)` when there is none.
    pub async fn get_vector(&self, key: &CacheKey) -> Result<Option<StoredVector>, SharedError> {
        let Some(json) = self.get_bytes(key).await? else { return Ok(None) };
        Ok(Some(codec::decode_vector(&json)?))
    }

    /// The ranking under `key`: `Ok(None)` when there is none.
    pub async fn get_ranking(&self, key: &CacheKey) -> Result<Option<StoredRanking>, SharedError> {
        let Some(json) = self.get_bytes(key).await? else { return Ok(None) };
        Ok(Some(codec::decode_ranking(&json)?))
    }

    /// The decompressed value under `key`.
    async fn get_bytes(&self, key: &CacheKey) -> Result<Option<Vec<u8>>, SharedError> {
        let name = self.redis_key(key);
        let bytes: Option<Vec<u8>> = self
            .run(|mut connection| async move { redis::cmd("GET").arg(name).query_async(&mut connection).await })
            .await?;
        let Some(bytes) = bytes else { return Ok(None) };
        Ok(Some(lz4_flex::block::decompress_size_prepended(&bytes)?))
    }

    /// Stores `json` (an encoded answer) under `key` for `ttl`.
    pub async fn set(&self, key: &CacheKey, json: &[u8], ttl: Duration) -> Result<(), SharedError> {
        let name = self.redis_key(key);
        let value = lz4_flex::block::compress_prepend_size(json);
        let seconds = ttl.as_secs().max(1);
        self.run(|mut connection| async move {
            redis::cmd("SET").arg(name).arg(value).arg("EX").arg(seconds).query_async::<()>(&mut connection).await
        })
        .await
    }

    /// Runs one command on the shared connection, bounded by
    /// [`OPERATION_TIMEOUT`]; skipped while Redis rests after a failure.
    async fn run<T, F>(&self, command: impl FnOnce(Connection) -> F) -> Result<T, SharedError>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        if self.retry_at.lock().unwrap_or_else(PoisonError::into_inner).is_some_and(|at| Instant::now() < at) {
            return Err(SharedError::Resting);
        }
        let operation = async {
            let connection = self.connection().await?;
            command(connection).await
        };
        let result = match tokio::time::timeout(OPERATION_TIMEOUT, operation).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => Err(SharedError::Redis(error)),
            Err(_) => Err(SharedError::Timeout),
        };
        let mut retry_at = self.retry_at.lock().unwrap_or_else(PoisonError::into_inner);
        match &result {
            Ok(_) if retry_at.take().is_some() => {
                tracing::warn!(redis = %self.target.shown(), "the answer cache's Redis is reachable again");
            }
            Ok(_) => {}
            Err(error) => {
                if retry_at.replace(Instant::now() + RETRY_AFTER_OUTAGE).is_none() {
                    tracing::error!(redis = %self.target.shown(), %error, "the answer cache's Redis failed: calls miss it for now");
                }
            }
        }
        result
    }

    async fn connection(&self) -> redis::RedisResult<Connection> {
        let timeouts = Timeouts { connect: CONNECT_TIMEOUT, response: OPERATION_TIMEOUT };
        self.connection.get_or_try_init(|| self.target.connect(timeouts)).await.cloned()
    }
}
