//! Cold start of `weir serve` with six provider components in its folder: from
//! spawning the release binary to its first `GET /health` answered 200, with an
//! empty artifact cache (every component compiled) and with a warm one (every
//! component read back precompiled), alternated within one run so both see the
//! same machine. A third case, a warm cache and an empty folder, is the floor
//! the six components add to.
//!
//! The six files are the embedded OpenAI component, each with a distinct custom
//! section appended so that each has its own digest. The registry compiles every
//! folder file before it lets a later file's provider keys override an earlier
//! one's, and the artifact cache keys on the digest, so each file really is
//! compiled (or deserialized) and instantiated to describe itself. The embedded
//! component loads too (it shares the cache), so every start loads seven.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const COMPONENTS: usize = 6;
/// Starts per case; odd, so the median is one of them.
const RUNS: usize = 9;

fn main() {
    let providers = tempfile::tempdir().expect("providers folder");
    let openai = weir_host::plugin::embedded_components()
        .iter()
        .find(|embedded| embedded.name == "openai")
        .expect("the embedded OpenAI component")
        .bytes;
    for copy in 0..COMPONENTS {
        let bytes = with_custom_section(openai, "weir-bench-copy", copy.to_string().as_bytes());
        std::fs::write(providers.path().join(format!("openai-{copy}.wasm")), bytes).expect("component file");
    }
    let empty_folder = tempfile::tempdir().expect("empty providers folder");
    let warm_cache = tempfile::tempdir().expect("cache folder");
    // Fills the warm cache, and pages the binary in so the first measured start
    // does not pay for reading it from disk.
    start_to_health(providers.path(), warm_cache.path());

    let mut cold = Vec::with_capacity(RUNS);
    let mut warm = Vec::with_capacity(RUNS);
    let mut floor = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let empty_cache = tempfile::tempdir().expect("cache folder");
        cold.push(start_to_health(providers.path(), empty_cache.path()));
        warm.push(start_to_health(providers.path(), warm_cache.path()));
        floor.push(start_to_health(empty_folder.path(), warm_cache.path()));
    }
    let (cold, warm, floor) = (median(cold), median(warm), median(floor));
    eprintln!("weir serve, spawn → `listening on` → GET /health 200, median of {RUNS} starts each:");
    eprintln!("  {COMPONENTS} components + embedded, empty cache (cold compile): {:>8.1} ms", ms(cold));
    eprintln!("  {COMPONENTS} components + embedded, warm cache:                 {:>8.1} ms", ms(warm));
    eprintln!("  embedded only, warm cache (floor):                   {:>8.1} ms", ms(floor));
    eprintln!("  cold / warm = {:.1}×; the cache saves {:.1} ms", ms(cold) / ms(warm), ms(cold) - ms(warm));
}

/// The component with one more custom section (id 0: name, then payload) at its
/// end. Custom sections carry no semantics, so the copy compiles to the same
/// code, but its bytes, hence its digest and cache entry, are its own.
fn with_custom_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    let mut contents = leb128(name.len());
    contents.extend_from_slice(name.as_bytes());
    contents.extend_from_slice(payload);
    let mut bytes = component.to_vec();
    bytes.push(0);
    bytes.extend(leb128(contents.len()));
    bytes.extend(contents);
    bytes
}

/// Unsigned LEB128, the encoding of every length in a wasm binary.
fn leb128(mut value: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            bytes.push(byte);
            return bytes;
        }
        bytes.push(byte | 0x80);
    }
}

/// Spawns `weir serve` on an ephemeral port, waits for the line announcing its
/// address, and asks `/health` once. The time covers process start, engine,
/// loading every component, the catalog and binding the listener, plus one
/// HTTP exchange on loopback. The server is killed afterwards.
fn start_to_health(providers_dir: &Path, cache_dir: &Path) -> Duration {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listen", "127.0.0.1:0", "--providers-dir"])
        .arg(providers_dir)
        .env("WEIR_CACHE_DIR", cache_dir)
        // Warnings and errors still reach this run's stderr.
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn weir serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("read stdout");
    let status = line.trim().strip_prefix("listening on ").map(health_status);
    let elapsed = started.elapsed();
    child.kill().expect("stop weir serve");
    child.wait().expect("reap weir serve");
    match status {
        Some(status) if status.starts_with("HTTP/1.1 200") => elapsed,
        Some(status) => panic!("GET /health answered `{status}`"),
        None => panic!("weir serve printed `{}` instead of its address", line.trim()),
    }
}

/// The status line of `GET /health`.
fn health_status(address: &str) -> String {
    let mut stream = TcpStream::connect(address).expect("connect to weir");
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").expect("send request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    response.lines().next().unwrap_or_default().to_owned()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
