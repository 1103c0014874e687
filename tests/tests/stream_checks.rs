//! The conformance kit's stream checks through `weir check`, run as a process: the
//! real host frames each stream (SSE, or AWS event-stream messages written as
//! bytes) and feeds it to the component's own stream decoder. Every in-repo
//! streaming component passes each stream check, by name, with its fixtures
//! (`stream` cases among them); the broken-streams component (`tests/broken-streams`)
//! fails exactly the check each key's flaw breaks: a decoder that refuses every
//! event fails all five naming the event, one that drops a tool-call fragment
//! fails the tool-call check, one that never reports usage the usage check.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Output;

mod kit;

use kit::{embedded_component, weir_check};

/// The built-in stream checks, as the report names them.
const STREAM_CHECKS: [&str; 5] = [
    "stream: text arrives in order, then an end-turn stop",
    "stream: a tool call split across frames is one call with its whole arguments",
    "stream: usage is reported",
    "stream: an in-band error frame becomes an error delta of its class",
    "stream: a stream cut short (no end) reports no stop",
];

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A provider's fixture folder, `providers/<name>/conformance`.
fn fixtures(provider: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../providers").join(provider).join("conformance");
    dir.to_str().unwrap().to_owned()
}

/// Every `FAIL` line of `stdout`, as `key: check` without its reason.
fn failures(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("FAIL  "))
        .map(|line| line.split(" — ").next().unwrap_or(line))
        .collect()
}

/// `key` passed every stream check, on the samples of `dialect`.
fn passes_every_stream_check(stdout: &str, key: &str, dialect: &str) {
    let recognized = format!("ok    {key}: stream: dialect: {dialect}, read from its streaming request");
    assert!(stdout.contains(&recognized), "missing {recognized:?} in:\n{stdout}");
    for check in STREAM_CHECKS {
        let line = format!("ok    {key}: {check}\n");
        assert!(stdout.contains(&line), "missing {line:?} in:\n{stdout}");
    }
}

const CHAT_SSE: &str = "OpenAI Chat Completions (SSE)";
const RESPONSES_SSE: &str = "OpenAI Responses (SSE)";
const MESSAGES_SSE: &str = "Anthropic Messages (SSE)";
const CONVERSE: &str = "Bedrock ConverseStream (AWS event stream)";
const INVOKE: &str = "Anthropic on Bedrock InvokeModelWithResponseStream (AWS event stream)";
const GEMINI_SSE: &str = "Gemini streamGenerateContent (SSE)";
const VERTEX_SSE: &str = "Anthropic Messages on Vertex AI streamRawPredict (SSE)";

/// An embedded component, its streaming keys with the dialect each speaks, and
/// fixture lines its run must pass.
struct Streaming {
    component: &'static str,
    keys: &'static [(&'static str, &'static str)],
    fixture_lines: &'static [&'static str],
}

const IN_REPO: [Streaming; 7] = [
    Streaming {
        component: "openai",
        keys: &[("openai", CHAT_SSE), ("openai-compatible", CHAT_SSE), ("openai-responses", RESPONSES_SSE)],
        fixture_lines: &["openai: fixture: a stream cut before finish_reason is malformed at finish"],
    },
    Streaming {
        component: "anthropic",
        keys: &[("anthropic", MESSAGES_SSE)],
        fixture_lines: &["anthropic: fixture: thinking with its signature, then text"],
    },
    Streaming { component: "anthropic-bedrock", keys: &[("anthropic-bedrock", INVOKE)], fixture_lines: &[] },
    Streaming {
        component: "anthropic-bedrock-mantle",
        keys: &[("anthropic-bedrock-mantle", MESSAGES_SSE)],
        fixture_lines: &[],
    },
    Streaming {
        component: "anthropic-vertex",
        keys: &[("anthropic-vertex", VERTEX_SSE)],
        fixture_lines: &["anthropic-vertex: fixture: streamRawPredict's SSE carries a tool call"],
    },
    Streaming {
        component: "bedrock-converse",
        keys: &[("bedrock-converse", CONVERSE)],
        fixture_lines: &[
            "bedrock-converse: fixture: reasoning, text, then usage in metadata",
            "bedrock-converse: fixture: an error frame (message-type error) is transient",
        ],
    },
    Streaming {
        component: "gemini",
        keys: &[("gemini", GEMINI_SSE), ("vertex-gemini", GEMINI_SSE)],
        fixture_lines: &[
            "gemini: fixture: thought then text, the signature on an empty closing part, usage with thoughts",
            "vertex-gemini: fixture: a blocked prompt ends the stream with a refusal",
        ],
    },
];

#[test]
fn every_in_repo_streaming_component_passes_each_stream_check_with_its_stream_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    for Streaming { component, keys, fixture_lines } in IN_REPO {
        let output = weir_check(&[&embedded_component(dir.path(), component), "--fixtures", &fixtures(component)]);
        let stdout = stdout(&output);
        assert!(output.status.success() && failures(&stdout).is_empty(), "{component}:\n{stdout}");
        for (key, dialect) in keys {
            passes_every_stream_check(&stdout, key, dialect);
        }
        for line in fixture_lines {
            assert!(stdout.contains(&format!("ok    {line}\n")), "{component}: missing {line:?} in:\n{stdout}");
        }
    }
}

/// The Python provider (componentize-py) decodes the Chat Completions dialect too.
#[test]
fn the_python_component_passes_each_stream_check() {
    let output = weir_check(&[env!("WEIR_HERMES_PY_WASM"), "--fixtures", &fixtures("hermes-py")]);
    let stdout = stdout(&output);
    assert!(output.status.success(), "{stdout}");
    passes_every_stream_check(&stdout, "hermes-text", CHAT_SSE);
}

/// Runs `weir check` on the broken-streams component: it must fail.
fn check_broken(fixtures: Option<&Path>) -> String {
    let mut args = vec![env!("WEIR_BROKEN_STREAMS_WASM")];
    if let Some(dir) = fixtures {
        args.extend(["--fixtures", dir.to_str().unwrap()]);
    }
    let output = weir_check(&args);
    let stdout = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not pass the conformance kit"));
    stdout
}

#[test]
fn a_decoder_that_refuses_every_event_fails_each_stream_check_naming_the_event() {
    let stdout = check_broken(None);
    for check in STREAM_CHECKS {
        let line = format!("FAIL  streams-refuse: {check} — event 1 of ");
        assert!(stdout.contains(&line), "missing {line:?} in:\n{stdout}");
    }
    assert!(
        stdout.contains("refused (unsupported): streams-refuse does not stream"),
        "the decoder's own reason is shown:\n{stdout}"
    );
    passes_every_stream_check(&stdout, "streams-sound", CHAT_SSE);
}

#[test]
fn a_decoder_that_drops_a_tool_call_fragment_fails_the_tool_call_check() {
    let stdout = check_broken(None);
    let line = "FAIL  streams-drop-fragment: stream: a tool call split across frames is one call with its whole \
                arguments — its fragments join into \"{\\\"city\\\": \\\"Pa\", expected {\"city\": \"Paris\"}: a \
                fragment was lost or changed";
    assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
}

#[test]
fn a_decoder_that_never_reports_usage_fails_the_usage_check() {
    let stdout = check_broken(None);
    let line = "FAIL  streams-no-usage: stream: usage is reported — no usage delta";
    assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
}

/// Each flaw fails its own check and no other; a dialect the kit has no sample of
/// fails once, saying what to add.
#[test]
fn the_broken_streams_component_fails_exactly_the_checks_its_flaws_break() {
    let stdout = check_broken(None);
    let mut expected: Vec<String> = STREAM_CHECKS.iter().map(|check| format!("streams-refuse: {check}")).collect();
    expected.extend(
        [
            "streams-drop-fragment: stream: a tool call split across frames is one call with its whole arguments",
            "streams-no-usage: stream: usage is reported",
            "streams-stop-when-cut: stream: a stream cut short (no end) reports no stop",
            "streams-error-as-text: stream: an in-band error frame becomes an error delta of its class",
            "streams-custom: stream: dialect",
        ]
        .map(str::to_owned),
    );
    let mut found: Vec<&str> = failures(&stdout);
    found.sort_unstable();
    expected.sort_unstable();
    assert_eq!(found, expected, "{stdout}");
    assert!(
        stdout.contains("FAIL  streams-custom: stream: dialect — the kit has no stream sample of `POST /v1/generate`"),
        "{stdout}"
    );
}

/// `stream` fixtures through the host's framing: SSE chunks split inside a line
/// and a CRLF, a stream of a dialect the kit has no sample of, a refusal named
/// by its event, and a wrong expectation failing with the difference.
#[test]
fn stream_fixtures_run_through_the_hosts_framing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("streams.json"),
        r#"[
          {"kind": "stream", "name": "chunks split inside a line", "provider": "streams-custom",
           "sse": ["data: {\"choices\":[{\"delta\":{\"content\":\"Hi", " there\"}}]}\r", "\n\r\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"],
           "expect": {"ending": "complete", "text": "Hi there", "stop": "end-turn",
                      "deltas": [{"text": "Hi there"}, {"stop": {"reason": "end-turn", "raw": "stop"}}]}},
          {"kind": "stream", "name": "a refusal is named by its event", "provider": "streams-refuse",
           "sse": "data: {}\n\ndata: {}\n\n",
           "expect": {"ending": "codec-error", "codec_error": {"kind": "unsupported", "at": "event 1 of 2"}}},
          {"kind": "stream", "name": "a wrong expectation", "provider": "streams-sound",
           "sse": "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n",
           "expect": {"ending": "cut-short"}}
        ]"#,
    )
    .unwrap();
    let stdout = check_broken(Some(dir.path()));
    for line in [
        "ok    streams-custom: fixture: chunks split inside a line",
        "ok    streams-custom: stream: dialect: none the kit has samples of; its `stream` fixtures (1) check its decoder",
        "ok    streams-refuse: fixture: a refusal is named by its event",
        "FAIL  streams-sound: fixture: a wrong expectation — $.ending is \"complete\", expected \"cut-short\"",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(!failures(&stdout).contains(&"streams-custom: stream: dialect"), "{stdout}");
}

/// A fixture of a kind the kit does not have is an error naming the kinds it has
/// (`stream` among them), said once, not once per link of its error chain.
#[test]
fn a_fixture_of_an_unknown_kind_is_named_once_with_the_kinds_there_are() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("typo.json"),
        r#"{"kind": "streem", "name": "n", "provider": "streams-sound", "sse": "", "expect": {}}"#,
    )
    .unwrap();
    let output = weir_check(&[env!("WEIR_BROKEN_STREAMS_WASM"), "--fixtures", dir.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("unknown variant `streem`").count(), 1, "{stderr}");
    assert!(stderr.contains("`stream`") && stderr.contains("typo.json"), "{stderr}");
}
