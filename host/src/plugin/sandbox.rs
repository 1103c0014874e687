//! Per-call store state: what a component may touch while it runs.
//!
//! Only the WASI interfaces Rust's standard library imports on `wasm32-wasip2`
//! are linked (`wasi:io`, `wasi:cli`), with an empty context: no environment,
//! no arguments, null stdio. Filesystem, sockets, clocks and random are not
//! linked at all, so a component importing them fails to load instead of
//! receiving a capability. Every call runs under a memory ceiling, caps on
//! instances and tables, and a CPU budget (fuel) that it spends in slices
//! ([`FUEL_PER_YIELD`]), handing its tokio worker back between slices;
//! [`SandboxLimits::Off`] exists only to measure what those limits cost.

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::cli::WasiCli;
use wasmtime_wasi::p2::bindings as wasi;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Memory a single call may grow its linear memories to.
pub const MEMORY_LIMIT_BYTES: usize = 64 << 20;
/// The most a component's result may make the host allocate as it is lifted
/// (wasmtime's hostcall fuel: every string's bytes and every list's elements
/// count). The canonical ABI lets a result's strings alias one buffer, so a
/// guest within its memory ceiling can claim any size: this bounds the copy.
/// One and a half times the largest upstream body a decode reads
/// (`transport`'s 64 MiB) and nearly three times an encode's largest request,
/// so no honest result comes near it; below wasmtime's default (128 MiB), which
/// would otherwise apply.
pub const LIFT_BYTES_PER_CALL: usize = 96 << 20;
/// Tables and memories one call may create.
const TABLE_AND_MEMORY_LIMIT: usize = 16;
/// Core module instances one call's component may hold. A Rust component has a
/// handful; componentize-py's CPython has 38 (the interpreter, libc, the adapter
/// and their shims), so 64 leaves room for other guest languages' runtimes.
pub const CORE_INSTANCES_PER_CALL: u32 = 64;
/// The CPU budget of one call into a component, in wasmtime fuel (about one unit
/// per wasm instruction): roughly a second of guest work, a thousand times what
/// encoding a 4 KB conversation takes, so only a runaway component reaches it.
pub const FUEL_PER_CALL: u64 = 1_000_000_000;
/// The fuel a call spends between two yields to the async runtime: about
/// 100 µs of guest work (tokio's rule of thumb for the longest stretch between
/// two `.await`s). Without it a component burning its whole [`FUEL_PER_CALL`]
/// holds one worker thread for about a second, which on a 2-core machine stalls
/// every other call scheduled there. A normal encode spends far less than one
/// slice, so it never yields (`benches/component_round_trip.rs` measures the
/// cost).
pub const FUEL_PER_YIELD: u64 = 100_000;

/// The data a per-call [`Store`] holds.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: Limits,
}

impl CallState {
    /// The bytes of linear memory the store's instances have (the sum of
    /// every memory's size, as the limiter granted it).
    pub fn memory_bytes(&self) -> usize {
        self.limits.memory_bytes
    }
}

/// The per-call [`StoreLimits`], and what the memories it granted add up to.
struct Limits {
    limits: StoreLimits,
    memory_bytes: usize,
}

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let granted = self.limits.memory_growing(current, desired, maximum)?;
        if granted {
            self.memory_bytes += desired.saturating_sub(current);
        }
        Ok(granted)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Whether the stores of an engine run under the limits above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxLimits {
    /// Fuel, the memory ceiling and the instance, table and memory caps: what
    /// every engine that serves uses.
    Enforced,
    /// All of them, but a call never yields while it runs. This exists only so a
    /// benchmark can measure, in one run, what yielding costs; never serve with
    /// it: a looping component would hold its worker for its whole budget.
    EnforcedWithoutYield,
    /// None of them. This exists only so a benchmark can measure, in one run,
    /// what the limits cost per call; never serve with it.
    Off,
}

/// What a per-call store is made from: the engine, and whether its stores are
/// limited (which must match how the engine was configured: fuel is an engine
/// setting, the rest are per store).
#[derive(Clone)]
pub struct CallEngine {
    pub engine: Engine,
    pub limits: SandboxLimits,
}

/// A fresh store with nothing granted and, unless the engine is the
/// measurement-only [`SandboxLimits::Off`] one, the per-call limits applied.
pub fn new_store(engine: &CallEngine) -> Store<CallState> {
    let state = CallState {
        wasi: WasiCtx::builder().build(),
        table: ResourceTable::new(),
        limits: Limits {
            limits: StoreLimitsBuilder::new()
                .memory_size(MEMORY_LIMIT_BYTES)
                .instances(CORE_INSTANCES_PER_CALL as usize)
                .tables(TABLE_AND_MEMORY_LIMIT)
                .memories(TABLE_AND_MEMORY_LIMIT)
                .build(),
            memory_bytes: 0,
        },
    };
    let mut store = Store::new(&engine.engine, state);
    if engine.limits == SandboxLimits::Off {
        return store;
    }
    store.limiter(|state| &mut state.limits);
    store.set_hostcall_fuel(LIFT_BYTES_PER_CALL);
    // Both fail only for an engine built without fuel, which `PluginEngine`
    // builds only with `SandboxLimits::Off`; say so loudly if that ever changes.
    // Every call into a component is `call_async` (`provider.rs`), as yielding requires.
    if engine.limits == SandboxLimits::Enforced
        && let Err(error) = store.fuel_async_yield_interval(Some(FUEL_PER_YIELD))
    {
        tracing::error!(%error, "cannot make a component store yield while it runs");
    }
    if let Err(error) = store.set_fuel(FUEL_PER_CALL) {
        tracing::error!(%error, "cannot set a CPU budget on a component store");
    }
    store
}

/// Gives a store that lives across many calls (a stream's decoder) a fresh CPU
/// budget before each one: the budget bounds one call, not a stream's length.
pub fn refuel(store: &mut Store<CallState>, engine: &CallEngine) {
    if engine.limits != SandboxLimits::Off
        && let Err(error) = store.set_fuel(FUEL_PER_CALL)
    {
        tracing::error!(%error, "cannot set a CPU budget on a component store");
    }
}

fn table_of(state: &mut CallState) -> &mut ResourceTable {
    &mut state.table
}

struct HasIo;

impl HasData for HasIo {
    type Data<'a> = &'a mut ResourceTable;
}

/// Links exactly the WASI interfaces a Rust guest imports, and nothing else, in
/// their async form: the sync bindings `block_on` inside the caller's tokio
/// runtime, which panics the host task when a guest merely writes to stderr.
pub fn link_wasi(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let table = table_of;
    wasi::io::error::add_to_linker::<CallState, HasIo>(linker, table)?;
    wasi::io::poll::add_to_linker::<CallState, HasIo>(linker, table)?;
    wasi::io::streams::add_to_linker::<CallState, HasIo>(linker, table)?;
    let cli = <CallState as wasmtime_wasi::cli::WasiCliView>::cli;
    wasi::cli::environment::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::exit::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::stdin::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::stdout::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::stderr::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::terminal_input::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::terminal_output::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::terminal_stdin::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::terminal_stdout::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    wasi::cli::terminal_stderr::add_to_linker::<CallState, WasiCli>(linker, cli)?;
    Ok(())
}
