//! Provider components that each export one operation, written against the WIT
//! with wit-bindgen directly, so the host's loading and calling of each world
//! version and operation mix is tested without the SDK in between:
//!
//! - `chat-0-1`: `describe` + `chat` of the frozen `weir:provider@0.1.0`, key
//!   `legacy`, with a stateful stream decoder;
//! - `chat-0-4` / `chat-0-5` / `chat-0-6`: one chat (+ native, logprobs) component, key
//!   `versioned`, built against the frozen 0.4.0, 0.5.0 and 0.6.0 (the records 0.5.0
//!   changed cross through the host's conversion in the first; the last has
//!   `decode-native` and no `native-stream`);
//! - `embeddings`: `describe` + `embeddings` of 0.3.0, key `embed-only`;
//! - `rerank`: `describe` + `rerank` of 0.3.0, key `rerank-only`.
//!
//! Each speaks a small JSON dialect of its own (the tests' fakes speak it
//! back) and misbehaves for a few wire ids, named by the constants below.
//! Only the `wasm32` build has content: natively the WIT export names are not
//! valid linker symbols, and nothing native uses this crate.
#![allow(clippy::panic, reason = "panicking on a named wire id is a misbehaviour under test")]

/// The wire id every `serves` answers `false` for.
pub const NOT_SERVED: &str = "not-served";
/// The wire id `embeddings.serves` panics on.
pub const SERVES_PANICS: &str = "panics-in-serves";
/// The wire id `embeddings.max-batch` panics on.
pub const MAX_BATCH_PANICS: &str = "panics-in-max-batch";
/// The wire id `embeddings.max-batch` answers 0 for (a contract violation).
pub const MAX_BATCH_ZERO: &str = "zero-batch";
/// The wire id `embeddings.max-batch` answers 1 for (one input per request).
pub const ONE_PER_REQUEST: &str = "one-per-request";
/// What `embeddings.max-batch` answers for every other wire id.
pub const MAX_BATCH: u32 = 4;
/// The wire id whose `embeddings.encode` returns more headers than the host takes.
pub const TOO_MANY_HEADERS: &str = "too-many-headers";
/// How many headers it returns.
pub const ABSURD_HEADER_COUNT: usize = 100_000;

#[cfg(all(target_arch = "wasm32", feature = "chat-0-1"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod chat_0_1;

#[cfg(all(target_arch = "wasm32", any(feature = "chat-0-4", feature = "chat-0-5", feature = "chat-0-6")))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod chat_versioned;

#[cfg(all(target_arch = "wasm32", feature = "embeddings"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod embeddings;

#[cfg(all(target_arch = "wasm32", feature = "rerank"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod rerank;

/// A JSON body as bytes. Serializing a `serde_json::Value` cannot fail.
#[cfg(target_arch = "wasm32")]
fn body(value: &serde_json::Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// The value of header `name` (case-insensitive).
#[cfg(all(
    target_arch = "wasm32",
    any(
        feature = "chat-0-1",
        feature = "chat-0-4",
        feature = "chat-0-5",
        feature = "chat-0-6",
        feature = "embeddings",
        feature = "rerank"
    )
))]
fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
}

/// What a failed response means, for the 0.3.0 components' `classify`: from the
/// status alone, as the conformance kit's classify checks expect of any dialect.
/// Each component maps it onto its own generated `error-class`.
#[cfg(all(target_arch = "wasm32", any(feature = "embeddings", feature = "rerank")))]
mod failure {
    /// The class a status gives.
    pub enum Class {
        RateLimited,
        Overloaded,
        Transient,
        Authentication,
        NotFound,
        InvalidRequest,
    }

    pub fn class(status: u16) -> Class {
        match status {
            429 => Class::RateLimited,
            529 => Class::Overloaded,
            401 | 403 => Class::Authentication,
            404 => Class::NotFound,
            500..=599 => Class::Transient,
            _ => Class::InvalidRequest,
        }
    }

    /// A `retry-after` hint: a delay or a moment.
    pub enum Hint {
        DelayMs(u64),
        AtUnixMs(u64),
    }

    /// `retry-after` in seconds or as an HTTP date (IMF-fixdate,
    /// `Wed, 21 Oct 2037 07:28:00 GMT`); `None` when absent or unreadable.
    pub fn retry_after(headers: &[(String, String)]) -> Option<Hint> {
        let value = super::header(headers, "retry-after")?.trim();
        if let Ok(seconds) = value.parse::<u64>() {
            return Some(Hint::DelayMs(seconds.saturating_mul(1000)));
        }
        http_date_ms(value).map(Hint::AtUnixMs)
    }

    fn http_date_ms(value: &str) -> Option<u64> {
        let parts: Vec<&str> = value.split_whitespace().collect();
        let [_, day, month, year, time, "GMT"] = parts.as_slice() else { return None };
        const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
        let month = MONTHS.iter().position(|name| name == month)? as i64 + 1;
        let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
        let clock: Vec<i64> = time.split(':').map(|part| part.parse().ok()).collect::<Option<_>>()?;
        let [hours, minutes, seconds] = clock.as_slice() else { return None };
        let seconds = days_from_civil(year, month, day) * 86_400 + hours * 3_600 + minutes * 60 + seconds;
        u64::try_from(seconds).ok().map(|seconds| seconds * 1000)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
    /// `days_from_civil`).
    fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
        let year = if month <= 2 { year - 1 } else { year };
        let era = year.div_euclid(400);
        let year_of_era = year - era * 400;
        let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
        let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
        era * 146_097 + day_of_era - 719_468
    }

    /// The body as text for the log, at most 1 KiB of it.
    pub fn detail(body: &[u8]) -> String {
        String::from_utf8_lossy(&body[..body.len().min(1024)]).into_owned()
    }
}
