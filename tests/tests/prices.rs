//! Prices from the command line: `weir prices check` over the embedded catalog
//! and over a config, a prices file (`--prices FILE`) replacing the catalog's
//! prices as `weir providers` shows them, an operator's own entry price, and
//! the errors a prices file can hold (an unknown id, a bad price), each naming
//! the id.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, openai_wire, run_cli};

fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// An operator's catalog: `priced` declares its own price (no date), `bare`
/// none, `embed` an embedding entry without one.
const CONFIG: &str = r#"
[[model]]
id = "priced"
provider = "openai"
wire_id = "gpt-4.1"
max_output_tokens = 32768
context_window = 1047576
input_price = 1.75
output_price = 7.0

[[model]]
id = "bare"
provider = "openai"
wire_id = "gpt-4o"
max_output_tokens = 16384
context_window = 128000

[[model]]
id = "embed"
provider = "openai"
kind = "embedding"
wire_id = "text-embedding-3-small"
embedding_dimensions = 1536
context_window = 8192
"#;

#[test]
fn the_embedded_catalog_prices_every_chat_entry() {
    let output = run_cli(&["prices", "check"], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("NO PRICE"), "every entry has a price: {stdout}");
    assert!(stdout.contains("entries priced"), "{stdout}");
}

#[test]
fn prices_check_names_the_unpriced_entries_and_fails_for_a_chat_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "weir.toml", CONFIG);
    let output = run_cli(&["prices", "check", "--config", &config], &[]);
    let (stdout, stderr) = text(&output);
    assert!(!output.status.success(), "a chat entry has no price: {stdout}{stderr}");
    assert!(stdout.contains("NO PRICE bare (chat, provider `openai`)"), "{stdout}");
    assert!(stdout.contains("NO PRICE embed (embedding, provider `openai`)"), "{stdout}");
    assert!(!stdout.contains("NO PRICE priced"), "{stdout}");
    assert!(stdout.contains("1 of 3 entries priced") && stdout.contains("1 chat entries have no price"), "{stdout}");

    // The prices file fills both in: the check passes.
    let prices = write(
        dir.path(),
        "prices.toml",
        "[bare]\ninput_price = 2.5\noutput_price = 10.0\nprices_as_of = \"2026-12-06\"\n\n[embed]\ninput_price = 0.02\n",
    );
    let output = run_cli(&["prices", "check", "--config", &config, "--prices", &prices], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("3 of 3 entries priced") && !stdout.contains("NO PRICE"), "{stdout}");
}

/// The entry's own price shows as declared (undated); the file's row
/// replaces what it names and brings its date.
#[test]
fn weir_providers_shows_the_entry_price_and_the_file_price_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "weir.toml", CONFIG);
    let output = run_cli(&["providers", "--config", &config], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("prices: input $1.75, output $7 per million tokens (undated)"), "{stdout}");
    assert!(stdout.contains("prices: none declared"), "`bare`: {stdout}");

    let prices = write(dir.path(), "prices.toml", "[priced]\noutput_price = 6.5\nprices_as_of = \"2026-12-01\"\n");
    let output = run_cli(&["providers", "--config", &config, "--prices", &prices], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("prices: input $1.75, output $6.5 per million tokens (as of 2026-12-01)"), "{stdout}");

    // A web search price shows after the token prices.
    let prices = write(dir.path(), "search.toml", "[priced]\nweb_search_price = 10.0\n");
    let output = run_cli(&["providers", "--config", &config, "--prices", &prices], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("prices: input $1.75, output $7 per million tokens, web search $10 per thousand searches"),
        "{stdout}"
    );

    // Over the embedded catalog, without a config.
    let prices = write(dir.path(), "gpt.toml", "[\"gpt-4.1\"]\ninput_price = 1.9\ncache_read_price = 0.45\n");
    let output = run_cli(&["providers", "--prices", &prices], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("prices: input $1.9, output $8, cache read $0.45 per million tokens (undated)"),
        "a new price drops the catalog's date: {stdout}"
    );
}

#[test]
fn a_prices_file_with_an_unknown_id_or_a_bad_price_is_refused_naming_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "weir.toml", CONFIG);
    let cases = [
        ("[gpt-99]\ninput_price = 1.0\noutput_price = 2.0\n", "`gpt-99` is not a catalog entry"),
        ("[priced]\ninput_price = -1.0\n", "`priced`: prices must be finite and not negative"),
        ("[priced]\ninput_price = inf\n", "`priced`: prices must be finite and not negative"),
        ("[bare]\ninput_price = 1.0\n", "model `bare`: `input_price` and `output_price` are declared together"),
        ("[priced]\nprices_as_of = \"06/12/2026\"\n", "model `priced`: `prices_as_of` is a date written YYYY-MM-DD"),
        ("[priced]\nprice = 1.0\n", "unknown field `price`"),
    ];
    for (file, expected) in cases {
        let prices = write(dir.path(), "prices.toml", file);
        for command in [&["prices", "check"][..], &["providers"][..]] {
            let mut args = command.to_vec();
            args.extend(["--config", &config, "--prices", &prices]);
            let output = run_cli(&args, &[]);
            let (stdout, stderr) = text(&output);
            assert!(!output.status.success(), "{file}: {stdout}");
            assert!(stderr.contains("prices") && stderr.contains(expected), "{file}: {stderr}");
        }
    }
    let missing = dir.path().join("absent.toml").display().to_string();
    let output = run_cli(&["prices", "check", "--prices", &missing], &[]);
    assert!(!output.status.success());
    assert!(text(&output).1.contains("absent.toml"), "{}", text(&output).1);
}

/// `weir serve --prices FILE`: the file's prices are the ones `/v1/models`
/// shows and the ledger's cost is computed from.
#[tokio::test]
async fn weir_serve_prices_calls_from_the_prices_file() {
    let upstream = FakeUpstream::start().await;
    let config = format!(
        "{}\n[ledger]\npath = \"ledger.db\"\n",
        CONFIG.replace(
            "wire_id = \"gpt-4.1\"",
            &format!("wire_id = \"gpt-4.1\"\nendpoint = \"{}\"\noutput_tokens = 100", upstream.base_url())
        )
    );
    let dir = tempfile::tempdir().unwrap();
    let prices = write(
        dir.path(),
        "prices.toml",
        "[priced]\ninput_price = 1000000.0\noutput_price = 2000000.0\nweb_search_price = 10.0\n\
         web_search_preview_price = 25.0\nprices_as_of = \"2026-12-06\"\n",
    );
    let mut gateway = Gateway::start_with_args(&config, &[("OPENAI_API_KEY", "sk-test")], &["--prices", &prices]).await;
    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let priced = models["data"].as_array().unwrap().iter().find(|m| m["id"] == "priced").unwrap();
    assert_eq!(
        priced["weir"]["prices"],
        json!({"input": 1000000.0, "output": 2000000.0, "cache_read": null, "cache_write": null, "search": null,
            "web_search": 10.0, "web_search_preview": 25.0, "as_of": "2026-12-06"})
    );
    upstream.push(openai_wire::completion_with_usage("Hello.", 3, 2, 0, 0));
    let body = json!({"model": "priced", "messages": [{"role": "user", "content": "Hi"}]});
    let answer = gateway.post_json("/v1/chat/completions", &body, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(gateway.terminate(std::time::Duration::from_secs(30)).is_some());
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let cost = records.last().unwrap()["cost_usd"].as_f64().unwrap();
    assert!((cost - 7.0).abs() < 1e-9, "3 input tokens at $1 each and 2 output at $2 each: {cost}");
}

/// A USD budget needs a price on every entry its callers reach, by the rule of
/// the entry's kind: an embedding entry is priced by `input_price` alone (it
/// may not declare an output price), a reranker by the search. Before, an
/// embedding entry counted as unpriced, so any USD budget that could reach
/// one refused the configuration.
#[test]
fn a_usd_budget_counts_an_embedding_priced_by_input_and_a_search_priced_reranker_as_priced() {
    let dir = tempfile::tempdir().unwrap();
    let budget = "\n[[model]]\nid = \"ranker\"\nprovider = \"openai-compatible\"\nkind = \"rerank\"\nwire_id = \"bge\"\n\
                  endpoint = \"http://127.0.0.1:9\"\ncontext_window = 8192\n\n[member.ana]\ndaily_usd = 1.0\n";
    let refused = write(
        dir.path(),
        "weir.toml",
        &format!("{}{budget}", CONFIG.replace("id = \"bare\"", "id = \"bare\"\ninput_price = 1.0\noutput_price = 2.0")),
    );
    let output = run_cli(&["providers", "--config", &refused], &[]);
    let (stdout, stderr) = text(&output);
    assert!(!output.status.success(), "{stdout}");
    assert!(stderr.contains("model `embed`") && stderr.contains("declares no price"), "{stderr}");

    let priced = CONFIG
        .replace("id = \"bare\"", "id = \"bare\"\ninput_price = 1.0\noutput_price = 2.0")
        .replace("context_window = 8192\n", "context_window = 8192\ninput_price = 0.02\n");
    let search_priced = budget.replace("context_window = 8192\n\n", "context_window = 8192\nsearch_price = 2.0\n\n");
    let config = write(dir.path(), "weir.toml", &format!("{priced}{search_priced}"));
    let output = run_cli(&["providers", "--config", &config], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("prices: $2 per thousand searches (up to 100 documents each) (undated)"), "{stdout}");

    // The prices file sets a search price as it sets the others.
    let prices = write(dir.path(), "prices.toml", "[cohere-rerank-v3-5]\nsearch_price = 1.5\n");
    let output = run_cli(&["providers", "--prices", &prices], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("prices: $1.5 per thousand searches (up to 100 documents each) (undated)"), "{stdout}");
}
