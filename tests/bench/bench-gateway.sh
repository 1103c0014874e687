# Sourced by the bench scripts: what they share about the gateway they start.
TOKEN=wk-bench-0000000000000000000000000000000000000000

# bench_gateway_toml PORT UPSTREAM: a gateway listening on PORT with the bench's caller
# key (TOKEN) and one model, `bench-model`, served by the OpenAI-compatible UPSTREAM.
bench_gateway_toml() {
  cat <<TOML
listen = "127.0.0.1:$1"

[[key]]
id = "bench"
member = "bench"
hash = "sha256:$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"

[[model]]
id = "bench-model"
provider = "openai"
endpoint = "$2"
credential = "BENCH_KEY"
max_output_tokens = 1000
context_window = 8000
output_tokens = 100
TOML
}
