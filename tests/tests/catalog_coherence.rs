//! A coherent catalog at load, through the real `weir` binary: a wire id its provider
//! does not serve is refused naming the entry; an entry naming a provider key no component
//! has is linked to the one provider that serves and claims its id with the same
//! addressing (reported by `weir providers`, the log and the admin `/v1/models`, and its
//! calls reach that provider's wire), or is listed unavailable with the reason; a
//! component that traps while answering leaves only its own entries unavailable;
//! `requires_lax` and `[retention.*]` on legacy Bedrock are refused; a Mantle entry with
//! `tpm` and no `rpm` admits `tpm / 1000` requests a minute.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::anthropic_wire::{self, text_block, usage_json};
use weir_tests::gateway::precompile;
use weir_tests::{FakeUpstream, Gateway, run_cli};

const KEY: &str = "sk-ant-weir-test-0123456789";

/// One `[[model]]` with the limits every entry needs; `more` adds lines.
fn entry(id: &str, provider: &str, wire_id: &str, more: &str) -> String {
    format!(
        "[[model]]\nid = \"{id}\"\nprovider = \"{provider}\"\nwire_id = \"{wire_id}\"\nmax_output_tokens = 8000\n\
         context_window = 200000\noutput_tokens = 100\nmax_retries = 0\n{more}\n"
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `weir providers --config FILE` on this config (written to a temp dir).
fn providers(config: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, config).unwrap();
    run_cli(&["providers", "--config", path.to_str().unwrap()], &[])
}

/// `weir providers` on a running gateway's config and providers folder.
fn providers_of(gateway: &Gateway, folder: Option<&Path>) -> String {
    let mut args = vec!["providers", "--config", gateway.config_path().to_str().unwrap()];
    if let Some(folder) = folder {
        args.extend(["--providers-dir", folder.to_str().unwrap()]);
    }
    let output = run_cli(&args, &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

/// The admin detail of one model in `GET /v1/models` (no keys: the operator's view).
async fn model_detail(gateway: &Gateway, id: &str) -> Value {
    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let model = models["data"].as_array().unwrap().iter().find(|model| model["id"] == id);
    model.unwrap_or_else(|| panic!("no model {id} in {models}"))["weir"].clone()
}

async fn post(gateway: &Gateway, model: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let body = json!({"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": "Hello"}]});
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap())
}

/// A direct Claude id on a Bedrock surface, a Bedrock id on the direct API and a Bedrock
/// Claude id on Converse: each a configuration error naming the entry, the provider and the
/// wire id, so neither `weir providers` nor `weir serve` starts.
#[test]
fn a_wire_id_spelled_for_another_surface_is_refused_at_load() {
    let cases = [
        ("direct-on-bedrock", "anthropic-bedrock", "claude-opus-5"),
        ("direct-on-mantle", "anthropic-bedrock-mantle", "claude-opus-5"),
        ("bedrock-on-direct", "anthropic", "anthropic.claude-opus-5"),
        ("claude-on-converse", "bedrock-converse", "us.anthropic.claude-opus-5"),
        ("direct-claude-on-converse", "bedrock-converse", "claude-opus-5"),
    ];
    for (id, provider, wire_id) in cases {
        let config = format!("{}{}", entry("fine", "anthropic", "claude-opus-5", ""), entry(id, provider, wire_id, ""));
        let output = providers(&config);
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{id} loaded:\n{}", text(&output.stdout));
        for named in [format!("model `{id}`"), format!("provider `{provider}`"), format!("wire id `{wire_id}`")] {
            assert!(stderr.contains(&named), "{id}: {named} missing from: {stderr}");
        }
    }
    // `weir serve` exits non-zero on the same error, before it listens.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, entry("direct-on-bedrock", "anthropic-bedrock", "claude-opus-5", "")).unwrap();
    let output = run_cli(&["serve", "--config", path.to_str().unwrap(), "--listen", "127.0.0.1:0"], &[]);
    assert!(!output.status.success());
    assert!(!text(&output.stdout).contains("listening on"), "{}", text(&output.stdout));
    assert!(text(&output.stderr).contains("model `direct-on-bedrock`"), "{}", text(&output.stderr));
}

/// The embedded default catalog is coherent: every entry's wire id is served by its own
/// provider, none is linked or unavailable (the quick start `weir serve` keeps working).
#[test]
fn the_embedded_default_catalog_loads_with_every_entry_served() {
    let output = run_cli(&["providers"], &[]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", text(&output.stderr));
    for model in ["gpt-5", "claude-opus-5-direct", "claude-opus-5-bedrock", "claude-opus-5-mantle", "nova-pro"] {
        assert!(stdout.contains(&format!(" model {model}: endpoint ")), "{model} not listed:\n{stdout}");
    }
    assert!(!stdout.contains("UNAVAILABLE") && !stdout.contains("(linked"), "{stdout}");
}

/// An entry naming the runtime seed's key `anthropic-direct` (no component here has it)
/// with a direct Claude id is linked to `anthropic`, the one provider that serves and
/// claims it. The link is in the log, in `weir providers` and in the admin detail; a call
/// reaches the fake upstream on the Messages wire with the entry's wire id and credential.
#[tokio::test]
async fn a_provider_link_is_reported_and_its_calls_reach_the_linked_provider() {
    let upstream = FakeUpstream::start().await;
    let endpoint = format!("endpoint = \"http://{}\"\ncredential = \"weir-anthropic-key\"", upstream.addr());
    let config = format!(
        "read_timeout_secs = 5\n{}{}",
        entry("sonnet-elsewhere", "anthropic-direct", "claude-sonnet-4-5", &endpoint),
        // No endpoint: linked all the same, to the provider's own (trusted) default.
        entry("opus-elsewhere", "anthropic-direct", "claude-opus-5", ""),
    );
    let gateway = Gateway::start_with(&config, &[("WEIR_ANTHROPIC_KEY", KEY)], None).await;
    let log = gateway.wait_for_stderr("linked_provider=anthropic", Duration::from_secs(5)).await;
    assert!(log.contains("model=sonnet-elsewhere") && log.contains("provider=anthropic-direct"), "{log}");

    let table = providers_of(&gateway, None);
    assert!(
        table.contains(&format!(
            " model sonnet-elsewhere: endpoint http://{} (linked: names provider `anthropic-direct`, wire id \
             `claude-sonnet-4-5`)",
            upstream.addr()
        )),
        "{table}"
    );
    assert!(table.contains(" model opus-elsewhere: endpoint https://api.anthropic.com (linked"), "{table}");
    let detail = model_detail(&gateway, "sonnet-elsewhere").await;
    assert_eq!(detail["provider"], "anthropic-direct", "{detail}");
    assert_eq!(detail["linked_provider"], "anthropic", "{detail}");
    assert_eq!(detail["available"], true, "{detail}");
    assert_eq!(detail["provider_source"], "embedded:anthropic", "{detail}");

    upstream.push(anthropic_wire::message(vec![text_block("Linked.")], "end_turn", usage_json(9, 3, 0, 0)));
    let (status, headers, body) = post(&gateway, "sonnet-elsewhere").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Linked.", "{body}");
    assert_eq!(headers["x-weir-provider"], "anthropic");
    let received = upstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/v1/messages", "the linked provider's wire");
    assert_eq!(received[0].header("x-api-key"), Some(KEY));
    assert_eq!(received[0].json()["model"], "claude-sonnet-4-5");
}

/// A Bedrock Claude id both Bedrock surfaces serve and claim is ambiguous without an
/// endpoint (never resolved silently); an id no provider claims links nowhere. Both stay
/// listed, unavailable with the reason, and their calls fail as `provider_unavailable`
/// with nothing sent. An endpoint of Mantle's addressing picks Mantle.
#[tokio::test]
async fn an_ambiguous_or_unclaimed_entry_is_listed_unavailable_and_sends_nothing() {
    let upstream = FakeUpstream::start().await;
    let local = format!("endpoint = \"{}\"", upstream.base_url());
    let config = format!(
        "{}{}{}",
        entry("ambiguous", "bedrock-claude", "anthropic.claude-opus-5", ""),
        entry("unclaimed", "vllm-elsewhere", "qwen3", &local),
        entry(
            "mantle-by-endpoint",
            "bedrock-claude",
            "anthropic.claude-opus-5",
            "endpoint = \"https://bedrock-mantle.us-east-1.api.aws/anthropic\""
        ),
    );
    let gateway = Gateway::start(&config).await;

    let ambiguous = model_detail(&gateway, "ambiguous").await;
    assert_eq!(ambiguous["available"], false, "{ambiguous}");
    assert_eq!(ambiguous["linked_provider"], Value::Null);
    let reason = ambiguous["unavailable_reason"].as_str().unwrap();
    assert!(reason.contains("ambiguous"), "{reason}");
    assert!(reason.contains("`anthropic-bedrock` (") && reason.contains("`anthropic-bedrock-mantle` ("), "{reason}");
    let unclaimed = model_detail(&gateway, "unclaimed").await;
    assert_eq!(unclaimed["available"], false, "{unclaimed}");
    let reason = unclaimed["unavailable_reason"].as_str().unwrap();
    assert!(reason.contains("no loaded provider serves and claims `qwen3`"), "{reason}");
    let mantle = model_detail(&gateway, "mantle-by-endpoint").await;
    assert_eq!(mantle["linked_provider"], "anthropic-bedrock-mantle", "{mantle}");

    let table = providers_of(&gateway, None);
    assert!(table.contains("UNAVAILABLE model ambiguous (provider `bedrock-claude`"), "{table}");
    assert!(table.contains("UNAVAILABLE model unclaimed (provider `vllm-elsewhere`"), "{table}");
    for model in ["ambiguous", "unclaimed"] {
        let (status, _, body) = post(&gateway, model).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "provider_unavailable", "{body}");
    }
    assert!(upstream.received().is_empty(), "nothing is sent for an unavailable entry");
}

/// A component that panics in `describe.serves` does not stop the gateway: its entries
/// (this one and, since its fault is kept, every other on it) are unavailable with the
/// fault named, and the other providers keep serving.
#[tokio::test]
async fn a_component_that_traps_while_answering_leaves_only_its_entries_unavailable() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let hostile = folder.path().join("hostile.wasm");
    std::fs::copy(env!("WEIR_HOSTILE_WASM"), &hostile).unwrap();
    precompile(&hostile);
    let local = format!("endpoint = \"{}\"", upstream.base_url());
    let config = format!(
        "{}{}{}",
        entry("trap", "hostile-panic", "panics-in-serves", &local),
        entry("same-component", "hostile-utf8", "anything", &local),
        entry("fine", "openai-compatible", "qwen3", &local),
    );
    let gateway = Gateway::start_with(&config, &[], Some(folder.path())).await;

    for model in ["trap", "same-component"] {
        let detail = model_detail(&gateway, model).await;
        assert_eq!(detail["available"], false, "{detail}");
        let reason = detail["unavailable_reason"].as_str().unwrap();
        assert!(reason.contains("could not say whether it serves") && reason.contains("describe.serves"), "{reason}");
        let (status, _, body) = post(&gateway, model).await;
        assert_eq!(status, 503, "{body}");
    }
    assert!(upstream.received().is_empty());
    let (status, _, body) = post(&gateway, "fine").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(upstream.received().len(), 1);
}

/// `requires_lax` on legacy Bedrock (InvokeModel binds no retention project) is refused
/// even with a `[retention.anthropic-bedrock]`, and that table is itself refused.
#[test]
fn requires_lax_on_a_surface_that_binds_no_retention_project_is_refused() {
    let lax = entry("fable", "anthropic-bedrock", "us.anthropic.fable-5", "requires_lax = true");
    let output = providers(&lax);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("model `fable`") && stderr.contains("binds no retention project"), "{stderr}");

    let with_table = format!("[retention.anthropic-bedrock]\nheader = \"anthropic-workspace-id\"\n{lax}");
    let output = providers(&with_table);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("[retention.anthropic-bedrock]") && stderr.contains("remove the table"), "{stderr}");

    // Mantle binds one: the same model there loads.
    let mantle = format!(
        "[retention.anthropic-bedrock-mantle]\nheader = \"anthropic-workspace-id\"\n{}",
        entry("fable", "anthropic-bedrock-mantle", "anthropic.fable-5", "requires_lax = true")
    );
    let output = providers(&mantle);
    assert!(output.status.success(), "{}", text(&output.stderr));
}

/// A Mantle entry with `tpm` and no `rpm` admits `tpm / 1000` requests a minute (at least
/// one), also when it is Mantle by link; a declared `rpm` stays, and no other surface
/// derives one.
#[tokio::test]
async fn a_mantle_entry_with_tpm_and_no_rpm_admits_tpm_over_1000_requests_a_minute() {
    let mantle_endpoint = "endpoint = \"https://bedrock-mantle.us-east-1.api.aws/anthropic\"\n";
    let config = [
        entry("mantle", "anthropic-bedrock-mantle", "anthropic.claude-opus-5", "tpm = 2000000"),
        entry("mantle-small", "anthropic-bedrock-mantle", "anthropic.claude-opus-5", "tpm = 500"),
        entry("mantle-declared", "anthropic-bedrock-mantle", "anthropic.claude-opus-5", "tpm = 2000000\nrpm = 7"),
        entry("mantle-linked", "claude-on-aws", "anthropic.claude-opus-5", &format!("{mantle_endpoint}tpm = 30000")),
        entry("bedrock", "anthropic-bedrock", "us.anthropic.claude-opus-5", "tpm = 2000000"),
    ]
    .concat();
    let gateway = Gateway::start(&config).await;
    for (model, rpm) in [
        ("mantle", json!(2000)),
        ("mantle-small", json!(1)),
        ("mantle-declared", json!(7)),
        ("mantle-linked", json!(30)),
        ("bedrock", Value::Null),
    ] {
        let detail = model_detail(&gateway, model).await;
        assert_eq!(detail["admission"]["rpm"], rpm, "{model}: {detail}");
    }
    assert_eq!(model_detail(&gateway, "mantle-linked").await["linked_provider"], "anthropic-bedrock-mantle");
}

/// Routes are recomputed when the providers folder changes: a component dropped in while
/// serving makes its entries available — except one whose wire id it says it does not
/// serve, which stays unavailable with that reason (a bad drop-in never stops the
/// gateway), its calls refused with nothing sent.
#[tokio::test]
async fn a_reload_recomputes_routes_and_a_wire_id_the_new_component_refuses_stays_unavailable() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let hostile = std::fs::read(env!("WEIR_HOSTILE_WASM")).unwrap();
    let local = format!("endpoint = \"{}\"", upstream.base_url());
    let config = format!(
        "watch_interval_ms = 100\n{}{}",
        entry("served", "hostile-env", "fine", &local),
        entry("refused", "hostile-env", "not-served", &local),
    );
    let gateway = Gateway::start_with(&config, &[], Some(folder.path())).await;
    assert_eq!(model_detail(&gateway, "served").await["available"], false, "no component has the key yet");

    // Write then rename: the watcher never sees half a file.
    let partial = folder.path().join(".hostile.wasm.partial");
    std::fs::write(&partial, hostile).unwrap();
    std::fs::rename(&partial, folder.path().join("hostile.wasm")).unwrap();
    let mut served = Value::Null;
    for _ in 0..200 {
        served = model_detail(&gateway, "served").await;
        if served["available"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(served["available"], true, "{served}\n{}", gateway.stderr());
    let refused = model_detail(&gateway, "refused").await;
    assert_eq!(refused["available"], false, "{refused}");
    let reason = refused["unavailable_reason"].as_str().unwrap();
    assert!(reason.contains("provider `hostile-env` does not serve wire id `not-served`"), "{reason}");
    let (status, _, body) = post(&gateway, "refused").await;
    assert_eq!(status, 503, "{body}");
    assert!(upstream.received().is_empty(), "nothing sent for the refused entry");
    let (status, _, body) = post(&gateway, "served").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(upstream.received().len(), 1);
}
