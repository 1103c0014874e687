//! Shared by the benches that run a gateway in this process in front of a
//! fake OpenAI-compatible upstream.

/// The `[[model]]` entry `chat`: the embedded `openai-compatible` component
/// (no key) in front of `endpoint`, wire id `qwen3`.
pub fn chat_model(endpoint: &str, output_tokens: u32) -> String {
    format!(
        r#"
[[model]]
id = "chat"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{endpoint}"
max_output_tokens = 1000
context_window = 10000
output_tokens = {output_tokens}
"#
    )
}

/// A gateway of `toml`: no providers folder, and a component cache of its own
/// so the component is compiled once across runs.
pub fn cached_weir(toml: &str, bench: &str) -> weir_host::Weir {
    weir_host::Weir::builder()
        .config(weir_host::Config::from_toml(toml, bench).expect("config"))
        .providers_dir("/nonexistent-weir-bench-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-bench-cache")))
        .build()
        .expect("gateway")
}

/// Serves `weir` on a free loopback port with `weir_host::server::serve` (what
/// `weir serve` runs) and returns its OpenAI base URL.
pub async fn serve_on_loopback(weir: weir_host::Weir) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind gateway");
    let base = format!("http://{}/v1", listener.local_addr().expect("gateway address"));
    tokio::spawn(weir_host::server::serve(weir, listener));
    base
}
