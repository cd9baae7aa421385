//! The engine and what every store shares: the engine configuration (component model,
//! fuel, epoch interruption, the instance pool where it helps), the epoch ticker, the
//! linker, and a fresh `Store` with the limits and captured output of one instance.

use std::sync::{Arc, OnceLock};

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::bindings::{v0_1, v0_2};
use super::grants::OpenedDir;
use super::held::{DescriptorShare, Descriptors};
use super::hostcalls;
use super::limits::MAX_WASM_STACK;
use super::state::{CappedPipe, Clock, State};
use super::{OUTPUT_CAP, Sandbox};
use crate::policy::capability::Live;

/// Bytes of linear memory (and of tables) a pooled slot resets by copy and keeps
/// resident between instances; a plugin's dirty pages above this are returned to the
/// kernel.
pub(super) const POOL_KEEP_RESIDENT: usize = 1 << 20;

/// Warm pool slots kept for reuse: bounds the memory the pool keeps resident to about
/// this many times [`POOL_KEEP_RESIDENT`] per kind (memories, tables).
pub(super) const POOL_WARM_SLOTS: u32 = 32;

/// Elements of a pooled table.
pub(super) const POOL_TABLE_ELEMENTS: usize = super::state::MAX_TABLE_ELEMENTS;

/// Instances alive at once in the pool (wasmtime's default), and fiber stacks for
/// their calls.
pub(super) const POOL_INSTANCES: u32 = 1_000;

/// The engine configuration of the sandbox (component model, fuel, epoch interruption,
/// a 512 KiB wasm stack, the instance pool where it helps); part of the compile cache
/// key through wasmtime's compatibility hash. Public so that tools and benchmarks can
/// build a compatible [`Engine`].
pub fn engine_config() -> Config {
    engine_config_with(pooled_allocation())
}

/// The sandbox's engine configuration, with instances from `pool` or, without one,
/// allocated one by one.
pub(super) fn engine_config_with(pool: Option<PoolingAllocationConfig>) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.consume_fuel(true);
    config.epoch_interruption(true);
    config.max_wasm_stack(MAX_WASM_STACK);
    if let Some(pool) = pool {
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

/// Whether a `WasmRuntime` on this machine takes its instances from a pool: the kernel
/// must report which pages an instance wrote (`PAGEMAP_SCAN`, Linux 6.7+).
pub fn instance_pool_available() -> bool {
    PoolingAllocationConfig::is_pagemap_scan_available()
}

/// The pooling allocator, where the kernel can tell which pages an instance wrote
/// (`PAGEMAP_SCAN`, Linux 6.7+). A fresh instance per event then reuses a warm slot:
/// no `mmap`/`munmap` of a 4 GiB reservation and no page faults on the pages the last
/// instance touched, since only those are reset (up to [`POOL_KEEP_RESIDENT`] bytes, by
/// copy; beyond that by `madvise`). Without the scan the pool would reset by `memset`
/// or `madvise` of whole regions and is no faster than allocating per instance, so it
/// is not used.
pub(super) fn pooled_allocation() -> Option<PoolingAllocationConfig> {
    if !instance_pool_available() {
        return None;
    }
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(POOL_INSTANCES)
        .pagemap_scan(wasmtime::Enabled::Yes)
        .linear_memory_keep_resident(POOL_KEEP_RESIDENT)
        .table_keep_resident(POOL_KEEP_RESIDENT)
        .max_unused_warm_slots(POOL_WARM_SLOTS)
        // The cap on a table's growth in the pool (address space only). The example
        // Python and JS components have ~5,700 and ~7,700 elements; larger interpreter
        // builds and .NET guests pass the default 20,000.
        .table_elements(POOL_TABLE_ELEMENTS)
        // Every call runs on a fiber stack: one per instance the pool can hold (each
        // costs an `mprotect` when the engine starts, ~4 ms for all).
        .total_stacks(POOL_INSTANCES);
    Some(pool)
}

/// The engine: with the instance pool when asked for and available. A pool whose
/// address space cannot be reserved (`ulimit -v`) is not fatal: instances are then
/// allocated one by one.
pub(super) fn new_engine(instance_pool: bool) -> Result<Engine, String> {
    let pooled = instance_pool
        .then(pooled_allocation)
        .flatten()
        .and_then(|pool| {
            Engine::new(&engine_config_with(Some(pool)))
                .inspect_err(|e| {
                    tracing::warn!("wasm: no instance pool ({e}); allocating per instance")
                })
                .ok()
        });
    match pooled {
        Some(engine) => Ok(engine),
        None => Engine::new(&engine_config_with(None))
            .map_err(|e| format!("cannot create the wasm engine: {e}")),
    }
}

/// The linkers of the sandbox: WASI 0.2, the `host` import, and the wrappers of
/// [`super::hostcalls`] (deadline-bound sleeps, guarded opens, metered I/O); `http` also
/// has wasi-http, and is used only for hooks with an HTTP grant.
pub(super) struct Linkers {
    /// For hooks without an HTTP grant: wasi-http imports are stubbed per component
    /// ([`super::hostcalls::stub_http`]).
    pub(super) plain: Linker<State>,
    /// For hooks with an HTTP grant: built by the first of them ([`Linkers::http`]).
    /// Building it took ~0.2 ms of every one-shot `hookhost dispatch`, most of which
    /// have no such hook.
    http: OnceLock<Result<Linker<State>, String>>,
}

impl Linkers {
    /// The linker of hooks with an HTTP grant, built the first time it is asked for.
    pub(super) fn http(&self) -> Result<&Linker<State>, String> {
        self.http
            .get_or_init(|| build_linker(self.plain.engine(), true))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Builds the linker without wasi-http (the other one is built when first used).
pub(super) fn linkers(engine: &Engine) -> Result<Linkers, String> {
    Ok(Linkers {
        plain: build_linker(engine, false)?,
        http: OnceLock::new(),
    })
}

/// One linker, with wasi-http when `http`. Every import passes the same wrappers in both.
fn build_linker(engine: &Engine, http: bool) -> Result<Linker<State>, String> {
    let mut linker = Linker::<State>::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)
        .map_err(|e| format!("cannot link WASI: {e}"))?;
    if http {
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(|e| format!("cannot link wasi-http: {e}"))?;
        // `fields` charged by their bytes to the memory limit.
        linker.allow_shadowing(true);
        super::held_fields::add(&mut linker)
            .map_err(|e| format!("cannot link wasi-http's fields: {e:#}"))?;
        // Outgoing bodies charged by their write budget.
        super::held_bodies::add(&mut linker)
            .map_err(|e| format!("cannot link wasi-http's bodies: {e:#}"))?;
        linker.allow_shadowing(false);
    }
    add_hookhost_imports(&mut linker)
        .map_err(|e| format!("cannot link the host interface: {e}"))?;
    // Every guest path passes the filesystem's chokepoint, before the other wrappers.
    linker.allow_shadowing(true);
    super::guest_fs::add(&mut linker)
        .map_err(|e| format!("cannot link the guest filesystem: {e:#}"))?;
    linker.allow_shadowing(false);
    hostcalls::add(&mut linker).map_err(|e| format!("cannot link the host calls: {e:#}"))?;
    Ok(linker)
}

/// Bytes of randomness a plugin may ask for in one call (wasmtime-wasi allows 64 MiB).
const MAX_RANDOM_BYTES: u64 = 1 << 20;

impl Sandbox {
    /// A fresh store for one instance of a plugin, with the hook's live capabilities
    /// (its directories opened and checked by [`super::grants`]).
    pub(super) fn store(
        &self,
        plugin: &Arc<str>,
        live: &Live,
        dirs: &[OpenedDir],
        memory_bytes: u64,
        env: &[(String, String)],
        guard: super::grants::StoreGuard,
    ) -> Result<Store<State>, String> {
        let stdout = CappedPipe::new(OUTPUT_CAP);
        let stderr = CappedPipe::new(OUTPUT_CAP);
        let clock = Clock::new();
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .monotonic_clock(clock)
            .max_random_size(MAX_RANDOM_BYTES)
            // File I/O runs on the runtime's blocking threads, never on the thread that
            // dispatches events: a host call that blocks is then cut off at the
            // deadline (`Limits::bound`) and holds up nothing else.
            .allow_blocking_current_thread(false);
        for (name, value) in env {
            builder.env(name, value);
        }
        for dir in dirs {
            let perms = if dir.write {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            builder
                .preopened_dir(dir.host_path(), &dir.guest, perms)
                .map_err(|e| {
                    format!(
                        "cannot open granted directory `{}`: {e}",
                        dir.real.display()
                    )
                })?;
        }
        let wasi = builder.build();
        let descriptors = DescriptorShare::new(Descriptors::shared(), guard.hook, dirs.len())
            .map_err(|e| format!("cannot open the granted directories: {e}"))?;
        let memory = usize::try_from(memory_bytes).unwrap_or(usize::MAX);
        let state = State::new(
            plugin.clone(),
            wasi,
            clock,
            Arc::new(live.clone()),
            memory,
            stdout,
            stderr,
            descriptors,
            guard.places,
        );
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every host call, of whatever import, is charged here ([`hostcalls::meter`]).
        hostcalls::meter(&mut store);
        // At every epoch tick during a call: past the call's deadline, interrupt it;
        // before, yield, so that the task's thread runs its other tasks meanwhile.
        store.epoch_deadline_callback(|store| match store.data().http_policy.deadline {
            Some(deadline) if tokio::time::Instant::now() < deadline => {
                Ok(UpdateDeadline::Yield(1))
            }
            _ => Err(Trap::Interrupt.into()),
        });
        Ok(store)
    }
}

/// Links hookhost's own imports of both WIT versions: 0.1.0's `types` and `host`, 0.2.0's
/// `types` (the same types), `host` and `model` ([`super::model_call`]).
fn add_hookhost_imports(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    v0_1::Plugin::add_to_linker::<State, HasSelf<State>>(linker, |s| s)?;
    // 0.2.0's `types` declares types only: an instance with nothing to define.
    linker.instance("hookhost:hook/types@0.2.0")?;
    v0_2::hookhost::hook::host::add_to_linker::<State, HasSelf<State>>(linker, |s| s)?;
    super::model_call::add(linker)
}
