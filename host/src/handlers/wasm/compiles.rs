//! Compiling is bounded and remembered: every plugin load that finds no compiled
//! component in memory passes [`Sandbox::compile_bounded`], which
//!
//! - runs the blocking part of a load (open, hash, `sha256` pin, admission, the compile
//!   cache, the compile) on a thread of its own, so that a slow compile never holds the
//!   dispatching task, and the other hooks of the event answer meanwhile;
//! - waits for it no longer than the hook's timeout (the compile budget of a hook; a load
//!   outside any hook, `hookhost plugin inspect`, has [`COMPILE_BUDGET`]). Past it the hook
//!   fails with a timeout naming the hook and the plugin file; the compile goes on, and
//!   its component is kept ([`Compiles::park`]) for the next load of the same digest in
//!   this process, and in the compile cache for other processes;
//! - shares one compile among concurrent loads of one digest ([`Compiles::once`]);
//! - remembers a component that does not compile, by digest, in memory and in the
//!   compile cache (`failed/`): it is not compiled again until the file changes (another
//!   file is another digest).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::Component;

use super::cache::{CacheStatus, CompileError};
use super::{LoadError, Sandbox};
use crate::handlers::FailureKind;
use crate::policy::allowlist::PluginAllowlist;

/// The compile budget of a load outside any hook (`hookhost plugin inspect`, which the
/// demo and `hookhost plugin test` users run to compile ahead): the default timeout of a
/// hook. A hook's own load has the hook's timeout.
pub const COMPILE_BUDGET: Duration = Duration::from_secs(600);

/// Called with a plugin's file name on the compile thread each time a load compiles a
/// component ([`super::WasmRuntime::on_compile`]).
#[derive(Clone)]
pub(super) struct CompileObserver(pub(super) Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for CompileObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompileObserver(…)")
    }
}

/// Failures remembered in memory at most (a daemon that sees many broken builds forgets
/// them all at once past this, and finds them again in the compile cache).
const MAX_REMEMBERED: usize = 256;
/// Components of timed-out loads kept at most for the next load.
const MAX_PARKED: usize = 16;

/// What one compile (or cache load) of a digest gave.
pub(super) type Compiled = Result<(Component, CacheStatus), CompileError>;

/// What the blocking part of a load gives: digest, size, component, cache status.
pub(super) type Prepared = (String, u64, Component, CacheStatus);

/// Compiles in progress, failed and finished late, by plugin digest.
#[derive(Default)]
pub(super) struct Compiles {
    /// In progress: concurrent first loads of one plugin (16 events of a new session
    /// reaching a warm daemon at once) share one compile instead of compiling it once
    /// each. The first load of a digest compiles; the others wait for its result (on
    /// their own threads, as the compile runs on its) and report [`CacheStatus::Hit`],
    /// since they compiled nothing. An entry lives only while its compile runs.
    running: Mutex<HashMap<String, Arc<Mutex<Option<Compiled>>>>>,
    /// Digests that do not compile, and why.
    failed: Mutex<HashMap<String, String>>,
    /// Components whose load gave up waiting (its hook timed out) before they were done.
    parked: Mutex<HashMap<String, Component>>,
}

impl Compiles {
    /// The result of `compile` for `digest`, run once however many loads ask at once.
    pub(super) fn once(&self, digest: &str, compile: impl FnOnce() -> Compiled) -> Compiled {
        let flight = lock(&self.running)
            .entry(digest.to_owned())
            .or_default()
            .clone();
        // The first to lock the flight compiles; the others wait here for its result.
        // (A compile that panicked leaves nothing: the next one compiles again.)
        let mut result = lock(&flight);
        if let Some(shared) = result.as_ref() {
            return shared.clone().map(|(component, status)| {
                let status = match status {
                    CacheStatus::Uncached => CacheStatus::Uncached,
                    _ => CacheStatus::Hit,
                };
                (component, status)
            });
        }
        let compiled = compile();
        *result = Some(compiled.clone());
        let mut running = lock(&self.running);
        if running.get(digest).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
            running.remove(digest);
        }
        compiled
    }

    /// Why `digest` did not compile, if it did not before in this process.
    pub(super) fn failure(&self, digest: &str) -> Option<String> {
        lock(&self.failed).get(digest).cloned()
    }

    /// Remembers that `digest` does not compile.
    pub(super) fn remember_failure(&self, digest: &str, reason: &str) {
        let mut failed = lock(&self.failed);
        if failed.len() >= MAX_REMEMBERED {
            failed.clear();
        }
        failed.insert(digest.to_owned(), reason.to_owned());
    }

    /// Keeps the component of a load that gave up waiting, for the next load.
    pub(super) fn park(&self, digest: String, component: Component) {
        let mut parked = lock(&self.parked);
        if parked.len() >= MAX_PARKED {
            parked.clear();
        }
        parked.insert(digest, component);
    }

    /// The component a timed-out load left for `digest`, taken.
    pub(super) fn take_parked(&self, digest: &str) -> Option<Component> {
        lock(&self.parked).remove(digest)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The hook a load is for, for the message of a compile that outlives its budget, and
/// the event's budget that `describe` draws on.
pub(super) struct Budget<'a> {
    /// The hook's label (its id), `None` outside a hook.
    pub(super) hook: Option<&'a str>,
    /// How long the load may wait for the compile.
    pub(super) time: Duration,
    /// The event's budget, when the load is for an event: `describe` runs until its
    /// deadline on the fuel it has left, and what `describe` spends is gone for the call.
    pub(super) event: Option<&'a super::limits::EventBudget>,
}

impl Sandbox {
    /// The digest, size and compiled component of the plugin at `path` (see
    /// [`Sandbox::compile`]), from a thread of its own, waited for at most `budget`.
    pub(super) async fn compile_bounded(
        self: &Arc<Self>,
        path: &Path,
        file_name: &Arc<str>,
        expected_sha: Option<&str>,
        allowlist: Option<&PluginAllowlist>,
        budget: &Budget<'_>,
    ) -> Result<Prepared, LoadError> {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let job = {
            let sandbox = Arc::clone(self);
            let path = path.to_path_buf();
            let file_name = file_name.clone();
            let expected_sha = expected_sha.map(str::to_owned);
            let allowlist = allowlist.cloned();
            move || {
                let prepared = sandbox.compile(
                    &path,
                    &file_name,
                    expected_sha.as_deref(),
                    allowlist.as_ref(),
                );
                // This thread lets go of the sandbox before it answers: whoever waits
                // holds it too, and must be the one that drops it (with every mapped
                // artifact it keeps) when it is done, not this thread some time later.
                let parking = Arc::downgrade(&sandbox);
                drop(sandbox);
                // Nobody waits any more (the hook timed out): keep the component for the
                // next load of this digest, if the sandbox is still there.
                if let Err(Ok((digest, _, component, _))) = sender.send(prepared)
                    && let Some(sandbox) = parking.upgrade()
                {
                    sandbox.compiles.park(digest, component);
                }
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("hookhost-compile".into())
            .spawn(job)
        {
            return Err((
                FailureKind::CannotStart,
                format!(
                    "plugin `{}`: no thread to compile it on: {e}",
                    path.display()
                ),
            ));
        }
        match tokio::time::timeout(budget.time, receiver).await {
            Ok(Ok(prepared)) => prepared,
            Ok(Err(_)) => Err((
                FailureKind::CannotStart,
                format!("plugin `{}`: its compile crashed", path.display()),
            )),
            Err(_) => Err((FailureKind::Timeout, out_of_budget(path, budget))),
        }
    }

    /// Compiles `bytes` of `digest` (through the compile cache) once however many loads
    /// ask, unless it is known not to compile; remembers it if it does not.
    pub(super) fn compile_once(
        &self,
        digest: &str,
        file_name: &str,
        read: impl FnOnce() -> Result<Vec<u8>, CompileError>,
    ) -> Result<(Component, CacheStatus), LoadError> {
        if let Some(component) = self.compiles.take_parked(digest) {
            return Ok((component, CacheStatus::Hit));
        }
        let known = self
            .compiles
            .failure(digest)
            .or_else(|| self.cache.failed(digest));
        if let Some(reason) = known {
            self.compiles.remember_failure(digest, &reason);
            return Err((
                FailureKind::CannotStart,
                format!(
                    "{reason} (remembered for sha256 {digest}: not compiled again until the file changes)"
                ),
            ));
        }
        let read = || {
            if let Some(observe) = &self.on_compile {
                (observe.0)(file_name);
            }
            read()
        };
        self.compiles
            .once(digest, || {
                self.cache
                    .load_component(&self.engine, read, digest, file_name)
            })
            .map_err(|error| {
                if let CompileError::Invalid(reason) = &error {
                    self.compiles.remember_failure(digest, reason);
                    self.cache.remember_failed(digest, reason);
                }
                (FailureKind::CannotStart, error.into_message())
            })
    }
}

/// The message of a load whose compile outlived its budget: the hook, the file, the
/// budget, and what to do.
fn out_of_budget(path: &Path, budget: &Budget<'_>) -> String {
    let (whose, limit) = match budget.hook {
        Some(hook) => (format!("hook `{hook}`: "), "the hook's timeout"),
        None => (String::new(), "the compile budget"),
    };
    format!(
        "{whose}plugin `{}` was not compiled within {:?} ({limit}); the compile goes on and \
         is kept for the next event of a long-lived host (`hookhost serve`, the dispatch \
         daemon). For one-shot dispatch, compile it ahead with `hookhost plugin inspect` \
         (the compile is cached) or raise the hook's timeout",
        path.display(),
        budget.time
    )
}
