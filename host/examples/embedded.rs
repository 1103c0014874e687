//! Weir embedded in a service: no gateway, no HTTP server of its own — the
//! library's `chat` call is the whole integration.
//!
//! Run against any OpenAI-compatible server (here the repository's fake upstream):
//!
//! ```sh
//! cargo run -p weir-tests --bin fake-upstream -- --listen 127.0.0.1:9100 &
//! cargo run -p weir-host --example embedded -- http://127.0.0.1:9100/v1
//! ```
#![allow(clippy::print_stdout, reason = "an example prints its result")]

use weir_host::types::{Conversation, ToolDefinition};
use weir_host::{Caller, ChatRequest, Config, Weir};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoint = std::env::args().nth(1).unwrap_or_else(|| "http://127.0.0.1:9100/v1".to_owned());
    let catalog = format!(
        r#"
        [[model]]
        id = "local-chat"
        provider = "openai-compatible"
        wire_id = "any-model"
        endpoint = "{endpoint}"
        max_output_tokens = 4096
        context_window = 32768
        output_tokens = 512
        "#
    );
    let weir = Weir::builder().config(Config::from_toml(&catalog, "example")?).build()?;

    let conversation =
        Conversation::user("What's the weather in Paris?").with_system("You are terse.").with_tool(ToolDefinition {
            name: "get_weather".to_owned(),
            description: "Current weather for a city".to_owned(),
            parameters_json: r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                .to_owned(),
        });
    // The embedding service says who is calling: its own member id (no gateway key).
    let caller = Caller { key_id: None, member: "example-service".to_owned(), team: None };
    let answer = weir.chat(ChatRequest::new("local-chat", conversation).caller(caller)).await?;

    println!("model:    {} via {:?}", answer.stamp.model, answer.stamp.provider);
    println!("text:     {}", answer.text());
    println!("tools:    {:?}", answer.tool_calls());
    println!("stop:     {:?}", answer.stop_reason);
    println!("usage:    {:?}", answer.usage);
    println!("latency:  {:?} over {} attempt(s)", answer.stamp.latency, answer.stamp.attempts);
    Ok(())
}
