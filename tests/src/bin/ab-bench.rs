//! `ab-bench`: two gateways (A and B) compared in one run, so that a machine whose speed
//! drifts between runs still gives a ratio that means something.
//!
//! Two ways of pairing them:
//!
//! - `--mode rounds`: short rounds of `--callers` connections against one side, then the
//!   other, the order swapped every pair (A B, B A, A B, ...). Each pair gives B's calls/s
//!   and CPU per call as ratios to A's, measured seconds apart; the summary is the median
//!   and quartiles of those ratios. For throughput at a concurrency.
//! - `--mode interleave`: one caller, one kept-alive connection to each side, requests
//!   alternating A, B, A, B, ... so that both sides meet the same moment of the machine.
//!   Each round gives both sides' p50; the summary is the median and quartiles of the
//!   rounds' differences (B − A) and the pooled p50s. For the latency one caller adds.
//!
//! ```text
//! cargo run --release -p weir-tests --bin ab-bench -- --a http://127.0.0.1:4101/v1/chat/completions \
//!   --b http://127.0.0.1:4102/v1/chat/completions --a-pid PID --b-pid PID \
//!   -H 'authorization: Bearer KEY' --body '{"model":"bench-model","messages":[...]}' \
//!   --mode interleave --rounds 20 --round-secs 3
//! ```
//!
//! Every response must be 2xx with a body: a round that meets anything else stops the run.
//! Loopback only, like the shared bench: a target elsewhere is refused.

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Rounds,
    Interleave,
}

#[derive(Debug, Parser)]
#[command(about = "Compare two gateways in one run: paired rounds, or one caller's requests interleaved")]
struct Args {
    /// Side A's URL (the baseline).
    #[arg(long)]
    a: Uri,
    /// Side B's URL (the change).
    #[arg(long)]
    b: Uri,
    /// Side A's process, for its CPU per call (from /proc).
    #[arg(long)]
    a_pid: Option<u32>,
    /// Side B's process.
    #[arg(long)]
    b_pid: Option<u32>,
    /// A header sent with every request (`name: value`); repeatable.
    #[arg(short = 'H', long = "header")]
    headers: Vec<String>,
    /// The JSON body POSTed.
    #[arg(long)]
    body: String,
    #[arg(long, value_enum, default_value = "rounds")]
    mode: Mode,
    /// Concurrent connections per round (`rounds` mode; `interleave` is one caller).
    #[arg(long, default_value_t = 32)]
    callers: usize,
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    #[arg(long, default_value_t = 3.0)]
    round_secs: f64,
    /// Unmeasured load on each side before the first round.
    #[arg(long, default_value_t = 2.0)]
    warmup_secs: f64,
}

/// One request's fixed parts.
#[derive(Debug, Clone)]
struct Target {
    uri: Uri,
    authority: String,
    headers: Vec<(String, String)>,
    body: Bytes,
}

impl Target {
    fn new(uri: &Uri, args: &Args) -> anyhow::Result<Target> {
        let authority = uri.authority().context("the URL has no host")?.to_string();
        let host = uri.host().unwrap_or_default();
        ensure!(host == "127.0.0.1" || host == "localhost", "only loopback targets are measured, not {host}");
        let headers = args
            .headers
            .iter()
            .map(|header| {
                let (name, value) = header.split_once(':').context("a header is `name: value`")?;
                Ok((name.trim().to_owned(), value.trim().to_owned()))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Target { uri: uri.clone(), authority, headers, body: Bytes::from(args.body.clone()) })
    }

    async fn connect(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let stream =
            TcpStream::connect(&self.authority).await.with_context(|| format!("connect {}", self.authority))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(sender)
    }

    /// One request, answered whole; its latency.
    async fn call(&self, sender: &mut SendRequest<Full<Bytes>>) -> anyhow::Result<Duration> {
        let mut request = Request::post(self.uri.path()).header("host", &self.authority);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let request = request.header("content-type", "application/json").body(Full::new(self.body.clone()))?;
        let start = Instant::now();
        sender.ready().await?;
        let response = sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        let took = start.elapsed();
        ensure!(
            status.is_success() && !body.is_empty(),
            "{} answered {status}: {}",
            self.uri,
            String::from_utf8_lossy(&body)
        );
        Ok(took)
    }
}

/// A process's CPU time so far (user + system), from /proc.
fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // In clock ticks of USER_HZ, which Linux fixes at 100 per second.
    Some(Duration::from_secs_f64(ticks as f64 / 100.0))
}

/// The CPU time `pid` used since `before` was read.
fn cpu_since(pid: Option<u32>, before: Option<Duration>) -> Option<Duration> {
    Some(cpu_time(pid)?.saturating_sub(before?))
}

/// A latency in whole microseconds.
fn micros(took: Duration) -> u32 {
    u32::try_from(took.as_micros()).unwrap_or(u32::MAX)
}

/// What one side did in one round.
#[derive(Debug, Clone)]
struct Round {
    secs: f64,
    latencies_us: Vec<u32>,
    cpu: Option<Duration>,
}

impl Round {
    fn calls(&self) -> usize {
        self.latencies_us.len()
    }

    fn per_second(&self) -> f64 {
        self.calls() as f64 / self.secs
    }

    fn cpu_ms_per_call(&self) -> Option<f64> {
        Some(self.cpu?.as_secs_f64() * 1000.0 / self.calls().max(1) as f64)
    }

    fn p50_us(&self) -> f64 {
        percentile(&self.latencies_us, 0.5)
    }
}

/// Where the quantile `at` (0 to 1) of `n` sorted values stands; `None` for none.
fn rank(n: usize, at: f64) -> Option<usize> {
    n.checked_sub(1).map(|last| (last as f64 * at).round() as usize)
}

fn percentile(values: &[u32], at: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    rank(sorted.len(), at).map_or(f64::NAN, |index| f64::from(sorted[index]))
}

/// Median and quartiles of `values`.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|value| value.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| rank(sorted.len(), q).map_or(f64::NAN, |index| sorted[index]);
    (at(0.25), at(0.5), at(0.75))
}

/// `callers` connections against `target` for `secs`.
async fn load(target: &Target, pid: Option<u32>, callers: usize, secs: f64) -> anyhow::Result<Round> {
    let mut senders = Vec::with_capacity(callers);
    for _ in 0..callers {
        senders.push(target.connect().await?);
    }
    let cpu_before = cpu_time(pid);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for mut sender in senders {
        let target = target.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let took = target.call(&mut sender).await?;
                latencies.push(micros(took));
            }
            anyhow::Ok(latencies)
        });
    }
    let mut latencies_us = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        latencies_us.extend(joined??);
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Round { secs, latencies_us, cpu: cpu_since(pid, cpu_before) })
}

/// One caller alternating A and B for `secs`: both sides' rounds.
async fn interleave(
    a: &Target,
    b: &Target,
    pids: (Option<u32>, Option<u32>),
    secs: f64,
) -> anyhow::Result<(Round, Round)> {
    let (mut to_a, mut to_b) = (a.connect().await?, b.connect().await?);
    let (cpu_a, cpu_b) = (cpu_time(pids.0), cpu_time(pids.1));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let (mut on_a, mut on_b) = (Vec::new(), Vec::new());
    let mut a_first = true;
    while Instant::now() < deadline {
        // Which side goes first alternates too, so neither always follows the other.
        let (a_took, b_took) = match a_first {
            true => (a.call(&mut to_a).await?, b.call(&mut to_b).await?),
            false => {
                let b_took = b.call(&mut to_b).await?;
                (a.call(&mut to_a).await?, b_took)
            }
        };
        on_a.push(micros(a_took));
        on_b.push(micros(b_took));
        a_first = !a_first;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((
        Round { secs, latencies_us: on_a, cpu: cpu_since(pids.0, cpu_a) },
        Round { secs, latencies_us: on_b, cpu: cpu_since(pids.1, cpu_b) },
    ))
}

fn describe(round: &Round) -> String {
    let cpu = round.cpu_ms_per_call().map_or("-".to_owned(), |ms| format!("{ms:.4}"));
    format!("{:>9.0} calls/s  p50 {:>7.0} us  cpu {cpu} ms/call", round.per_second(), round.p50_us())
}

#[allow(clippy::print_stdout, reason = "the figures on stdout are this tool's output")]
fn report(pairs: &[(Round, Round)]) {
    let ratio = |pick: fn(&Round) -> Option<f64>| -> Vec<f64> {
        pairs.iter().filter_map(|(a, b)| Some(pick(b)? / pick(a)?)).collect()
    };
    let throughput = ratio(|round| Some(round.per_second()));
    let cpu = ratio(Round::cpu_ms_per_call);
    let p50_diffs: Vec<f64> = pairs.iter().map(|(a, b)| b.p50_us() - a.p50_us()).collect();
    let pooled = |pick: fn(&(Round, Round)) -> &Round| -> Vec<u32> {
        pairs.iter().flat_map(|pair| pick(pair).latencies_us.iter().copied()).collect()
    };
    let (pooled_a, pooled_b) = (pooled(|pair| &pair.0), pooled(|pair| &pair.1));
    let calls = |pick: fn(&(Round, Round)) -> &Round| pairs.iter().map(|pair| pick(pair).calls()).sum::<usize>();
    println!("pairs: {}; calls A {}, B {}", pairs.len(), calls(|pair| &pair.0), calls(|pair| &pair.1));
    let line = |name: &str, (low, median, high): (f64, f64, f64), unit: &str| {
        println!("{name:<28} median {median:>9.3}{unit}  quartiles {low:.3}{unit} / {high:.3}{unit}");
    };
    line("B/A calls/s", spread(&throughput), "x");
    line("B/A CPU per call", spread(&cpu), "x");
    line("B-A p50 (per round)", spread(&p50_diffs), " us");
    println!(
        "pooled p50: A {:.0} us, B {:.0} us (B-A {:+.0} us); pooled p90: A {:.0} us, B {:.0} us",
        percentile(&pooled_a, 0.5),
        percentile(&pooled_b, 0.5),
        percentile(&pooled_b, 0.5) - percentile(&pooled_a, 0.5),
        percentile(&pooled_a, 0.9),
        percentile(&pooled_b, 0.9),
    );
}

#[allow(clippy::print_stdout, reason = "the figures on stdout are this tool's output")]
async fn run(args: Args) -> anyhow::Result<()> {
    let (a, b) = (Target::new(&args.a, &args)?, Target::new(&args.b, &args)?);
    let pids = (args.a_pid, args.b_pid);
    if args.mode == Mode::Interleave && args.callers != 1 {
        bail!("interleave mode is one caller: leave --callers out or set it to 1");
    }
    // Warm both sides (connections, caches, the allocator's pools) before measuring.
    load(&a, None, args.callers, args.warmup_secs).await?;
    load(&b, None, args.callers, args.warmup_secs).await?;
    let mut pairs = Vec::with_capacity(args.rounds);
    for round in 0..args.rounds {
        let pair = match args.mode {
            Mode::Interleave => interleave(&a, &b, pids, args.round_secs).await?,
            Mode::Rounds if round % 2 == 0 => {
                let on_a = load(&a, pids.0, args.callers, args.round_secs).await?;
                (on_a, load(&b, pids.1, args.callers, args.round_secs).await?)
            }
            Mode::Rounds => {
                let on_b = load(&b, pids.1, args.callers, args.round_secs).await?;
                (load(&a, pids.0, args.callers, args.round_secs).await?, on_b)
            }
        };
        println!("round {round:>3}  A {}  |  B {}", describe(&pair.0), describe(&pair.1));
        pairs.push(pair);
    }
    report(&pairs);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // One thread, like a lean load tool: the gateways under test keep the cores.
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(run(args))
}
