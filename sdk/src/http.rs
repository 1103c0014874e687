//! Header lookup and retry hints. The component has no clock, so an absolute
//! instant (an HTTP date) is returned as Unix milliseconds for the host to compare.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::types::{Headers, RetryHint};

/// The first value of a header, compared case-insensitively.
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.trim())
}

/// The retry hint of a failed response: `retry-after-ms`, else `retry-after` in
/// seconds or as an HTTP date. Unparseable values are ignored, not guessed.
pub fn retry_hint(headers: &Headers) -> Option<RetryHint> {
    if let Some(ms) = header(headers, "retry-after-ms").and_then(parse_decimal_ms) {
        return Some(RetryHint::DelayMs(ms));
    }
    let value = header(headers, "retry-after")?;
    if let Some(ms) = parse_seconds_ms(value) {
        return Some(RetryHint::DelayMs(ms));
    }
    http_date_unix_ms(value).map(RetryHint::AtUnixMs)
}

fn parse_decimal_ms(value: &str) -> Option<u64> {
    let ms: f64 = value.parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then_some(ms.round() as u64)
}

fn parse_seconds_ms(value: &str) -> Option<u64> {
    let seconds: f64 = value.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then_some((seconds * 1000.0).round() as u64)
}

/// A Go-style duration as OpenAI's `x-ratelimit-reset-*` headers send it
/// (`12ms`, `1s`, `6m0s`, `1h2m3.5s`), in milliseconds.
pub fn go_duration_ms(value: &str) -> Option<u64> {
    let mut total_ms = 0.0_f64;
    let mut rest = value.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "us" | "µs" => 0.001,
            "ns" => 0.000_001,
            _ => return None,
        };
        total_ms += number * factor;
        rest = &rest[unit_len..];
    }
    Some(total_ms.ceil() as u64)
}

/// An HTTP date in any of RFC 9110's three forms — IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`)
/// and asctime (`Sun Nov  6 08:49:37 1994`) — as Unix milliseconds.
pub fn http_date_unix_ms(value: &str) -> Option<u64> {
    unix_ms(httpdate::parse_http_date(value.trim()).ok()?)
}

/// An RFC 3339 UTC instant (`2026-01-01T12:00:30Z`, fractional seconds allowed) as
/// Unix milliseconds, as Anthropic's `*-reset` headers send it.
pub fn rfc3339_unix_ms(value: &str) -> Option<u64> {
    unix_ms(humantime::parse_rfc3339(value.trim()).ok()?)
}

/// Both parsers only add a duration to the epoch: no clock is read, so a
/// component importing no `wasi:clocks` can use them.
fn unix_ms(at: SystemTime) -> Option<u64> {
    u64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn retry_after_seconds_and_ms() {
        assert_eq!(retry_hint(&headers(&[("Retry-After", "12")])), Some(RetryHint::DelayMs(12_000)));
        assert_eq!(
            retry_hint(&headers(&[("retry-after", "1"), ("retry-after-ms", "250.4")])),
            Some(RetryHint::DelayMs(250))
        );
        assert_eq!(retry_hint(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_hint(&headers(&[])), None);
    }

    #[test]
    fn retry_after_http_date_in_all_three_forms() {
        for form in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            let hint = retry_hint(&headers(&[("retry-after", form)]));
            assert_eq!(hint, Some(RetryHint::AtUnixMs(784_111_777_000)), "{form}");
        }
        assert_eq!(http_date_unix_ms("Sun, 06 Nov 1994 08:49:37 CET"), None);
        assert_eq!(http_date_unix_ms("Sun, 31 Nov 1994 08:49:37 GMT"), None, "no 31 November");
    }

    #[test]
    fn rfc3339_reset() {
        assert_eq!(rfc3339_unix_ms("1994-11-06T08:49:37Z"), Some(784_111_777_000));
        assert_eq!(rfc3339_unix_ms("1994-11-06T08:49:37.5Z"), Some(784_111_777_500));
        assert_eq!(rfc3339_unix_ms("yesterday"), None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration_ms("12ms"), Some(12));
        assert_eq!(go_duration_ms("1s"), Some(1_000));
        assert_eq!(go_duration_ms("6m0s"), Some(360_000));
        assert_eq!(go_duration_ms("1h2m3.5s"), Some(3_723_500));
        assert_eq!(go_duration_ms("forever"), None);
        assert_eq!(go_duration_ms(""), None);
    }
}
