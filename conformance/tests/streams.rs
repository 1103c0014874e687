//! The stream checks catch what they promise to: each key of the broken-streams
//! provider (`tests/broken-streams`) fails exactly the stream check its decoder's
//! flaw breaks, a sound decoder passes every one, and `stream` fixtures compare
//! what they say, natively (`tests/tests/stream_checks.rs` runs the same through
//! `weir check`).

// Test code: helpers fail the test.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::path::Path;

use weir_broken_streams_provider::{
    BrokenStreams, CUSTOM, DROP_FRAGMENT, ERROR_AS_TEXT, NO_USAGE, REFUSE, SOUND, STOP_WHEN_CUT,
};
use weir_conformance::stream::checks::{ALL, CUT_SHORT, DIALECT, IN_BAND_ERROR, TEXT_IN_ORDER, TOOL_CALL, USAGE};
use weir_conformance::{Outcome, Report};

fn run(fixtures: Option<&Path>) -> Report {
    weir_conformance::native::run::<BrokenStreams>(fixtures).unwrap()
}

/// The failure reason of `key`'s check `name`; panics if it did not fail.
fn failure<'a>(report: &'a Report, key: &str, name: &str) -> &'a str {
    match &report.find(key, name).unwrap_or_else(|| panic!("no check {key}: {name} in\n{report}")).outcome {
        Outcome::Failed(reason) => reason,
        outcome => panic!("{key}: {name} is {outcome:?}; the kit missed a flaw\n{report}"),
    }
}

/// Every stream check of `key` but those in `failing` passed.
fn others_pass(report: &Report, key: &str, failing: &[&str]) {
    for name in ALL.iter().filter(|name| !failing.contains(name)) {
        let check = report.find(key, name).unwrap_or_else(|| panic!("no check {key}: {name} in\n{report}"));
        assert_eq!(check.outcome, Outcome::Passed, "{key}: {name}\n{report}");
    }
}

#[test]
fn a_sound_decoder_passes_every_stream_check_of_its_dialect() {
    let report = run(None);
    others_pass(&report, SOUND, &[]);
    let dialect = format!("{DIALECT}: OpenAI Chat Completions (SSE), read from its streaming request");
    assert_eq!(report.find(SOUND, &dialect).map(|check| &check.outcome), Some(&Outcome::Passed), "{report}");
}

#[test]
fn a_decoder_that_refuses_events_fails_every_stream_check_naming_the_event() {
    let report = run(None);
    for name in ALL {
        let reason = failure(&report, REFUSE, name);
        assert!(reason.contains("event 1 of ") && reason.contains("refused (unsupported)"), "{name}: {reason}");
    }
    // The component's other checks are not its decoder's: they pass.
    let plain = report.find(REFUSE, "encode: a plain conversation gives a well-formed request without credentials");
    assert_eq!(plain.map(|check| &check.outcome), Some(&Outcome::Passed));
}

#[test]
fn each_flaw_fails_its_own_check_and_only_it() {
    let report = run(None);
    let reason = failure(&report, DROP_FRAGMENT, TOOL_CALL);
    assert!(reason.contains("a fragment was lost or changed"), "{reason}");
    others_pass(&report, DROP_FRAGMENT, &[TOOL_CALL]);

    let reason = failure(&report, NO_USAGE, USAGE);
    assert!(reason.contains("no usage delta"), "{reason}");
    others_pass(&report, NO_USAGE, &[USAGE]);

    let reason = failure(&report, STOP_WHEN_CUT, CUT_SHORT);
    assert!(reason.contains("reported a stop (`end-turn`)"), "{reason}");
    others_pass(&report, STOP_WHEN_CUT, &[CUT_SHORT]);

    let reason = failure(&report, ERROR_AS_TEXT, IN_BAND_ERROR);
    assert!(reason.contains("no error delta"), "{reason}");
    others_pass(&report, ERROR_AS_TEXT, &[IN_BAND_ERROR]);
    assert!(report.find(ERROR_AS_TEXT, TEXT_IN_ORDER).is_some());
}

#[test]
fn a_dialect_the_kit_has_no_sample_of_fails_until_stream_fixtures_check_it() {
    let report = run(None);
    let reason = failure(&report, CUSTOM, DIALECT);
    assert!(
        reason.contains("no stream sample of `POST /v1/generate`") && reason.contains("`stream` fixtures"),
        "{reason}"
    );
    assert!(report.find(CUSTOM, USAGE).is_none(), "no sample checks ran:\n{report}");

    let dir = tempfile_dir("custom");
    std::fs::write(
        dir.join("custom.json"),
        r#"{"kind": "stream", "name": "custom text", "provider": "streams-custom",
            "sse": ["data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
                    "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"],
            "expect": {"ending": "complete", "text": "Hi", "stop": "end-turn", "usage": null}}"#,
    )
    .unwrap();
    let report = run(Some(&dir));
    let passed = format!("{DIALECT}: none the kit has samples of; its `stream` fixtures (1) check its decoder");
    assert_eq!(report.find(CUSTOM, &passed).map(|check| &check.outcome), Some(&Outcome::Passed), "{report}");
    assert_eq!(report.find(CUSTOM, "fixture: custom text").map(|check| &check.outcome), Some(&Outcome::Passed));
}

#[test]
fn stream_fixtures_compare_deltas_endings_and_errors() {
    let dir = tempfile_dir("fixtures");
    std::fs::write(
        dir.join("streams.json"),
        r#"[
          {"kind": "stream", "name": "deltas in order", "provider": "streams-sound",
           "sse": "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n",
           "expect": {"ending": "complete",
                      "deltas": [{"text": "Hi"}, {"stop": {"reason": "end-turn", "raw": "stop", "refusal": null}},
                                 {"usage": {"input": 3, "output": 1}}]}},
          {"kind": "stream", "name": "cut short is malformed at finish", "provider": "streams-sound",
           "sse": "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
           "expect": {"ending": "codec-error", "text": "Hi", "stop": null,
                      "codec_error": {"kind": "malformed", "at": "finish"}}},
          {"kind": "stream", "name": "an error frame ends the stream", "provider": "streams-sound",
           "sse": "data: {\"error\":{\"message\":\"boom\"}}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"late\"}}]}\n\n",
           "expect": {"ending": "in-band-error", "text": "", "error": {"class": "transient", "status": null}}},
          {"kind": "stream", "name": "a wrong expectation fails", "provider": "streams-sound",
           "sse": "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n",
           "expect": {"text": "Bye"}},
          {"kind": "stream", "name": "event-stream frames for an SSE key", "provider": "streams-sound",
           "event_stream": [{"event": "messageStart", "json": {"role": "assistant"}}],
           "expect": {}},
          {"kind": "stream", "name": "both bodies", "provider": "streams-sound",
           "sse": "", "event_stream": [], "expect": {}},
          {"kind": "stream", "name": "the refusal is named", "provider": "streams-refuse",
           "sse": "data: {}\n\n", "expect": {"codec_error": {"kind": "unsupported", "at": "event 1 of 1"}}}
        ]"#,
    )
    .unwrap();
    let report = run(Some(&dir));
    for name in [
        "deltas in order",
        "cut short is malformed at finish",
        "an error frame ends the stream",
        "the refusal is named",
    ] {
        let check = report.find(if name.contains("refusal") { REFUSE } else { SOUND }, &format!("fixture: {name}"));
        assert_eq!(check.map(|check| &check.outcome), Some(&Outcome::Passed), "{name}\n{report}");
    }
    assert!(
        failure(&report, SOUND, "fixture: a wrong expectation fails").contains("$.text is \"Hi\", expected \"Bye\"")
    );
    let reason = failure(&report, SOUND, "fixture: event-stream frames for an SSE key");
    assert!(reason.contains("frames its streams as sse; this stream is aws-event-stream"), "{reason}");
    assert!(failure(&report, SOUND, "fixture: both bodies").contains("exactly one of `sse` and `event_stream`"));
}

#[test]
fn a_stream_case_names_its_typos() {
    let typo = r#"{"kind": "stream", "name": "n", "provider": "p", "sse": "", "expect": {},
                   "event_stream": [{"event": "x", "jsn": {}}]}"#;
    let error = weir_conformance::dialect::parse(typo).unwrap_err().to_string();
    assert!(error.contains("jsn"), "{error}");
}

/// A fresh folder under the system's temp dir for one test's fixtures.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-conformance-streams-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
