//! The wasm sandbox: hooks as WASI 0.2 components of the `hookhost:hook` worlds (0.2.0 in
//! `wit/hook.wit`, 0.1.0 in `wit/v0.1.0/`, loaded side by side), run by wasmtime under
//! fuel, memory, time, output and capability limits.
//!
//! - One [`wasmtime::Engine`] (fuel and epoch interruption on) and one `Linker` with
//!   WASI 0.2, wasi-http and the `host` import, created on the first wasm hook.
//! - One `InstancePre` per plugin file, compiled once and cached on disk
//!   ([`CompileCache`]), re-read when the file changes.
//! - Compiling runs on a thread of its own under the hook's timeout, and a component that
//!   does not compile is remembered by digest (`compiles`).
//! - A fresh `Store` and instance per event by default; with `instance: "session"` one
//!   instance per hook, session, project and grants (`session_key.rs`), dropped when it
//!   fails, at `SessionEnd`, when its grants change, or when too many sessions are open.
//!   An instance that trapped is never used again.
//! - Every call runs on a fiber of the dispatching task (`instantiate_async`,
//!   `call_async`): at each epoch tick it yields to the executor, or traps past its
//!   deadline, so wasm never holds a runtime thread.
//! - Limits on every call: fuel ([`DEFAULT_FUEL`]), an epoch deadline from the hook's
//!   timeout, a memory cap ([`DEFAULT_MEMORY_BYTES`]) and caps on stdout / stderr
//!   ([`OUTPUT_CAP`]). Hitting one fails the hook with a message naming the limit and
//!   its value; `onFailure` decides what that means for the action.
//! - Capabilities are deny-by-default: a directory, env var or HTTP host is live only
//!   when the plugin declares it in `describe` and the config grants it
//!   ([`crate::policy::capability`]); the model (0.2.0) when the plugin imports
//!   `hookhost:hook/model` and the config grants `capabilities.model` (`model_call`).
//!
//! The plugin's typed response becomes a [`HookOutput`](super::HookOutput), exactly what a command hook's
//! JSON would have parsed to, so the merge treats both alike.

mod bindings;
pub mod cache;
mod cache_key;
mod call;
mod compiles;
mod convert;
mod engine;
mod gate_load;
mod gitdir_cache;
mod grants;
mod guest_fs;
mod held;
mod held_bodies;
mod held_fields;
mod held_responses;
mod hostcalls;
mod http_policy;
mod http_send;
mod instances;
mod limits;
mod load;
#[cfg(test)]
mod meter_tests;
mod model_budget;
mod model_call;
pub mod oci;
mod progress;
mod session_key;
mod state;
mod ticker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde_json::Value;
use wasmtime::{Engine, Store};

pub use cache::{CacheStatus, CompileCache, sha256_hex};
pub use call::PluginCall;
pub use compiles::COMPILE_BUDGET;
use compiles::CompileObserver;
pub use convert::{Converted, MAX_CONVERTED_BYTES, PluginResponse, convert_response};
pub use engine::{engine_config, instance_pool_available};
pub use held::RESOURCE_ENTRY_BYTES;
pub use held::{hook_descriptors, host_descriptors};
pub use hostcalls::{FUEL_PER_BYTE, FUEL_PER_HOST_CALL, FUEL_PER_LOG_RECORD};
pub use http_policy::MAX_CONNECTIONS;
pub use instances::{MAX_SESSION_MEMORY, MAX_SESSION_MEMORY_PER_HOOK};
pub use load::{
    DEFAULT_MAX_PLUGIN_BYTES, DeclaredCapabilities, DeclaredDir, PluginError, PluginInfo,
};
pub use model_budget::PluginModel;
pub use model_call::{MAX_MODEL_MESSAGES, MAX_MODEL_REPLY_BYTES, MAX_MODEL_REQUEST_BYTES};
pub use state::MAX_TABLE_ELEMENTS;

use super::model::{ModelError, Resolved};
use super::output::cap_text;
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict, WasmRunner};
use crate::config::SourceKind;
use crate::config::schema::InstanceMode;
use crate::policy::allowlist::PluginAllowlist;
use crate::policy::capability::{self, Live};
use crate::policy::ceiling::Ceilings;
use crate::policy::places::HostPlaces;
use crate::policy::{Hook, Policy};
use futures_util::future::BoxFuture;
use grants::GrantCheck;
use instances::SessionSlot;
use limits::{Allowance, CallOutcome, EventBudget, Limits, Phase, finish};
use load::Loaded;
use state::State;

/// The newest WIT package version this host implements.
pub const WIT_VERSION: &str = "0.2.0";

/// Every WIT package version this host loads, oldest first: a plugin built for any of
/// them runs beside the others (`bindings`).
pub const WIT_VERSIONS: [&str; 2] = ["0.1.0", "0.2.0"];

/// The exported interface every plugin must have, without its version.
pub(super) const HOOK_EXPORT: &str = "hookhost:hook/hook";

pub use crate::policy::limits::{DEFAULT_FUEL, DEFAULT_MEMORY_BYTES};

/// Bytes of stdout, and of stderr, a plugin may write per call.
pub const OUTPUT_CAP: usize = 1 << 20;

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
    max_plugin_bytes: u64,
    on_compile: Option<CompileObserver>,
    oci_dir: Option<PathBuf>,
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
            max_plugin_bytes: load::max_plugin_bytes_from_env(),
            on_compile: None,
            oci_dir: Some(oci::OciStore::default_dir()),
            sandbox: OnceLock::new(),
        }
    }

    /// The largest plugin file the sandbox reads (default [`DEFAULT_MAX_PLUGIN_BYTES`],
    /// or `HOOKHOST_MAX_PLUGIN_MB` MiB): a larger one is refused before it is read,
    /// naming its path.
    pub fn with_max_plugin_bytes(mut self, bytes: u64) -> WasmRuntime {
        self.max_plugin_bytes = bytes;
        self
    }

    /// Whether instances come from a pool of reusable slots where the kernel supports it
    /// (the default; see [`engine_config`]). The pool pays off over many events; a
    /// process that runs one event saves its set-up (about 0.3 ms) without it.
    pub fn with_instance_pool(mut self, pool: bool) -> WasmRuntime {
        self.instance_pool = pool;
        self
    }

    /// Calls `observe` with the plugin's file name, on the compile thread, each time a
    /// load compiles a component (a cache miss; a component known not to compile is not
    /// compiled again, and not observed). For tests and embedders that count or pace
    /// compiles; `observe` runs before the compile and may block it.
    pub fn on_compile(mut self, observe: impl Fn(&str) + Send + Sync + 'static) -> WasmRuntime {
        self.on_compile = Some(CompileObserver(Arc::new(observe)));
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
            .get_or_init(|| {
                Sandbox::new(
                    self.cache_dir.clone(),
                    self.instance_pool,
                    self.max_plugin_bytes,
                    self.on_compile.clone(),
                    self.oci_store(),
                )
                .map(Arc::new)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The compile cache directory, if any.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// Runs one plugin on one event outside any config: what `hookhost plugin test` does.
    pub async fn call(&self, call: &PluginCall, invocation: &Invocation) -> PluginRun {
        self.call_governed(call, invocation, None, None, &HostPlaces::default())
            .await
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
        self.call_governed(call, invocation, allowlist, None, &HostPlaces::default())
            .await
    }

    /// Like [`WasmRuntime::call_admitted`], also checking the directory grants, when they
    /// are opened for the instance, against managed policy's `ceilings` (for hooks from
    /// sources it caps) and against `places`, which no grant may reach (the compile cache
    /// is always one).
    pub async fn call_governed(
        &self,
        call: &PluginCall,
        invocation: &Invocation,
        allowlist: Option<&PluginAllowlist>,
        ceilings: Option<&Ceilings>,
        places: &HostPlaces,
    ) -> PluginRun {
        let governance = (allowlist, ceilings, places);
        self.governed(call, invocation, governance, None).await
    }

    /// [`WasmRuntime::call_governed`] with the model of the hook's provider (resolved
    /// through [`crate::handlers::model::resolve`]) for a plugin the hook grants it to.
    async fn governed(
        &self,
        call: &PluginCall,
        invocation: &Invocation,
        (allowlist, ceilings, places): Governance<'_>,
        model: Option<Result<Resolved, ModelError>>,
    ) -> PluginRun {
        let started = Instant::now();
        match self.sandbox() {
            Ok(sandbox) => {
                let governance = (allowlist, ceilings, places);
                sandbox
                    .run(call, invocation, started, governance, model)
                    .await
            }
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
    async fn run_hook(
        &self,
        hook: &Hook,
        invocation: &Invocation,
        policy: &Policy,
        model: Option<Result<Resolved, ModelError>>,
    ) -> HandlerRun {
        let started = Instant::now();
        let Some(call) = PluginCall::from_hook(hook) else {
            return HandlerRun::failed(
                FailureKind::CannotStart,
                format!("hook `{}` is not a wasm hook", hook.id),
                started,
            );
        };
        // Managed policy caps every source but itself (and embedders' own hooks).
        let capped = !matches!(hook.origin.kind, SourceKind::Managed | SourceKind::Embedded);
        let ceilings = policy.settings.ceilings.as_ref().filter(|_| capped);
        let governance = (
            Some(&*policy.settings.plugin_allowlist),
            ceilings,
            &policy.host_places,
        );
        let mut run = self.governed(&call, invocation, governance, model).await;
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
        Box::pin(self.run_hook(hook, invocation, policy, None))
    }

    fn run_with_model<'a>(
        &'a self,
        hook: &'a Hook,
        invocation: &'a Invocation,
        policy: &'a Policy,
        model: Result<Resolved, ModelError>,
    ) -> BoxFuture<'a, HandlerRun> {
        Box::pin(self.run_hook(hook, invocation, policy, Some(model)))
    }
}

/// Managed policy's allowlist and ceilings, and the host-owned places, for one call.
type Governance<'a> = (
    Option<&'a PluginAllowlist>,
    Option<&'a Ceilings>,
    &'a HostPlaces,
);

/// The engine and everything shared across plugins.
struct Sandbox {
    engine: Engine,
    linkers: engine::Linkers,
    cache: CompileCache,
    /// The host-owned places (the compile cache among them), so that no grant reaches one.
    guards: grants::PlaceGuards,
    max_plugin_bytes: u64,
    plugins: Mutex<HashMap<PathBuf, Arc<Loaded>>>,
    /// Compiles in progress, failed and finished late ([`compiles`]).
    compiles: compiles::Compiles,
    /// [`WasmRuntime::on_compile`].
    on_compile: Option<CompileObserver>,
    sessions: Mutex<HashMap<instances::SessionKey, SessionSlot>>,
    /// Advances the engine's epoch; every call holds it running ([`Limits::bound`]).
    ticker: ticker::EpochTicker,
    /// The OCI cache of `oci://` plugins.
    oci: Option<oci::OciStore>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

/// Why a load failed: the failure kind for the report, and the message.
pub(super) type LoadError = (FailureKind, String);

impl Sandbox {
    fn new(
        cache_dir: Option<PathBuf>,
        instance_pool: bool,
        max_plugin_bytes: u64,
        on_compile: Option<CompileObserver>,
        oci: Option<oci::OciStore>,
    ) -> Result<Sandbox, String> {
        let engine = engine::new_engine(instance_pool)?;
        let linkers = engine::linkers(&engine)?;
        let ticker = ticker::EpochTicker::start(&engine)?;
        let guards = grants::PlaceGuards::new(cache_dir.as_deref());
        let cache = CompileCache::new(cache_dir, &engine);
        Ok(Sandbox {
            engine,
            linkers,
            cache,
            guards,
            max_plugin_bytes,
            plugins: Mutex::default(),
            compiles: compiles::Compiles::default(),
            on_compile,
            sessions: Mutex::default(),
            ticker,
            oci,
        })
    }

    async fn run(
        self: &Arc<Self>,
        call: &PluginCall,
        invocation: &Invocation,
        started: Instant,
        (allowlist, ceilings, places): Governance<'_>,
        model: Option<Result<Resolved, ModelError>>,
    ) -> PluginRun {
        let failed = |kind, message: String, warnings| PluginRun {
            run: HandlerRun::failed(kind, message, started),
            output_json: None,
            warnings,
        };
        let limits = Limits {
            fuel: call.fuel,
            memory_bytes: call.memory_bytes,
            timeout: call.timeout,
        };
        let (plugin, sha256) = match &call.oci {
            None => (call.plugin.clone(), call.sha256.clone()),
            Some(reference) => match self.oci_plugin(reference, call).await {
                Ok(found) => found,
                Err((kind, message)) => return failed(kind, message, Vec::new()),
            },
        };
        let event_budget = EventBudget::new(started, &limits);
        let budget = compiles::Budget {
            hook: Some(&call.label),
            time: call.timeout.saturating_sub(started.elapsed()),
            event: Some(&event_budget),
        };
        let loaded = match self
            .load(&plugin, sha256.as_deref(), allowlist, &limits, &budget)
            .await
        {
            Ok(l) => l,
            Err((kind, message)) => return failed(kind, message, Vec::new()),
        };
        // From here every run names the plugin that was admitted (decision receipts).
        let digest: Option<[u8; 32]> = hex::decode(&loaded.info.sha256)
            .ok()
            .and_then(|bytes| bytes.try_into().ok());
        let failed = |kind, message: String, warnings| {
            let mut run = failed(kind, message, warnings);
            run.run.usage.plugin_sha256 = digest;
            run
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
                usage: Usage {
                    plugin_sha256: digest,
                    ..Usage::default()
                },
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
        let (live, mut warnings) = match capability::intersect(
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
        warnings.extend(grants::unpassable_env(&live));
        let guard = self.guards.of(places);
        let grants = GrantCheck {
            hook: &call.label,
            ceilings,
            workspace: &invocation.project_dir,
            home: home_dir(),
            places: &guard,
        };
        let allowance = Allowance {
            limits,
            event: event_budget,
            model: live.model.map(|tokens| {
                Arc::new(PluginModel::new(
                    model.unwrap_or_else(model_call::unavailable),
                    tokens,
                ))
            }),
        };
        let event = convert::event(invocation, call.config.as_ref());
        let outcome = match call.instance {
            InstanceMode::Event => {
                self.run_fresh(&loaded, &live, &grants, &allowance, &event)
                    .await
            }
            InstanceMode::Session => {
                self.run_in_session(
                    call, &loaded, &live, &grants, &allowance, &event, invocation,
                )
                .await
            }
        };
        let CallOutcome {
            result,
            mut usage,
            mut diagnostics,
        } = match outcome {
            Ok(o) => o,
            Err((kind, message)) => {
                return failed(
                    kind,
                    format!("plugin `{}`: {message}", loaded.file_name),
                    warnings,
                );
            }
        };
        let (verdict, output_json) = match result {
            Ok(response) => match convert::response(response, &invocation.spec) {
                Ok(converted) => {
                    if !converted.notes.is_empty() {
                        let notes = converted
                            .notes
                            .iter()
                            .map(|n| format!("limit: {n}"))
                            .collect::<Vec<_>>()
                            .join("\n");
                        diagnostics = Some(match diagnostics.take() {
                            Some(d) => cap_text(&format!("{notes}\n{d}")),
                            None => notes,
                        });
                    }
                    (Verdict::Answer(converted.answer), Some(converted.json))
                }
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
        usage.plugin_sha256 = digest;
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

    /// A store for a new instance of `loaded` with the hook's live grants (directories
    /// opened and checked now), armed with `allowance` for its first call.
    fn armed_store(
        &self,
        loaded: &Loaded,
        live: &Live,
        grants: &GrantCheck<'_>,
        allowance: &Allowance,
    ) -> Result<Store<State>, LoadError> {
        let dirs = grants::open_dirs(&live.dirs, grants).map_err(|e| (FailureKind::Refused, e))?;
        let mut store = self
            .store(
                &loaded.file_name,
                live,
                &dirs,
                allowance.limits.memory_bytes,
                &grants::env_values(live),
                grants::StoreGuard {
                    hook: Arc::from(grants.hook),
                    places: grants.places.clone(),
                },
            )
            .map_err(|e| (FailureKind::CannotStart, e))?;
        allowance
            .arm(&mut store)
            .map_err(|e| (FailureKind::CannotStart, e))?;
        Ok(store)
    }

    async fn run_fresh(
        &self,
        loaded: &Loaded,
        live: &Live,
        grants: &GrantCheck<'_>,
        allowance: &Allowance,
        event: &bindings::Event,
    ) -> Result<CallOutcome, LoadError> {
        let pre = loaded
            .pre_for(self, !live.http.is_empty())
            .map_err(|e| (FailureKind::CannotStart, e))?;
        let mut store = self.armed_store(loaded, live, grants, allowance)?;
        let deadline = store.data().http_policy.deadline;
        let mut phase = Phase::Instantiate;
        let result = Limits::bound(&self.ticker, deadline, async {
            let plugin = pre.instantiate_async(&mut store).await?;
            phase = Phase::Call;
            plugin
                .hookhost_hook_hook()
                .call_handle(&mut store, event)
                .await
        })
        .await;
        Ok(finish(&mut store, &allowance.limits, phase, result))
    }
}

/// The user's home directory, for `${home}` grants: config's, the one policy expands
/// ceilings with (looked up once per process).
fn home_dir() -> Option<&'static Path> {
    static HOME: OnceLock<Option<PathBuf>> = OnceLock::new();
    HOME.get_or_init(crate::config::env::home_dir).as_deref()
}
