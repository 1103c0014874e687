//! The `Host` a keyless gateway answers when it is reached over loopback: a
//! loopback address or `localhost`, nothing else.
//!
//! A page on any site can have its own name rebound to 127.0.0.1 (DNS
//! rebinding); the browser then sends the page's requests to the local gateway
//! as same-origin ones, with the page's name as `Host`. POSTs were already
//! refused (a cross-site page cannot send `application/json` without a
//! preflight, and a foreign `Origin` is refused), but reads were not: the
//! page could read `/v1/usage`, `/metrics`, `/v1/providers`. Only a client on
//! this machine that names the loopback itself is answered. A gateway with
//! keys is not concerned: the page holds no key.

use std::net::IpAddr;

use axum::http::header::HOST;
use axum::http::request::Parts;

/// Whether the request names the loopback in its `Host` and, for an
/// absolute-form target, in its authority. A request without a `Host`
/// (HTTP/1.0, a hand-written client) is not a browser's: it passes.
pub(super) fn names_loopback(head: &Parts) -> bool {
    let host = head.headers.get(HOST).map(|value| value.to_str().is_ok_and(is_loopback_authority));
    let target = head.uri.authority().map(|authority| is_loopback_authority(authority.as_str()));
    host.unwrap_or(true) && target.unwrap_or(true)
}

/// `host[:port]` where the host is `localhost` or a loopback address
/// (127.0.0.0/8, `[::1]`).
fn is_loopback_authority(authority: &str) -> bool {
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((address, rest)) => (address, rest.strip_prefix(':').map_or((!rest.is_empty()).then_some(rest), Some)),
            None => return false,
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port_ok = port.is_none_or(|port| port.bytes().all(|byte| byte.is_ascii_digit()));
    let host_ok = host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|address| address.to_canonical().is_loopback());
    port_ok && host_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_pass_with_or_without_a_port() {
        for good in
            ["localhost", "LocalHost:8080", "127.0.0.1", "127.0.0.1:4000", "127.8.9.10:1", "[::1]", "[::1]:4000"]
        {
            assert!(is_loopback_authority(good), "{good}");
        }
    }

    #[test]
    fn any_other_name_or_address_is_refused() {
        for bad in [
            "evil.example",
            "evil.example:4000",
            "localhost.evil.example",
            "evil.localhost",
            "10.0.0.1:4000",
            "0.0.0.0",
            "[::2]:4000",
            "[::1]x",
            "[::1",
            "127.0.0.1:80a",
            "127.0.0.1:4000:1",
            "",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn the_host_header_and_an_absolute_target_must_both_name_the_loopback() {
        let head = |uri: &str, host: Option<&str>| {
            let mut builder = axum::http::Request::get(uri);
            if let Some(host) = host {
                builder = builder.header(HOST, host);
            }
            builder.body(()).unwrap().into_parts().0
        };
        assert!(names_loopback(&head("/v1/usage", Some("127.0.0.1:4000"))));
        assert!(names_loopback(&head("/v1/usage", None)), "no Host: not a browser");
        assert!(!names_loopback(&head("/v1/usage", Some("evil.example"))));
        assert!(!names_loopback(&head("http://evil.example/v1/usage", Some("localhost"))));
        assert!(names_loopback(&head("http://localhost:4000/v1/usage", Some("localhost:4000"))));
    }
}
