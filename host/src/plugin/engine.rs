//! The engine and linker (created once), and loading a component into an
//! `InstancePre` (once per component file): the lifecycle's first two stages.
//! The third, a fresh `Store` per call, lives in [`super::provider`].

use std::path::PathBuf;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use super::cache::ArtifactCache;
use super::convert::Records;
use super::exports::Exports;
use super::sandbox::{self, CallEngine, CallState, SandboxLimits, new_store};
use super::world::{self, Operation};
use crate::types::ProviderInfo;

/// Where a component came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentSource {
    /// Built from `providers/*` and compiled into the `weir` binary.
    Embedded(&'static str),
    /// A `.wasm` file from the providers folder.
    File(PathBuf),
}

impl std::fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Embedded(name) => write!(f, "embedded:{name}"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A validated component, ready to instantiate per call.
pub struct LoadedComponent {
    pub source: ComponentSource,
    /// Hex SHA-256 of the component file.
    pub digest: String,
    /// The `weir:provider` version it targets: one of [`world::WORLD_VERSIONS`].
    pub world_version: &'static str,
    pub providers: Vec<ProviderInfo>,
    pub(super) engine: CallEngine,
    pub(super) pre: InstancePre<CallState>,
    /// The engine's instance slots, shared by every component it loaded.
    pub(super) slots: InstanceSlots,
    /// Where each function of its interfaces is exported; an operation it does
    /// not export has none.
    pub(super) exports: Exports,
    /// What its `serves` / `claims` / `max-batch` answered, per provider key and
    /// wire id: asked at load, never per call (see [`super::Provider::answers`]).
    pub(super) answers: std::sync::Mutex<super::provider::AnswerCache>,
}

impl LoadedComponent {
    /// Whether it exports `operation`'s interface.
    pub fn exports(&self, operation: Operation) -> bool {
        self.exports.exports(operation)
    }

    /// The operations it exports, in [`Operation::ALL`]'s order.
    pub fn operations(&self) -> Vec<Operation> {
        Operation::ALL.into_iter().filter(|operation| self.exports(*operation)).collect()
    }
}

impl std::fmt::Debug for LoadedComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedComponent")
            .field("source", &self.source)
            .field("digest", &self.digest)
            .field("world_version", &self.world_version)
            .field("operations", &self.operations())
            .finish_non_exhaustive()
    }
}

/// Hex SHA-256 of a component file: its identity in the artifact cache, in
/// status output and in allow-lists.
pub fn component_digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The engine, the linker and the artifact cache, shared by every component.
#[derive(Clone)]
pub struct PluginEngine {
    engine: Engine,
    limits: SandboxLimits,
    linker: Arc<Linker<CallState>>,
    cache: Option<ArtifactCache>,
    slots: InstanceSlots,
}

impl std::fmt::Debug for PluginEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEngine").field("cache", &self.cache).finish_non_exhaustive()
    }
}

impl PluginEngine {
    /// The engine every gateway serves with: each call runs under the sandbox's
    /// limits (`sandbox::FUEL_PER_CALL`, the memory ceiling, the instance caps).
    pub fn new(cache_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        Self::with_limits(cache_dir, SandboxLimits::Enforced, DEFAULT_SLOTS)
    }

    /// [`Self::new`] with a pool of `slots` instances (at most
    /// [`MAX_SLOTS`]): a serving gateway sizes it from `[server] max_in_flight`
    /// (see [`crate::Config`]), since a call in flight holds one instance at a
    /// time and a stream holds its decoder's for its whole life.
    pub fn with_slots(cache_dir: Option<PathBuf>, slots: u32) -> anyhow::Result<Self> {
        Self::with_limits(cache_dir, SandboxLimits::Enforced, slots.clamp(1, MAX_SLOTS))
    }

    /// An engine whose calls run with no fuel and no store limits. It exists
    /// only so `benches/component_round_trip.rs` can measure what the limits
    /// cost against a limited engine in the same run. Never serve with it: a
    /// component that loops would hold its worker thread forever.
    pub fn without_limits_for_measurement(cache_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        Self::with_limits(cache_dir, SandboxLimits::Off, DEFAULT_SLOTS)
    }

    /// An engine whose calls run under every limit but never yield to the async
    /// runtime while they run. It exists only so `benches/component_round_trip.rs`
    /// can measure what yielding costs against the serving engine in the same
    /// run. Never serve with it: a looping component would hold its worker
    /// thread for its whole CPU budget.
    pub fn without_yield_for_measurement(cache_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        Self::with_limits(cache_dir, SandboxLimits::EnforcedWithoutYield, DEFAULT_SLOTS)
    }

    fn with_limits(cache_dir: Option<PathBuf>, limits: SandboxLimits, slots: u32) -> anyhow::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.cranelift_opt_level(OptLevel::Speed);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(slots)));
        // A CPU budget per call (see `sandbox::FUEL_PER_CALL`): a component that
        // loops fails its own call instead of holding a worker thread forever.
        config.consume_fuel(limits != SandboxLimits::Off);
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        sandbox::link_wasi(&mut linker)?;
        // Fuel changes the compiled code, so the two kinds of engine never share
        // an artifact: the cache keys on the engine's compatibility hash.
        let cache = cache_dir.and_then(|dir| ArtifactCache::open(dir, &engine));
        Ok(Self { engine, limits, linker: Arc::new(linker), cache, slots: InstanceSlots::new(slots) })
    }

    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.cache.as_ref().map(ArtifactCache::dir)
    }

    /// Compiles (or loads the precompiled artifact of) a component, checks it
    /// targets a world version this host speaks and which operations it
    /// exports, links it, checks every exported function's type, and asks it
    /// what it provides.
    /// `digest` is the file's [`component_digest`], which callers have already
    /// computed (to compare with what is loaded, or with an allow-list).
    pub fn load(&self, source: ComponentSource, bytes: &[u8], digest: String) -> Result<LoadedComponent, String> {
        let component = self.compile(bytes, &digest).map_err(|e| format!("not a valid component: {e:#}"))?;
        let targets = world::check_exports(&self.engine, &component)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| format!("cannot be linked (it imports something this host does not grant): {e:#}"))?;
        let mut exports = Exports::find(&component, &targets)?;
        let engine = CallEngine { engine: self.engine.clone(), limits: self.limits };
        let providers = describe(&engine, &pre, &mut exports)?;
        if providers.is_empty() {
            return Err("describes no provider".to_owned());
        }
        let slots = self.slots.clone();
        Ok(LoadedComponent {
            source,
            digest,
            world_version: targets.version,
            providers,
            engine,
            pre,
            slots,
            exports,
            answers: std::sync::Mutex::default(),
        })
    }

    fn compile(&self, bytes: &[u8], digest: &str) -> wasmtime::Result<Component> {
        match &self.cache {
            Some(cache) => cache.load_or_compile(&self.engine, bytes, digest),
            None => Component::new(&self.engine, bytes),
        }
    }
}

/// Component instances the pooling allocator holds at once, per engine, when
/// nothing sizes the pool (`weir check`, the benches). Every instance takes a
/// permit of [`InstanceSlots`] first, so a call that finds the pool full waits
/// for a slot instead of failing in the allocator.
const DEFAULT_SLOTS: u32 = 1_000;

/// The largest pool an engine is given, whatever `max_in_flight` says: each
/// slot reserves ~4 GiB of address space (see [`pooling`]), and 16 384 slots
/// are half of what x86-64 gives a process. Calls beyond it wait for a slot.
pub const MAX_SLOTS: u32 = 16_384;

/// Instances come from a pool of preallocated slots, and the first 256 KiB of each
/// slot's memory stay resident between uses (reset in place instead of
/// unmapped and faulted back in). Measured on the 4 KB round trip
/// (`benches/component_round_trip.rs`): instantiation 72 µs on demand, 45 µs
/// pooled with nothing resident, 30 µs with 256 KiB resident — more resident
/// costs more memset than it saves. It works because first-party guests link a
/// 128 KiB stack (`.cargo/config.toml`), so the pages a call touches (stack top,
/// data, heap) sit in that first region. Where Linux has `PAGEMAP_SCAN` (6.7
/// and later), the reset asks the kernel which pages the instance wrote and
/// resets those alone, not the whole 256 KiB: the gateway's user-space
/// instructions per call fell from 1.11 M to 0.74 M under callgrind
/// (valgrind's memset is slower than the real one, so the real saving is
/// smaller). Elsewhere it falls back to the memset. The price is resident
/// memory for slots peak concurrency touched: at most 256 KiB per slot.
/// Each memory slot also reserves (not commits) wasmtime's default 4 GiB of
/// address space, so that guest bounds checks can be elided: ~4 TiB of
/// virtual space per 1 000 slots (x86-64 gives a process 128 TiB).
fn pooling(slots: u32) -> PoolingAllocationConfig {
    const KEEP_RESIDENT: usize = 256 << 10;
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(slots)
        .total_core_instances(slots.saturating_mul(8))
        .total_memories(slots)
        .total_tables(slots.saturating_mul(4))
        // A store keeps the last async stack it ran on for its next call, so a
        // live stream's store holds one: a stack per slot.
        .total_stacks(slots)
        .max_memories_per_component(2)
        .max_core_instances_per_component(sandbox::CORE_INSTANCES_PER_CALL)
        .max_tables_per_component(8)
        .max_memory_size(sandbox::MEMORY_LIMIT_BYTES)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10)
        .pagemap_scan(Enabled::Auto);
    pooling
}

/// Instances of the engine that an attempt may keep while its upstream works
/// (see [`super::Session::while_waiting`]); beyond them an attempt gives its
/// instance back and decodes in a fresh one. Every slot an instance ever
/// lived in keeps its touched pages resident (~160 KiB for a first-party
/// component, measured as the gateway's RSS at 128 callers: +20 MiB with
/// every attempt holding), so this bounds what holding adds to the memory.
const HELD_WHILE_WAITING: usize = 32;

/// One permit per slot of the engine's instance pool. A call takes one before it
/// instantiates and holds it as long as its store lives (a stream decoder: the
/// stream's life), waiting a bounded time when every slot is in use: a burst of
/// long streams delays a call instead of failing it.
#[derive(Clone, Debug)]
pub(super) struct InstanceSlots {
    slots: Arc<Semaphore>,
    held: Arc<Semaphore>,
}

impl InstanceSlots {
    fn new(slots: u32) -> Self {
        Self { slots: Arc::new(Semaphore::new(slots as usize)), held: Arc::new(Semaphore::new(HELD_WHILE_WAITING)) }
    }

    /// A slot, waiting at most until `until`; `None` when none freed in time.
    pub(super) async fn take(&self, until: Instant) -> Option<OwnedSemaphorePermit> {
        // The semaphore is never closed, so the only failure is the wait.
        tokio::time::timeout_at(until, Arc::clone(&self.slots).acquire_owned()).await.ok()?.ok()
    }

    /// Leave to keep an instance while an upstream works, if fewer than
    /// [`HELD_WHILE_WAITING`] are kept; never waits.
    pub(super) fn hold(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.held).try_acquire_owned().ok()
    }

    /// Slots not in use (for tests).
    #[cfg(test)]
    pub(super) fn available(&self) -> usize {
        self.slots.available_permits()
    }
}

/// Checks the types of a freshly loaded component's functions and asks it what
/// it provides, in one instance. Loading is synchronous startup work, so the
/// async call runs on a minimal executor of its own (no tokio runtime is
/// needed, and none may be entered from inside one).
fn describe(
    engine: &CallEngine,
    pre: &InstancePre<CallState>,
    exports: &mut Exports,
) -> Result<Vec<ProviderInfo>, String> {
    pollster::block_on(async {
        let mut store = new_store(engine);
        let instance = pre.instantiate_async(&mut store).await.map_err(|e| format!("cannot be instantiated: {e:#}"))?;
        exports.typecheck(&mut store, &instance).map_err(|e| format!("does not match the provider world: {e}"))?;
        let mismatch = |e: wasmtime::Error| format!("does not match the provider world: {e:#}");
        let trapped = |e: wasmtime::Error| format!("trapped in `describe.providers`: {e:#}");
        match exports.describe.records() {
            Records::Current => {
                let providers = exports.describe.providers(&mut store, &instance).map_err(mismatch)?;
                let (providers,) = providers.call_async(&mut store, ()).await.map_err(trapped)?;
                Ok(providers)
            }
            Records::V0_4 => {
                // 0.4.0's `provider-info`, converted once at load (see `super::convert`).
                let providers = exports.describe.providers_v0_4(&mut store, &instance).map_err(mismatch)?;
                let (providers,) = providers.call_async(&mut store, ()).await.map_err(trapped)?;
                Ok(providers.into_iter().map(ProviderInfo::from).collect())
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn at_most_a_bounded_number_of_instances_are_kept_while_waiting() {
        let slots = InstanceSlots::new(1_000);
        let kept: Vec<_> = std::iter::from_fn(|| slots.hold()).take(HELD_WHILE_WAITING + 1).collect();
        assert_eq!(kept.len(), HELD_WHILE_WAITING);
        drop(kept);
        assert!(slots.hold().is_some(), "given back when the attempts let go");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_pool_makes_a_call_wait_for_a_slot_until_its_bound() {
        let slots = InstanceSlots::new(1);
        let held = slots.take(Instant::now()).await.unwrap();
        assert_eq!(slots.available(), 0);
        let started = Instant::now();
        assert!(slots.take(started + Duration::from_secs(3)).await.is_none(), "no slot frees: the wait ends");
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.take(Instant::now() + Duration::from_secs(10)).await.is_some() }
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        drop(held);
        assert!(waiting.await.unwrap(), "a slot freed within the bound is taken");
        assert_eq!(slots.available(), 1, "and given back when its holder ends");
    }
}
