//! `weir check FILE.wasm`, run as a process: the conformance kit through the real
//! host on real components — the first-party OpenAI component (chat, embeddings and
//! rerank) and the embeddings-and-rerank Bedrock component with their fixtures, the
//! embeddings-only and rerank-only test components, the template, the Python
//! provider, the Python and JavaScript templates, the hostile one, a broken
//! embeddings component, and files that are not provider components at all.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Output;

mod kit;

use kit::{embedded_component, weir_check};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn openai_component(dir: &Path) -> String {
    embedded_component(dir, "openai")
}

/// A provider's fixture folder, `providers/<name>/conformance`.
fn fixtures(provider: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../providers").join(provider).join("conformance");
    dir.to_str().unwrap().to_owned()
}

fn assert_passes(output: &Output) {
    assert_passes_as(output, "0.7.0");
}

/// [`assert_passes`] for a component of world `version` (the operations
/// components are built against the frozen 0.3.0 WIT).
fn assert_passes_as(output: &Output, version: &str) {
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", text(&output.stderr));
    assert!(stdout.contains(&format!("world {version}, sha256 ")), "{stdout}");
    assert!(stdout.contains("ok    ") && stdout.trim_end().ends_with(" 0 failed"), "{stdout}");
}

/// Every `FAIL` line of `stdout`, without its reason.
fn failures(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("FAIL  "))
        .map(|line| line.split(" — ").next().unwrap_or(line))
        .collect()
}

/// The OpenAI component exports chat, embeddings and rerank: the kit checks all
/// three, with its chat fixtures and its embeddings and rerank fixtures.
#[test]
fn the_openai_component_is_checked_for_chat_embeddings_and_rerank_with_its_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    let output = weir_check(&[&openai_component(dir.path()), "--fixtures", &fixtures("openai")]);
    let stdout = text(&output.stdout);
    assert!(stdout.contains("operations checked: chat, embeddings, rerank"), "{stdout}");
    for line in [
        "ok    openai: encode: quotes, escapes, NUL and emoji survive JSON exactly",
        "ok    openai-compatible: decode: JSON nested 100 000 deep is malformed, not a fault",
        "ok    openai: fixture: insufficient_quota is quota, though it comes as a 429",
        "ok    openai: embeddings `text-embedding-3-small`: encode: max-batch (256) inputs are sent in one request",
        "ok    openai: embeddings `text-embedding-3-small`: encode: dimensions (512) are sent exactly",
        "ok    openai: embeddings `text-embedding-ada-002`: encode: dimensions (256) are refused as unsupported, not dropped",
        "ok    openai-compatible: embeddings `weir-conformance-model-7`: max-batch is at least 1 and the same when asked again",
        "ok    openai: embeddings: classify: retry-after in an HTTP date becomes a hint",
        "ok    openai-compatible: rerank `BAAI/bge-reranker-v2-m3`: encode: top-n (2) is sent exactly",
        "ok    openai: fixture: the reference answer: one vector, its tokens and model",
        "ok    openai-compatible: fixture: a vLLM ranking with echoed documents, its tokens, model and id",
        // The `native` interface, on the key that takes native fields (the Responses API).
        "ok    openai-responses: native: encode without native fields builds chat's request",
        "ok    openai-responses: native: field `prompt_cache_key` is carried or refused",
        "ok    openai-responses: native: decode-native of an HTML error page is malformed, not a fault",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // `openai` (api.openai.com) serves no rerank model, so rerank is checked on the
    // compatible key only.
    assert!(!stdout.contains("openai: rerank"), "{stdout}");
    assert!(failures(&stdout).is_empty(), "{stdout}");
    assert_passes(&output);
}

/// The Bedrock component for embeddings and rerank (no chat): Titan, Cohere Embed
/// v3 and v4, Cohere Rerank, each on the wire ids its fixtures name.
#[test]
fn the_bedrock_retrieval_component_passes_embeddings_and_rerank_with_its_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    let component = embedded_component(dir.path(), "bedrock-retrieval");
    let output = weir_check(&[&component, "--fixtures", &fixtures("bedrock-retrieval")]);
    assert_passes(&output);
    let stdout = text(&output.stdout);
    assert!(stdout.contains("operations checked: embeddings, rerank\n"), "{stdout}");
    for line in [
        "ok    bedrock-retrieval: embeddings `amazon.titan-embed-text-v2:0`: encode: max-batch (1) inputs are sent in one request",
        "ok    bedrock-retrieval: embeddings `amazon.titan-embed-text-v2:0`: encode: dimensions (1024) are sent exactly",
        "ok    bedrock-retrieval: embeddings `cohere.embed-english-v3`: encode: without dimensions it refuses as unsupported (it needs them)",
        "ok    bedrock-retrieval: embeddings `us.cohere.embed-v4:0`: encode: max-batch (96) inputs are sent in one request",
        "ok    bedrock-retrieval: embeddings `us.cohere.embed-v4:0`: encode: the wire model id is sent",
        "ok    bedrock-retrieval: rerank `cohere.rerank-v3-5:0`: encode: top-n (2) is sent exactly",
        "ok    bedrock-retrieval: rerank: decode: an empty body is malformed, not a fault",
        "ok    bedrock-retrieval: fixture: Cohere v4 through a profile: a query is search_query at the pinned width",
        "ok    bedrock-retrieval: fixture: Cohere Rerank: results best first, search units, the request id",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("bedrock-retrieval: encode:"), "no chat check on a component without chat:\n{stdout}");
}

/// Without fixtures the Bedrock component serves none of the wire ids the kit
/// knows on its own, so nothing of embeddings or rerank could be checked: that
/// fails, saying so, instead of passing on no checks.
#[test]
fn a_component_serving_none_of_the_kits_wire_ids_fails_saying_nothing_was_checked() {
    let dir = tempfile::tempdir().unwrap();
    let output = weir_check(&[&embedded_component(dir.path(), "bedrock-retrieval")]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    for check in [
        "FAIL  *: embeddings: some provider key embeds with a wire id the kit tries — no provider key serves any of [\"weir-conformance-model-7\"]",
        "FAIL  *: rerank: some provider key reranks with a wire id the kit tries — no provider key serves any of",
    ] {
        assert!(stdout.contains(check), "missing {check:?} in:\n{stdout}");
    }
}

/// The one-operation test components (`tests/operations`) pass with no fixtures:
/// the kit's own wire id is one they serve, and only their operation is checked.
#[test]
fn the_embeddings_only_and_rerank_only_components_pass_on_their_one_operation() {
    let embed = weir_check(&[env!("WEIR_EMBED_ONLY_WASM")]);
    assert_passes_as(&embed, "0.3.0");
    let stdout = text(&embed.stdout);
    assert!(stdout.contains("operations checked: embeddings\n"), "{stdout}");
    for line in [
        "ok    embed-only: embeddings `weir-conformance-model-7`: max-batch is at least 1 and the same when asked again",
        "ok    embed-only: embeddings `weir-conformance-model-7`: encode: max-batch (4) inputs are sent in one request",
        "ok    embed-only: embeddings `weir-conformance-model-7`: encode: dimensions (256) are sent exactly",
        "ok    embed-only: embeddings: decode: a JSON array is malformed, not a fault",
        "ok    embed-only: embeddings: classify: retry-after in seconds becomes a hint",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("embed-only: encode:") && !stdout.contains("rerank"), "{stdout}");

    let rerank = weir_check(&[env!("WEIR_RERANK_ONLY_WASM")]);
    assert_passes_as(&rerank, "0.3.0");
    let stdout = text(&rerank.stdout);
    assert!(stdout.contains("operations checked: rerank\n"), "{stdout}");
    for line in [
        "ok    rerank-only: rerank `weir-conformance-model-7`: encode: the query and every document are sent",
        "ok    rerank-only: rerank `weir-conformance-model-7`: encode: top-n (2) is sent exactly",
        "ok    rerank-only: rerank: classify: HTTP 500 with an unreadable body",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("rerank-only: encode:") && !stdout.contains("embeddings"), "{stdout}");
}

/// The embeddings-only component misbehaves for named wire ids: `max-batch` 0 for
/// one, a trap in `max-batch` for another. Fixtures that name them make the kit
/// check them, and each fault is named; the rest of the component still passes.
#[test]
fn a_broken_embeddings_component_fails_with_each_fault_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.json"),
        r#"[{"kind": "embeddings_encode", "name": "zero-batch still encodes", "provider": "embed-only",
             "inputs": ["x"], "params": {"model": "zero-batch"}, "expect": {"path": "/embeddings"}},
            {"kind": "embeddings_encode", "name": "panics-in-max-batch still encodes", "provider": "embed-only",
             "inputs": ["x"], "params": {"model": "panics-in-max-batch"}, "expect": {"path": "/embeddings"}}]"#,
    )
    .unwrap();
    let output = weir_check(&[env!("WEIR_EMBED_ONLY_WASM"), "--fixtures", dir.path().to_str().unwrap()]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    for line in [
        "FAIL  embed-only: embeddings `zero-batch`: max-batch is at least 1 and the same when asked again — fault: answered `embeddings.max-batch` 0 for `zero-batch` (max-batch 0; at least 1)",
        "FAIL  embed-only: embeddings `panics-in-max-batch`: max-batch is at least 1 and the same when asked again — fault: trapped in `embeddings.max-batch`",
        "ok    embed-only: fixture: zero-batch still encodes",
        "ok    embed-only: embeddings `weir-conformance-model-7`: max-batch is at least 1 and the same when asked again",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert_eq!(failures(&stdout).len(), 2, "only the two faults fail:\n{stdout}");
    assert!(text(&output.stderr).contains("does not pass the conformance kit"));
}

/// The Claude family, Converse and Gemini, each through the host with its own fixtures.
#[test]
fn the_embedded_anthropic_bedrock_vertex_and_gemini_components_pass_the_kit_with_their_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    for name in
        ["anthropic", "anthropic-bedrock", "anthropic-bedrock-mantle", "anthropic-vertex", "bedrock-converse", "gemini"]
    {
        let output = weir_check(&[&embedded_component(dir.path(), name), "--fixtures", &fixtures(name)]);
        assert_passes(&output);
        assert!(text(&output.stdout).contains(&format!("ok    {name}: fixture: ")), "{name}: no fixture ran");
    }
}

/// weir:provider 0.5.0's media flags, compared by the kit through the host on
/// real components: Converse and Gemini declare inline images and documents
/// only; Converse refuses both by URL, which passes, named as the
/// declaration's; the Claude component declares all four and carries each.
#[test]
fn each_media_refusal_is_compared_with_the_components_declaration() {
    let dir = tempfile::tempdir().unwrap();
    let converse =
        weir_check(&[&embedded_component(dir.path(), "bedrock-converse"), "--fixtures", &fixtures("bedrock-converse")]);
    assert_passes(&converse);
    let stdout = text(&converse.stdout);
    for line in [
        "ok    bedrock-converse: encode: image (base64): sent, as `inline-images` declares",
        "ok    bedrock-converse: encode: document: sent, as `inline-documents` declares",
        "ok    bedrock-converse: encode: image (URL): refused as unsupported, as declared (no `image-urls`) — ",
        "ok    bedrock-converse: encode: document (URL): refused as unsupported, as declared (no `document-urls`) — ",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    let gemini = weir_check(&[&embedded_component(dir.path(), "gemini"), "--fixtures", &fixtures("gemini")]);
    assert_passes(&gemini);
    assert!(text(&gemini.stdout).contains("ok    gemini: encode: image (base64): sent, as `inline-images` declares"));
    let anthropic = weir_check(&[&embedded_component(dir.path(), "anthropic"), "--fixtures", &fixtures("anthropic")]);
    assert_passes(&anthropic);
    let stdout = text(&anthropic.stdout);
    for (name, flag) in [
        ("image (base64)", "inline-images"),
        ("image (URL)", "image-urls"),
        ("document", "inline-documents"),
        ("document (URL)", "document-urls"),
    ] {
        let line = format!("ok    anthropic: encode: {name}: sent, as `{flag}` declares");
        assert!(stdout.contains(&line), "missing {line:?} in:\n{stdout}");
    }
}

/// `weir check` warns of a key declaring `thinking` that no entry of the
/// catalog it is given (`--config`, default the embedded one) could reach,
/// and still passes. Gemini's embedded entries say `reasoning = "thinking"`;
/// a catalog whose Gemini entry does not leaves its `thinking` unreachable.
#[test]
fn thinking_no_catalog_entry_could_reach_is_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let gemini = embedded_component(dir.path(), "gemini");
    let warning = "warn  gemini: declares `thinking`, but no catalog entry could reach it";
    let gemini_fixtures = fixtures("gemini");
    let reached = weir_check(&[&gemini, "--fixtures", &gemini_fixtures]);
    assert_passes(&reached);
    assert!(!text(&reached.stdout).contains(warning), "{}", text(&reached.stdout));

    let config = dir.path().join("weir.toml");
    let entry = "[[model]]\nid = \"flash\"\nprovider = \"gemini\"\nwire_id = \"gemini-2.5-flash\"\n\
                 max_output_tokens = 1000\ncontext_window = 100000\n";
    std::fs::write(&config, entry).unwrap();
    let unreached = weir_check(&[&gemini, "--fixtures", &gemini_fixtures, "--config", config.to_str().unwrap()]);
    assert_passes(&unreached);
    let stdout = text(&unreached.stdout);
    assert!(stdout.contains(warning) && stdout.contains("`reasoning = \"thinking\"`"), "{stdout}");

    std::fs::write(&config, format!("{entry}reasoning = \"thinking\"\n")).unwrap();
    let reached = weir_check(&[&gemini, "--fixtures", &gemini_fixtures, "--config", config.to_str().unwrap()]);
    assert!(!text(&reached.stdout).contains(warning), "{}", text(&reached.stdout));
    std::fs::write(&config, format!("{entry}reasoning = \"thinking\"\ncapabilities = [\"streaming\"]\n")).unwrap();
    let undeclared = weir_check(&[&gemini, "--fixtures", &gemini_fixtures, "--config", config.to_str().unwrap()]);
    assert!(text(&undeclared.stdout).contains(warning), "an entry without `thinking`: {}", text(&undeclared.stdout));
}

#[test]
fn the_template_component_passes_the_kit_with_its_fixtures() {
    assert_passes(&weir_check(&[env!("WEIR_TEMPLATE_WASM"), "--fixtures", &fixtures("ollama")]));
}

/// The provider written in Python (componentize-py), through the same host and kit.
#[test]
fn the_python_component_passes_the_kit_with_its_fixtures() {
    let output = weir_check(&[env!("WEIR_HERMES_PY_WASM"), "--fixtures", &fixtures("hermes-py")]);
    assert_passes(&output);
    let stdout = text(&output.stdout);
    assert!(stdout.contains("ok    hermes-text: fixture: Hermes tool-call markup"), "{stdout}");
}

/// The Python template (`providers/template-py`) passes with its fixtures, and what
/// it refuses (images, documents, tool definitions, ...) is reported as refused,
/// never as sent.
#[test]
fn the_python_template_passes_and_its_refusals_are_reported_as_refusals() {
    let output = weir_check(&[env!("WEIR_TEMPLATE_PY_WASM"), "--fixtures", &fixtures("template-py")]);
    assert_passes(&output);
    let stdout = text(&output.stdout);
    for line in [
        "ok    template-py: encode: tool definitions and tool choice are refused as unsupported — template-py has no tool definitions",
        "ok    template-py: encode: image (base64): refused as unsupported, as declared (no `inline-images`) — template-py cannot send an image",
        "ok    template-py: encode: document (URL): refused as unsupported, as declared (no `document-urls`) — template-py cannot send a document",
        "ok    template-py: encode: tool use and tool result: sent, natively or as text",
        "ok    template-py: fixture: an answer with every field the kit compares",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("template-py: encode: tool definitions and tool choice are sent"), "{stdout}");
    assert!(stdout.contains("passed (5 by refusing as unsupported), 0 failed"), "{stdout}");
}

/// The JavaScript template (`providers/template-js`, componentize-js) passes with its
/// fixtures through the same host and kit; its refusals are reported as refusals, and
/// the 1 MiB message (which `JSON.stringify` inside the component cannot write within
/// the per-call memory limit) is sent whole.
#[test]
fn the_javascript_template_passes_and_its_refusals_are_reported_as_refusals() {
    let output = weir_check(&[env!("WEIR_TEMPLATE_JS_WASM"), "--fixtures", &fixtures("template-js")]);
    assert_passes(&output);
    let stdout = text(&output.stdout);
    for line in [
        "ok    template-js: encode: a 1 MiB message is sent whole",
        "ok    template-js: encode: quotes, escapes, NUL and emoji survive JSON exactly",
        "ok    template-js: encode: tool definitions and tool choice are refused as unsupported — template-js has no tool definitions",
        "ok    template-js: encode: image (base64): refused as unsupported, as declared (no `inline-images`) — template-js cannot send an image",
        "ok    template-js: encode: document (URL): refused as unsupported, as declared (no `document-urls`) — template-js cannot send a document",
        "ok    template-js: encode: tool use and tool result: sent, natively or as text",
        "ok    template-js: decode: JSON nested 100 000 deep is malformed, not a fault",
        "ok    template-js: fixture: a streaming request asks for the stream and its usage",
        "ok    template-js: stream: a tool call split across frames is one call with its whole arguments",
        "ok    template-js: fixture: an answer with every field the kit compares",
        "ok    template-js: fixture: a 429 with retry-after is rate-limited with a hint",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(stdout.contains("57 checks, 57 passed (5 by refusing as unsupported), 0 failed"), "{stdout}");
}

#[test]
fn a_hostile_component_fails_with_each_fault_named_and_exits_nonzero() {
    let output = weir_check(&[env!("WEIR_HOSTILE_WASM")]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    for line in [
        "FAIL  hostile-loop: encode: a plain conversation gives a well-formed request without credentials — fault: exceeded its CPU budget in `chat.encode`",
        "FAIL  hostile-panic: encode: the wire model id is sent — fault: trapped in `chat.encode`",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(text(&output.stderr).contains("does not pass the conformance kit"));
}

#[test]
fn a_fixture_for_a_key_the_component_does_not_serve_fails() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = dir.path().join("fixtures");
    std::fs::create_dir(&fixtures).unwrap();
    std::fs::write(
        fixtures.join("case.json"),
        r#"{"kind": "classify", "name": "stray", "provider": "anthropic",
            "response": {"status": 529}, "expect": {"class": "overloaded"}}"#,
    )
    .unwrap();
    let output = weir_check(&[&openai_component(dir.path()), "--fixtures", fixtures.to_str().unwrap()]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL  anthropic: fixture: stray — the component does not serve `anthropic`"), "{stdout}");
}

#[test]
fn files_that_are_not_provider_components_are_rejected_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm\x0d\0\x01\0 not really").unwrap();
    for (file, reason) in [
        (garbage.to_str().unwrap(), "is rejected: not a valid component"),
        (
            env!("WEIR_WRONG_VERSION_WASM"),
            "targets weir:provider@0.9.0; this host speaks weir:provider@0.1.0, 0.2.0, 0.3.0, 0.4.0, 0.5.0, 0.6.0 and 0.7.0",
        ),
        (env!("WEIR_WRONG_WORLD_WASM"), "is rejected"),
        (env!("WEIR_HOSTILE_FS_WASM"), "imports something this host does not grant"),
        ("/no/such/component.wasm", "cannot read /no/such/component.wasm"),
    ] {
        let output = weir_check(&[file]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{file}: {stderr}");
        assert!(stderr.contains(reason), "{file}: missing {reason:?} in {stderr}");
    }
}

#[test]
fn a_missing_fixture_folder_is_an_error_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let output = weir_check(&[&openai_component(dir.path()), "--fixtures", "/no/such/fixtures"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("fixtures: /no/such/fixtures"), "{}", text(&output.stderr));
}
