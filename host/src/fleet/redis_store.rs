//! The [`RateStore`] whose accounts live in Redis. Each operation is one
//! `EVALSHA` of `account.lua` on one auto-reconnecting multiplexed connection
//! shared by every account of the gateway (on a Redis Cluster, one per node,
//! routed by the key's slot: [`super::target`]); the script reads the clock
//! (Redis's `TIME`) itself, so the gateways' clocks need not agree.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::budgets::SharedBudgets;
use super::keys::KeyNames;
use super::lease::{Leased, LeasedAccount};
use super::permits::{self, RedisPermits};
use super::target::{Connection, RedisTarget, TargetError, Timeouts};
use super::{FleetMeter, FleetSettings, SharedErrorPolicy};
use crate::admission::{
    Axis, BoxFuture, Bucket, Demand, Feedback, InProcessAccount, InteractiveShare, Limits, PermitPool, RateAccount,
    RateStore, Room, Shortfall, Verdict, room_in,
};

/// After a failed operation, how long calls take the policy without asking
/// Redis; the first call after it asks again.
pub const RETRY_AFTER_OUTAGE: Duration = Duration::from_secs(1);
/// The longest one operation may take (connecting included) before it counts
/// as a failure: admission must not hang on a Redis that stopped answering.
const OPERATION_TIMEOUT: Duration = Duration::from_millis(750);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

const SCRIPT: &str = include_str!("account.lua");
/// A permit's lease, unless `[fleet] lease_secs` says otherwise.
pub const DEFAULT_LEASE_SECS: u64 = 15;
/// Renewed each third of it, so a shorter lease is mostly renewal traffic.
const MIN_LEASE_SECS: u64 = 3;

/// Why `[fleet]` cannot make a store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("[fleet] fleet_size must be at least 1")]
    ZeroFleetSize,
    #[error("[fleet] on_shared_error = \"local\" needs fleet_size (each gateway's share)")]
    LocalWithoutSize,
    #[error("[fleet] lease_secs must be at least {MIN_LEASE_SECS}")]
    ShortLease,
}

/// The fleet's accounts, in Redis.
#[derive(Clone)]
pub struct RedisStore {
    shared: Arc<Shared>,
    /// How long a concurrency permit's lease lasts unless renewed.
    lease: Duration,
    /// The accounts leased in blocks, given back when the gateway stops.
    blocks: Arc<Mutex<Vec<Weak<Leased>>>>,
    /// The permit pools, whose idle permits are given back when it stops.
    permit_pools: Arc<Mutex<Vec<Weak<permits::Inner>>>>,
}

pub(super) struct Shared {
    target: RedisTarget,
    /// Made on the first operation (inside the runtime, which a builder
    /// called outside one lacks), and again after a failed first connect.
    connection: tokio::sync::OnceCell<Connection>,
    script: redis::Script,
    keys: KeyNames,
    policy: SharedErrorPolicy,
    fleet_size: u32,
    /// Set while Redis is out: calls take the policy until this instant.
    retry_at: Mutex<Option<Instant>>,
    /// Failed operations so far: what was confirmed in Redis before the
    /// latest failure may have been lost with it (a restarted Redis is empty).
    failures: AtomicU64,
    meter: Option<Arc<dyn FleetMeter>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("redis", &self.shared.target.shown())
            .field("policy", &self.shared.policy)
            .finish()
    }
}

impl RedisStore {
    /// A store on the Redis `settings` name (one server, or a cluster).
    /// Connects lazily (on the first call), so a gateway starts while Redis
    /// is still coming up; an unusable URL or a `local` policy without a
    /// fleet size is refused here.
    pub fn new(settings: &FleetSettings, meter: Option<Arc<dyn FleetMeter>>) -> Result<Self, SettingsError> {
        let fleet_size = match (settings.on_shared_error, settings.fleet_size) {
            (_, Some(0)) => return Err(SettingsError::ZeroFleetSize),
            (SharedErrorPolicy::Local, None) => return Err(SettingsError::LocalWithoutSize),
            (_, size) => size.unwrap_or(1),
        };
        let target = RedisTarget::new(settings)?;
        let keys = KeyNames::new(settings.key_prefix.as_deref().unwrap_or("weir"), target.is_cluster());
        let shared = Shared {
            target,
            connection: tokio::sync::OnceCell::new(),
            script: redis::Script::new(SCRIPT),
            keys,
            policy: settings.on_shared_error,
            fleet_size,
            retry_at: Mutex::new(None),
            failures: AtomicU64::new(0),
            meter,
        };
        let lease = Duration::from_secs(settings.lease_secs.unwrap_or(DEFAULT_LEASE_SECS));
        if lease < Duration::from_secs(MIN_LEASE_SECS) {
            return Err(SettingsError::ShortLease);
        }
        Ok(Self { shared: Arc::new(shared), lease, blocks: Arc::default(), permit_pools: Arc::default() })
    }

    /// The fleet's budget accounts.
    pub fn budgets(&self) -> SharedBudgets {
        SharedBudgets::new(Arc::clone(&self.shared))
    }

    /// The fleet's channel of admin changes.
    pub fn admin_notices(&self) -> super::AdminNotices {
        super::AdminNotices::new(Arc::clone(&self.shared))
    }

    /// How many gateways share the limits (1 unless `fleet_size` says).
    pub fn fleet_size(&self) -> u32 {
        self.shared.fleet_size
    }

    /// The `max` concurrency permits of `key`, concrete: this gateway keeps
    /// up to [`permits::spare_permits`] of them idle (see [`RedisPermits`]);
    /// the store gives them back at [`RateStore::give_back`].
    pub fn redis_permits(&self, key: &str, max: u32) -> RedisPermits {
        let pool = self.permits_keeping(key, max, permits::spare_permits(max));
        let mut pools = self.permit_pools.lock().unwrap_or_else(PoisonError::into_inner);
        pools.retain(|pool| pool.strong_count() > 0);
        pools.push(pool.downgrade());
        pool
    }

    /// The `max` concurrency permits of `key` with none kept idle: one script
    /// run per acquire and per release, as before blocks (the benchmark's
    /// baseline).
    pub fn per_call_permits(&self, key: &str, max: u32) -> RedisPermits {
        self.permits_keeping(key, max, 0)
    }

    fn permits_keeping(&self, key: &str, max: u32, spare: u32) -> RedisPermits {
        let local_share = (self.shared.policy == SharedErrorPolicy::Local).then(|| max / self.shared.fleet_size.max(1));
        let key = self.shared.keys.permits(key);
        RedisPermits::new(Arc::clone(&self.shared), key, self.lease, max, spare, local_share)
    }

    /// The account under `key`, leased in blocks, concrete; the store gives
    /// its block back at [`RateStore::give_back`].
    pub fn leased_account(&self, key: &str, limits: Limits) -> LeasedAccount {
        let account = LeasedAccount::new(self.redis_account(key, limits));
        let mut blocks = self.blocks.lock().unwrap_or_else(PoisonError::into_inner);
        blocks.retain(|leased| leased.strong_count() > 0);
        blocks.push(account.downgrade());
        account
    }

    /// The account under `key`, one script run per operation, concrete (the
    /// property tests drive its script with a clock of their own).
    pub fn redis_account(&self, key: &str, limits: Limits) -> RedisAccount {
        let local = (self.shared.policy == SharedErrorPolicy::Local)
            .then(|| InProcessAccount::new(share_of(limits, self.shared.fleet_size), Instant::now()));
        RedisAccount {
            shared: Arc::clone(&self.shared),
            key: self.shared.keys.account(key),
            limits,
            local,
            last_tenths: AtomicI64::new(0),
            seen: Mutex::new(Seen::Nothing),
        }
    }
}

impl RateStore for RedisStore {
    /// Leased in blocks (see [`LeasedAccount`]).
    fn account(&self, key: &str, limits: Limits) -> Arc<dyn RateAccount> {
        Arc::new(self.leased_account(key, limits))
    }

    fn give_back(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let held: Vec<_> =
                self.blocks.lock().unwrap_or_else(PoisonError::into_inner).iter().filter_map(Weak::upgrade).collect();
            let pools: Vec<_> = self
                .permit_pools
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter_map(Weak::upgrade)
                .collect();
            let blocks = futures_util::future::join_all(held.iter().map(|leased| leased.give_back(None)));
            let permits = futures_util::future::join_all(pools.iter().map(|pool| pool.give_back_all()));
            futures_util::future::join(blocks, permits).await;
        })
    }

    fn permits(&self, key: &str, max: u32) -> Option<Arc<dyn PermitPool>> {
        Some(Arc::new(self.redis_permits(key, max)))
    }

    fn circuits(&self) -> Option<Arc<dyn crate::admission::deployment::CircuitBoard>> {
        Some(Arc::new(super::circuits::RedisCircuits::new(Arc::clone(&self.shared))))
    }
}

/// One gateway's part of each limit, rounded down (a share that rounds to
/// zero admits nothing rather than overspend).
fn share_of(limits: Limits, fleet_size: u32) -> Limits {
    let part = |limit: u64| limit / u64::from(fleet_size.max(1));
    Limits { rpm: limits.rpm.map(part), tpm: limits.tpm.map(part) }
}

/// The instant the script reads as "now", instead of Redis's `TIME`: for
/// tests that compare the script with the in-process arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptTime {
    pub seconds: u64,
    pub nanos: u32,
}

/// The script's answer to a take, with waits relative to its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptVerdict {
    Granted,
    Wait(Duration),
    Never(Shortfall),
}

/// The script's answer to a lease, with waits relative to its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAnswer {
    /// The demand was taken, and `extra` more (at most what was asked).
    Granted {
        extra: Demand,
    },
    Wait(Duration),
    Never(Shortfall),
}

/// One model's (or caller key's) shared account.
pub struct RedisAccount {
    shared: Arc<Shared>,
    key: String,
    limits: Limits,
    /// This gateway's share, used while Redis is out under the `local` policy.
    local: Option<InProcessAccount>,
    /// The shared coefficient in tenths, as the script last answered it.
    last_tenths: AtomicI64,
    /// What this gateway's last take learned of the shared buckets, so an
    /// attempt choosing among deployments can judge this one's room without
    /// asking Redis ([`RateAccount::room`]).
    seen: Mutex<Seen>,
}

/// The shared buckets as this gateway's last take found them. Other gateways
/// take from them too, so this is what one gateway knows, not the fleet's
/// level: a deployment it believes has room may still make a call wait.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    Nothing,
    /// Requests and tokens left (`None`: unlimited) after a granted take at `at`.
    Left {
        requests: Option<u64>,
        tokens: Option<u64>,
        at: Instant,
    },
    /// A take was told to wait until then.
    FullUntil(Instant),
}

impl std::fmt::Debug for RedisAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisAccount").field("key", &self.key).field("limits", &self.limits).finish()
    }
}

fn limit_arg(limit: Option<u64>) -> String {
    limit.map(|limit| limit.to_string()).unwrap_or_default()
}

fn wait_of(nanos: i64) -> Duration {
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
}

/// A count the script answered (never negative there).
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The script's refusal of a demand no bucket can ever hold.
fn shortfall(axis: i64, demand: i64, limit: i64, reserved: i64) -> Shortfall {
    let axis = if axis == 1 { Axis::Requests } else { Axis::Tokens };
    Shortfall { axis, demand: count(demand), limit: count(limit), reserved: count(reserved) }
}

fn unexpected(answer: &[i64]) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "unexpected answer", format!("{answer:?}")))
}

impl RedisAccount {
    async fn invoke(&self, op: &str, at: Option<ScriptTime>, args: &[String]) -> redis::RedisResult<Vec<i64>> {
        let mut invocation = self.shared.script.key(&self.key);
        invocation.arg(op);
        match at {
            Some(at) => invocation.arg(at.seconds).arg(at.nanos),
            None => invocation.arg("").arg(""),
        };
        invocation.arg(limit_arg(self.limits.rpm)).arg(limit_arg(self.limits.tpm));
        for arg in args {
            invocation.arg(arg);
        }
        self.shared.eval(&invocation).await
    }

    fn demand_args(demand: Demand, share: Option<InteractiveShare>) -> Vec<String> {
        let mut args = vec![demand.requests.to_string(), demand.tokens.to_string()];
        if let Some(share) = share {
            args.push(share.millionths().to_string());
        }
        args
    }

    /// Takes `demand` whole, leaving `share` of each bucket, at the script's
    /// clock (`at`, or Redis's own).
    pub async fn take_at(
        &self,
        demand: Demand,
        share: InteractiveShare,
        at: Option<ScriptTime>,
    ) -> redis::RedisResult<ScriptVerdict> {
        let answer = self.invoke("take", at, &Self::demand_args(demand, Some(share))).await?;
        match answer.as_slice() {
            [0, tenths, requests, tokens] => {
                self.granted(*tenths, *requests, *tokens);
                Ok(ScriptVerdict::Granted)
            }
            [1, wait, tenths] => Ok(ScriptVerdict::Wait(self.told_to_wait(*wait, *tenths))),
            [2, axis, demand, limit, reserved] => {
                Ok(ScriptVerdict::Never(shortfall(*axis, *demand, *limit, *reserved)))
            }
            other => Err(unexpected(other)),
        }
    }

    /// Gives `returned` back, then takes `demand` whole and up to `extra`
    /// more on each axis from what is left (a gateway's block, see
    /// [`super::LeasedAccount`]), at the script's clock (`at`, or Redis's own).
    pub async fn lease_at(
        &self,
        returned: Demand,
        demand: Demand,
        extra: Demand,
        at: Option<ScriptTime>,
    ) -> redis::RedisResult<LeaseAnswer> {
        let args = [returned.requests, returned.tokens, demand.requests, demand.tokens, extra.requests, extra.tokens]
            .map(|n| n.to_string());
        let answer = self.invoke("lease", at, &args).await?;
        match answer.as_slice() {
            [0, tenths, requests, tokens, extra_requests, extra_tokens] => {
                self.granted(*tenths, *requests, *tokens);
                Ok(LeaseAnswer::Granted {
                    extra: Demand { requests: count(*extra_requests), tokens: count(*extra_tokens) },
                })
            }
            [1, wait, tenths] => Ok(LeaseAnswer::Wait(self.told_to_wait(*wait, *tenths))),
            [2, axis, demand, limit, reserved] => Ok(LeaseAnswer::Never(shortfall(*axis, *demand, *limit, *reserved))),
            other => Err(unexpected(other)),
        }
    }

    /// Keeps what a granted take or lease answered: the coefficient, and the
    /// requests and tokens it left (-1: unlimited).
    fn granted(&self, tenths: i64, requests: i64, tokens: i64) {
        self.saw(tenths);
        let left = |n: i64| u64::try_from(n).ok();
        self.learned(Seen::Left { requests: left(requests), tokens: left(tokens), at: Instant::now() });
    }

    /// Keeps what a take or lease told to wait answered; the wait.
    fn told_to_wait(&self, wait: i64, tenths: i64) -> Duration {
        self.saw(tenths);
        self.learned(Seen::FullUntil(Instant::now() + wait_of(wait)));
        wait_of(wait)
    }

    /// How long until `demand` could be supplied with `share` left.
    pub async fn forecast_at(
        &self,
        demand: Demand,
        share: InteractiveShare,
        at: Option<ScriptTime>,
    ) -> redis::RedisResult<Duration> {
        match self.invoke("forecast", at, &Self::demand_args(demand, Some(share))).await?.as_slice() {
            [wait] => Ok(wait_of(*wait)),
            other => Err(unexpected(other)),
        }
    }

    pub async fn give_at(&self, demand: Demand, at: Option<ScriptTime>) -> redis::RedisResult<()> {
        self.invoke("give", at, &Self::demand_args(demand, None)).await.map(|_| ())
    }

    /// Feeds the shared throttle; answers its coefficient in tenths.
    pub async fn feedback_at(&self, signal: Feedback, at: Option<ScriptTime>) -> redis::RedisResult<i64> {
        let signal = match signal {
            Feedback::Backpressure(weight) => weight.to_string(),
            Feedback::Success => "s".to_owned(),
        };
        self.tenths(&self.invoke("feedback", at, &[signal]).await?)
    }

    async fn coefficient_tenths(&self) -> redis::RedisResult<i64> {
        self.tenths(&self.invoke("coefficient", None, &[]).await?)
    }

    /// The coefficient an answer carries alone, kept (see [`Self::saw`]).
    fn tenths(&self, answer: &[i64]) -> redis::RedisResult<i64> {
        match answer {
            [tenths] => {
                self.saw(*tenths);
                Ok(*tenths)
            }
            other => Err(unexpected(other)),
        }
    }

    /// Keeps the shared coefficient the script last answered.
    fn saw(&self, tenths: i64) {
        self.last_tenths.store(tenths, Ordering::Relaxed);
    }

    fn learned(&self, seen: Seen) {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = seen;
    }

    /// The requests and tokens (`None`: unlimited) the last granted take
    /// left, if the last take was granted.
    pub fn last_left(&self) -> Option<(Option<u64>, Option<u64>)> {
        match *self.seen.lock().unwrap_or_else(PoisonError::into_inner) {
            Seen::Left { requests, tokens, .. } => Some((requests, tokens)),
            Seen::Nothing | Seen::FullUntil(_) => None,
        }
    }

    /// The room for `demand` at `now` from what was left at `at`, refilled at
    /// the throttle's stretch as last answered: the in-process estimate over
    /// buckets holding those levels (other gateways' takes since are unseen).
    fn room_from_left(&self, left: [Option<u64>; 2], at: Instant, demand: Demand, now: Instant) -> Room {
        let held = |capacity: Option<u64>, left: Option<u64>| Some(Bucket::holding(capacity?, left?, at));
        let (requests, tokens) = (held(self.limits.rpm, left[0]), held(self.limits.tpm, left[1]));
        let tenths = 10 + u32::try_from(self.last_tenths.load(Ordering::Relaxed)).unwrap_or(0);
        room_in(requests.as_ref(), tokens.as_ref(), demand, now, tenths)
    }

    /// A success moves nothing while the coefficient is 0 (it stays 0, and
    /// the success count matters only above 0 and restarts at the next
    /// slow-down), so it is not sent. The coefficient is known from the last
    /// answer (every take carries it): one raised by another gateway since is
    /// seen at this gateway's next take.
    fn success_changes_nothing(&self, signal: Feedback) -> bool {
        signal == Feedback::Success && self.last_tenths.load(Ordering::Relaxed) == 0
    }
}

impl Shared {
    pub(super) fn policy(&self) -> SharedErrorPolicy {
        self.policy
    }

    /// Runs a script on the gateway's connection, bounded by
    /// [`OPERATION_TIMEOUT`] (connecting included).
    pub(super) async fn eval<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<T> {
        let bounded = async { invocation.invoke_async(&mut self.connection().await?).await };
        match tokio::time::timeout(OPERATION_TIMEOUT, bounded).await {
            Ok(answer) => answer,
            Err(_) => Err(redis::RedisError::from((redis::ErrorKind::Io, "no answer in time"))),
        }
    }

    /// Runs a command (or a pipeline) on the gateway's connection, bounded by
    /// [`OPERATION_TIMEOUT`] (connecting included). On a cluster a pipeline's
    /// keys must share a slot: see [`Self::query_each`].
    pub(super) async fn query<T: redis::FromRedisValue>(&self, command: &redis::Pipeline) -> redis::RedisResult<T> {
        let bounded = async { command.query_async(&mut self.connection().await?).await };
        match tokio::time::timeout(OPERATION_TIMEOUT, bounded).await {
            Ok(answer) => answer,
            Err(_) => Err(redis::RedisError::from((redis::ErrorKind::Io, "no answer in time"))),
        }
    }

    /// Runs `commands` (each on keys of one slot) and answers each one's
    /// answer, in order: one pipeline on one server; on a cluster, each
    /// command on its own at once (their keys' slots may differ), bounded
    /// together by [`OPERATION_TIMEOUT`]; any failure fails them all.
    pub(super) async fn query_each<T: redis::FromRedisValue>(
        &self,
        commands: Vec<redis::Cmd>,
    ) -> redis::RedisResult<Vec<T>> {
        if !self.keys.tagged() {
            let mut pipeline = redis::pipe();
            for command in commands {
                pipeline.add_command(command);
            }
            return self.query(&pipeline).await;
        }
        let bounded = async {
            let connection = self.connection().await?;
            let each = commands.iter().map(|command| {
                let mut connection = connection.clone();
                async move { command.query_async::<T>(&mut connection).await }
            });
            futures_util::future::try_join_all(each).await
        };
        match tokio::time::timeout(OPERATION_TIMEOUT, bounded).await {
            Ok(answer) => answer,
            Err(_) => Err(redis::RedisError::from((redis::ErrorKind::Io, "no answer in time"))),
        }
    }

    /// How many operations have failed so far: a lease confirmed before the
    /// latest failure may have been lost with it.
    pub(super) fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// Where Redis is, for a connection of its own (a subscription).
    pub(super) fn target(&self) -> &RedisTarget {
        &self.target
    }

    /// The names of the fleet's keys (`[fleet] key_prefix`, default `weir`;
    /// tagged on a cluster).
    pub(super) fn keys(&self) -> &KeyNames {
        &self.keys
    }

    /// The gateway's one connection (multiplexed, reconnecting by itself once made).
    async fn connection(&self) -> redis::RedisResult<Connection> {
        let timeouts = Timeouts { connect: CONNECT_TIMEOUT, response: RESPONSE_TIMEOUT };
        self.connection.get_or_try_init(|| self.target.connect(timeouts)).await.cloned()
    }

    /// `operation`'s answer, or `None` when Redis is out (now, or within
    /// [`RETRY_AFTER_OUTAGE`] of the last failure): the caller takes the policy.
    pub(super) async fn attempt<T>(&self, operation: impl Future<Output = redis::RedisResult<T>>) -> Option<T> {
        let now = Instant::now();
        let out = *self.retry_at.lock().unwrap_or_else(PoisonError::into_inner);
        if out.is_some_and(|retry_at| now < retry_at) {
            return None;
        }
        match operation.await {
            Ok(answer) => {
                if out.is_some() && self.retry_at.lock().unwrap_or_else(PoisonError::into_inner).take().is_some() {
                    tracing::warn!(redis = %self.target.shown(), "shared state reachable again: admission is shared once more");
                }
                Some(answer)
            }
            Err(error) => {
                self.failures.fetch_add(1, Ordering::SeqCst);
                let first = self
                    .retry_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .replace(Instant::now() + RETRY_AFTER_OUTAGE)
                    .is_none();
                if first {
                    tracing::error!(redis = %self.target.shown(), policy = ?self.policy, %error, "shared state unreachable");
                } else {
                    tracing::debug!(redis = %self.target.shown(), %error, "shared state still unreachable");
                }
                if let Some(meter) = &self.meter {
                    meter.shared_state_failed();
                }
                None
            }
        }
    }
}

impl RedisAccount {
    /// No bucket to share: a take always fits and a give returns nothing, so
    /// Redis is not asked (the throttle is still shared, for status).
    pub(super) fn unlimited(&self) -> bool {
        self.limits.rpm.is_none() && self.limits.tpm.is_none()
    }

    pub(super) fn limits(&self) -> Limits {
        self.limits
    }

    /// [`Self::lease_at`] on Redis's clock; `None` when Redis is out (the
    /// caller takes the policy).
    pub(super) async fn lease(&self, returned: Demand, demand: Demand, extra: Demand) -> Option<LeaseAnswer> {
        self.shared.attempt(self.lease_at(returned, demand, extra, None)).await
    }

    /// Gives a block's remainder back to the shared buckets. Unlike
    /// [`RateAccount::give`], never to the local share while Redis is out:
    /// the block was taken from the shared buckets, and is then lost (fewer
    /// tokens until they refill, never more).
    pub(super) async fn give_back(&self, returned: Demand) {
        if self.shared.attempt(self.give_at(returned, None)).await.is_none() {
            tracing::debug!(key = %self.key, ?returned, "a leased block could not be given back; it refills with time");
        }
    }
}

impl RateAccount for RedisAccount {
    fn try_take_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Verdict> {
        Box::pin(async move {
            if self.unlimited() {
                return Verdict::Granted;
            }
            match self.shared.attempt(self.take_at(demand, share, None)).await {
                Some(ScriptVerdict::Granted) => Verdict::Granted,
                Some(ScriptVerdict::Wait(wait)) => Verdict::NotBefore(Instant::now() + wait),
                Some(ScriptVerdict::Never(shortfall)) => Verdict::Never(shortfall),
                None => match &self.local {
                    Some(local) => local.try_take_reserving(demand, share).await,
                    None => Verdict::Unavailable,
                },
            }
        })
    }

    fn forecast_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Instant> {
        Box::pin(async move {
            if self.unlimited() {
                return Instant::now();
            }
            match self.shared.attempt(self.forecast_at(demand, share, None)).await {
                Some(wait) => Instant::now() + wait,
                None => match &self.local {
                    Some(local) => local.forecast_reserving(demand, share).await,
                    None => Instant::now(),
                },
            }
        })
    }

    /// From what this gateway's last take learned: the levels it left,
    /// refilled since, or the wait it was told; nothing known before a take.
    fn room(&self, demand: Demand, now: Instant) -> Room {
        if self.unlimited() {
            return Room::Now { free: 1.0 };
        }
        match *self.seen.lock().unwrap_or_else(PoisonError::into_inner) {
            Seen::FullUntil(until) if until > now => Room::Later(until),
            Seen::Left { requests, tokens, at } => self.room_from_left([requests, tokens], at, demand, now),
            Seen::Nothing | Seen::FullUntil(_) => Room::Unknown,
        }
    }

    /// While Redis is out under `refuse`, a give is lost: the fleet then has
    /// fewer tokens than it might, never more.
    fn give(&self, demand: Demand) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.unlimited() {
                return;
            }
            if self.shared.attempt(self.give_at(demand, None)).await.is_none()
                && let Some(local) = &self.local
            {
                local.give(demand).await;
            }
        })
    }

    fn feedback(&self, signal: Feedback) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.success_changes_nothing(signal) {
                return;
            }
            if self.shared.attempt(self.feedback_at(signal, None)).await.is_none()
                && let Some(local) = &self.local
            {
                local.feedback(signal).await;
            }
        })
    }

    /// The shared coefficient; while Redis is out, the local one, or NaN
    /// (unknown) under `refuse`.
    fn coefficient(&self) -> BoxFuture<'_, f64> {
        Box::pin(async move {
            match self.shared.attempt(self.coefficient_tenths()).await {
                // At most 90: exact in a float.
                Some(tenths) => tenths as f64 / 10.0,
                None => match &self.local {
                    Some(local) => local.coefficient().await,
                    None => f64::NAN,
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(policy: SharedErrorPolicy, fleet_size: Option<u32>) -> FleetSettings {
        FleetSettings {
            redis_url: Some("redis://127.0.0.1:1".to_owned()),
            cluster_urls: None,
            on_shared_error: policy,
            fleet_size,
            key_prefix: None,
            lease_secs: None,
        }
    }

    #[test]
    fn a_local_policy_needs_a_fleet_size_and_a_size_is_at_least_one() {
        let error = RedisStore::new(&settings(SharedErrorPolicy::Local, None), None).unwrap_err();
        assert_eq!(error, SettingsError::LocalWithoutSize);
        assert!(error.to_string().contains("needs fleet_size"), "{error}");
        let error = RedisStore::new(&settings(SharedErrorPolicy::Refuse, Some(0)), None).unwrap_err();
        assert_eq!(error, SettingsError::ZeroFleetSize);
        let mut bad = settings(SharedErrorPolicy::Refuse, None);
        bad.lease_secs = Some(MIN_LEASE_SECS - 1);
        assert_eq!(RedisStore::new(&bad, None).unwrap_err(), SettingsError::ShortLease);
        bad.redis_url = Some("http://user:secret@example.com".to_owned());
        let error = RedisStore::new(&bad, None).unwrap_err();
        assert!(matches!(error, SettingsError::Target(TargetError::UnusableUrl { .. })), "{error:?}");
        assert!(!error.to_string().contains("secret"), "the password never shows: {error}");
    }

    #[test]
    fn each_gateway_shares_a_limit_rounded_down() {
        let limits = Limits { rpm: Some(100), tpm: Some(2) };
        assert_eq!(share_of(limits, 3), Limits { rpm: Some(33), tpm: Some(0) });
        assert_eq!(share_of(Limits::default(), 3), Limits::default());
    }

    #[tokio::test]
    async fn an_unreachable_redis_takes_the_policy_and_is_counted() {
        #[derive(Default)]
        struct Count(std::sync::atomic::AtomicUsize);
        impl FleetMeter for Count {
            fn shared_state_failed(&self) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count::default());
        let limits = Limits { rpm: Some(60), tpm: None };
        let demand = Demand { requests: 1, tokens: 0 };
        let refuse = RedisStore::new(&settings(SharedErrorPolicy::Refuse, None), Some(count.clone())).unwrap();
        let account = refuse.account("m", limits);
        assert_eq!(account.try_take(demand).await, Verdict::Unavailable);
        assert_eq!(account.try_take(demand).await, Verdict::Unavailable, "within the retry interval: not asked");
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(account.coefficient().await.is_nan());

        let local = RedisStore::new(&settings(SharedErrorPolicy::Local, Some(3)), None).unwrap();
        let account = local.account("m", limits);
        let granted = futures_util::future::join_all((0..21).map(|_| account.try_take(demand))).await;
        let granted = granted.iter().filter(|verdict| **verdict == Verdict::Granted).count();
        assert_eq!(granted, 20, "a third of 60 per minute, alone");
    }
}
