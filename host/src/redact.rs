//! The one redaction of connection strings and URLs, for every place one is
//! shown: a log line, an error message, a status listing. It knows the three
//! shapes a connection string takes here — a URL (`redis://`, `rediss://`,
//! `postgres://`, `https://`, …), a libpq key/value string
//! (`host=h user=u password=secret`), and anything else, shown as is — and
//! hides, in each, what can hold a secret:
//!
//! - a URL's user information (user and password) up to the last `@` before
//!   its host, so a password holding `@` is hidden whole;
//! - the value of every query parameter or key/value pair whose name says it
//!   is a secret ([`is_secret_name`]: `password`, `pass`, `secret`, `token`,
//!   `key`, `api-key`, `sig`, `signature`, …, case-insensitive); the name stays.
//!
//! An endpoint (where model calls go) is shown by [`redacted_endpoint`],
//! which hides every query value, whatever its name: a service may take its
//! key under any name (`code`, `sv`/`sig`, …), and an endpoint's query is the
//! operator's, set once, so its values are never logged.
//!
//! It works on the text, without parsing the URL first: a malformed URL (the
//! very one an error message is about) is redacted too, and when the text
//! cannot be read for sure, more is hidden rather than less. It depends on
//! nothing else in the crate, so any layer may use it.

/// What replaces a URL's user information.
const HIDDEN_USERINFO: &str = "<credentials>";

/// What replaces a secret value.
const HIDDEN_VALUE: &str = "<redacted>";

/// Names whose value is hidden when the whole name is one of these.
const SECRET_NAMES: [&str; 3] = ["pass", "key", "sig"];

/// Names whose value is hidden when the name ends with one of these (`-`
/// read as `_`): `password`, `sslpassword`, `api_key`, `x_api_key`,
/// `access_token`, `client_secret`, `x_amz_signature`, …
const SECRET_SUFFIXES: [&str; 7] = ["password", "passwd", "secret", "token", "signature", "_key", "apikey"];

/// `text` with every secret it holds hidden (see the module's doc).
pub fn redacted(text: &str) -> String {
    match text.find("://") {
        Some(scheme_end) => redacted_url(text, scheme_end + "://".len(), QueryValues::SecretNamesHidden),
        None if text.contains('=') => redacted_key_values(text),
        None => text.to_owned(),
    }
}

/// An endpoint URL with its user information and every query value hidden
/// (the names stay: `?api-version=<redacted>`).
pub fn redacted_endpoint(url: &str) -> String {
    match url.find("://") {
        Some(scheme_end) => redacted_url(url, scheme_end + "://".len(), QueryValues::AllHidden),
        None => redacted(url),
    }
}

/// Which query values a URL's redaction hides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueryValues {
    /// Those whose name says they are a secret ([`is_secret_name`]).
    SecretNamesHidden,
    /// Every one.
    AllHidden,
}

/// Whether a query parameter or key/value pair named `name` holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let name = name.trim().to_ascii_lowercase().replace('-', "_");
    SECRET_NAMES.contains(&name.as_str()) || SECRET_SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
}

/// A URL whose authority starts at `authority`: its user information hidden,
/// then its query's values as `values` says. An `@` still shown after that
/// is either in the path, a fragment or a value not hidden, or ends user
/// information whose password holds an unescaped `/`, `?` or `#` (a URL no
/// driver reads, but the very one its error message shows): it is read as
/// the latter, and everything up to it hidden.
fn redacted_url(url: &str, authority: usize, values: QueryValues) -> String {
    let shown = redacted_parts(url, authority, values);
    match shown[authority..].rfind('@') {
        Some(at) => format!("{}{HIDDEN_USERINFO}{}", &url[..authority], &shown[authority + at..]),
        None => shown,
    }
}

/// [`redacted_url`] as the URL reads: the authority ends at the first `/`,
/// `?` or `#`, and its last `@` ends the user information (a password may
/// hold `@`: `user:p@ss@host`).
fn redacted_parts(url: &str, authority: usize, values: QueryValues) -> String {
    let (head, rest) = url.split_at(authority);
    let mut shown = String::with_capacity(url.len());
    shown.push_str(head);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let after_userinfo = match rest[..authority_end].rfind('@') {
        Some(at) => {
            shown.push_str(HIDDEN_USERINFO);
            &rest[at..]
        }
        None => rest,
    };
    match after_userinfo.split_once('?') {
        Some((before_query, query_and_fragment)) => {
            shown.push_str(before_query);
            shown.push('?');
            let (query, fragment) = match query_and_fragment.split_once('#') {
                Some((query, fragment)) => (query, Some(fragment)),
                None => (query_and_fragment, None),
            };
            shown.push_str(&redacted_query(query, values));
            if let Some(fragment) = fragment {
                shown.push('#');
                shown.push_str(fragment);
            }
        }
        None => shown.push_str(after_userinfo),
    }
    shown
}

/// A query (`a=1&password=x`) with the values `values` says hidden.
fn redacted_query(query: &str, values: QueryValues) -> String {
    let hidden = |name: &str| values == QueryValues::AllHidden || is_secret_name(&percent_decoded(name));
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if hidden(name) => format!("{name}={HIDDEN_VALUE}"),
            Some(_) | None => pair.to_owned(),
        })
        .collect();
    pairs.join("&")
}

/// `name` with `%XX` escapes decoded (`api%5Fkey` is `api_key`); an escape
/// that is not one is kept as written.
fn percent_decoded(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = bytes
            .get(index + 1..index + 3)
            .filter(|_| bytes[index] == b'%')
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                index += 3;
            }
            None => {
                decoded.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// A libpq key/value string: `key = value` pairs separated by white space, a
/// value either bare (up to white space) or in single quotes (`\'` and `\\`
/// escaped inside). Each secret name's value is hidden; from the first point
/// the string stops reading as pairs, the rest is hidden (it may be a value).
fn redacted_key_values(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        shown.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        if rest.is_empty() {
            return shown;
        }
        let Some(pair) = key_value(rest) else {
            shown.push_str(HIDDEN_VALUE);
            return shown;
        };
        let written = &rest[..pair.len];
        if is_secret_name(pair.key) {
            shown.push_str(&written[..pair.value_start]);
            shown.push_str(HIDDEN_VALUE);
        } else {
            shown.push_str(written);
        }
        rest = &rest[pair.len..];
    }
}

/// One `key = value` pair at the start of a key/value string.
struct KeyValue<'a> {
    key: &'a str,
    /// Where the value (its opening quote, if quoted) starts.
    value_start: usize,
    /// The pair's length, its value's closing quote included.
    len: usize,
}

/// Reads the pair `text` starts with (no leading white space), or `None` when
/// it is not one (no `=`, an unclosed quote).
fn key_value(text: &str) -> Option<KeyValue<'_>> {
    let key_end = text.find(|c: char| c == '=' || c.is_whitespace())?;
    let key = &text[..key_end];
    let after_key = &text[key_end..];
    let at_equals = after_key.trim_start();
    let after_equals = at_equals.strip_prefix('=')?;
    let at_value = after_equals.trim_start();
    let value_start = text.len() - at_value.len();
    let value_len = match at_value.strip_prefix('\'') {
        Some(quoted) => 1 + quoted_len(quoted)?,
        None => at_value.find(char::is_whitespace).unwrap_or(at_value.len()),
    };
    (!key.is_empty()).then_some(KeyValue { key, value_start, len: value_start + value_len })
}

/// The length of a quoted value after its opening quote, the closing quote
/// included; `None` when it is not closed.
fn quoted_len(quoted: &str) -> Option<usize> {
    let mut escaped = false;
    for (index, c) in quoted.char_indices() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '\'') => return Some(index + 1),
            (false, _) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hides(text: &str, secrets: &[&str], expected: &str) {
        let shown = redacted(text);
        assert_eq!(shown, expected, "{text}");
        for secret in secrets {
            assert!(!shown.contains(secret), "{secret} shown in {shown}");
        }
    }

    #[test]
    fn a_redis_url_hides_its_password_escaped_or_holding_an_at_sign() {
        hides("redis://:p%40ss@h:6379/0", &["p%40ss", "ss@"], "redis://<credentials>@h:6379/0");
        hides("redis://user:p@ss@h/0", &["p@ss", "user"], "redis://<credentials>@h/0");
        hides(
            "rediss://default:s3cret@cache.internal:6380/2",
            &["s3cret"],
            "rediss://<credentials>@cache.internal:6380/2",
        );
        hides("redis://h:6379/0?pass=x1y2", &["x1y2"], "redis://h:6379/0?pass=<redacted>");
        hides("redis://h:6379/0?pass=x1@y2", &["x1", "y2"], "redis://h:6379/0?pass=<redacted>");
        hides(
            "redis+unix:///run/redis.sock?db=1&pass=x1y2",
            &["x1y2"],
            "redis+unix:///run/redis.sock?db=1&pass=<redacted>",
        );
        hides("redis://127.0.0.1:6379", &[], "redis://127.0.0.1:6379");
    }

    #[test]
    fn a_postgres_url_hides_its_password_in_userinfo_and_query() {
        hides("postgres://u:pw@h/db", &["pw"], "postgres://<credentials>@h/db");
        hides(
            "postgresql://h/db?password=x1y2&sslmode=require",
            &["x1y2"],
            "postgresql://h/db?password=<redacted>&sslmode=require",
        );
        hides(
            "postgresql://h/db?user=u&PassWord=x1y2&sslpassword=k3y",
            &["x1y2", "k3y"],
            "postgresql://h/db?user=u&PassWord=<redacted>&sslpassword=<redacted>",
        );
    }

    #[test]
    fn a_libpq_key_value_string_hides_its_password_quoted_or_bare() {
        hides("host=h user=u password=secret dbname=d", &["secret"], "host=h user=u password=<redacted> dbname=d");
        hides("password='a b c' host=h", &["a b c", "b c"], "password=<redacted> host=h");
        hides("password = 'it\\'s a b' host = h", &["it\\'s", "a b"], "password = <redacted> host = h");
        hides("host=h port=5432", &[], "host=h port=5432");
    }

    #[test]
    fn a_key_value_string_that_stops_reading_as_pairs_hides_the_rest() {
        hides("host=h password='unclosed secret", &["unclosed", "secret"], "host=h <redacted>");
        hides("host=h stray password=x1y2", &["x1y2"], "host=h <redacted>");
    }

    #[test]
    fn an_endpoint_keeps_its_query_names_and_hides_secret_values() {
        hides("https://h/p?api-version=1&api-key=K3Y", &["K3Y"], "https://h/p?api-version=1&api-key=<redacted>");
        hides(
            "https://h/p?API_KEY=a&token=b&secret=c&sig=d&signature=e&key=f&x-amz-security-token=g#frag",
            &["=a", "=b", "=c", "=d", "=e", "=f", "=g"],
            "https://h/p?API_KEY=<redacted>&token=<redacted>&secret=<redacted>&sig=<redacted>&signature=<redacted>\
             &key=<redacted>&x-amz-security-token=<redacted>#frag",
        );
        hides("https://h/p?api%2Dkey=K3Y", &["K3Y"], "https://h/p?api%2Dkey=<redacted>");
        hides("https://h/openai?api-version=2024-10-21", &[], "https://h/openai?api-version=2024-10-21");
    }

    #[test]
    fn an_endpoint_shows_no_query_value_whatever_its_name() {
        assert_eq!(
            redacted_endpoint("https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21&code=C0DE"),
            "https://x.openai.azure.com/openai/deployments/d?api-version=<redacted>&code=<redacted>"
        );
        assert_eq!(redacted_endpoint("https://u:pw@h/v1?flag"), "https://<credentials>@h/v1?flag");
        assert_eq!(redacted_endpoint("https://h/v1"), "https://h/v1");
        assert_eq!(redacted_endpoint("not a url password=x"), "<redacted>", "no pairs: hidden whole");
    }

    #[test]
    fn a_password_holding_a_slash_or_question_mark_is_hidden_whole() {
        hides("redis://:pa/ss?w@h:6379/0", &["pa/ss", "ss?w"], "redis://<credentials>@h:6379/0");
        hides("postgres://u:p#w@h/db", &["p#w"], "postgres://<credentials>@h/db");
        hides("https://h/users/@me?key=a@b", &["a@b", "=a"], "https://<credentials>@me?key=<redacted>");
    }

    #[test]
    fn text_that_is_no_connection_string_is_shown_as_is() {
        hides("/var/lib/weir/ledger.db", &[], "/var/lib/weir/ledger.db");
        hides("", &[], "");
    }

    #[test]
    fn secret_names_are_recognised_whatever_their_case_and_separator() {
        for name in ["password", "PASS", "Secret", "token", "key", "api-key", "api_key", "Api-Key", "sig", "signature"]
        {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["host", "user", "dbname", "sslmode", "api-version", "keys", "db", "passage"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
