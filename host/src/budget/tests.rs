//! The book's rules: whole-or-nothing holds, settlement, release, roll-over,
//! per-call ceilings, and the config checks at load.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::*;
use crate::catalog::{Config, ModelSpec};
use crate::error::WeirError;
use crate::failure::Category;

fn at(text: &str) -> SystemTime {
    humantime::parse_rfc3339(text).unwrap()
}

fn book_of(limits: &[(Scope, Limits)], clock: Arc<ManualClock>) -> BudgetBook {
    BudgetBook::new(limits.iter().cloned().collect::<HashMap<_, _>>(), Timezone::UTC, clock)
}

fn member(name: &str) -> Scope {
    Scope::Member(name.to_owned())
}

fn key(id: &str) -> Scope {
    Scope::Key(id.to_owned())
}

fn tokens(n: u64) -> Spend {
    Spend { tokens: n, usd: None }
}

fn daily_tokens(n: u64) -> Limits {
    Limits { daily_tokens: Some(n), ..Limits::default() }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(at("2026-12-01T10:00:00Z")))
}

/// The one token budget of `scope` as it stands: (spent, held, remaining).
fn standing(book: &BudgetBook, scope: &Scope, period: Period) -> (Amount, Amount, Amount) {
    let status = book.status().into_iter().find(|s| &s.scope == scope && s.period == period).unwrap();
    (status.spent, status.held, status.remaining)
}

#[test]
fn a_hold_counts_until_settled_with_the_actual_spend() {
    let book = book_of(&[(member("ana"), daily_tokens(1_000))], clock());
    let scopes = book.applicable(None, "ana", None);
    let hold = book.hold(&scopes, tokens(600), "m").unwrap();
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(0), Amount::Tokens(600), Amount::Tokens(400))
    );
    // A second worst case of 600 does not fit beside the first.
    let error = book.hold(&scopes, tokens(600), "m").unwrap_err();
    assert!(matches!(error, BudgetError::Exhausted { remaining: Amount::Tokens(400), .. }), "{error:?}");
    hold.settle(tokens(250));
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(250), Amount::Tokens(0), Amount::Tokens(750))
    );
    assert!(book.hold(&scopes, tokens(600), "m").is_ok());
}

#[test]
fn a_dropped_hold_is_released() {
    let book = book_of(&[(member("ana"), daily_tokens(1_000))], clock());
    let scopes = book.applicable(None, "ana", None);
    drop(book.hold(&scopes, tokens(900), "m").unwrap());
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(0), Amount::Tokens(0), Amount::Tokens(1_000))
    );
}

#[test]
fn a_hold_is_whole_or_nothing_across_scopes_and_the_tighter_budget_refuses() {
    let book = book_of(&[(key("k1"), daily_tokens(100)), (member("ana"), daily_tokens(1_000))], clock());
    let scopes = book.applicable(Some("k1"), "ana", Some("search"));
    assert_eq!(scopes, vec![key("k1"), member("ana")]);
    let error = book.hold(&scopes, tokens(150), "m").unwrap_err();
    match &error {
        BudgetError::Exhausted { scope, kind, period, remaining, needed, .. } => {
            assert_eq!((scope, *kind, *period), (&key("k1"), Kind::Tokens, Period::Day));
            assert_eq!((*remaining, *needed), (Amount::Tokens(100), Amount::Tokens(150)));
        }
        other => panic!("{other:?}"),
    }
    // The member's budget held nothing for the refused call.
    assert_eq!(standing(&book, &member("ana"), Period::Day).1, Amount::Tokens(0));
}

#[test]
fn exhaustion_is_a_429_with_the_reset_as_retry_after_and_never_retried() {
    let clock = clock();
    let book = book_of(&[(member("ana"), daily_tokens(10))], Arc::clone(&clock));
    let error = WeirError::from(book.hold(&book.applicable(None, "ana", None), tokens(11), "m").unwrap_err());
    assert_eq!(error.category(), Category::BudgetExhausted);
    assert_eq!((error.category().as_str(), error.http_status()), ("budget_exhausted", 429));
    // 10:00 to midnight.
    assert_eq!(error.retry_after(), Some(Duration::from_secs(14 * 3600)));
    assert!(error.retry_policy().is_none());
    let message = error.safe_message();
    for part in ["member `ana`", "day", "tokens", "10 tokens left", "11 tokens", "2026-12-02T00:00:00Z"] {
        assert!(message.contains(part), "{part}: {message}");
    }
}

#[test]
fn a_worst_case_above_a_per_call_ceiling_is_call_budget_exceeded() {
    let limits = Limits { max_call_tokens: Some(500), max_call_usd: Some(0.01), ..Limits::default() };
    let book = book_of(&[(key("k1"), limits)], clock());
    let scopes = book.applicable(Some("k1"), "ana", None);
    let error = WeirError::from(book.hold(&scopes, Spend { tokens: 501, usd: Some(0.0) }, "m").unwrap_err());
    assert_eq!((error.category().as_str(), error.http_status()), ("call_budget_exceeded", 400));
    assert!(error.safe_message().contains("per-call ceiling of 500 tokens"), "{}", error.safe_message());
    let error = book.hold(&scopes, Spend { tokens: 10, usd: Some(0.02) }, "m").unwrap_err();
    assert!(matches!(error, BudgetError::CallCeiling { ceiling: Amount::Usd(_), .. }), "{error:?}");
    assert!(book.hold(&scopes, Spend { tokens: 500, usd: Some(0.01) }, "m").is_ok());
}

#[test]
fn a_usd_budget_refuses_a_call_it_cannot_price() {
    let book = book_of(&[(member("ana"), Limits { daily_usd: Some(1.0), ..Limits::default() })], clock());
    let error = book.hold(&book.applicable(None, "ana", None), tokens(10), "free-model").unwrap_err();
    assert_eq!(error.category(), Category::InvalidRequest);
    assert!(error.to_string().contains("`free-model` declares no prices"), "{error}");
}

#[test]
fn a_usd_budget_counts_cache_priced_tokens_at_their_price() {
    let mut model = ModelSpec::sample();
    model.prices = crate::record::Prices {
        input: Some(3.0),
        output: Some(15.0),
        cache_read: None,
        cache_write: None,
        search: None,
        web_search: None,
        web_search_preview: None,
    };
    model.cache_read_multiplier = 0.1;
    model.cache_write_multiplier = 1.25;
    // The worst case prices the whole input at the dearer cache-write price.
    let worst = worst_case(&model, 1_000_000, 100_000);
    assert_eq!(worst.tokens, 1_100_000);
    assert!((worst.usd.unwrap() - (3.75 + 1.5)).abs() < 1e-9, "{worst:?}");
    // A record of cache reads settles at the read price.
    let read = crate::record::Tokens { input: 0, output: 100_000, cache_read: 1_000_000, ..Default::default() };
    let multipliers = crate::record::CacheMultipliers { read: 0.1, write: 1.25 };
    let actual = Spend::of(&read, model.prices.cost(&read, 0, multipliers));
    let book = book_of(&[(member("ana"), Limits { daily_usd: Some(10.0), ..Limits::default() })], clock());
    book.hold(&book.applicable(None, "ana", None), worst, "m").unwrap().settle(actual);
    let (spent, held, remaining) = standing(&book, &member("ana"), Period::Day);
    assert_eq!(held, Amount::Usd(0.0));
    let (Amount::Usd(spent), Amount::Usd(remaining)) = (spent, remaining) else { panic!("{spent:?}") };
    assert!((spent - 1.8).abs() < 1e-9 && (remaining - 8.2).abs() < 1e-9, "{spent} {remaining}");
}

#[test]
fn web_searches_add_their_price_to_a_priced_spend_and_leave_an_unpriced_one_unpriced() {
    let mut model = ModelSpec::sample();
    model.prices = crate::record::Prices {
        input: Some(3.0),
        output: Some(15.0),
        web_search: Some(10.0),
        ..crate::record::Prices::default()
    };
    let worst = worst_case(&model, 0, 1000);
    let held = with_web_searches(model.prices.web_search, worst, 5);
    assert_eq!(held.tokens, worst.tokens, "searches are not tokens");
    assert!((held.usd.unwrap() - (0.015 + 0.05)).abs() < 1e-12, "{held:?}");
    // An entry without token prices stays unpriced: a USD budget must refuse it.
    model.prices = crate::record::Prices { web_search: Some(10.0), ..crate::record::Prices::default() };
    assert_eq!(with_web_searches(Some(10.0), worst_case(&model, 0, 1000), 5).usd, None);
    // An entry without a web search price adds nothing.
    model.prices = crate::record::Prices { input: Some(3.0), output: Some(15.0), ..crate::record::Prices::default() };
    let plain = worst_case(&model, 0, 1000);
    assert_eq!(with_web_searches(model.prices.web_search, plain, 5), plain);
}

#[test]
fn a_period_roll_over_frees_the_budget_at_the_boundary() {
    let clock = Arc::new(ManualClock::new(at("2026-12-01T23:59:00Z")));
    let limits = Limits { daily_tokens: Some(100), monthly_tokens: Some(150), ..Limits::default() };
    let book = book_of(&[(member("ana"), limits)], Arc::clone(&clock));
    let scopes = book.applicable(None, "ana", None);
    book.hold(&scopes, tokens(100), "m").unwrap().settle(tokens(100));
    assert!(matches!(book.hold(&scopes, tokens(1), "m"), Err(BudgetError::Exhausted { period: Period::Day, .. })));
    // A call held before midnight and settled after it counts in its own day.
    let late = book.hold(&scopes, tokens(0), "m").unwrap();
    clock.advance(Duration::from_secs(60));
    late.settle(tokens(40));
    assert_eq!(standing(&book, &member("ana"), Period::Day).0, Amount::Tokens(0));
    // The month goes on: 140 of 150 spent, so the new day's 100 is capped at 10.
    assert_eq!(standing(&book, &member("ana"), Period::Month).0, Amount::Tokens(140));
    assert!(book.hold(&scopes, tokens(10), "m").is_ok());
    let refused = book.hold(&scopes, tokens(11), "m").unwrap_err();
    assert!(matches!(refused, BudgetError::Exhausted { period: Period::Month, .. }), "{refused:?}");
    clock.set(at("2027-01-01T00:00:00Z"));
    assert!(book.hold(&scopes, tokens(100), "m").is_ok());
}

#[test]
fn concurrent_holds_never_exceed_the_budget() {
    let book = book_of(&[(member("ana"), daily_tokens(1_000))], clock());
    let scopes = book.applicable(None, "ana", None);
    let held: Vec<_> = std::thread::scope(|threads| {
        let handles: Vec<_> = (0..50).map(|_| threads.spawn(|| book.hold(&scopes, tokens(100), "m").ok())).collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).collect()
    });
    assert_eq!(held.iter().filter(|hold| hold.is_some()).count(), 10);
    assert_eq!(standing(&book, &member("ana"), Period::Day).1, Amount::Tokens(1_000));
}

#[test]
fn restored_spend_counts_only_in_the_current_period() {
    let clock = clock();
    let book = book_of(&[(member("ana"), daily_tokens(1_000))], Arc::clone(&clock));
    let (today, _) = Timezone::UTC.bounds(Period::Day, clock.now());
    book.restore(&member("ana"), Period::Day, today, tokens(300));
    book.restore(&member("ana"), Period::Day, today - Duration::from_secs(86_400), tokens(500));
    book.restore(&member("bob"), Period::Day, today, tokens(500));
    assert_eq!(standing(&book, &member("ana"), Period::Day).0, Amount::Tokens(300));
}

const PRICED: &str = "[[model]]\nid = \"priced\"\nprovider = \"openai\"\nmax_output_tokens = 10\ncontext_window = 100\n\
                      input_price = 1.0\noutput_price = 2.0\n";
const FREE: &str = "[[model]]\nid = \"free\"\nprovider = \"openai\"\nmax_output_tokens = 10\ncontext_window = 100\n";
const HASH: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

#[test]
fn a_usd_budget_over_an_entry_without_prices_is_rejected_at_load() {
    let member = format!("[member.ana]\ndaily_usd = 5.0\n{PRICED}{FREE}");
    let message = Config::from_toml(&member, "t").unwrap_err().to_string();
    assert!(message.contains("[member.ana] has `daily_usd`") && message.contains("model `free`"), "{message}");
    let key = format!("[[key]]\nid = \"k1\"\nmember = \"ana\"\nhash = \"{HASH}\"\nmax_call_usd = 0.5\n{PRICED}{FREE}");
    let message = Config::from_toml(&key, "t").unwrap_err().to_string();
    assert!(message.contains("key `k1` has `max_call_usd`") && message.contains("model `free`"), "{message}");
    // A key whose `models` leave the unpriced entry out is fine, and so is its
    // member: it has no other key.
    let narrowed = format!(
        "[[key]]\nid = \"k1\"\nmember = \"ana\"\nteam = \"t\"\nhash = \"{HASH}\"\nmodels = [\"priced\"]\nmonthly_usd = 9.0\n\
         [member.ana]\ndaily_usd = 1.0\n[team.t]\nmonthly_usd = 100.0\n{PRICED}{FREE}"
    );
    let config = Config::from_toml(&narrowed, "t").unwrap();
    assert_eq!(config.teams["t"].monthly_usd, Some(100.0));
    // A token budget needs no prices; 0 is unlimited.
    let tokens = format!("[member.ana]\ndaily_tokens = 1000\nmonthly_usd = 0\n{FREE}");
    let config = Config::from_toml(&tokens, "t").unwrap();
    let book = book(&config, Arc::new(SystemClock)).unwrap();
    assert_eq!(book.applicable(None, "ana", None), vec![member_scope("ana")]);
}

fn member_scope(name: &str) -> Scope {
    Scope::Member(name.to_owned())
}

#[test]
fn budget_settings_are_checked_at_load() {
    for (bad, expected) in [
        ("budget_timezone = \"Europe/Paris\"\n", "fixed offset"),
        ("[member.ana]\ndaily_usd = -1.0\n", "not negative"),
        ("[team.t]\nnot_a_budget = 1\n", "unknown field"),
    ] {
        let message = Config::from_toml(&format!("{bad}{PRICED}"), "t").unwrap_err().to_string();
        assert!(message.contains(expected), "{bad}: {message}");
    }
    let config = Config::from_toml(&format!("budget_timezone = \"+02:00\"\n{PRICED}"), "t").unwrap();
    assert_eq!(book(&config, Arc::new(SystemClock)).unwrap().timezone(), Timezone::parse("+02:00").unwrap());
}

#[test]
fn a_hold_settled_at_its_worst_case_counts_what_was_held() {
    let book = book_of(&[(member("ana"), daily_tokens(1_000))], clock());
    book.hold(&book.applicable(None, "ana", None), tokens(700), "m").unwrap().settle_at_worst();
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(700), Amount::Tokens(0), Amount::Tokens(300))
    );
}

#[test]
fn a_ledger_that_exists_but_cannot_be_read_stops_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    std::fs::write(&path, b"not a SQLite file, long enough to be read as a header by SQLite ......").unwrap();
    let toml = format!("[ledger]\npath = {:?}\n[member.ana]\ndaily_tokens = 10\n", path.to_str().unwrap());
    let built = crate::Weir::builder()
        .config(Config::from_toml(&toml, "t").unwrap())
        .providers_dir("/nonexistent-weir-budget-test")
        .cache_dir(None)
        .build();
    let Err(error) = built else { panic!("the build must fail") };
    assert!(matches!(error, crate::BuildError::Budgets(_)), "{error}");
    assert!(error.to_string().contains("cannot rebuild the budgets from the ledger"), "{error}");
}

#[tokio::test]
async fn a_top_up_holds_only_the_difference_and_the_settle_moves_the_total() {
    let book = book_of(&[(member("ana"), daily_tokens(1_000))], clock());
    let scopes = book.applicable(None, "ana", None);
    let mut hold = book.hold(&scopes, tokens(100), "m").unwrap();
    assert_eq!(hold.top_up(tokens(400), "m").await.unwrap(), Some(tokens(300)), "the difference is added");
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(0), Amount::Tokens(400), Amount::Tokens(600))
    );
    assert_eq!(hold.top_up(tokens(250), "m").await.unwrap(), None, "a hold is never lowered");
    assert_eq!(hold.held(), tokens(400));
    hold.settle(tokens(330));
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(330), Amount::Tokens(0), Amount::Tokens(670))
    );
}

#[tokio::test]
async fn a_top_up_that_does_not_fit_is_refused_whole_and_leaves_the_hold_as_it_was() {
    let book = book_of(&[(key("k1"), daily_tokens(2_000)), (member("ana"), daily_tokens(500))], clock());
    let scopes = book.applicable(Some("k1"), "ana", None);
    let other = book.hold(&scopes, tokens(200), "m").unwrap();
    let mut hold = book.hold(&scopes, tokens(100), "m").unwrap();
    let error = hold.top_up(tokens(301), "m").await.unwrap_err();
    let BudgetError::Exhausted { scope, remaining, needed, .. } = &error else { panic!("{error:?}") };
    assert_eq!((scope, *remaining, *needed), (&member("ana"), Amount::Tokens(200), Amount::Tokens(201)));
    assert_eq!(error.category(), Category::BudgetExhausted);
    // Nothing was added to either budget, the key's included.
    assert_eq!(standing(&book, &key("k1"), Period::Day).1, Amount::Tokens(300));
    assert_eq!(standing(&book, &member("ana"), Period::Day).1, Amount::Tokens(300));
    assert_eq!(hold.held(), tokens(100));
    assert_eq!(hold.top_up(tokens(300), "m").await.unwrap(), Some(tokens(200)), "exactly what is left fits");
    drop(other);
    hold.settle_at_worst();
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(300), Amount::Tokens(0), Amount::Tokens(200))
    );
}

#[tokio::test]
async fn a_top_up_checks_the_per_call_ceiling_against_the_calls_total() {
    let limits = Limits { daily_tokens: Some(10_000), max_call_tokens: Some(500), ..Limits::default() };
    let book = book_of(&[(member("ana"), limits)], clock());
    let scopes = book.applicable(None, "ana", None);
    let mut hold = book.hold(&scopes, tokens(300), "m").unwrap();
    let error = hold.top_up(tokens(501), "m").await.unwrap_err();
    assert!(
        matches!(error, BudgetError::CallCeiling { ceiling: Amount::Tokens(500), needed: Amount::Tokens(501), .. }),
        "{error:?}"
    );
    assert_eq!(standing(&book, &member("ana"), Period::Day).1, Amount::Tokens(300));
    assert_eq!(hold.top_up(tokens(500), "m").await.unwrap(), Some(tokens(200)));
    // A scope with only a per-call ceiling (no period budget) is still checked.
    let ceiling_only = book_of(&[(key("k1"), Limits { max_call_tokens: Some(50), ..Limits::default() })], clock());
    let mut hold = ceiling_only.hold(&ceiling_only.applicable(Some("k1"), "ana", None), tokens(40), "m").unwrap();
    let error = hold.top_up(tokens(51), "m").await.unwrap_err();
    assert_eq!(error.category(), Category::CallBudgetExceeded);
}

#[tokio::test]
async fn a_usd_top_up_is_checked_in_usd() {
    let book = book_of(&[(member("ana"), Limits { daily_usd: Some(1.0), ..Limits::default() })], clock());
    let scopes = book.applicable(None, "ana", None);
    let mut hold = book.hold(&scopes, Spend { tokens: 10, usd: Some(0.25) }, "m").unwrap();
    let added = hold.top_up(Spend { tokens: 10, usd: Some(0.75) }, "m").await.unwrap();
    assert_eq!(added, Some(Spend { tokens: 0, usd: Some(0.5) }), "only the price grew");
    let error = hold.top_up(Spend { tokens: 20, usd: Some(1.5) }, "m").await.unwrap_err();
    assert!(matches!(error, BudgetError::Exhausted { remaining: Amount::Usd(_), .. }), "{error:?}");
    let error = hold.top_up(Spend { tokens: 20, usd: None }, "m").await.unwrap_err();
    assert_eq!(error.category(), Category::InvalidRequest, "a USD budget cannot take an unpriced total: {error}");
}

#[tokio::test]
async fn a_top_up_counts_in_the_period_the_call_started_in() {
    let clock = Arc::new(ManualClock::new(at("2026-12-01T23:59:00Z")));
    let book = book_of(&[(member("ana"), daily_tokens(100))], Arc::clone(&clock));
    let scopes = book.applicable(None, "ana", None);
    let mut hold = book.hold(&scopes, tokens(90), "m").unwrap();
    clock.advance(Duration::from_secs(120));
    let refused = hold.top_up(tokens(150), "m").await.unwrap_err();
    assert!(
        matches!(refused, BudgetError::Exhausted { remaining: Amount::Tokens(10), .. }),
        "checked against the day it started in: {refused:?}"
    );
    // Once the new day has started (the account rolled over), the old day's
    // figures are gone: the top-up adds nothing to the new one.
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(0), Amount::Tokens(0), Amount::Tokens(100))
    );
    assert_eq!(hold.top_up(tokens(150), "m").await.unwrap(), Some(tokens(60)));
    assert_eq!(standing(&book, &member("ana"), Period::Day).1, Amount::Tokens(0));
    hold.settle(tokens(120));
    assert_eq!(standing(&book, &member("ana"), Period::Day).0, Amount::Tokens(0));
}

#[test]
fn a_budget_lowered_under_its_holds_refuses_new_calls_and_lets_the_held_ones_settle() {
    let book = book_of(&[(member("ana"), daily_tokens(1_000))], clock());
    let scopes = book.applicable(None, "ana", None);
    let held = book.hold(&scopes, tokens(600), "m").unwrap();
    let added = book.replace_limits([(member("ana"), daily_tokens(500))].into_iter().collect());
    assert!(added.is_empty(), "ana had a budget already");
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(0), Amount::Tokens(600), Amount::Tokens(0)),
        "held over the new limit: nothing remains, nothing goes negative"
    );
    assert!(matches!(book.hold(&scopes, tokens(1), "m"), Err(BudgetError::Exhausted { .. })));
    held.settle(tokens(200));
    assert_eq!(
        standing(&book, &member("ana"), Period::Day),
        (Amount::Tokens(200), Amount::Tokens(0), Amount::Tokens(300))
    );
    assert!(book.hold(&scopes, tokens(300), "m").is_ok(), "room again once it fits");
}

#[test]
fn a_scope_given_a_budget_at_run_time_starts_a_fresh_account_and_a_removed_one_is_unlimited() {
    let book = book_of(&[(member("ana"), daily_tokens(1_000))], clock());
    book.hold(&book.applicable(None, "ana", None), tokens(300), "m").unwrap().settle(tokens(300));
    let added =
        book.replace_limits([(member("ana"), daily_tokens(1_000)), (key("k"), daily_tokens(50))].into_iter().collect());
    assert_eq!(added, vec![key("k")]);
    assert_eq!(book.applicable(Some("k"), "ana", None), vec![key("k"), member("ana")]);
    assert_eq!(standing(&book, &member("ana"), Period::Day).0, Amount::Tokens(300), "ana's account is kept");
    book.restore(&key("k"), Period::Day, at("2026-12-01T00:00:00Z"), tokens(40));
    assert!(matches!(book.hold(&[key("k")], tokens(20), "m"), Err(BudgetError::Exhausted { .. })));
    let added = book.replace_limits([(key("k"), daily_tokens(50))].into_iter().collect());
    assert!(added.is_empty());
    assert!(book.applicable(None, "ana", None).is_empty(), "ana's budget is gone: unlimited");
}
