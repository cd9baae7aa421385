//! The reload gate: the one function through which both daemons (`hookhost serve` and the
//! dispatch daemon) build a host from config that may have changed ([`reload`]).
//!
//! A changed file replaces its last good version only after it passes every check a
//! dispatch would make ([`Check::ALL`]): read, parsed, every hook built (matchers and
//! `if` patterns compiled, fields valid), no grant reaching a host-owned place, managed
//! ceilings applied, and each wasm hook's plugin present, matching its `sha256` pin,
//! admitted by managed policy's allowlist and loadable (compiled, or in the compile
//! cache, and links). A file that fails one keeps its last good version
//! in force (`resolve_keeping_last_good` in `host/reload.rs`), with a notice on every outcome
//! and in the log naming the file, the hook and the field.
//!
//! A file replaced while (or just after) the build read it is never missed: the gate
//! stamps the files after the build and reports the build `dirty` when any of them changed
//! since the build began (or within the timestamps' granularity before), so the caller
//! builds again at its next check even though the stamps it compares are unchanged.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{Host, HostBuilder, SourcesFingerprint};
use crate::config::ConfigError;
use crate::config::file::{FileError, read_regular, sha256_regular};
use crate::handlers::FailureKind;
use crate::handlers::wasm::{DEFAULT_MAX_PLUGIN_BYTES, PluginCall, PluginError, WasmRuntime};
use crate::policy::{HandlerSpec, Policy};

/// Each check a changed config file passes before it replaces its last good version, in
/// the order they are made. The first five are made by every build (in
/// [`crate::config::load`] and [`crate::policy::resolve`]); the plugin checks are the
/// gate's own (`plugin_checks`), made on daemons' builds only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The file is read: a regular file under the cap, UTF-8, believed (managed policy).
    Read,
    /// It parses: JSON of the config's shape.
    Parse,
    /// Every hook and matcher builds: fields valid, matchers and `if` patterns compiled.
    Build,
    /// No directory grant reaches a place hookhost owns.
    Grant,
    /// Managed policy's ceilings admit every hook of the file.
    Ceiling,
    /// Each wasm hook's plugin file is present and readable.
    PluginFile,
    /// Its digest is the hook's `sha256` pin.
    PluginDigest,
    /// Managed policy's plugin allowlist admits it.
    PluginAllowlist,
    /// It loads as the hook's first event would: a component of this host's WIT version
    /// that compiles (or is in the compile cache) and links, and whose `describe` answers
    /// under the hook's own fuel, memory and timeout (a load that times out is left to
    /// the hook's own load: on a busy machine it says nothing about the file).
    PluginLoad,
}

impl Check {
    /// Every check, in order.
    pub const ALL: [Check; 9] = [
        Check::Read,
        Check::Parse,
        Check::Build,
        Check::Grant,
        Check::Ceiling,
        Check::PluginFile,
        Check::PluginDigest,
        Check::PluginAllowlist,
        Check::PluginLoad,
    ];

    /// The words a notice of this check's failure uses.
    pub fn words(self) -> &'static str {
        match self {
            Check::Read => "cannot read file",
            Check::Parse => "invalid",
            Check::Build => "hooks skipped",
            Check::Grant => "hook refused",
            Check::Ceiling => "refused by managed policy",
            Check::PluginFile => "plugin file missing or unreadable",
            Check::PluginDigest => "plugin digest is not the `sha256` pin",
            Check::PluginAllowlist => "plugin not admitted by the managed allowlist",
            Check::PluginLoad => "plugin does not load",
        }
    }
}

/// What the gate let through: the host to serve, the state of its files as it read them,
/// and whether one changed meanwhile.
#[derive(Debug, Clone)]
pub struct Reloaded {
    /// The host: the new config where it passed every check, the last good version of
    /// each file that did not.
    pub host: Host,
    /// The state of the host's files after the build: the next check compares with it.
    pub fingerprint: SourcesFingerprint,
    /// A file changed since the build began (or too recently for its stamp to show a
    /// second change), or a file could not be read for want of descriptors or memory
    /// ([`crate::policy::Policy::host_failures`]): build again at the next check even if
    /// the fingerprint is the same.
    pub dirty: bool,
}

/// What the gate adds to a daemon's builder: the last good versions of the host built
/// before, and the plugin checks, run with the daemon's wasm runtime (which also runs the
/// host's wasm hooks unless the builder has a runner already).
#[derive(Debug, Clone, Copy)]
pub struct Gate<'a> {
    previous: Option<&'a Host>,
    wasm: &'a Arc<WasmRuntime>,
}

impl Gate<'_> {
    /// `builder`, gated: [`HostBuilder::reload_of`] the previous host, with the plugin
    /// checks, and (over the standard sources) the last good versions on disk
    /// ([`HostBuilder::last_good_on_disk`]).
    pub fn apply(&self, builder: HostBuilder) -> HostBuilder {
        let mut builder = builder.reload_of(self.previous);
        if builder.wasm.is_none() {
            builder.wasm = Some(self.wasm.clone() as Arc<dyn crate::handlers::WasmRunner>);
        }
        builder.plugin_check = Some(self.wasm.clone());
        // The last good versions on disk, in the data directory of the standard sources
        // (a daemon restarted keeps them in force).
        if builder.stored.is_none()
            && let Some(data) = &builder.data
        {
            builder.stored = Some(super::StoredGood::in_data_dir(data));
        }
        builder
    }
}

/// The reload gate. Builds the host of `project` with `build`, which must pass its
/// builder through the [`Gate`] it is given. With a `previous` host of the same project, a
/// build that panics leaves it serving with a notice ([`Host::rebuild`]); a first build
/// (or one for another project, which `previous` only lends its last good versions to)
/// is not guarded. Every notice the new host has that `previous` had not is logged.
///
/// # Errors
///
/// What `build` returns.
pub fn reload(
    project: &Path,
    previous: Option<&Host>,
    wasm: &Arc<WasmRuntime>,
    build: impl FnOnce(Gate<'_>) -> Result<Host, String>,
) -> Result<Reloaded, String> {
    let started = SystemTime::now();
    // Whether `build` returned: a build that panicked is not tried again until a file
    // changes (the previous host stands in, with a notice).
    let mut built = false;
    let host = match previous.filter(|p| p.policy().project_dir == project) {
        Some(previous) => {
            let mut failed = None;
            let host = previous.rebuild(|previous| {
                let gate = Gate {
                    previous: Some(previous),
                    wasm,
                };
                let host = build(gate).unwrap_or_else(|e| {
                    failed = Some(e);
                    previous.clone()
                });
                built = true;
                host
            });
            if let Some(e) = failed {
                return Err(e);
            }
            host
        }
        None => {
            let host = build(Gate { previous, wasm })?;
            built = true;
            host
        }
    };
    let fingerprint = host.fingerprint();
    // A config the host could not read for want of descriptors or memory says nothing
    // about the files: build again at the next check, or the daemon would refuse every
    // event until a file changes.
    let dirty =
        built && (!fingerprint.settled_since(started) || !host.policy().host_failures.is_empty());
    let before = previous
        .map(|p| p.policy().notices.as_slice())
        .unwrap_or(&[]);
    for notice in &host.policy().notices {
        if !before.contains(notice) {
            tracing::warn!("config of {}: {notice}", project.display());
        }
    }
    Ok(Reloaded {
        host,
        fingerprint,
        dirty,
    })
}

/// How close to the start of a build a file's change time may be and still be missed by
/// a stamp: file timestamps are coarse (a clock tick, up to a second on some file
/// systems), so a rewrite within it can leave the stamp as it was.
pub(super) const STAMP_GRANULARITY: Duration = Duration::from_secs(1);

/// Why the plugin `file` would not be admitted now, as the loader would judge it before
/// a compile: the check that refuses it, the hook field to name, and why. It must be a
/// readable regular file within the plugin cap (a FIFO or a directory is refused, never
/// waited on), whose digest is `pin` when there is one, admitted by managed policy's
/// allowlist `list` (with its `.sig` when the allowlist needs one). The gate's checks
/// (`plugin_checks`) and `hookhost hooks` both ask here.
pub fn plugin_refusal(
    file: &Path,
    pin: Option<&str>,
    list: &crate::policy::allowlist::PluginAllowlist,
) -> Option<(Check, &'static str, String)> {
    let shown = file.display();
    let digest = match sha256_regular(file, DEFAULT_MAX_PLUGIN_BYTES) {
        Ok(digest) => digest,
        Err(FileError::NotFound) => {
            return Some((
                Check::PluginFile,
                "plugin",
                format!("plugin `{shown}` does not exist"),
            ));
        }
        Err(e) => {
            return Some((
                Check::PluginFile,
                "plugin",
                format!("cannot read plugin `{shown}`: {e}"),
            ));
        }
    };
    if let Some(pin) = pin.filter(|p| !p.eq_ignore_ascii_case(&digest)) {
        return Some((
            Check::PluginDigest,
            "sha256",
            format!("`{pin}`, but the file's is {digest}"),
        ));
    }
    if !list.required() {
        return None;
    }
    let signature = list.needs_signature(&digest).then(|| {
        let sig = crate::policy::allowlist::signature_path(file);
        match read_regular(&sig, 4096) {
            Err(FileError::NotFound) => None,
            Err(e) => Some(Err(e.to_string())),
            Ok((bytes, _)) => Some(Ok(bytes)),
        }
    });
    list.admit(file, &digest, signature.flatten())
        .err()
        .map(|message| (Check::PluginAllowlist, "plugin", message))
}

/// The plugin checks of every wasm hook of `policy` that runs: its plugin file's digest
/// the hook's `sha256` pin and admitted by managed policy's allowlist (when either
/// applies), then the plugin loaded by `wasm` (present, readable, a component of this
/// WIT version that compiles or is in the compile cache, and links). Each failure is an error of the hook's file, naming the hook and
/// the field. A loaded plugin is kept by `wasm`, so the first dispatch does not load it
/// again. Without a wasm engine nothing is judged here (every wasm hook then fails at
/// dispatch, named).
pub(super) fn plugin_checks(policy: &Policy, wasm: &WasmRuntime) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    for hook in policy.hooks.iter().filter(|h| h.skip.is_none()) {
        let HandlerSpec::Wasm(spec) = &hook.handler else {
            continue;
        };
        let mut refuse = |check: Check, field: &str, message: String| {
            errors.push(ConfigError {
                location: hook.origin.location.clone(),
                path: format!("{}.{field}", hook.config_path),
                message: format!("hook `{}`: {}: {message}", hook.id, check.words()),
            });
        };
        // A registry's plugin is judged as its cached layer file, pinned to the layer's
        // digest; one not cached yet is pulled (and judged) at its first event.
        let (file, pin) = match &spec.oci {
            None => (spec.plugin.clone(), spec.sha256.clone()),
            Some(reference) => match wasm.oci_cached(reference) {
                Ok(Some(cached)) => {
                    if let Some(pin) = spec.sha256.as_ref().filter(|p| **p != cached.layer) {
                        refuse(
                            Check::PluginDigest,
                            "sha256",
                            format!(
                                "`{pin}`, but the component of `{reference}` is {}",
                                cached.layer
                            ),
                        );
                        continue;
                    }
                    (cached.path, Some(cached.layer))
                }
                Ok(None) => continue,
                Err(message) => {
                    refuse(Check::PluginFile, "plugin", message);
                    continue;
                }
            },
        };
        // Pin and allowlist first, on the file's digest: a plugin that is not admitted is
        // never compiled (as at dispatch).
        let list = &policy.settings.plugin_allowlist;
        if (pin.is_some() || list.required())
            && let Some((check, field, message)) = plugin_refusal(&file, pin.as_deref(), list)
        {
            refuse(check, field, message);
            continue;
        }
        let Some(mut call) = PluginCall::from_hook(hook) else {
            continue;
        };
        call.plugin = file;
        call.oci = None;
        // The load the hook's first event makes, `describe` under the hook's own limits.
        match wasm.load_for_hook(&call) {
            // No engine, or a load that ran out of time (a compile, or a `describe`, on a
            // busy machine): nothing to judge the file on (the hook's own load, under its
            // own timeout, says what happens).
            Ok(_) | Err(PluginError::Engine(_)) => {}
            Err(PluginError::Load {
                kind: FailureKind::Timeout,
                ..
            }) => {}
            Err(PluginError::Load { message, .. }) => {
                let check = if message.starts_with("cannot read plugin") {
                    Check::PluginFile
                } else {
                    Check::PluginLoad
                };
                refuse(check, "plugin", message);
            }
        }
    }
    errors
}
