//! The wasm sandbox: hooks as WASI 0.2 components of the `hookhost:hook@0.1.0` world
//! (`wit/hook.wit`), run by wasmtime under fuel, memory, time, output and capability
//! limits.
//!
//! - One [`wasmtime::Engine`] (fuel and epoch interruption on) and one `Linker` with
//!   WASI 0.2, wasi-http and the `host` import, created on the first wasm hook.
//! - One `InstancePre` per plugin file, compiled once and cached on disk
//!   ([`CompileCache`]), re-read when the file changes.
//! - A fresh `Store` and instance per event by default; with `instance: "session"` one
//!   instance per (hook, session), dropped when it fails, at `SessionEnd`, or when too
//!   many sessions are open. An instance that trapped is never used again.
//! - Every call runs on a fiber of the dispatching task (`instantiate_async`,
//!   `call_async`): at each epoch tick it yields to the executor, or traps past its
//!   deadline, so wasm never holds a runtime thread.
//! - Limits on every call: fuel ([`DEFAULT_FUEL`]), an epoch deadline from the hook's
//!   timeout, a memory cap ([`DEFAULT_MEMORY_BYTES`]) and caps on stdout / stderr
//!   ([`OUTPUT_CAP`]). Hitting one fails the hook with a message naming the limit and
//!   its value; `onFailure` decides what that means for the action.
//! - Capabilities are deny-by-default: a directory, env var or HTTP host is live only
//!   when the plugin declares it in `describe` and the config grants it
//!   ([`crate::policy::capability`]).
//!
//! The plugin's typed response becomes a [`HookOutput`](super::HookOutput), exactly what a command hook's
//! JSON would have parsed to, so the merge treats both alike.

mod bindings;
pub mod cache;
mod convert;
mod state;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use cache::FileStamp;
pub use cache::{CacheStatus, CompileCache, sha256_hex};

use super::output::cap_text;
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict, WasmRunner};
use crate::config::schema::{InstanceMode, RawCapabilities};
use crate::event::EventSpec;
use crate::policy::allowlist::PluginAllowlist;
use crate::policy::capability::{self, Declared, DirRequest, Live};
use crate::policy::{HandlerSpec, Hook, Policy};
use bindings::{Plugin, PluginPre};
use futures_util::future::BoxFuture;
use state::{CappedPipe, Clock, State};

/// The WIT package version this host implements.
pub const WIT_VERSION: &str = "0.1.0";
/// The exported interface every plugin must have, without its version.
const HOOK_EXPORT: &str = "hookhost:hook/hook";
pub use crate::policy::limits::{DEFAULT_FUEL, DEFAULT_MEMORY_BYTES};
/// Bytes of stdout, and of stderr, a plugin may write per call.
pub const OUTPUT_CAP: usize = 1 << 20;
/// Epoch tick: the granularity of wall-clock deadlines.
const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Budget of `describe`, which runs once per plugin load.
const DESCRIBE_FUEL: u64 = 1_000_000_000;
const DESCRIBE_MEMORY: u64 = 1 << 30;
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Session instances kept at most; the least recently used goes first.
const MAX_SESSION_INSTANCES: usize = 64;
/// Stack available to wasm code.
const MAX_WASM_STACK: usize = 512 * 1024;
/// Bytes of linear memory (and of tables) a pooled slot resets by copy and keeps
/// resident between instances; a plugin's dirty pages above this are returned to the
/// kernel.
const POOL_KEEP_RESIDENT: usize = 1 << 20;
/// Warm pool slots kept for reuse: bounds the memory the pool keeps resident to about
/// this many times [`POOL_KEEP_RESIDENT`] per kind (memories, tables).
const POOL_WARM_SLOTS: u32 = 32;
/// Elements of a pooled table.
const POOL_TABLE_ELEMENTS: usize = 100_000;
/// Instances alive at once in the pool (wasmtime's default), and fiber stacks for
/// their calls.
const POOL_INSTANCES: u32 = 1_000;

/// What a plugin says about itself, and what the host found in the file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginInfo {
    /// The file.
    pub path: PathBuf,
    /// sha256 of the file, lowercase hex.
    pub sha256: String,
    /// Size of the file in bytes.
    pub size: u64,
    /// The `hookhost:hook` version it was built for.
    pub wit_version: String,
    /// Name from `describe`.
    pub name: String,
    /// Version from `describe`.
    pub version: String,
    /// Events it handles (empty: all).
    pub events: Vec<String>,
    /// Capabilities it asks for.
    pub capabilities: DeclaredCapabilities,
    /// The component's imports (WIT names).
    pub imports: Vec<String>,
    /// The component's exports (WIT names).
    pub exports: Vec<String>,
}

/// The capabilities a plugin declares, as reported by `inspect`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeclaredCapabilities {
    /// Directories: `(path, write)`.
    pub dirs: Vec<DeclaredDir>,
    /// Env var names.
    pub env: Vec<String>,
    /// Host patterns.
    pub http: Vec<String>,
}

/// A directory a plugin asks for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeclaredDir {
    /// `${workspace}`, `${home}`, an absolute path, or `*`.
    pub path: String,
    /// Whether it asks to write.
    pub write: bool,
}

impl DeclaredCapabilities {
    fn to_declared(&self) -> Declared {
        Declared {
            dirs: self
                .dirs
                .iter()
                .map(|d| DirRequest {
                    path: d.path.clone(),
                    write: d.write,
                })
                .collect(),
            env: self.env.clone(),
            http: self.http.clone(),
        }
    }
}

/// Everything one plugin run needs, independent of the config structures.
#[derive(Debug, Clone)]
pub struct PluginCall {
    /// A name for reports: the hook id, or the file name.
    pub label: String,
    /// The component file.
    pub plugin: PathBuf,
    /// Expected sha256, checked before compiling.
    pub sha256: Option<String>,
    /// Grants.
    pub capabilities: RawCapabilities,
    /// Fuel per call.
    pub fuel: u64,
    /// Memory cap in bytes.
    pub memory_bytes: u64,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Instance lifetime.
    pub instance: InstanceMode,
    /// The hook's `config`, handed to the plugin.
    pub config: Option<Value>,
}

impl PluginCall {
    /// A call of the plugin file at `plugin` with the defaults of a configured hook (no
    /// grants, default fuel and memory, a fresh instance per event), a 10-second timeout,
    /// and the file name as its label.
    pub fn new(plugin: impl Into<PathBuf>) -> PluginCall {
        let plugin = plugin.into();
        PluginCall {
            label: plugin.file_name().map_or_else(
                || plugin.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            plugin,
            sha256: None,
            capabilities: RawCapabilities::default(),
            fuel: DEFAULT_FUEL,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            timeout: Duration::from_secs(10),
            instance: InstanceMode::Event,
            config: None,
        }
    }

    /// The call a configured wasm hook makes; `None` for other handler types.
    pub fn from_hook(hook: &Hook) -> Option<PluginCall> {
        let HandlerSpec::Wasm(spec) = &hook.handler else {
            return None;
        };
        Some(PluginCall {
            label: hook.id.clone(),
            plugin: spec.plugin.clone(),
            sha256: spec.sha256.clone(),
            capabilities: spec.capabilities.clone(),
            fuel: spec.fuel.unwrap_or(DEFAULT_FUEL),
            memory_bytes: spec.memory_bytes.unwrap_or(DEFAULT_MEMORY_BYTES),
            timeout: hook.timeout,
            instance: spec.instance,
            config: spec.config.clone(),
        })
    }
}

/// A run plus what only the sandbox knows: the hook output as JSON (what a command hook
/// would have printed) and capability warnings.
#[derive(Debug, Clone)]
pub struct PluginRun {
    /// The run, as the dispatcher sees it.
    pub run: HandlerRun,
    /// The plugin's response as Claude Code hook output JSON, when it answered.
    pub output_json: Option<Value>,
    /// Grants the plugin did not declare, and similar notes.
    pub warnings: Vec<String>,
}

/// The wasm sandbox. Cheap to create: the engine starts on the first wasm hook.
#[derive(Debug)]
pub struct WasmRuntime {
    cache_dir: Option<PathBuf>,
    instance_pool: bool,
    sandbox: OnceLock<Result<Arc<Sandbox>, String>>,
}

impl Default for WasmRuntime {
    fn default() -> Self {
        WasmRuntime::new(CompileCache::default_dir())
    }
}

impl WasmRuntime {
    /// A runtime that caches compiled plugins in `cache_dir` (`None`: no disk cache).
    pub fn new(cache_dir: Option<PathBuf>) -> WasmRuntime {
        WasmRuntime {
            cache_dir,
            instance_pool: true,
            sandbox: OnceLock::new(),
        }
    }

    /// Whether instances come from a pool of reusable slots where the kernel supports it
    /// (the default; see [`engine_config`]). The pool pays off over many events; a
    /// process that runs one event saves its set-up (about 0.3 ms) without it.
    pub fn with_instance_pool(mut self, pool: bool) -> WasmRuntime {
        self.instance_pool = pool;
        self
    }

    /// The runtime shared by every host of the process that was not given one: one engine,
    /// one set of compiled plugins.
    pub fn shared() -> Arc<dyn WasmRunner> {
        static SHARED: OnceLock<Arc<WasmRuntime>> = OnceLock::new();
        SHARED
            .get_or_init(|| Arc::new(WasmRuntime::default()))
            .clone()
    }

    fn sandbox(&self) -> Result<&Arc<Sandbox>, String> {
        self.sandbox
            .get_or_init(|| Sandbox::new(self.cache_dir.clone(), self.instance_pool).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The compile cache directory, if any.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// Loads a plugin (compiling or reading the cache) and returns what it declares.
    /// Blocks until done (`describe` runs in the plugin).
    ///
    /// # Errors
    ///
    /// A message naming the file: unreadable, not a component, built for another WIT
    /// version, or `describe` failed.
    pub fn inspect(&self, path: &Path) -> Result<(PluginInfo, CacheStatus), String> {
        let sandbox = self.sandbox()?;
        let loaded = block_on(sandbox.load(path, None, None))?.map_err(|(_, message)| message)?;
        Ok((loaded.info.clone(), loaded.cache_status.clone()))
    }

    /// Runs one plugin on one event outside any config: what `hookhost plugin test` does.
    pub async fn call(&self, call: &PluginCall, invocation: &Invocation) -> PluginRun {
        self.call_admitted(call, invocation, None).await
    }

    /// Like [`WasmRuntime::call`], refusing (before compiling, or running a cached
    /// compile) any plugin that managed policy's `allowlist` does not admit. The digest
    /// checked is that of the bytes that are compiled.
    pub async fn call_admitted(
        &self,
        call: &PluginCall,
        invocation: &Invocation,
        allowlist: Option<&PluginAllowlist>,
    ) -> PluginRun {
        let started = Instant::now();
        match self.sandbox() {
            Ok(sandbox) => sandbox.run(call, invocation, started, allowlist).await,
            Err(e) => PluginRun {
                run: HandlerRun::failed(
                    FailureKind::CannotStart,
                    format!("the wasm sandbox cannot start: {e}"),
                    started,
                ),
                output_json: None,
                warnings: Vec::new(),
            },
        }
    }

    /// [`WasmRunner::run`]: the hook's plugin call, admitted by managed policy's
    /// allowlist, with capability warnings put in front of its diagnostics.
    async fn run_hook(&self, hook: &Hook, invocation: &Invocation, policy: &Policy) -> HandlerRun {
        let started = Instant::now();
        let Some(call) = PluginCall::from_hook(hook) else {
            return HandlerRun::failed(
                FailureKind::CannotStart,
                format!("hook `{}` is not a wasm hook", hook.id),
                started,
            );
        };
        let mut run = self
            .call_admitted(&call, invocation, Some(&policy.settings.plugin_allowlist))
            .await;
        if !run.warnings.is_empty() {
            let warnings: Vec<String> = run
                .warnings
                .iter()
                .map(|w| format!("warning: {w}"))
                .collect();
            let joined = warnings.join("\n");
            run.run.diagnostics = Some(match run.run.diagnostics.take() {
                Some(d) => cap_text(&format!("{joined}\n{d}")),
                None => joined,
            });
        }
        run.run
    }
}

impl WasmRunner for WasmRuntime {
    fn run<'a>(
        &'a self,
        hook: &'a Hook,
        invocation: &'a Invocation,
        policy: &'a Policy,
    ) -> BoxFuture<'a, HandlerRun> {
        Box::pin(self.run_hook(hook, invocation, policy))
    }
}

/// A compiled plugin, ready to instantiate.
struct Loaded {
    /// The file as it was when loaded; another stamp means it changed.
    stamp: FileStamp,
    pre: PluginPre<State>,
    info: PluginInfo,
    declared: Declared,
    cache_status: CacheStatus,
    file_name: Arc<str>,
}

/// A live instance kept for one (hook, session).
struct SessionInstance {
    store: Store<State>,
    plugin: Plugin,
    digest: String,
    last_used: Instant,
}

/// Held across the call: a session's events reach its instance one at a time.
type SessionSlot = Arc<tokio::sync::Mutex<Option<SessionInstance>>>;

/// The engine and everything shared across plugins.
struct Sandbox {
    engine: Engine,
    linker: Linker<State>,
    cache: CompileCache,
    plugins: Mutex<HashMap<PathBuf, Arc<Loaded>>>,
    sessions: Mutex<HashMap<(String, String), SessionSlot>>,
    ticker_stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Release);
    }
}

/// Why a load failed: the failure kind for the report, and the message.
type LoadError = (FailureKind, String);

/// The engine configuration of the sandbox (component model, fuel, epoch interruption,
/// a 512 KiB wasm stack, the instance pool where it helps); part of the compile cache
/// key through wasmtime's compatibility hash. Public so that tools and benchmarks can
/// build a compatible [`Engine`].
pub fn engine_config() -> Config {
    engine_config_with(pooled_allocation())
}

/// The sandbox's engine configuration, with instances from `pool` or, without one,
/// allocated one by one.
fn engine_config_with(pool: Option<PoolingAllocationConfig>) -> Config {
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

/// Whether a [`WasmRuntime`] on this machine takes its instances from a pool: the kernel
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
fn pooled_allocation() -> Option<PoolingAllocationConfig> {
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

impl Sandbox {
    fn new(cache_dir: Option<PathBuf>, instance_pool: bool) -> Result<Sandbox, String> {
        // A pool whose address space cannot be reserved (`ulimit -v`) is not fatal:
        // instances are then allocated one by one.
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
        let engine = match pooled {
            Some(engine) => engine,
            None => Engine::new(&engine_config_with(None))
                .map_err(|e| format!("cannot create the wasm engine: {e}"))?,
        };
        let mut linker = Linker::<State>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| format!("cannot link WASI: {e}"))?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(|e| format!("cannot link wasi-http: {e}"))?;
        Plugin::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            .map_err(|e| format!("cannot link the host interface: {e}"))?;
        clamp_sleeps(&mut linker).map_err(|e| format!("cannot link the clock: {e}"))?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        {
            let (engine, stop) = (engine.clone(), ticker_stop.clone());
            std::thread::Builder::new()
                .name("hookhost-epoch".into())
                .spawn(move || {
                    // Ticks follow real time: a late wake-up catches up, so deadlines
                    // are not stretched by scheduling delays.
                    let start = Instant::now();
                    let mut ticks: u128 = 0;
                    while !stop.load(Ordering::Acquire) {
                        std::thread::sleep(EPOCH_TICK);
                        let due = start.elapsed().as_nanos() / EPOCH_TICK.as_nanos();
                        while ticks < due {
                            engine.increment_epoch();
                            ticks += 1;
                        }
                    }
                })
                .map_err(|e| format!("cannot start the epoch ticker: {e}"))?;
        }
        let cache = CompileCache::new(cache_dir, &engine);
        Ok(Sandbox {
            engine,
            linker,
            cache,
            plugins: Mutex::default(),
            sessions: Mutex::default(),
            ticker_stop,
        })
    }

    /// The compiled plugin at `path`, loading it when new or changed.
    async fn load(
        &self,
        path: &Path,
        expected_sha: Option<&str>,
        allowlist: Option<&PluginAllowlist>,
    ) -> Result<Arc<Loaded>, LoadError> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| cannot_read(path, &e))?;
        let stamp = FileStamp::of(&meta);
        let cached = self
            .plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
            .cloned();
        if let Some(loaded) = cached.filter(|l| l.stamp == stamp) {
            check_sha(&loaded.info.sha256, expected_sha, path)?;
            admit(allowlist, path, &loaded.info.sha256)?;
            return Ok(loaded);
        }
        let file_name: Arc<str> = path
            .file_name()
            .map_or_else(|| shown.to_string(), |n| n.to_string_lossy().into_owned())
            .into();
        // Hashing, compiling or mapping a cached compile: blocking work, done where
        // it does not hold up the runtime's other tasks.
        let (digest, component, cache_status) =
            blocking(|| self.compile(path, &file_name, &meta, expected_sha, allowlist))?;
        let (imports, exports) = self.interface_names(&component);
        let wit_version = check_wit_version(&imports, &exports, path)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .and_then(PluginPre::new)
            .map_err(|e| {
                (
                    FailureKind::CannotStart,
                    format!("plugin `{shown}` cannot be linked: {e:#}"),
                )
            })?;
        let described = self.describe(&pre, &file_name).await?;
        let info = PluginInfo {
            path: path.to_path_buf(),
            sha256: digest,
            size: meta.len(),
            wit_version,
            name: described.name,
            version: described.version,
            events: described.events,
            capabilities: DeclaredCapabilities {
                dirs: described
                    .capabilities
                    .dirs
                    .into_iter()
                    .map(|d| DeclaredDir {
                        path: d.path,
                        write: d.write,
                    })
                    .collect(),
                env: described.capabilities.env,
                http: described.capabilities.http,
            },
            imports,
            exports,
        };
        let loaded = Arc::new(Loaded {
            stamp,
            pre,
            declared: info.capabilities.to_declared(),
            info,
            cache_status,
            file_name,
        });
        self.plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_path_buf(), loaded.clone());
        Ok(loaded)
    }

    /// The digest of the plugin at `path` and its compiled component (from the compile
    /// cache when it holds one), refusing a digest that the config's `sha256` or
    /// managed policy's allowlist does not admit.
    fn compile(
        &self,
        path: &Path,
        file_name: &Arc<str>,
        meta: &std::fs::Metadata,
        expected_sha: Option<&str>,
        allowlist: Option<&PluginAllowlist>,
    ) -> Result<(String, Component, CacheStatus), LoadError> {
        let shown = path.display();
        let (digest, bytes) = self
            .cache
            .plugin_digest(path, meta)
            .map_err(|e| cannot_read(path, &e))?;
        check_sha(&digest, expected_sha, path)?;
        // Managed allowlist: decided on the digest of the bytes that compile (`read`
        // below refuses bytes with another digest).
        admit(allowlist, path, &digest)?;
        // Only a cache miss reads (or re-reads) the file.
        let read = || {
            // Bytes from the digest step were hashed there; re-read ones must match it.
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => {
                    let bytes = std::fs::read(path).map_err(|e| cannot_read(path, &e).1)?;
                    if sha256_hex(&bytes) != digest {
                        return Err(format!(
                            "plugin `{shown}` changed while it was being loaded; try again"
                        ));
                    }
                    bytes
                }
            };
            if !wasmparser_is_component(&bytes) {
                return Err(format!(
                    "plugin `{shown}` is not a WebAssembly component (build it for wasm32-wasip2)"
                ));
            }
            Ok(bytes)
        };
        let (component, cache_status) = self
            .cache
            .load(&self.engine, read, &digest, file_name)
            .map_err(|e| (FailureKind::CannotStart, e))?;
        Ok((digest, component, cache_status))
    }

    fn interface_names(&self, component: &Component) -> (Vec<String>, Vec<String>) {
        let ty = component.component_type();
        let imports = ty
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let exports = ty
            .exports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        (imports, exports)
    }

    /// Calls `describe` in a throwaway instance with no capabilities.
    async fn describe(
        &self,
        pre: &PluginPre<State>,
        file_name: &Arc<str>,
    ) -> Result<bindings::PluginInfo, LoadError> {
        let limits = Limits {
            fuel: DESCRIBE_FUEL,
            memory_bytes: DESCRIBE_MEMORY,
            timeout: DESCRIBE_TIMEOUT,
        };
        let mut store = self
            .store(file_name, &Live::default(), limits.memory_bytes, &[])
            .map_err(|e| (FailureKind::CannotStart, e))?;
        limits
            .arm(&mut store)
            .map_err(|e| (FailureKind::CannotStart, e))?;
        let result = async {
            let plugin = pre.instantiate_async(&mut store).await?;
            plugin.hookhost_hook_hook().call_describe(&mut store).await
        }
        .await;
        result.map_err(|e| {
            let (kind, message) = classify_error(&e, &mut store, &limits);
            (
                kind,
                format!("plugin `{file_name}`: `describe` failed: {message}"),
            )
        })
    }

    /// A fresh store for one instance of a plugin, with the hook's live capabilities.
    fn store(
        &self,
        plugin: &Arc<str>,
        live: &Live,
        memory_bytes: u64,
        env: &[(String, String)],
    ) -> Result<Store<State>, String> {
        let stdout = CappedPipe::new(OUTPUT_CAP);
        let stderr = CappedPipe::new(OUTPUT_CAP);
        let clock = Clock::new();
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .monotonic_clock(clock)
            .allow_blocking_current_thread(true);
        for (name, value) in env {
            builder.env(name, value);
        }
        for dir in &live.dirs {
            let perms = if dir.write {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            builder
                .preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| {
                    format!(
                        "cannot open granted directory `{}`: {e}",
                        dir.host.display()
                    )
                })?;
        }
        let wasi = builder.build();
        let memory = usize::try_from(memory_bytes).unwrap_or(usize::MAX);
        let state = State::new(
            plugin.clone(),
            wasi,
            clock,
            Arc::new(live.clone()),
            memory,
            stdout,
            stderr,
        );
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
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

    async fn run(
        &self,
        call: &PluginCall,
        invocation: &Invocation,
        started: Instant,
        allowlist: Option<&PluginAllowlist>,
    ) -> PluginRun {
        let failed = |kind, message: String, warnings| PluginRun {
            run: HandlerRun::failed(kind, message, started),
            output_json: None,
            warnings,
        };
        let loaded = match self
            .load(&call.plugin, call.sha256.as_deref(), allowlist)
            .await
        {
            Ok(l) => l,
            Err((kind, message)) => return failed(kind, message, Vec::new()),
        };
        let event_name = invocation.spec.name.as_ref();
        if !loaded.info.events.is_empty()
            && !loaded
                .info
                .events
                .iter()
                .any(|e| e == event_name || e == "*")
        {
            let mut run = HandlerRun {
                verdict: Verdict::Answer(Answer::default()),
                exit_code: None,
                duration: started.elapsed(),
                usage: Usage::default(),
                diagnostics: None,
            };
            run.diagnostics = Some(format!(
                "plugin `{}` does not handle `{event_name}`; not called",
                loaded.file_name
            ));
            return PluginRun {
                run,
                output_json: None,
                warnings: Vec::new(),
            };
        }
        let (live, warnings) = match capability::intersect(
            &call.capabilities,
            &loaded.declared,
            &invocation.project_dir,
            home_dir(),
        ) {
            Ok(x) => x,
            Err(e) => {
                return failed(
                    FailureKind::CannotStart,
                    format!("plugin `{}`: {e}", loaded.file_name),
                    Vec::new(),
                );
            }
        };
        let event = convert::event(invocation, call.config.as_ref());
        let limits = Limits {
            fuel: call.fuel,
            memory_bytes: call.memory_bytes,
            timeout: call.timeout,
        };
        let outcome = match call.instance {
            InstanceMode::Event => self.run_fresh(&loaded, &live, &limits, &event).await,
            InstanceMode::Session => {
                self.run_in_session(call, &loaded, &live, &limits, &event, invocation)
                    .await
            }
        };
        let CallOutcome {
            result,
            usage,
            diagnostics,
        } = match outcome {
            Ok(o) => o,
            Err(message) => {
                return failed(
                    FailureKind::CannotStart,
                    format!("plugin `{}`: {message}", loaded.file_name),
                    warnings,
                );
            }
        };
        let (verdict, output_json) = match result {
            Ok(response) => match convert::response(response, &invocation.spec) {
                Ok((output, json)) => (Verdict::Answer(output), Some(json)),
                Err(message) => (
                    Verdict::failed(
                        FailureKind::InvalidOutput,
                        format!("plugin `{}`: {message}", loaded.file_name),
                    ),
                    None,
                ),
            },
            Err((kind, message)) => (
                Verdict::failed(kind, format!("plugin `{}`: {message}", loaded.file_name)),
                None,
            ),
        };
        PluginRun {
            run: HandlerRun {
                verdict,
                exit_code: None,
                duration: started.elapsed(),
                usage,
                diagnostics,
            },
            output_json,
            warnings,
        }
    }

    /// A store for a new instance of `loaded` with the hook's live grants, armed with
    /// `limits` for its first call.
    fn armed_store(
        &self,
        loaded: &Loaded,
        live: &Live,
        limits: &Limits,
    ) -> Result<Store<State>, String> {
        let mut store = self.store(
            &loaded.file_name,
            live,
            limits.memory_bytes,
            &env_values(live),
        )?;
        limits.arm(&mut store)?;
        Ok(store)
    }

    async fn run_fresh(
        &self,
        loaded: &Loaded,
        live: &Live,
        limits: &Limits,
        event: &bindings::Event,
    ) -> Result<CallOutcome, String> {
        let mut store = self.armed_store(loaded, live, limits)?;
        let result = async {
            let plugin = loaded.pre.instantiate_async(&mut store).await?;
            plugin
                .hookhost_hook_hook()
                .call_handle(&mut store, event)
                .await
        }
        .await;
        Ok(finish(&mut store, limits, result))
    }

    async fn run_in_session(
        &self,
        call: &PluginCall,
        loaded: &Loaded,
        live: &Live,
        limits: &Limits,
        event: &bindings::Event,
        invocation: &Invocation,
    ) -> Result<CallOutcome, String> {
        let key = (call.label.clone(), invocation.session_id.clone());
        let slot = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            if !sessions.contains_key(&key) && sessions.len() >= MAX_SESSION_INSTANCES {
                evict_oldest(&mut sessions);
            }
            sessions.entry(key.clone()).or_default().clone()
        };
        // The instance is taken out of its slot for the call: if the call's future is
        // dropped (its client went away), the instance goes with it instead of being
        // reused mid-call. The slot stays locked meanwhile, so a session's events reach
        // its instance one at a time.
        let mut guard = slot.lock().await;
        let kept = guard
            .take()
            .filter(|instance| instance.digest == loaded.info.sha256);
        let mut instance = match kept {
            Some(instance) => instance,
            None => {
                let mut store = self.armed_store(loaded, live, limits)?;
                match loaded.pre.instantiate_async(&mut store).await {
                    Ok(plugin) => SessionInstance {
                        store,
                        plugin,
                        digest: loaded.info.sha256.clone(),
                        last_used: Instant::now(),
                    },
                    Err(e) => {
                        drop(guard);
                        self.forget_session(&key);
                        return Ok(finish(&mut store, limits, Err(e)));
                    }
                }
            }
        };
        instance.last_used = Instant::now();
        limits.arm(&mut instance.store)?;
        let result = instance
            .plugin
            .hookhost_hook_hook()
            .call_handle(&mut instance.store, event)
            .await;
        let trapped = result.is_err();
        let outcome = finish(&mut instance.store, limits, result);
        let ends = invocation.spec.ends_session;
        if trapped || ends {
            // A trapped instance is never used again; a session that ended has no use for it.
            drop(guard);
            self.forget_session(&key);
        } else {
            *guard = Some(instance);
        }
        Ok(outcome)
    }

    fn forget_session(&self, key: &(String, String)) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

/// A plugin file that cannot be read (or stat'ed): the hook cannot start.
fn cannot_read(path: &Path, error: &std::io::Error) -> LoadError {
    (
        FailureKind::CannotStart,
        format!("cannot read plugin `{}`: {error}", path.display()),
    )
}

/// Runs blocking work (file reads, compiling) from async code: in place on a
/// multi-thread runtime, whose other tasks move to another thread meanwhile; inline
/// elsewhere (a one-shot command on a one-thread runtime has nothing else to run).
fn blocking<R>(work: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// Runs `future` to completion from sync code, on a one-thread runtime of its own: on
/// this thread, or on a scoped thread when this one may be running an async task
/// (which must not block).
fn block_on<F>(future: F) -> Result<F::Output, String>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    let run = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|runtime| runtime.block_on(future))
            .map_err(|e| format!("cannot start the async runtime: {e}"))
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return run();
    }
    std::thread::scope(|scope| {
        scope
            .spawn(run)
            .join()
            .unwrap_or_else(|_| Err("the wasm runner crashed".to_string()))
    })
}

/// Replaces `monotonic-clock.subscribe-duration` / `subscribe-instant` with versions
/// whose sleeps end at the call's deadline: wasm code is interrupted by the epoch
/// deadline, but a guest blocked in a host sleep would otherwise outlive its timeout.
fn clamp_sleeps(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    use wasmtime::StoreContextMut;
    use wasmtime::component::Resource;
    use wasmtime_wasi::p2::DynPollable;
    linker.allow_shadowing(true);
    let mut clock = linker.instance("wasi:clocks/monotonic-clock@0.2.12")?;
    clock.func_wrap(
        "subscribe-duration",
        |mut store: StoreContextMut<'_, State>,
         (nanos,): (u64,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            let until = std::time::Instant::now().checked_add(Duration::from_nanos(nanos));
            let until = until
                .unwrap_or_else(|| std::time::Instant::now() + Duration::from_secs(86_400 * 365));
            Ok((store.data_mut().sleep_until(until)?,))
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |mut store: StoreContextMut<'_, State>,
         (when,): (u64,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            let until = store.data().clock.instant(when);
            Ok((store.data_mut().sleep_until(until)?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

fn evict_oldest(sessions: &mut HashMap<(String, String), SessionSlot>) {
    let oldest = sessions
        .iter()
        .filter_map(|(k, slot)| {
            let guard = slot.try_lock().ok()?;
            Some((k.clone(), guard.as_ref().map(|i| i.last_used)))
        })
        .min_by_key(|(_, used)| *used)
        .map(|(k, _)| k);
    if let Some(key) = oldest {
        sessions.remove(&key);
    }
}

/// The user's home directory, for `${home}` grants (looked up once).
fn home_dir() -> Option<&'static Path> {
    static HOME: OnceLock<Option<PathBuf>> = OnceLock::new();
    HOME.get_or_init(|| directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()))
        .as_deref()
}

fn env_values(live: &Live) -> Vec<(String, String)> {
    live.env
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
        .collect()
}

/// Whether the bytes are a component (not a core module): the layer field of the
/// preamble.
fn wasmparser_is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}

fn check_sha(actual: &str, expected: Option<&str>, path: &Path) -> Result<(), LoadError> {
    match expected {
        Some(expected) if !expected.eq_ignore_ascii_case(actual) => Err((
            FailureKind::Refused,
            format!(
                "plugin `{}` refused: `sha256` is {expected} in config but the file's is {actual}",
                path.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Asks managed policy's allowlist about a plugin digest, reading the plugin's detached
/// signature only when the digest alone does not admit it.
fn admit(allowlist: Option<&PluginAllowlist>, path: &Path, digest: &str) -> Result<(), LoadError> {
    let Some(list) = allowlist.filter(|l| l.required()) else {
        return Ok(());
    };
    let signature = if list.needs_signature(digest) {
        use std::io::Read;
        let sig = crate::policy::allowlist::signature_path(path);
        match std::fs::File::open(&sig) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(Err(e.to_string())),
            Ok(file) => {
                // A signature is 64 bytes in hex or base64; a larger file is not one.
                let mut bytes = Vec::new();
                Some(
                    file.take(4096)
                        .read_to_end(&mut bytes)
                        .map(|_| bytes)
                        .map_err(|e| e.to_string()),
                )
            }
        }
    } else {
        None
    };
    list.admit(path, digest, signature)
        .map(drop)
        .map_err(|message| (FailureKind::Refused, message))
}

/// Finds the `hookhost:hook` version of a component; refuses other versions, naming
/// both.
fn check_wit_version(
    imports: &[String],
    exports: &[String],
    path: &Path,
) -> Result<String, LoadError> {
    let version_of = |name: &str| {
        name.strip_prefix("hookhost:hook/")
            .and_then(|rest| rest.split_once('@'))
            .map(|(_, v)| v.to_string())
    };
    let Some(version) = exports
        .iter()
        .find(|n| n.starts_with(&format!("{HOOK_EXPORT}@")))
        .and_then(|n| version_of(n))
    else {
        return Err((
            FailureKind::CannotStart,
            format!(
                "`{}` is not a hookhost plugin: it exports no `{HOOK_EXPORT}` interface (exports: {})",
                path.display(),
                if exports.is_empty() {
                    "none".to_string()
                } else {
                    exports.join(", ")
                }
            ),
        ));
    };
    let others = imports.iter().chain(exports).filter_map(|n| version_of(n));
    for found in std::iter::once(version.clone()).chain(others) {
        if found != WIT_VERSION {
            return Err((
                FailureKind::Refused,
                format!(
                    "plugin `{}` was built for hookhost:hook@{found}, but this host supports hookhost:hook@{WIT_VERSION}; \
                     rebuild it against hookhost-guest for {WIT_VERSION}",
                    path.display()
                ),
            ));
        }
    }
    Ok(version)
}

/// The limits of one call.
#[derive(Debug, Clone, Copy)]
struct Limits {
    fuel: u64,
    memory_bytes: u64,
    timeout: Duration,
}

impl Limits {
    /// Sets fuel and the epoch deadline for the next call, and clears per-call records.
    fn arm(&self, store: &mut Store<State>) -> Result<(), String> {
        store
            .set_fuel(self.fuel)
            .map_err(|e| format!("cannot set fuel: {e}"))?;
        // The next tick runs the store's epoch callback, which yields or interrupts.
        store.set_epoch_deadline(1);
        store.data_mut().limiter.refused = None;
        store.data_mut().http_policy.deadline = Some(tokio::time::Instant::now() + self.timeout);
        store
            .data()
            .http_policy
            .denied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        Ok(())
    }
}

/// What one call produced, before it becomes a verdict.
struct CallOutcome {
    result: Result<bindings::Response, (FailureKind, String)>,
    usage: Usage,
    diagnostics: Option<String>,
}

/// Collects usage and diagnostics after a call and classifies its error.
fn finish(
    store: &mut Store<State>,
    limits: &Limits,
    result: wasmtime::Result<Result<bindings::Response, String>>,
) -> CallOutcome {
    let interrupted =
        matches!(&result, Err(e) if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt));
    // After an epoch interrupt the fuel counter is stale; don't report it.
    let fuel = if interrupted {
        None
    } else {
        store
            .get_fuel()
            .ok()
            .map(|left| limits.fuel.saturating_sub(left))
    };
    let usage = Usage {
        fuel,
        memory_bytes: Some(store.data().limiter.peak as u64),
    };
    let result = match result {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(message)) => match store.data().limiter.refused {
            Some(asked) => Err((
                FailureKind::Limit,
                memory_message(limits, asked, &format!("the plugin returned: {message}")),
            )),
            None => Err((FailureKind::Trap, format!("returned an error: {message}"))),
        },
        Err(e) => Err(classify_error(&e, store, limits)),
    };
    let diagnostics = collect_diagnostics(store);
    CallOutcome {
        result,
        usage,
        diagnostics,
    }
}

fn memory_message(limits: &Limits, asked: usize, detail: &str) -> String {
    format!(
        "memory limit of {} bytes ({} MiB) reached: the plugin asked to grow its memory to {asked} bytes; {detail}",
        limits.memory_bytes,
        limits.memory_bytes >> 20
    )
}

/// Maps a wasmtime error to a failure kind and a message naming the limit hit.
fn classify_error(
    error: &wasmtime::Error,
    store: &mut Store<State>,
    limits: &Limits,
) -> (FailureKind, String) {
    let trap = error.downcast_ref::<Trap>().copied();
    let (stdout_over, stderr_over) = {
        let data = store.data();
        (data.stdout.take_overflow(), data.stderr.take_overflow())
    };
    if stdout_over || stderr_over {
        let which = if stdout_over { "stdout" } else { "stderr" };
        return (
            FailureKind::Limit,
            format!("{which} exceeded its cap of {OUTPUT_CAP} bytes"),
        );
    }
    match trap {
        Some(Trap::OutOfFuel) => {
            return (
                FailureKind::Limit,
                format!("fuel exhausted after {} units", limits.fuel),
            );
        }
        Some(Trap::Interrupt) => {
            return (
                FailureKind::Timeout,
                format!(
                    "timed out after {} (wall-clock limit)",
                    human_duration(limits.timeout)
                ),
            );
        }
        Some(Trap::StackOverflow) => {
            return (
                FailureKind::Limit,
                format!("call stack exhausted (wasm stack limit of {MAX_WASM_STACK} bytes)"),
            );
        }
        _ => {}
    }
    if let Some(asked) = store.data().limiter.refused {
        return (
            FailureKind::Limit,
            memory_message(
                limits,
                asked,
                &format!("then it trapped: {}", short_error(error)),
            ),
        );
    }
    let panic = store.data().stderr.last_line_matching("panicked at");
    match (trap, panic) {
        (_, Some(line)) => (FailureKind::Trap, format!("plugin panicked: {line}")),
        (Some(trap), None) => (FailureKind::Trap, format!("trapped: {trap}")),
        (None, None) => (FailureKind::Trap, format!("failed: {}", short_error(error))),
    }
}

fn short_error(error: &wasmtime::Error) -> String {
    match error.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{error:#}")
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

fn human_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{secs} s")
    }
}

/// stdout, stderr, log records and refused requests of the call, capped.
fn collect_diagnostics(store: &mut Store<State>) -> Option<String> {
    let data = store.data_mut();
    let mut parts = Vec::new();
    let denied = std::mem::take(
        &mut *data
            .http_policy
            .denied
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    );
    for target in denied {
        parts.push(format!("http: request to {target} denied (not granted)"));
    }
    for record in data.log.take() {
        parts.push(format!("log: {record}"));
    }
    for (name, pipe) in [("stdout", &data.stdout), ("stderr", &data.stderr)] {
        let (bytes, _) = pipe.take();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_end();
        if !text.is_empty() {
            parts.push(format!("{name}: {text}"));
        }
    }
    (!parts.is_empty()).then(|| cap_text(&parts.join("\n")))
}

/// Builds an [`Invocation`] from an event name and input, outside any dispatcher: for
/// `hookhost plugin test` and embedders that call [`WasmRuntime::call`] directly.
///
/// # Errors
///
/// The input is not an object.
pub fn invocation(
    spec: Arc<EventSpec>,
    input: Value,
    project_dir: &Path,
) -> Result<Invocation, String> {
    Invocation::new(spec, input, project_dir)
        .ok_or_else(|| "the input must be a JSON object".into())
}

/// Adds one `--grant` of `hookhost plugin test` to `capabilities`:
/// `dir=PATH[:ro|:rw]` (PATH may start with `${workspace}` or `${home}`; add
/// `@GUEST` after it to mount it elsewhere), `env=NAME`, `http=PATTERN`.
///
/// # Errors
///
/// A message naming the grant and what is wrong with it.
pub fn parse_grant(grant: &str, capabilities: &mut RawCapabilities) -> Result<(), String> {
    use crate::config::schema::{DirMode, RawDirGrant};
    let (kind, value) = grant.split_once('=').ok_or_else(|| {
        format!("grant `{grant}` must look like dir=PATH[:ro|:rw], env=NAME or http=HOST")
    })?;
    if value.is_empty() {
        return Err(format!("grant `{grant}` has no value"));
    }
    match kind {
        "dir" => {
            let (rest, mode) = match value.rsplit_once(':') {
                Some((rest, "ro")) => (rest, DirMode::ReadOnly),
                Some((rest, "rw")) => (rest, DirMode::ReadWrite),
                _ => (value, DirMode::ReadOnly),
            };
            let (path, guest) = match rest.split_once('@') {
                Some((path, guest)) => (path, Some(guest.to_string())),
                None => (rest, None),
            };
            capabilities.dirs.push(RawDirGrant {
                path: path.to_string(),
                guest,
                mode,
            });
        }
        "env" => capabilities.env.push(value.to_string()),
        "http" => capabilities.http.push(value.to_string()),
        other => {
            return Err(format!(
                "grant `{grant}`: unknown kind `{other}` (expected dir, env or http)"
            ));
        }
    }
    capability::validate(capabilities)
        .map_err(|(field, message)| format!("grant `{grant}`: {field}: {message}"))
}

/// What `hookhost plugin test` prints: the response and the resource use of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginTestReport {
    /// `ok`, `failed` or `timeout`.
    pub status: &'static str,
    /// The failure kind, when it failed.
    pub failure: Option<FailureKind>,
    /// The failure message, when it failed.
    pub message: Option<String>,
    /// The response as Claude Code hook output JSON, when it answered.
    pub response: Option<Value>,
    /// A blocking error (a block on an event without a decision field), if any.
    pub blocking_error: Option<String>,
    /// Fuel used.
    pub fuel: Option<u64>,
    /// Fuel budget.
    pub fuel_limit: u64,
    /// Peak linear memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Memory cap in bytes.
    pub memory_limit: u64,
    /// Wall-clock time of the run, including loading the plugin.
    pub duration_ms: f64,
    /// Captured stdout / stderr / log records.
    pub diagnostics: Option<String>,
    /// Grants the plugin did not declare.
    pub warnings: Vec<String>,
}

/// Runs one plugin on one event outside any config, as `hookhost plugin test` does.
/// Blocks until done.
///
/// # Errors
///
/// An unknown event or an input that is not a JSON object.
pub fn test_plugin(
    runtime: &WasmRuntime,
    call: &PluginCall,
    event: &str,
    input: Value,
    project_dir: &Path,
) -> Result<PluginTestReport, String> {
    let catalogue = crate::event::EventCatalogue::default();
    let spec = catalogue
        .get(event)
        .ok_or_else(|| format!("unknown event `{event}`; `hookhost events` lists them"))?;
    let invocation = invocation(spec.clone(), input, project_dir)?;
    let PluginRun {
        run,
        output_json,
        warnings,
    } = block_on(runtime.call(call, &invocation))?;
    let (status, failure, message, blocking_error) = match &run.verdict {
        Verdict::Answer(answer) => ("ok", None, None, answer.blocking_error.clone()),
        Verdict::Failed(f) => (
            if f.kind == FailureKind::Timeout {
                "timeout"
            } else {
                "failed"
            },
            Some(f.kind),
            Some(f.message.clone()),
            None,
        ),
    };
    Ok(PluginTestReport {
        status,
        failure,
        message,
        response: output_json,
        blocking_error,
        fuel: run.usage.fuel,
        fuel_limit: call.fuel,
        memory_bytes: run.usage.memory_bytes,
        memory_limit: call.memory_bytes,
        duration_ms: (run.duration.as_secs_f64() * 1e6).round() / 1e3,
        diagnostics: run.diagnostics,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::schema::DirMode;

    #[test]
    fn grants_parse_from_the_command_line() {
        let mut caps = RawCapabilities::default();
        for g in [
            "dir=${workspace}",
            "dir=/data:rw",
            "dir=${home}/x@/home:ro",
            "env=TOKEN",
            "http=api.example.com",
        ] {
            parse_grant(g, &mut caps).unwrap();
        }
        assert_eq!(caps.dirs[0].path, "${workspace}");
        assert_eq!(caps.dirs[0].mode, DirMode::ReadOnly);
        assert_eq!(
            (caps.dirs[1].path.as_str(), caps.dirs[1].mode),
            ("/data", DirMode::ReadWrite)
        );
        assert_eq!(caps.dirs[2].guest.as_deref(), Some("/home"));
        assert_eq!(caps.env, ["TOKEN"]);
        assert_eq!(caps.http, ["api.example.com"]);
        for bad in ["nothing", "dir=", "dir=relative", "net=x", "http=ftp://x"] {
            assert!(
                parse_grant(bad, &mut RawCapabilities::default()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn wit_versions_are_checked_on_every_hookhost_interface() {
        let path = Path::new("p.wasm");
        let exports = vec!["hookhost:hook/hook@0.1.0".to_string()];
        assert_eq!(check_wit_version(&[], &exports, path).unwrap(), "0.1.0");
        let imports = vec!["hookhost:hook/host@0.3.0".to_string()];
        let (kind, message) = check_wit_version(&imports, &exports, path).unwrap_err();
        assert_eq!(kind, FailureKind::Refused);
        assert!(
            message.contains("hookhost:hook@0.3.0") && message.contains("hookhost:hook@0.1.0"),
            "{message}"
        );
        let (kind, message) =
            check_wit_version(&[], &["wasi:cli/run@0.2.0".to_string()], path).unwrap_err();
        assert_eq!(kind, FailureKind::CannotStart);
        assert!(
            message.contains("not a hookhost plugin") && message.contains("wasi:cli/run"),
            "{message}"
        );
    }

    #[test]
    fn component_preamble_is_told_apart_from_core_modules() {
        assert!(wasmparser_is_component(b"\0asm\x0d\0\x01\0"));
        assert!(!wasmparser_is_component(b"\0asm\x01\0\0\0"));
        assert!(!wasmparser_is_component(b"nope"));
    }
}
