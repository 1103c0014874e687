//! The one HTTP client. It owns sockets, TLS, pooling and timeouts, and never
//! retries: the call layer's retry loop is the only one.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use thread_local::ThreadLocal;

use super::credentials::Credential;
use crate::memo::Memo;
use crate::types::{HttpRequest, HttpResponse};

/// Headers the transport owns; a component may not set them.
const TRANSPORT_HEADERS: [&str; 5] = ["host", "content-length", "transfer-encoding", "connection", "upgrade"];

/// Timeouts and limits of the upstream client.
#[derive(Debug, Clone, Copy)]
pub struct TransportSettings {
    pub connect_timeout: Duration,
    /// Longest silence while awaiting or reading a response.
    pub read_timeout: Duration,
    /// Largest response body read into memory.
    pub max_body_bytes: usize,
    /// Longest one upstream attempt may take in all: a whole answer until its
    /// body is read, a stream until its first output. The read timeout bounds a
    /// silence; this bounds an upstream that trickles. Enforced by the call
    /// layer, which alone knows when a stream's first output arrived.
    pub attempt_timeout: Duration,
}

impl Default for TransportSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(600),
            max_body_bytes: 64 << 20,
            attempt_timeout: Duration::from_secs(600),
        }
    }
}

/// Why no response was obtained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The component produced a request that cannot be sent.
    #[error("the provider produced an unsendable request: {0}")]
    InvalidRequest(String),
    #[error("cannot connect to the upstream: {0}")]
    Connect(String),
    /// The endpoint's host name does not exist (the resolver answered that no
    /// such name is known): asking again would get the same answer.
    #[error("the upstream's host name is unknown: {0}")]
    UnknownHost(String),
    /// The upstream's TLS certificate failed verification (untrusted issuer,
    /// wrong name, expired): a second handshake would meet the same certificate.
    #[error("the upstream's TLS certificate was rejected: {0}")]
    Certificate(String),
    #[error("the upstream did not answer in time")]
    Timeout,
    #[error("the connection to the upstream failed: {0}")]
    Io(String),
    #[error("the upstream's response exceeds {limit} bytes")]
    BodyTooLarge { limit: usize },
    /// The request could not be signed (a malformed URL or header for SigV4).
    #[error("cannot sign the request: {0}")]
    Signing(String),
}

/// Sends component-built requests.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    /// The pools of threads that serve their connections alone (see
    /// [`HttpClient::own_pool_on_this_thread`]), one per such thread.
    own_pools: Arc<ThreadLocal<reqwest::Client>>,
    settings: TransportSettings,
    bases: Arc<Bases>,
}

thread_local! {
    /// Whether this thread's calls use a pool of their own (set on the
    /// server's connection lanes). Not derived from `own_pools`: a
    /// `ThreadLocal` hands an exited thread's entry to the next thread given
    /// its id, which did not ask for a pool of its own.
    static OWN_POOL: Cell<bool> = const { Cell::new(false) };
}

impl HttpClient {
    pub fn new(settings: TransportSettings) -> anyhow::Result<Self> {
        Ok(Self { client: build_client(&settings)?, own_pools: Arc::default(), settings, bases: Arc::default() })
    }

    /// Gives the calling thread its own upstream pool, built now. For a thread
    /// that runs a single-threaded runtime serving its connections alone (the
    /// server's lanes): an upstream connection's I/O runs on the runtime that
    /// opened it, so in one shared pool a lane's call would often ride a
    /// connection another lane opened, and wake that lane's thread twice per
    /// call. With its own pool, a lane's calls stay on its thread.
    pub fn own_pool_on_this_thread(&self) {
        OWN_POOL.set(true);
        let _ = self.pool();
    }

    /// The pool this thread's calls use: its own (built on first use), or the
    /// shared one. A pool that cannot be built (the shared one was, with the
    /// same settings) falls back to the shared one.
    fn pool(&self) -> &reqwest::Client {
        if !OWN_POOL.get() {
            return &self.client;
        }
        match self.own_pools.get_or_try(|| build_client(&self.settings)) {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(%error, "cannot build this thread's upstream pool; using the shared one");
                &self.client
            }
        }
    }

    /// See [`TransportSettings::attempt_timeout`].
    pub fn attempt_timeout(&self) -> Duration {
        self.settings.attempt_timeout
    }

    /// Sends `request` to `endpoint` + its path with `credential` attached, and
    /// reads the whole response.
    pub async fn send(
        &self,
        endpoint: &str,
        request: HttpRequest,
        credential: &Credential,
    ) -> Result<HttpResponse, TransportError> {
        self.open(endpoint, request, credential).await?.read_all().await
    }

    /// Sends `request` and returns as soon as the status and headers are in; the
    /// body is read as it arrives ([`BodyStream::next_chunk`]), so a stream's
    /// reader paces the upstream socket: a slow consumer slows the read.
    pub async fn open(
        &self,
        endpoint: &str,
        request: HttpRequest,
        credential: &Credential,
    ) -> Result<BodyStream, TransportError> {
        let pool = self.pool();
        let request = self.build(pool, endpoint, request, credential)?;
        let response = pool.execute(request).await.map_err(classify)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        Ok(BodyStream { status, headers, response, max_body_bytes: self.settings.max_body_bytes })
    }

    fn build(
        &self,
        pool: &reqwest::Client,
        endpoint: &str,
        request: HttpRequest,
        credential: &Credential,
    ) -> Result<reqwest::Request, TransportError> {
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| TransportError::InvalidRequest(format!("bad method `{}`", request.method)))?;
        if !request.path_and_query.starts_with('/') {
            return Err(TransportError::InvalidRequest("path must start with `/`".to_owned()));
        }
        let url = self.bases.url(endpoint, &request.path_and_query)?;
        let headers = headers(request.headers, credential)?;
        let mut request = pool
            .request(method, url)
            .headers(headers)
            .body(request.body)
            .build()
            .map_err(|e| TransportError::InvalidRequest(error_chain(&e.without_url())))?;
        if let Credential::Sigv4(signer) = credential {
            signer.sign(&mut request).map_err(TransportError::Signing)?;
        }
        Ok(request)
    }
}

/// An upstream pool with the transport's settings. Never retries and never
/// follows a redirect: the call layer decides both.
fn build_client(settings: &TransportSettings) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .read_timeout(settings.read_timeout)
        .tcp_nodelay(true)
        .retry(reqwest::retry::never())
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// Endpoints parsed once, by their text. A request's URL is its endpoint with
/// the component's path appended to the endpoint's path, and the endpoint's
/// query (an Azure-style `?api-version=…`, which the operator chose) kept as
/// the query, followed by the component's own query parameters except those
/// the endpoint already sets ([`merged_query`]). The endpoint is parsed once
/// and the path and query set on a copy, which gives the URL that parsing the
/// joined text gives (property-tested below); a path that parsing would trim
/// takes the whole parse. Bounded: beyond [`BASES_KEPT`] endpoints it starts
/// over.
#[derive(Debug)]
struct Bases(Memo<Option<Base>>);

/// An endpoint parsed: its URL without a query, and the query it had.
#[derive(Debug, Clone)]
struct Base {
    url: reqwest::Url,
    query: Option<String>,
}

const BASES_KEPT: usize = 4_096;

impl Default for Bases {
    fn default() -> Self {
        Self(Memo::new(BASES_KEPT))
    }
}

impl Bases {
    fn url(&self, endpoint: &str, path_and_query: &str) -> Result<reqwest::Url, TransportError> {
        // The whole parse drops tabs and newlines anywhere and trailing spaces
        // and controls; setting a path keeps them. Such a path is parsed whole.
        let trimmed_by_parsing =
            path_and_query.contains(['\t', '\n', '\r']) || path_and_query.ends_with(|c: char| c <= ' ');
        if trimmed_by_parsing {
            return whole_parse(endpoint, path_and_query);
        }
        match self.base(endpoint) {
            Some(base) => Ok(on_base(base, path_and_query)),
            None => whole_parse(endpoint, path_and_query),
        }
    }

    /// The endpoint parsed, when the fast path applies to it.
    fn base(&self, endpoint: &str) -> Option<Base> {
        self.0.get_or_insert_with(endpoint, || {
            let mut url = reqwest::Url::parse(endpoint).ok().filter(|url| url.fragment().is_none())?;
            if url.cannot_be_a_base() {
                return None;
            }
            let query = url.query().filter(|query| !query.is_empty()).map(str::to_owned);
            url.set_query(None);
            Some(Base { url, query })
        })
    }
}

/// `path_and_query` (which starts with `/`) set on a copy of `base`: the path
/// appended to the endpoint's, the queries merged.
fn on_base(base: Base, path_and_query: &str) -> reqwest::Url {
    let Base { mut url, query: endpoint_query } = base;
    let (rest, fragment) = match path_and_query.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (path_and_query, None),
    };
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let joined = format!("{}{path}", url.path().trim_end_matches('/'));
    url.set_path(&joined);
    url.set_query(query);
    with_endpoint_query(&mut url, endpoint_query.as_deref());
    url.set_fragment(fragment);
    url
}

/// The endpoint (its query set aside) and the path and query, parsed as one,
/// then the endpoint's query merged in.
fn whole_parse(endpoint: &str, path_and_query: &str) -> Result<reqwest::Url, TransportError> {
    if endpoint.contains('#') {
        return Err(TransportError::InvalidRequest("bad URL: the endpoint has a fragment".to_owned()));
    }
    let (endpoint, endpoint_query) = match endpoint.split_once('?') {
        Some((endpoint, query)) => (endpoint, Some(query).filter(|query| !query.is_empty())),
        None => (endpoint, None),
    };
    let url = format!("{}{path_and_query}", endpoint.trim_end_matches('/'));
    let mut url = reqwest::Url::parse(&url).map_err(|e| TransportError::InvalidRequest(format!("bad URL: {e}")))?;
    with_endpoint_query(&mut url, endpoint_query);
    Ok(url)
}

/// Puts the endpoint's query first on `url`, the component's after it.
fn with_endpoint_query(url: &mut reqwest::Url, endpoint_query: Option<&str>) {
    if let Some(endpoint_query) = endpoint_query {
        let merged = merged_query(endpoint_query, url.query());
        url.set_query(Some(&merged));
    }
}

/// The endpoint's query parameters, then the component's whose names the
/// endpoint does not set: the operator's `api-version` (or key) is the one
/// sent, and the component's other parameters still go.
fn merged_query(endpoint: &str, component: Option<&str>) -> String {
    let name = |pair: &str| pair.split_once('=').map_or(pair, |(name, _)| name).to_owned();
    let endpoint_names: Vec<String> = endpoint.split('&').map(name).collect();
    let mut merged = endpoint.to_owned();
    let added = component
        .into_iter()
        .flat_map(|query| query.split('&'))
        .filter(|pair| !pair.is_empty() && !endpoint_names.contains(&name(pair)));
    for pair in added {
        merged.push('&');
        merged.push_str(pair);
    }
    merged
}

/// A response whose body has not been read yet. Dropping it closes the
/// connection, which is how a cancelled stream cancels its upstream request.
#[derive(Debug)]
pub struct BodyStream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    response: reqwest::Response,
    max_body_bytes: usize,
}

impl BodyStream {
    /// The next piece of the body as the socket delivers it; `None` at its end.
    pub async fn next_chunk(&mut self) -> Result<Option<bytes::Bytes>, TransportError> {
        self.response.chunk().await.map_err(classify)
    }

    /// The rest of the body, bounded by the transport's body limit.
    pub async fn read_all(mut self) -> Result<HttpResponse, TransportError> {
        let mut body = BytesMut::new();
        while let Some(chunk) = self.next_chunk().await? {
            if body.len() + chunk.len() > self.max_body_bytes {
                return Err(TransportError::BodyTooLarge { limit: self.max_body_bytes });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(HttpResponse { status: self.status, headers: self.headers, body: body.to_vec() })
    }
}

fn headers(pairs: Vec<(String, String)>, credential: &Credential) -> Result<HeaderMap, TransportError> {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| TransportError::InvalidRequest(format!("bad header name `{}`", name.escape_debug())))?;
        if TRANSPORT_HEADERS.contains(&name.as_str()) || credential.owns_header(name.as_str()) {
            return Err(TransportError::InvalidRequest(format!("header `{name}` is the host's to set")));
        }
        let value = HeaderValue::from_str(&value)
            .map_err(|_| TransportError::InvalidRequest(format!("bad value for header `{name}`")))?;
        map.append(name, value);
    }
    if let Credential::Header { name, value, .. } = credential {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| TransportError::InvalidRequest(format!("bad credential header name `{name}`")))?;
        let mut value = HeaderValue::from_str(value.expose())
            .map_err(|_| TransportError::InvalidRequest("credential is not a valid header value".to_owned()))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// The error typed, its text without the URL: reqwest's message names the URL
/// with its query, which may hold a key (`?api-key=`), and the text reaches logs.
fn classify(error: reqwest::Error) -> TransportError {
    let error = error.without_url();
    if error.is_timeout() {
        TransportError::Timeout
    } else if is_certificate_error(&error) {
        // reqwest reports a failed handshake as a connect error; told apart here
        // because, unlike a refused connection, it is not transient.
        TransportError::Certificate(error_chain(&error))
    } else if error.is_connect() && is_unknown_host(&error_chain(&error)) {
        TransportError::UnknownHost(error_chain(&error))
    } else if error.is_connect() {
        TransportError::Connect(error_chain(&error))
    } else {
        TransportError::Io(error_chain(&error))
    }
}

/// The resolver's own words for a name that does not exist, as the system
/// resolver (glibc, musl, BSD) spells them; hyper reports a lookup failure
/// only as text. A resolver that could not be reached ("Temporary failure in
/// name resolution") is not among them: that one is transient.
const UNKNOWN_NAME: [&str; 4] = [
    "Name or service not known",
    "No address associated with hostname",
    "Name does not resolve",
    "nodename nor servname provided",
];

fn is_unknown_host(chain: &str) -> bool {
    chain.contains("dns error") && UNKNOWN_NAME.iter().any(|words| chain.contains(words))
}

/// Whether rustls rejected the peer's certificate somewhere in the chain. The
/// handshake's `rustls::Error` travels inside an `io::Error`, whose `source()`
/// skips the wrapped error itself, so each `io::Error` is opened by hand.
fn is_certificate_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return matches!(tls, rustls::Error::InvalidCertificate(_));
        }
        let wrapped = current.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref);
        if let Some(inner) = wrapped
            && is_certificate_error(inner)
        {
            return true;
        }
        next = current.source();
    }
    false
}

/// The error with its causes, so "connection refused" is not lost behind
/// "error sending request".
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Setting the path and query on the parsed endpoint gives the URL that
        /// parsing the joined text gives, for any path a component may send.
        #[test]
        fn a_url_on_a_kept_base_is_the_whole_parse(
            base in proptest::sample::select(vec![
                "http://127.0.0.1:8080", "http://127.0.0.1:8080/", "https://api.example.com/v1",
                "https://api.example.com/v1/", "https://bücher.example/a/b", "http://[::1]:9/x/../y",
                "https://h.example/%7Euser/", "https://h.example/a%20b",
                "https://h.example/openai/deployments/d?api-version=2024-10-21", "https://h.example/v1/?a=1&b=2",
            ]),
            tail in "[a-zA-Z0-9/._~%?#&=+ \\t\\n\\x01\\\\:@!$'()*,;\\[\\]|^`{}\"<>é中-]{0,40}",
        ) {
            let path_and_query = format!("/{tail}");
            let bases = Bases::default();
            let fast = bases.url(base, &path_and_query).unwrap();
            let again = bases.url(base, &path_and_query).unwrap();
            let whole = whole_parse(base, &path_and_query).unwrap();
            proptest::prop_assert_eq!(fast.as_str(), whole.as_str());
            proptest::prop_assert_eq!(again.as_str(), whole.as_str());
        }
    }

    /// An HTTP/1.1 upstream on loopback that keeps connections alive and
    /// counts the connections that carried a request; it answers every request
    /// `200 ok`. Accepted sockets are not counted: when a checkout finds no idle
    /// connection at once, the pool also starts a connect, and a connect that
    /// loses that race is finished in the background and never used, so how
    /// many sockets arrive depends on scheduling (it did under CPU load).
    fn counting_upstream() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let used = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&used);
        std::thread::spawn(move || {
            for socket in listener.incoming() {
                let Ok(socket) = socket else { return };
                let counted = Arc::clone(&counted);
                std::thread::spawn(move || {
                    let mut writer = socket.try_clone().unwrap();
                    let mut reader = BufReader::new(socket);
                    let mut line = String::new();
                    let mut served = false;
                    // Bodiless requests: a head ends at its empty line.
                    while reader.read_line(&mut line).is_ok_and(|read| read > 0) {
                        if line == "\r\n" {
                            if !served {
                                served = true;
                                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                            let answered = writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
                            if answered.is_err() {
                                return;
                            }
                        }
                        line.clear();
                    }
                });
            }
        });
        (endpoint, used)
    }

    /// A thread running a single-threaded runtime, as a lane does, that made
    /// its calls and keeps running (driving the connections it opened) until
    /// dropped.
    struct CallingThread(Option<tokio::sync::oneshot::Sender<()>>, Option<std::thread::JoinHandle<()>>);

    impl Drop for CallingThread {
        fn drop(&mut self) {
            drop(self.0.take());
            if let Some(thread) = self.1.take() {
                thread.join().unwrap();
            }
        }
    }

    /// `requests` calls one after another from a new [`CallingThread`]; with
    /// `own_pool` the thread asks for its own pool first. Returns once they
    /// were answered.
    fn calls_from_a_thread(client: &HttpClient, endpoint: &str, own_pool: bool, requests: usize) -> CallingThread {
        let (client, endpoint) = (client.clone(), endpoint.to_owned());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done, called) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            if own_pool {
                client.own_pool_on_this_thread();
            }
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                for _ in 0..requests {
                    let request = HttpRequest {
                        method: "GET".into(),
                        path_and_query: "/ping".into(),
                        headers: Vec::new(),
                        body: Vec::new(),
                    };
                    let response = client.send(&endpoint, request, &Credential::None).await.unwrap();
                    assert_eq!((response.status, response.body.as_slice()), (200, b"ok".as_slice()));
                }
                // The last connection goes back to its pool once its task has
                // seen the response end, on this runtime.
                tokio::time::sleep(Duration::from_millis(50)).await;
                done.send(()).unwrap();
                let _ = stopped.await;
            });
        });
        called.recv_timeout(Duration::from_secs(30)).expect("the calls were answered");
        CallingThread(Some(stop), Some(thread))
    }

    /// Threads that asked for their own pool each open their own upstream
    /// connection; other threads share the one pool, whose kept-alive
    /// connection the next thread's call rides.
    ///
    /// The second thread makes one call: the connection it rode is driven by
    /// the first thread's runtime and goes back to the pool only once that
    /// runtime has run, so a call right after it can find it busy and open
    /// another (it did under CPU load). That is why a lane takes a pool of its
    /// own.
    #[test]
    fn a_thread_with_its_own_pool_keeps_its_own_upstream_connections() {
        use std::sync::atomic::Ordering::SeqCst;
        let (endpoint, used) = counting_upstream();
        let shared = HttpClient::new(TransportSettings::default()).unwrap();
        let first = calls_from_a_thread(&shared, &endpoint, false, 3);
        let second = calls_from_a_thread(&shared, &endpoint, false, 1);
        assert_eq!(used.load(SeqCst), 1, "one shared, kept-alive connection");
        drop((first, second));

        let (endpoint, used) = counting_upstream();
        let lanes = HttpClient::new(TransportSettings::default()).unwrap();
        let first = calls_from_a_thread(&lanes, &endpoint, true, 3);
        assert_eq!(used.load(SeqCst), 1, "a thread's calls reuse its own connection");
        let second = calls_from_a_thread(&lanes, &endpoint, true, 3);
        assert_eq!(used.load(SeqCst), 2, "the second thread opened a connection of its own");
        let third = calls_from_a_thread(&lanes, &endpoint, false, 2);
        assert_eq!(used.load(SeqCst), 3, "a thread without its own pool uses the shared one");
        drop((first, second, third));
    }

    #[test]
    fn an_endpoints_query_stays_the_query_after_the_appended_path() {
        let bases = Bases::default();
        let endpoint = "https://example.openai.azure.com/openai/deployments/d?api-version=2024-10-21";
        let url = bases.url(endpoint, "/chat/completions").unwrap();
        assert_eq!(
            url.as_str(),
            "https://example.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"
        );
        let slash = bases.url("https://h.example/v1/?api-version=1", "/embeddings").unwrap();
        assert_eq!(slash.as_str(), "https://h.example/v1/embeddings?api-version=1");
        assert!(bases.url("not a url", "/x").is_err());
    }

    #[test]
    fn the_components_query_follows_the_endpoints_which_wins_a_shared_name() {
        let bases = Bases::default();
        let endpoint = "https://h.example/openai?api-version=2024-10-21";
        let url = bases.url(endpoint, "/chat/completions?stream=true&api-version=1999-01-01").unwrap();
        assert_eq!(url.as_str(), "https://h.example/openai/chat/completions?api-version=2024-10-21&stream=true");
        let plain = bases.url("https://h.example/v1", "/chat?stream=true").unwrap();
        assert_eq!(plain.as_str(), "https://h.example/v1/chat?stream=true");
        assert_eq!(merged_query("a=1", Some("")), "a=1");
        assert_eq!(merged_query("a=1&b", Some("b=2&c=3")), "a=1&b&c=3");
    }

    #[test]
    fn an_endpoint_with_a_fragment_builds_no_url() {
        let bases = Bases::default();
        assert!(bases.url("https://h.example/v1#x", "/chat").is_err());
        assert!(bases.url("https://h.example/v1#x", "/chat\n").is_err());
    }

    /// reqwest's error text names the URL with its query; the transport's
    /// error (which reaches the log) does not.
    #[tokio::test]
    async fn a_transport_error_does_not_carry_the_endpoints_query() {
        let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}/v1?api-key=K3Y-Q", unused.local_addr().unwrap());
        drop(unused);
        let client = HttpClient::new(TransportSettings::default()).unwrap();
        let request =
            HttpRequest { method: "POST".into(), path_and_query: "/x".into(), headers: Vec::new(), body: Vec::new() };
        let error = client.send(&endpoint, request, &Credential::None).await.unwrap_err();
        assert!(matches!(error, TransportError::Connect(_)), "{error:?}");
        assert!(!error.to_string().contains("K3Y-Q"), "{error}");
    }

    #[test]
    fn a_certificate_error_is_found_inside_an_io_error() {
        let bad = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, bad);
        assert!(is_certificate_error(&io));
        let other = std::io::Error::new(std::io::ErrorKind::InvalidData, rustls::Error::DecryptError);
        assert!(!is_certificate_error(&other), "a TLS failure that is not the certificate's");
        assert!(!is_certificate_error(&std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
    }

    #[test]
    fn only_a_name_the_resolver_does_not_know_is_an_unknown_host() {
        let unknown = "error sending request: client error (Connect): dns error: failed to lookup address \
                       information: Name or service not known";
        assert!(is_unknown_host(unknown));
        let unreachable_resolver = "client error (Connect): dns error: failed to lookup address information: \
                                    Temporary failure in name resolution";
        assert!(!is_unknown_host(unreachable_resolver), "transient");
        assert!(!is_unknown_host("client error (Connect): tcp connect error: Connection refused (os error 111)"));
    }

    #[tokio::test]
    async fn a_host_no_resolver_knows_is_refused_as_unknown_and_never_retried() {
        let client = HttpClient::new(TransportSettings::default()).unwrap();
        let request = HttpRequest {
            method: "POST".into(),
            path_and_query: "/v1/x".into(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        let error = client.send("https://no-such-host.invalid", request, &Credential::None).await.unwrap_err();
        assert!(matches!(error, TransportError::UnknownHost(_)), "{error:?}");
    }
}
