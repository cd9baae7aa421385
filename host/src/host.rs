//! The embedder's entry point: [`HostBuilder`] gathers the sources, the trust decision and
//! the runtimes, resolves them into a [`Host`], and [`Host::dispatch`] runs one event through
//! the pipeline. Also the glue around it: [`data_dir`], [`SourcesFingerprint`] and the
//! last-good reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::audit::AuditLog;
use crate::config::{self, LoadedConfig, SourceOptions};
use crate::dispatch::{AsyncLauncher, DispatchError, Dispatcher};
use crate::event::{EventCatalogue, EventSpec};
use crate::handlers::{self, Handlers, WasmRunner};
use crate::outcome::Outcome;
use crate::policy::{self, Policy, ResolveOptions};
use crate::session::{DiskStore, SessionStore};
use crate::trust::{self, WorkspaceTrust};

pub mod gate;
mod places;
mod register;
mod reload;
mod stored_good;

pub use places::{HostFiles, host_owned_places};
pub use register::{Receipt, RegisterError, Registration};

pub use reload::SourcesFingerprint;
use reload::{LAST_GOOD_FILES, resolve_keeping_last_good};
use stored_good::StoredGood;

/// What policy needs from the system to resolve `sources` (their project and home
/// directories, the effective uid, real paths for the ceilings' symlink check), read
/// here so that policy itself does no I/O. Every caller of [`policy::resolve`] outside
/// tests starts from this; the rest of the options keep their defaults.
pub fn resolve_options(sources: &SourceOptions) -> ResolveOptions {
    resolve_options_with(sources, host_owned_places(sources, &HostFiles::default()))
}

/// [`resolve_options`] with the host-owned places already found (a build that knows
/// the host's files finds them once, with those files).
fn resolve_options_with(
    sources: &SourceOptions,
    host_places: Vec<policy::places::HostPlace>,
) -> ResolveOptions {
    ResolveOptions {
        project_dir: sources.project_dir.clone(),
        home_dir: sources.home_dir.clone(),
        uid: config::file::effective_uid(),
        real_path: policy::ceiling::RealPath(config::file::real_path),
        host_places,
        ..ResolveOptions::default()
    }
}

/// The user's data directory: `HOOKHOST_DATA_DIR`, else `~/.local/share/hookhost` (the
/// platform's data directory), else a `hookhost` directory in the temp dir. Session state,
/// the trust store and the audit log live there. An empty value is unset, and a relative
/// value or one inside the working directory is ignored ([`config::env`]).
pub fn data_dir() -> PathBuf {
    config::env::data_dir_judged(&config::env::workspaces_of(None)).0
}

/// The session store every host of the hookhost commands shares: `sessions/` in the
/// [`data_dir`] (the Stop cap's counts, queued async results, issued async jobs; see
/// [`crate::session`]). `serve` keeps its state there; the one-shot CLI, the dispatch
/// daemon and the async runner get it from [`HostBuilder::standard_sources`].
pub fn shared_session_store() -> DiskStore {
    DiskStore::new(data_dir().join("sessions"))
}

/// The trust store of `project`: the one place every command that reads or writes
/// workspace trust finds it (`dispatch` through [`HostBuilder::standard_sources`],
/// `hookhost trust`, `untrust`, `trust --status`, `serve`), so that `hookhost trust` never
/// records trust where a dispatch of the same project does not look. It lies in the
/// [`data_dir`] judged for `project` (a `HOOKHOST_DATA_DIR` inside the project or the
/// working directory is ignored); the notices say when a variable was refused.
pub fn trust_store_for(project: &Path) -> (trust::TrustStore, Vec<String>) {
    let (data, notices) = config::env::data_dir_judged(&config::env::workspaces_of(Some(project)));
    (trust::TrustStore::in_data_dir(&data), notices)
}

/// Builds a [`Host`] from config sources.
#[derive(Debug)]
pub struct HostBuilder {
    sources: SourceOptions,
    catalogue: EventCatalogue,
    stop_block_cap: Option<u32>,
    sessions: Option<Arc<dyn SessionStore>>,
    launcher: AsyncLauncher,
    session_files: Option<PathBuf>,
    wasm: Option<Arc<dyn WasmRunner>>,
    model: Option<Arc<dyn handlers::model::ModelClient>>,
    mcp: Option<Arc<dyn handlers::mcp::McpProvider>>,
    functions: Vec<policy::FunctionHook>,
    trust: WorkspaceTrust,
    audit: Option<PathBuf>,
    /// The key that signs the audit log's chain (default: `audit.key` in the data dir).
    audit_key: Option<PathBuf>,
    /// Notices about refused environment values, for every outcome.
    env_notices: Vec<String>,
    /// `Some` in a daemon: the last good version of each file (from the host built
    /// before), kept in force while a newer version is broken.
    last_good: Option<Arc<config::LastGood>>,
    /// `Some` through the reload gate ([`gate::Gate::apply`]): the runtime that makes the
    /// plugin checks ([`gate::plugin_checks`]).
    plugin_check: Option<Arc<handlers::wasm::WasmRuntime>>,
    /// The agent's `CLAUDE_ENV_FILE` ([`HostBuilder::agent_env_file`]), or why refused.
    agent_env_file: Option<Result<PathBuf, String>>,
    /// The data directory [`HostBuilder::standard_sources`] chose.
    data: Option<PathBuf>,
    /// `Some` with [`HostBuilder::last_good_on_disk`] (and through the reload gate): the
    /// last good versions on disk.
    stored: Option<stored_good::StoredGood>,
    /// [`HostBuilder::unbound_lock`]: the project's `hookhost.lock` is read (its digest
    /// still counts for workspace trust) but binds no reference.
    unbound_lock: bool,
    /// The `OTEL_*` variables ([`HostBuilder::standard_sources`] reads them): with the
    /// policy, where spans and metrics go ([`crate::telemetry::decide`]).
    otel: config::env::Otel,
}

impl HostBuilder {
    /// A builder for a project, reading no files except those added: no managed, user or
    /// project sources until [`HostBuilder::standard_sources`] or the setters add them.
    pub fn new(project_dir: impl Into<PathBuf>) -> HostBuilder {
        HostBuilder {
            sources: SourceOptions {
                project_dir: project_dir.into(),
                home_dir: config::env::home_dir(),
                ..SourceOptions::default()
            },
            catalogue: EventCatalogue::default(),
            stop_block_cap: None,
            sessions: None,
            launcher: AsyncLauncher::InProcess,
            session_files: None,
            wasm: None,
            model: None,
            mcp: None,
            functions: Vec::new(),
            trust: WorkspaceTrust::Untrusted,
            audit: None,
            audit_key: None,
            env_notices: Vec::new(),
            last_good: None,
            plugin_check: None,
            agent_env_file: None,
            data: None,
            stored: None,
            unbound_lock: false,
            otel: config::env::Otel::default(),
        }
    }

    /// Reads the standard sources: managed policy from the system directory
    /// (`/etc/hookhost`, or `HOOKHOST_MANAGED_DIR` only where the system has none), the
    /// user's `HOOKHOST_HOME`, and the project's `.hookhost/`; the Stop cap from
    /// `HOOKHOST_STOP_BLOCK_CAP`. Judges workspace trust by the trust store in
    /// [`data_dir`] (or trusts explicitly when `HOOKHOST_TRUST_WORKSPACE` is exactly `1`
    /// and managed policy does not forbid it), and appends every dispatch to the audit
    /// log (managed `auditLog`, else `HOOKHOST_AUDIT_LOG`, else `audit.jsonl` in
    /// [`data_dir`]). Environment values are judged by [`config::env`]: empty is unset, a
    /// relative path or one inside the workspace is ignored with a notice on every
    /// outcome. Keeps session state in the shared store of the data directory
    /// (`sessions/`, see [`crate::session`]), where every other host of that directory
    /// keeps it. An `audit_log`, a session store or a trust other than `Untrusted` set
    /// before is kept; setters called after override these.
    pub fn standard_sources(mut self) -> HostBuilder {
        let workspaces = config::env::workspaces_of(Some(&self.sources.project_dir));
        let (data, notice) = config::env::data_dir_judged(&workspaces);
        self.env_notices.extend(notice);
        self.data = Some(data.clone());
        if self.sessions.is_none() {
            self.sessions = Some(Arc::new(DiskStore::new(data.join("sessions"))));
        }
        if self.trust == WorkspaceTrust::Untrusted {
            let store = trust_store_for(&self.sources.project_dir)
                .0
                .path()
                .to_path_buf();
            self.trust = if config::env::trust_switch() {
                WorkspaceTrust::Environment(store)
            } else {
                WorkspaceTrust::Store(store)
            };
        }
        if self.audit.is_none() {
            let log = match config::env::path_var("HOOKHOST_AUDIT_LOG", &workspaces) {
                Ok(Some(path)) => path,
                Ok(None) => data.join("audit.jsonl"),
                Err(notice) => {
                    self.env_notices.push(notice);
                    data.join("audit.jsonl")
                }
            };
            self.audit = Some(log);
        }
        let (otel, notices) = config::env::otel();
        self.otel = otel;
        self.env_notices.extend(notices);
        let settings = std::mem::take(&mut self.sources.settings);
        self.sources = SourceOptions::from_env(self.sources.project_dir.clone(), settings);
        match config::env::stop_block_cap() {
            Ok(cap) => self.stop_block_cap = self.stop_block_cap.or(cap),
            Err(notice) => self.env_notices.push(notice),
        }
        if self.agent_env_file.is_none() {
            // Pinned to Claude Code's own layout (`host/places.rs`).
            let home = self.sources.home_dir.clone();
            self.agent_env_file = config::env::path_var("CLAUDE_ENV_FILE", &workspaces)
                .transpose()
                .map(|file| {
                    file.and_then(|path| {
                        places::claude_env_file_refusal(&path, home.as_deref(), &workspaces)
                            .map_or(Ok(path), Err)
                    })
                });
        }
        self
    }

    /// Appends what the command hooks of an event with `CLAUDE_ENV_FILE` (SessionStart,
    /// Setup, CwdChanged, FileChanged) write to hookhost's own env file to `file` as well:
    /// the agent's, which it sources before its later Bash commands (whole lines, at most
    /// [`crate::dispatch::env_forward::MAX_FORWARD_BYTES`] per event, never through a
    /// symlink). [`HostBuilder::standard_sources`] takes it from `CLAUDE_ENV_FILE`, only
    /// where Claude Code puts it (`<CLAUDE_CONFIG_DIR or ~/.claude>/session-env/…`); a
    /// file given here is the embedder's choice, held only to the host-owned places.
    pub fn agent_env_file(mut self, file: impl Into<PathBuf>) -> HostBuilder {
        self.agent_env_file = Some(Ok(file.into()));
        self
    }

    /// Builds the host of a daemon: with `previous` (the host built before from the same
    /// sources), every file that fails to load or whose hooks fail to build keeps its last
    /// good version in force, with a notice on every outcome naming the file, the error
    /// and that the previous version is in force. With `None` (the daemon's first build)
    /// nothing is kept yet, but this host remembers its good files for the next rebuild.
    pub fn reload_of(mut self, previous: Option<&Host>) -> HostBuilder {
        self.last_good = Some(
            previous
                .map(|host| host.last_good.clone())
                .unwrap_or_default(),
        );
        self
    }

    /// Keeps the last good version of each config file on disk too (`last-good/` in the
    /// data directory, `StoredGood`), and keeps it in force while the file is broken,
    /// in this host and in every later one built with this (a daemon restarted, each
    /// one-shot `hookhost dispatch`), with a notice naming the file and the error. A
    /// version is stored once it passed every check of the reload gate: the checks of
    /// every build, and the gate's plugin checks, made here with `wasm` whenever a
    /// file's bytes are not those stored (a daemon's gate makes them on every build).
    /// Not managed policy (`stored_good::is_stored`).
    pub fn last_good_on_disk(mut self, wasm: Arc<handlers::wasm::WasmRuntime>) -> HostBuilder {
        let data = self.data.clone().unwrap_or_else(data_dir);
        self.stored = Some(StoredGood::in_data_dir(&data));
        self.plugin_check.get_or_insert(wasm);
        self
    }

    /// Leaves the project's `hookhost.lock` unbound: every `oci://` reference as written
    /// (`hookhost plugin lock`, which writes the lock anew, even over a broken one). The
    /// lock still counts in the workspace's trust fingerprint.
    pub fn unbound_lock(mut self) -> HostBuilder {
        self.unbound_lock = true;
        self
    }

    /// Adds a `--settings` source: a file path or inline JSON.
    pub fn settings(mut self, file_or_json: impl Into<String>) -> HostBuilder {
        self.sources.settings.push(file_or_json.into());
        self
    }

    /// Sets the managed policy directory.
    pub fn managed_dir(mut self, dir: impl Into<PathBuf>) -> HostBuilder {
        self.sources.managed_dir = Some(dir.into());
        self
    }

    /// Sets the user config directory.
    pub fn user_dir(mut self, dir: impl Into<PathBuf>) -> HostBuilder {
        self.sources.user_dir = Some(dir.into());
        self
    }

    /// Overrides the Stop block cap (0 = no cap).
    pub fn stop_block_cap(mut self, cap: u32) -> HostBuilder {
        self.stop_block_cap = Some(cap);
        self
    }

    /// Keeps session state in `store` (a [`DiskStore`], or a layer over one). Default:
    /// the data directory's shared store with [`HostBuilder::standard_sources`], else a
    /// store of this host's own in a private temporary directory
    /// ([`DiskStore::of_its_own`]).
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> HostBuilder {
        self.sessions = Some(store);
        self
    }

    /// Starts async hooks with `launcher` (default: in-process tasks).
    pub fn async_launcher(mut self, launcher: AsyncLauncher) -> HostBuilder {
        self.launcher = launcher;
        self
    }

    /// Creates per-session files (`CLAUDE_ENV_FILE`) under `dir`.
    pub fn session_files(mut self, dir: impl Into<PathBuf>) -> HostBuilder {
        self.session_files = Some(dir.into());
        self
    }

    /// Serves `mcp_tool` hooks from the embedder's own MCP servers: those whose `server`
    /// the settings' `mcpServers` do not define and `provider` has. Managed
    /// `ceilings.mcpServers` (by name) and `handlerTypes` still apply.
    pub fn mcp_provider(mut self, provider: Arc<dyn handlers::mcp::McpProvider>) -> HostBuilder {
        self.mcp = Some(provider);
        self
    }

    /// Answers model hooks (`prompt`) with the embedder's own model: those whose
    /// `provider` is `embedder`, and those that name none when no `modelProvider` is set.
    /// Managed `ceilings.models` (providers, token budget) still apply.
    pub fn model_client(mut self, client: Arc<dyn handlers::model::ModelClient>) -> HostBuilder {
        self.model = Some(client);
        self
    }

    /// Runs wasm hooks with `runner` (default: a [`handlers::wasm::WasmRuntime`] with the
    /// compile cache in `HOOKHOST_CACHE_DIR` or the user's cache directory).
    pub fn wasm_runner(mut self, runner: Arc<dyn WasmRunner>) -> HostBuilder {
        self.wasm = Some(runner);
        self
    }

    /// Registers an in-process function hook. It runs after every configured hook in
    /// config order, and merges like any other hook.
    pub fn function_hook(mut self, hook: policy::FunctionHook) -> HostBuilder {
        self.functions.push(hook);
        self
    }

    /// How to judge the trust of the workspace (default: untrusted; see the crate docs).
    pub fn workspace_trust(mut self, trust: WorkspaceTrust) -> HostBuilder {
        self.trust = trust;
        self
    }

    /// Appends one JSON line per dispatch to the audit log at `path` (default: no log,
    /// or the standard one with [`HostBuilder::standard_sources`]).
    pub fn audit_log(mut self, path: impl Into<PathBuf>) -> HostBuilder {
        self.audit = Some(path.into());
        self
    }

    /// Signs the audit log's chain with the key in `path` (created 0600 on first use)
    /// instead of `audit.key` in the data directory (`docs/book/src/audit-chain.md`).
    pub fn audit_key_file(mut self, path: impl Into<PathBuf>) -> HostBuilder {
        self.audit_key = Some(path.into());
        self
    }

    /// Registers a custom event.
    pub fn register_event(mut self, spec: EventSpec) -> HostBuilder {
        self.catalogue.register(spec);
        self
    }

    /// Loads the sources and resolves the policy. Problems in the sources do not fail the
    /// build: they are in [`Policy::errors`] and [`Policy::warnings`], and every outcome
    /// carries them as notices ([`Policy::notices`]).
    pub fn build(self) -> Host {
        let catalogue = Arc::new(self.catalogue);
        let sources = self.sources;
        let mut loaded = config::load_with(&sources, &catalogue, self.last_good.as_deref());
        // A daemon's last good versions, with the stored ones where newer.
        let mut found = None;
        if let (Some(store), Some(memory)) = (&self.stored, self.last_good.as_deref()) {
            let gathered = stored_good::gather(store, &loaded, Some(memory), &catalogue);
            if gathered.reload {
                loaded = config::load_with(&sources, &catalogue, Some(&gathered.previous));
            }
            found = Some(gathered);
        }
        let env_notices = self.env_notices;
        loaded.notices.extend(env_notices.iter().cloned());
        let trust_store = match &self.trust {
            WorkspaceTrust::Store(store) | WorkspaceTrust::Environment(store) => Some(store),
            _ => None,
        };
        let files = HostFiles {
            trust_store: trust_store.map(PathBuf::as_path),
            audit_log: self.audit.as_deref(),
            session_files: self.session_files.as_deref(),
        };
        let options = ResolveOptions {
            stop_block_cap: self.stop_block_cap,
            functions: self.functions,
            ..resolve_options_with(&sources, host_owned_places(&sources, &files))
        };
        let resolve = |mut loaded: LoadedConfig| {
            if self.unbound_lock {
                loaded.lock = None;
            }
            let options = ResolveOptions {
                trust: Some(trust::request(&loaded, &sources, &self.trust)),
                ..options.clone()
            };
            policy::resolve(loaded, catalogue.clone(), &options)
        };
        // A daemon's gate checks plugins at every build; a one-shot only when a stored
        // file's bytes are not its stored version (`resolve_one_shot`).
        let check = |policy: &Policy| match &self.plugin_check {
            Some(wasm) => gate::plugin_checks(policy, wasm),
            None => Vec::new(),
        };
        let (policy, last_good, refused_plugins) = match (&self.stored, &self.last_good) {
            (Some(store), None) => {
                let reload = |previous: &config::LastGood| {
                    let mut loaded = config::load_with(&sources, &catalogue, Some(previous));
                    loaded.notices.extend(env_notices.iter().cloned());
                    loaded
                };
                let may_store = self.plugin_check.is_some();
                stored_good::resolve_one_shot(
                    store, loaded, &catalogue, reload, resolve, check, may_store,
                )
            }
            (_, Some(memory)) => {
                let previous = found.as_ref().map_or(&**memory, |f| &f.previous);
                let kept = resolve_keeping_last_good(loaded, previous, resolve, check);
                if let Some(found) = &found
                    && self.plugin_check.is_some()
                {
                    stored_good::remember(self.stored.as_ref(), found, &kept.1);
                }
                kept
            }
            (None, None) => (resolve(loaded), config::LastGood::new(), Vec::new()),
        };
        let policy = Arc::new(policy);
        let sessions = self.sessions.unwrap_or_else(|| {
            // No temporary directory: the shared store rather than none.
            Arc::new(DiskStore::of_its_own().unwrap_or_else(|e| {
                tracing::warn!("session state in the data directory: {e}");
                shared_session_store()
            }))
        });
        // The default sandbox is shared by the hosts of the process and cheap until the
        // first wasm hook runs: the engine starts then, with the compile cache in
        // `HOOKHOST_CACHE_DIR` or the user's cache dir.
        let wasm = self
            .wasm
            .unwrap_or_else(handlers::wasm::WasmRuntime::shared);
        // Managed policy's `auditLog` wins over every other choice of the log.
        let audit = policy.settings.audit_log.clone().or(self.audit);
        let (telemetry, telemetry_notices) = crate::telemetry::decide(&policy.settings, &self.otel);
        // Said once per process (a daemon rebuilds its host on every config change).
        static SAID: std::sync::Once = std::sync::Once::new();
        if !telemetry_notices.is_empty() {
            SAID.call_once(|| {
                for notice in &telemetry_notices {
                    tracing::warn!("{notice}");
                }
            });
        }
        let telemetry = telemetry.and_then(|config| {
            crate::telemetry::Telemetry::for_config(&config, || {
                handlers::http_client(&policy.settings)
            })
        });
        let dispatcher = Dispatcher::new(
            policy.clone(),
            Handlers::new(Some(wasm))
                .with_model(self.model)
                .with_mcp_provider(self.mcp),
            sessions,
            self.launcher,
            self.session_files,
        )
        .with_audit(audit.map(|path| {
            let log =
                AuditLog::new(path).with_managed_policy(policy.settings.managed_digest.clone());
            match self.audit_key {
                Some(key) => log.with_key_file(key),
                None => log,
            }
        }))
        .with_telemetry(telemetry)
        .with_agent_env_file(self.agent_env_file.map(|file| {
            file.and_then(|path| {
                places::agent_env_file_refusal(&path, &options.host_places).map_or(Ok(path), Err)
            })
        }));
        let mut watched = sources.watched_paths();
        let mut places = sources.watched_places();
        if let WorkspaceTrust::Store(store) | WorkspaceTrust::Environment(store) = &self.trust {
            watched.push(store.clone());
            // The data directory: believed on who can write it, and also where sessions,
            // daemons and caches live, whose coming is no change of the trust store.
            places.extend(store.parent().map(Path::to_path_buf));
        }
        watched.extend(
            dispatcher
                .policy()
                .hooks
                .iter()
                .filter_map(|hook| match &hook.handler {
                    policy::HandlerSpec::Wasm(wasm) => Some(wasm.plugin.clone()),
                    _ => None,
                }),
        );
        // The plugins of versions the reload gate refused: one that appears (or is fixed)
        // later lets its version in.
        watched.extend(refused_plugins);
        watched.sort();
        watched.dedup();
        places.sort();
        places.dedup();
        places.retain(|place| !watched.contains(place));
        Host {
            dispatcher,
            built: policy,
            watched: Arc::new(watched),
            places: Arc::new(places),
            last_good: Arc::new(last_good),
        }
    }
}

/// A hook host: a resolved policy and the runners to dispatch events with it.
#[derive(Debug, Clone)]
pub struct Host {
    dispatcher: Dispatcher,
    /// The policy as built, without notices added since ([`Host::with_notice`]).
    built: Arc<Policy>,
    watched: Arc<Vec<PathBuf>>,
    /// Directories watched for their identity, owner and mode only
    /// ([`config::file::FileStamp::of_place`]).
    places: Arc<Vec<PathBuf>>,
    /// The last good version of each file source, for [`HostBuilder::reload_of`].
    last_good: Arc<config::LastGood>,
}

impl Host {
    /// Every file whose change can change this host's policy: the config sources
    /// (present or not), the trust store, and the plugins its hooks reference. (The
    /// directories believed on who can write them, managed policy's and the trust
    /// store's, are watched too, for their owner and mode.)
    pub fn watched_paths(&self) -> &[PathBuf] {
        &self.watched
    }

    /// The state of [`Host::watched_paths`] now: while it is unchanged, a host built
    /// again would be built from the same files.
    pub fn fingerprint(&self) -> SourcesFingerprint {
        use config::file::FileStamp;
        let stamp = |path: &PathBuf, of: fn(&std::fs::Metadata) -> FileStamp| {
            (path.clone(), std::fs::metadata(path).ok().map(|m| of(&m)))
        };
        SourcesFingerprint(
            self.watched
                .iter()
                .map(|path| stamp(path, FileStamp::of))
                .chain(
                    self.places
                        .iter()
                        .map(|dir| stamp(dir, FileStamp::of_place)),
                )
                .collect(),
        )
    }

    /// This host as built, with `notice` on every outcome (replacing a notice added
    /// before): what a daemon serves when a rebuild failed.
    pub fn with_notice(&self, notice: impl Into<String>) -> Host {
        let mut policy = Policy::clone(&self.built);
        policy.notices.push(notice.into());
        Host {
            dispatcher: self.dispatcher.with_policy(Arc::new(policy)),
            ..self.clone()
        }
    }

    /// This host, also remembering the last good versions of the files `other` was built
    /// from (the newer version where both have one), up to a bound: what a daemon that
    /// forgets `other` (to bound its memory) keeps of it, so that rebuilding `other`'s
    /// project later still has a previous version of each of its files.
    pub fn remembering(&self, other: &Host) -> Host {
        let mut merged = config::LastGood::clone(&self.last_good);
        for (key, source) in other.last_good.iter() {
            let newer = merged.get(key).is_none_or(|kept| kept.since < source.since);
            if newer && (merged.len() < LAST_GOOD_FILES || merged.contains_key(key)) {
                merged.insert(key.clone(), source.clone());
            }
        }
        Host {
            last_good: Arc::new(merged),
            ..self.clone()
        }
    }

    /// Builds the host again (a daemon's reload after its files changed): `build` gets
    /// this host, to pass to [`HostBuilder::reload_of`]. A build that panics leaves this
    /// host serving, with a notice on every outcome saying that the reload failed and the
    /// previous config stays in force.
    pub fn rebuild(&self, build: impl FnOnce(&Host) -> Host) -> Host {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build(self))) {
            Ok(host) => host,
            Err(panic) => {
                let message = crate::text::panic_message(panic.as_ref());
                tracing::error!("config reload failed: {message}");
                self.with_notice(format!(
                    "config reload failed (the new config could not be built: {message}); \
                     the previous config stays in force until its files change again"
                ))
            }
        }
    }

    /// The resolved policy.
    pub fn policy(&self) -> &Arc<Policy> {
        self.dispatcher.policy()
    }

    /// The dispatcher.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// Dispatches one event and returns the merged outcome.
    ///
    /// # Errors
    ///
    /// An unknown event or an input that is not a JSON object.
    pub async fn dispatch(&self, event: &str, input: Value) -> Result<Outcome, DispatchError> {
        self.dispatcher.dispatch(event, input).await
    }

    /// Dispatches one event for a caller with a W3C trace context (`TRACEPARENT`): the
    /// dispatch's span, when telemetry is on, is its child.
    ///
    /// # Errors
    ///
    /// As [`Host::dispatch`].
    pub async fn dispatch_traced(
        &self,
        event: &str,
        input: Value,
        parent: Option<&crate::telemetry::TraceContext>,
    ) -> Result<Outcome, DispatchError> {
        self.dispatcher.dispatch_traced(event, input, parent).await
    }

    /// [`Host::dispatch_traced`] of an input read from `received` (the bytes as they came:
    /// the receipt names their digest) for the agent `agent` (as `--format` names it: the
    /// audit line records it, and hooks limited to other agents do not run).
    ///
    /// # Errors
    ///
    /// As [`Host::dispatch`].
    pub async fn dispatch_from(
        &self,
        event: &str,
        input: Value,
        received: Option<&[u8]>,
        agent: Option<&'static str>,
        parent: Option<&crate::telemetry::TraceContext>,
    ) -> Result<Outcome, DispatchError> {
        self.dispatcher
            .dispatch_from(event, input, received, agent, parent)
            .await
    }
}

#[cfg(test)]
mod tests;
