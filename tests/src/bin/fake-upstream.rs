//! `fake-upstream`: the echo OpenAI server of `weir_tests::FakeUpstream`, standalone.
//!
//! Lets a README reader (or a manual test) see a real completion through Weir without any
//! provider key:
//!
//! ```text
//! cargo run -p weir-tests --bin fake-upstream -- --listen 127.0.0.1:9100
//! ```
//!
//! It answers `POST /v1/chat/completions` with `echo: <last user message>` (streaming too)
//! and `GET /v1/models` with a model list, until interrupted.

use std::net::SocketAddr;

use clap::Parser;
use weir_tests::FakeUpstream;

#[derive(Debug, Parser)]
#[command(about = "A fake OpenAI Chat Completions server that echoes the last user message")]
struct Args {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:9100")]
    listen: SocketAddr,
}

#[tokio::main]
#[allow(clippy::print_stdout, reason = "the listening URL on stdout is this tool's interface, as for `weir serve`")]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let upstream = FakeUpstream::bind(args.listen).await?;
    println!("fake upstream listening on {}", upstream.base_url());
    tokio::signal::ctrl_c().await?;
    drop(upstream);
    Ok(())
}
