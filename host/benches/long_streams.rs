//! What long-lived streams cost `weir serve`: resident memory and CPU per
//! stream while thousands stay open at once, as reasoning models and agents
//! hold them for minutes.
//!
//! For each count of streams (`LONG_STREAMS`, default `1000,5000,9000`) a
//! fresh release `weir serve` is spawned with `[server] max_in_flight` and
//! `max_connections` just above the count (the component instance pool is
//! sized from `max_in_flight`), in front of a fake OpenAI-compatible upstream
//! in this process whose every stream sends one content event a second for
//! [`STREAM_SECS`]. The streams are opened together; once every one has
//! delivered its first event (or been refused), the gateway's RSS and CPU time
//! (`/proc/PID/status`, `/proc/PID/stat`) are read, again [`WINDOW`] later,
//! and the events the clients received in between are counted. Printed per
//! count: streams refused, idle RSS, RSS with every stream open, RSS per
//! stream, and the gateway's CPU per relayed event.
//!
//! Before the gateway runs, the same count of stream decoders is opened in
//! this process alone (the embedded OpenAI component, each fed one content
//! event, no HTTP): what the decoder's instance holds of the heap (counted by
//! this binary's allocator) and of resident memory, against what the whole
//! stream holds in the gateway. The gateway's per-stream figure is given as
//! RSS and as PSS: each instance maps its component's data image from one
//! shared file, so a page every instance read counts once per instance in RSS
//! and once in all in PSS.
//!
//! 10,000 streams need 20,000 descriptors in the gateway (a client and an
//! upstream socket each) and as many in this process; the default counts stop
//! at 9,000 to fit a hard open-file limit of 20,000. Run with
//! `cargo bench -p weir-host --bench long_streams`.

// Benchmark setup: a failed step should stop the run with its message, and the
// figures are the output.
#![allow(clippy::expect_used, clippy::panic, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use weir_host::stream::framing::FrameDecoder;
use weir_host::types::StreamFraming;

#[path = "support/gateway.rs"]
#[allow(dead_code, reason = "this bench uses one of the shared helpers")]
mod gateway;

#[path = "support/counting.rs"]
mod counting;

/// How long each upstream stream lasts: longer than opening every stream
/// plus the measuring window.
const STREAM_SECS: u64 = 120;
/// The window between the two readings.
const WINDOW: Duration = Duration::from_secs(20);
/// How long opening the streams may take before the run gives up on the rest.
const OPEN_WITHIN: Duration = Duration::from_secs(90);

fn main() {
    let counts: Vec<usize> = std::env::var("LONG_STREAMS")
        .unwrap_or_else(|_| "1000,5000,9000".to_owned())
        .split(',')
        .map(|count| count.trim().parse().expect("LONG_STREAMS: counts separated by commas"))
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    eprintln!("{}", machine_facts());
    if let Some(&first) = counts.first() {
        runtime.block_on(decoders_alone(first));
    }
    eprintln!(
        "streams | refused | idle RSS MiB | RSS open MiB | RSS KiB per stream | PSS KiB per stream | gateway CPU µs per event"
    );
    for count in counts {
        let row = runtime.block_on(measure(count));
        eprintln!(
            "{count:>7} | {:>7} | {:>12.1} | {:>12.1} | {:>18.1} | {:>18.1} | {:>8.1}",
            row.refused,
            row.idle.rss as f64 / 1024.0,
            row.open.rss as f64 / 1024.0,
            row.open.rss.saturating_sub(row.idle.rss) as f64 / count as f64,
            row.open.pss.saturating_sub(row.idle.pss) as f64 / count as f64,
            row.cpu_micros_per_event
        );
    }
}

struct Row {
    refused: usize,
    idle: Resident,
    open: Resident,
    cpu_micros_per_event: f64,
}

/// `count` stream decoders of the embedded OpenAI component held open in this
/// process, each fed one content event: what a decoder's instance holds, apart
/// from the HTTP side of a stream.
async fn decoders_alone(count: usize) {
    let toml =
        format!("[server]\nmax_in_flight = {}\n{}", count + 100, gateway::chat_model("http://127.0.0.1:9/v1", 200));
    let weir = gateway::cached_weir(&toml, "long_streams bench");
    let registry = weir.registry();
    let provider = registry.get("openai-compatible").expect("the openai-compatible provider");
    let chunk = br#"data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"tick 1 "},"finish_reason":null}]}

"#;
    let events = FrameDecoder::new(StreamFraming::Sse).push(chunk).expect("SSE framing");
    // One decoder first, so what is made once (the first instance's code
    // mappings, lazily built state) is not counted per decoder.
    let mut decoders = Vec::with_capacity(count + 1);
    decoders.push(provider.open_stream().await.expect("stream decoder"));
    let (heap_before, before) = (counting::live_bytes(), resident(std::process::id()));
    for _ in 1..=count {
        let mut decoder = provider.open_stream().await.expect("stream decoder");
        for event in &events {
            decoder.feed(event).await.expect("feed");
        }
        decoders.push(decoder);
    }
    let (heap_after, after) = (counting::live_bytes(), resident(std::process::id()));
    let per = |after: u64, before: u64| after.saturating_sub(before) as f64 / count as f64;
    eprintln!(
        "{count} decoders alone, KiB per decoder: heap {:.1} | RSS {:.1} (anonymous {:.1}, shared file pages {:.1}) | PSS {:.1}",
        heap_after.saturating_sub(heap_before) as f64 / 1024.0 / count as f64,
        per(after.rss, before.rss),
        per(after.anonymous, before.anonymous),
        per(after.rss.saturating_sub(after.anonymous), before.rss.saturating_sub(before.anonymous)),
        per(after.pss, before.pss),
    );
}

async fn measure(count: usize) -> Row {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("weir.toml");
    std::fs::write(&config, gateway_config(upstream, count)).expect("write config");
    let (mut gateway, address) = spawn_gateway(&config);
    let pid = gateway.id();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = resident(pid);

    let counters = Arc::new(Counters::default());
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("client");
    let url = format!("http://{address}/v1/chat/completions");
    let streams: Vec<_> =
        (0..count).map(|_| tokio::spawn(stream(client.clone(), url.clone(), counters.clone()))).collect();
    let opening = Instant::now();
    while counters.opened.load(Ordering::Relaxed) + counters.refused.load(Ordering::Relaxed) < count
        && opening.elapsed() < OPEN_WITHIN
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (cpu_before, events_before) = (cpu_ticks(pid), counters.events.load(Ordering::Relaxed));
    tokio::time::sleep(WINDOW).await;
    let (cpu_after, events_after) = (cpu_ticks(pid), counters.events.load(Ordering::Relaxed));
    let open = resident(pid);
    let refused = count - counters.opened.load(Ordering::Relaxed);
    gateway.kill().expect("stop weir serve");
    gateway.wait().expect("reap weir serve");
    streams.iter().for_each(tokio::task::JoinHandle::abort);
    let micros_per_tick = 1_000_000.0 / clock_ticks_per_second();
    let events = events_after.saturating_sub(events_before).max(1);
    Row {
        refused,
        idle,
        open,
        cpu_micros_per_event: cpu_after.saturating_sub(cpu_before) as f64 * micros_per_tick / events as f64,
    }
}

#[derive(Default)]
struct Counters {
    opened: AtomicUsize,
    refused: AtomicUsize,
    events: AtomicU64,
}

/// One streamed call, read to its end; its first event counts it as open.
async fn stream(client: reqwest::Client, url: String, counters: Arc<Counters>) {
    let body = r#"{"model":"long","stream":true,"messages":[{"role":"user","content":"go"}]}"#;
    let sent = client.post(url).header("content-type", "application/json").body(body).send().await;
    let Ok(mut response) = sent.map_err(|error| eprintln!("send: {error}")) else {
        counters.refused.fetch_add(1, Ordering::Relaxed);
        return;
    };
    if !response.status().is_success() {
        counters.refused.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut first = true;
    while let Ok(Some(chunk)) = response.chunk().await {
        let events = chunk.windows(2).filter(|pair| pair == b"\n\n").count() as u64;
        if first && events > 0 {
            counters.opened.fetch_add(1, Ordering::Relaxed);
            first = false;
        }
        counters.events.fetch_add(events, Ordering::Relaxed);
    }
}

/// The fake upstream: every chat completion streams one content event a
/// second for [`STREAM_SECS`].
async fn upstream() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind upstream");
    let address = listener.local_addr().expect("upstream address");
    let app = Router::new().route("/v1/chat/completions", post(slow_stream));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("upstream serves") });
    address
}

async fn slow_stream() -> Response {
    let events = futures_util::stream::unfold(0_u64, |second| async move {
        if second > STREAM_SECS {
            return None;
        }
        if second > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let event = match second {
            STREAM_SECS => Bytes::from_static(b"data: [DONE]\n\n"),
            _ => Bytes::from(format!(
                "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\
                 \"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tick {second} \"}},\"finish_reason\":null}}]}}\n\n"
            )),
        };
        Some((Ok::<_, std::convert::Infallible>(event), second + 1))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(events))
        .expect("a streamed response")
}

fn gateway_config(upstream: std::net::SocketAddr, count: usize) -> String {
    format!(
        "read_timeout_secs = 30\n\n[server]\nmax_in_flight = {in_flight}\nmax_connections = {connections}\n\n\
         [[model]]\nid = \"long\"\nprovider = \"openai-compatible\"\nwire_id = \"m\"\n\
         endpoint = \"http://{upstream}/v1\"\nmax_output_tokens = 1000\ncontext_window = 100000\noutput_tokens = 200\n",
        in_flight = count + 100,
        connections = count + 200,
    )
}

fn spawn_gateway(config: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn weir serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("read stdout");
    let address = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("weir serve printed `{line}`"));
    (child, address.to_owned())
}

/// A process's resident memory in KiB (`/proc/PID/smaps_rollup`).
struct Resident {
    rss: u64,
    /// Shared pages counted in proportion to how many mappings share them.
    pss: u64,
    anonymous: u64,
}

fn resident(pid: u32) -> Resident {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).expect("read /proc/PID/smaps_rollup");
    let field = |name: &str| {
        let line =
            rollup.lines().find(|line| line.starts_with(name)).unwrap_or_else(|| panic!("{name} in smaps_rollup"));
        line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("a size in kB")
    };
    Resident { rss: field("Rss:"), pss: field("Pss:"), anonymous: field("Anonymous:") }
}

/// User plus system CPU time, in clock ticks (`/proc/PID/stat` fields 14, 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // The command name may hold spaces; the fields after it are plain.
    let after_name = &stat[stat.rfind(')').expect("stat's command name") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields[n - 3].parse::<u64>().expect("a tick count");
    field(14) + field(15)
}

fn clock_ticks_per_second() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

fn machine_facts() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!("machine: {cores} cores, load average {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}
