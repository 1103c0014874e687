//! The built-in stream checks: every provider key that declares `streaming` is
//! fed the kit's samples of its dialect ([`super::samples`]), read from the
//! streaming request it encodes, and must:
//!
//! - stream text in order, then one end-turn stop ([`TEXT_IN_ORDER`]);
//! - join a tool call's arguments split across frames into one whole call ([`TOOL_CALL`]);
//! - report the usage the upstream sent ([`USAGE`]);
//! - turn an error frame into an error delta of the class it means ([`IN_BAND_ERROR`]);
//! - report no stop for a stream whose body ended before its end ([`CUT_SHORT`]):
//!   `finish` returns what it held and no stop, or declines as `malformed`.
//!
//! A decoder that refuses events fails each check, naming the event. A key whose
//! dialect the kit has no sample of passes only with `stream` fixtures of its own
//! ([`DIALECT`] says which).

use serde_json::Value;

use super::samples::{self, ARGUMENTS, Dialect, INPUT_TOKENS, OUTPUT_TOKENS, Sample, TEXT, TEXT_BEFORE_ERROR, TOOL};
use super::summary::{DecodedStream, Ending};
use crate::dialect::Case;
use crate::fixture::{Block, Conversation, Delta, Params, ProviderSummary, Role, Turn};
use crate::generic::{MAX_TOKENS, MODEL};
use crate::json::excerpt;
use crate::report::Report;
use crate::subject::Subject;

/// Which dialect the checks speak, or why they cannot run.
pub const DIALECT: &str = "stream: dialect";
pub const TEXT_IN_ORDER: &str = "stream: text arrives in order, then an end-turn stop";
pub const TOOL_CALL: &str = "stream: a tool call split across frames is one call with its whole arguments";
pub const USAGE: &str = "stream: usage is reported";
pub const IN_BAND_ERROR: &str = "stream: an in-band error frame becomes an error delta of its class";
pub const CUT_SHORT: &str = "stream: a stream cut short (no end) reports no stop";
/// Every check a key of a dialect the kit knows runs, in order.
pub const ALL: [&str; 5] = [TEXT_IN_ORDER, TOOL_CALL, USAGE, IN_BAND_ERROR, CUT_SHORT];

/// Runs the stream checks for each key of `providers` that declares streaming.
pub async fn run<S: Subject>(subject: &S, providers: &[ProviderSummary], cases: &[Case], report: &mut Report) {
    for provider in providers.iter().filter(|provider| provider.streaming) {
        let key = &provider.key;
        match dialect_of(subject, provider).await {
            Ok(dialect) => {
                report.record(key, format!("{DIALECT}: {}, read from its streaming request", dialect.name), Ok(()));
                sample_checks(subject, provider, &dialect.sample(), report).await;
            }
            Err(reason) => match stream_fixtures(cases, key) {
                0 => report.record(key, DIALECT, Err(format!("{reason}; give it `stream` fixtures"))),
                count => report.record(
                    key,
                    format!(
                        "{DIALECT}: none the kit has samples of; its `stream` fixtures ({count}) check its decoder"
                    ),
                    Ok(()),
                ),
            },
        }
    }
}

fn stream_fixtures(cases: &[Case], key: &str) -> usize {
    cases.iter().filter(|case| matches!(case, Case::Stream { provider, .. } if provider == key)).count()
}

/// The dialect of the streaming request `provider` encodes, if the kit has samples of it.
async fn dialect_of<S: Subject>(subject: &S, provider: &ProviderSummary) -> Result<&'static Dialect, String> {
    let conversation = Conversation {
        turns: vec![Turn {
            role: Role::User,
            content: vec![Block::Text { text: "Count to three.".to_owned() }],
            cache: false,
        }],
        ..Conversation::default()
    };
    let params = Params {
        model: MODEL.to_owned(),
        max_tokens: MAX_TOKENS,
        thinking_budget: None,
        effort: None,
        temperature: None,
        stop: Vec::new(),
        response_schema: None,
        stream: true,
    };
    let request = match subject.encode(&provider.key, &conversation, &params).await {
        Err(fault) => return Err(format!("fault encoding a streaming request: {}", fault.0)),
        Ok(Err(failure)) => {
            return Err(format!("it refused to encode a streaming request ({}): {}", failure.kind(), failure.reason()));
        }
        Ok(Ok(request)) => request,
    };
    samples::recognize(&request, provider.framing).ok_or_else(|| {
        let known: Vec<&str> = samples::DIALECTS.iter().map(|dialect| dialect.name).collect();
        format!(
            "the kit has no stream sample of `{} {}` framed as {} (it has samples of {})",
            request.method,
            request.path_and_query,
            provider.framing.name(),
            known.join(", ")
        )
    })
}

async fn sample_checks<S: Subject>(subject: &S, provider: &ProviderSummary, sample: &Sample, report: &mut Report) {
    let key = &provider.key;
    let text = super::decode(subject, provider, &sample.text.input()).await;
    report.record(key, TEXT_IN_ORDER, text.as_ref().map_err(Clone::clone).and_then(text_in_order));
    report.record(key, USAGE, text.and_then(|stream| usage(&stream)));
    let tool_call = super::decode(subject, provider, &sample.tool_call.input()).await;
    report.record(key, TOOL_CALL, tool_call.and_then(|stream| whole_call(&stream)));
    let error = super::decode(subject, provider, &sample.error.input()).await;
    report.record(key, IN_BAND_ERROR, error.and_then(|stream| error_delta(&stream, sample.error_classes)));
    let cut = super::decode(subject, provider, &sample.text.cut_short()).await;
    report.record(key, CUT_SHORT, cut.and_then(|stream| no_stop(&stream)));
}

/// The decoder took every event and `finish`, and no error frame was reported.
fn accepted(stream: &DecodedStream) -> Result<(), String> {
    if let Some(refused) = &stream.codec_error {
        return Err(format!("{} refused ({}): {}", refused.at, refused.kind, refused.reason));
    }
    match &stream.error {
        Some(error) => Err(format!("an in-band error came instead: `{}` ({})", error.class.class, error.class.detail)),
        None => Ok(()),
    }
}

fn stops(stream: &DecodedStream) -> usize {
    stream.deltas.iter().filter(|delta| matches!(delta, Delta::Stop(_))).count()
}

fn text_in_order(stream: &DecodedStream) -> Result<(), String> {
    accepted(stream)?;
    if stream.text != TEXT {
        return Err(format!("the text is {:?}; the stream sent {TEXT:?}", stream.text));
    }
    one_stop(stream, "end-turn")?;
    let last_text = stream.deltas.iter().rposition(|delta| matches!(delta, Delta::Text(_)));
    let stop = stream.deltas.iter().position(|delta| matches!(delta, Delta::Stop(_)));
    if last_text > stop {
        return Err("text came after the stop".to_owned());
    }
    Ok(())
}

/// Exactly one stop, of `reason`.
fn one_stop(stream: &DecodedStream, reason: &str) -> Result<(), String> {
    match (stops(stream), stream.stop.as_deref()) {
        (0, _) | (_, None) => Err("no stop: the host would fail the stream as cut short".to_owned()),
        (1, Some(found)) if found == reason => Ok(()),
        (1, Some(found)) => Err(format!("the stop is `{found}`, expected `{reason}`")),
        (count, _) => Err(format!("{count} stops; the host expects one")),
    }
}

fn usage(stream: &DecodedStream) -> Result<(), String> {
    accepted(stream)?;
    match &stream.usage {
        None => Err("no usage delta: the host would charge the call as if it used its whole output reserve".to_owned()),
        Some(usage) if usage.input == INPUT_TOKENS && usage.output == OUTPUT_TOKENS => Ok(()),
        Some(usage) => Err(format!(
            "the last usage is {} in, {} out; the stream reported {INPUT_TOKENS} in, {OUTPUT_TOKENS} out",
            usage.input, usage.output
        )),
    }
}

fn whole_call(stream: &DecodedStream) -> Result<(), String> {
    accepted(stream)?;
    let starts: Vec<&str> = stream
        .deltas
        .iter()
        .filter_map(|delta| match delta {
            Delta::ToolCallStart { id, name, .. } if name == TOOL => Some(id.as_str()),
            _ => None,
        })
        .collect();
    match starts.as_slice() {
        [id] if !id.is_empty() => {}
        [_] => return Err("the call started with an empty id".to_owned()),
        found => return Err(format!("{} calls to `{TOOL}` started; the stream carried one", found.len())),
    }
    let expected: Value = serde_json::from_str(ARGUMENTS).map_err(|e| e.to_string())?;
    match stream.call_arguments(TOOL).as_slice() {
        [arguments] if **arguments == expected => {}
        [arguments] => {
            return Err(format!(
                "its fragments join into {}, expected {ARGUMENTS}: a fragment was lost or changed",
                excerpt(arguments)
            ));
        }
        _ => return Err("its start names another index than its fragments".to_owned()),
    }
    one_stop(stream, "tool-use")
}

fn error_delta(stream: &DecodedStream, classes: &[&str]) -> Result<(), String> {
    // A stream whose error frame was missed reaches `finish`, which may decline
    // it: the missing error is what to report then.
    if let Some(refused) = stream.codec_error.as_ref().filter(|refused| refused.at != "finish") {
        return Err(format!("{} refused ({}): {}", refused.at, refused.kind, refused.reason));
    }
    let Some(error) = &stream.error else {
        return Err(format!(
            "no error delta: the stream ended {}; its text is {:?}",
            ending(stream.ending),
            stream.text
        ));
    };
    if !classes.contains(&error.class.class.as_str()) {
        return Err(format!("classed `{}`, expected one of {classes:?}", error.class.class));
    }
    if stream.text != TEXT_BEFORE_ERROR {
        return Err(format!(
            "the text is {:?}; the stream sent {TEXT_BEFORE_ERROR:?} before its error frame",
            stream.text
        ));
    }
    Ok(())
}

fn no_stop(stream: &DecodedStream) -> Result<(), String> {
    match &stream.codec_error {
        Some(refused) if refused.at == "finish" && refused.kind == "malformed" => {}
        Some(refused) => return Err(format!("{} refused ({}): {}", refused.at, refused.kind, refused.reason)),
        None => {}
    }
    match &stream.stop {
        Some(stop) => Err(format!("it reported a stop (`{stop}`): the host would take the cut answer as whole")),
        None => Ok(()),
    }
}

fn ending(ending: Ending) -> &'static str {
    match ending {
        Ending::Complete => "with a stop",
        Ending::InBandError => "with an error",
        Ending::CutShort => "without a stop",
        Ending::CodecError => "with `finish` declining",
    }
}
