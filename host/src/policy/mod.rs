//! Stage 2 of the pipeline: the resolved policy.
//!
//! [`resolve`] merges the raw layers under one precedence rule and validates and compiles
//! every hook once. The result is immutable and is all that later stages see.
//!
//! Precedence (highest first): managed, `--settings`, project local, project, user.
//! - hook lists **append** across layers, in that order (this is "config order");
//! - scalars (`disableAllHooks`, `stopBlockCap`) take the highest layer that sets them;
//! - `allowedHttpHookUrls`, `httpHookAllowedEnvVars` and `envAllowlist` are unions;
//! - an identical handler (same event, matcher and fields) defined by several layers runs
//!   once, from the highest layer;
//! - `disableAllHooks` in managed policy disables every hook; anywhere else it disables
//!   every hook except managed ones (Claude Code's semantics).
//!
//! Managed policy also governs the rest ([`allowlist`], [`ceiling`], [`trust`]):
//! `pluginAllowlist` / `requireAllowlistedPlugins` (lists are unions across `managed.json`
//! and `managed.d/`, flags are on when any file sets them), `ceilings` (each field from
//! the first managed file that sets it), `trustedWorkspaces` (union) and
//! `forbidWorkspaceTrust`. Other sources that set these get a warning and are ignored.
//! In a workspace that is not trusted, project and local hooks are skipped and the
//! settings of those files (`disableAllHooks`, `envAllowlist`, ...) are ignored too.

mod admit;
pub mod allowlist;
pub mod capability;
pub mod ceiling;
pub mod chain;
mod digest;
mod embedded;
pub mod env;
mod guard_entries;
mod hook;
pub mod limits;
mod loop_brakes;
pub mod mcp;
pub mod models;
pub mod oci;
mod on_failure;
pub mod places;
mod required;
mod settings;
mod spec;
pub mod trust;
pub mod urls;

pub use admit::{Admission, Admitted};
pub use embedded::FunctionHook;
pub use loop_brakes::{DEFAULT_MAX_HOOK_DEPTH, DEFAULT_STOP_ESCAPE_HATCH};
pub use on_failure::{FailureEffect, ignored as on_failure_ignored};
pub use settings::{DEFAULT_STOP_BLOCK_CAP, Settings};
pub use spec::{
    AgentSpec, CommandSpec, FRAMING_HEADERS, FunctionHandler, FunctionSpec, Group, HandlerSpec,
    Hook, HttpSpec, PromptSpec, RunMode, Shell, UnbuiltSpec, WasmSpec, is_framing_header,
};
pub use urls::UrlAllowlist;

pub use digest::{PolicyDigest, PolicySource};
use settings::{managed_trust, merge_settings, sets_settings};
use trust::{Fingerprint, TrustDecision, TrustInput};

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::schema::{RawEventGroup, RawHandler};
use crate::config::{ConfigError, ConfigLayer, ConfigWarning, LoadedConfig, SourceKind};
use crate::event::{EventCatalogue, EventSpec};
use crate::matcher::Matcher;

/// The resolved, immutable policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The events this policy knows.
    pub catalogue: Arc<EventCatalogue>,
    /// The project directory: command hooks run there, `${workspace}` points there.
    pub project_dir: PathBuf,
    /// Settings after precedence.
    pub settings: Settings,
    /// Matcher groups per event, in config order.
    groups: HashMap<String, Vec<Group>>,
    /// Every hook, in config order, including those that will not run.
    pub hooks: Vec<Arc<Hook>>,
    /// Sources and hooks that failed to load.
    pub errors: Vec<ConfigError>,
    /// Entries that were skipped or have no effect.
    pub warnings: Vec<ConfigWarning>,
    /// The workspace trust decision (`None`: the caller asked for none, see
    /// [`ResolveOptions::trust`]).
    pub workspace_trust: Option<TrustDecision>,
    /// What every outcome of this policy says besides its hooks' results: each error
    /// (and what it skipped), broken managed policy, files whose previous version is in
    /// force, refused environment values.
    pub notices: Vec<String>,
    /// The places hookhost owns, which no directory grant may reach
    /// ([`ResolveOptions::host_places`] and every plugin file with its signature): the
    /// sandbox checks each opened grant against them again ([`places`]).
    pub host_places: places::HostPlaces,
    /// Config sources the host could not read for want of its own descriptors or memory
    /// ([`LoadedConfig::host_failures`]): while there is one, no event is dispatched on
    /// this policy (`Dispatcher::invocation` refuses with
    /// `DispatchError::CannotGuard`).
    pub host_failures: Vec<String>,
    /// What [`Policy::admit`] needs to judge a hook registered at runtime as this
    /// resolution judged the configured ones.
    pub admission: Admission,
    /// The sources it was resolved from with their digests, and the digest of it all
    /// (for decision receipts).
    pub digest: Arc<PolicyDigest>,
}

impl Policy {
    /// The matcher groups of an event, in config order.
    pub fn groups(&self, event: &str) -> &[Group] {
        self.groups.get(event).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// Options of resolution that do not come from config files.
#[derive(Debug, Clone, Default)]
pub struct ResolveOptions {
    /// The project directory.
    pub project_dir: PathBuf,
    /// Overrides the Stop block cap (`HOOKHOST_STOP_BLOCK_CAP`).
    pub stop_block_cap: Option<u32>,
    /// In-process function hooks, after every configured hook in config order.
    pub functions: Vec<FunctionHook>,
    /// What to judge workspace trust on. `None` applies no workspace trust at all (project
    /// and local hooks run): for callers that decided elsewhere. [`crate::HostBuilder`]
    /// always passes one.
    pub trust: Option<TrustRequest>,
    /// The user's home directory (`${home}` in grants and ceilings, `~/` in `if` path
    /// rules), read by [`crate::config`]; `None` where there is none, and `${home}` and
    /// `~/` then match nothing.
    pub home_dir: Option<PathBuf>,
    /// The effective uid (`${uid}` in managed `auditLog`), read by the caller
    /// ([`crate::config::file::effective_uid`]): policy makes no system calls.
    pub uid: u32,
    /// How a directory grant and its ceiling resolve to their real locations, so that a
    /// symlink inside an allowed directory is refused at build
    /// ([`crate::config::file::real_path`] from [`crate::HostBuilder`]). The default
    /// resolves nothing: only the written paths are compared, and the sandbox's check
    /// when the grant is used still refuses what resolves outside.
    pub real_path: ceiling::RealPath,
    /// The places hookhost owns ([`crate::host_owned_places`], read where I/O is
    /// allowed): a directory grant of any hook, from any source, that is, contains or lies
    /// inside one is refused ([`places::refuse`]). The plugin files of the config and
    /// their signatures are added by [`resolve`].
    pub host_places: Vec<places::HostPlace>,
}

/// The facts a workspace trust decision is made on (gathered by [`crate::trust`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustRequest {
    /// The workspace, canonical.
    pub workspace: PathBuf,
    /// Its current fingerprint.
    pub fingerprint: Fingerprint,
    /// The plugin files in the fingerprint, each with its key there.
    pub plugins: std::collections::BTreeMap<PathBuf, String>,
    /// Recorded trust, or explicit trust for this run.
    pub input: TrustInput,
    /// The trust store could not be read for want of the host's own descriptors or
    /// memory: a host failure ([`Policy::host_failures`]), not an untrusted workspace.
    pub host_failure: Option<String>,
}

/// Merges loaded layers into a [`Policy`]. Invalid hooks are dropped and reported in
/// [`Policy::errors`]; the rest resolve.
pub fn resolve(
    loaded: LoadedConfig,
    catalogue: Arc<EventCatalogue>,
    options: &ResolveOptions,
) -> Policy {
    let LoadedConfig {
        mut layers,
        mut errors,
        mut warnings,
        failed,
        notices: loaded_notices,
        mut host_failures,
        lock,
        ..
    } = loaded;
    if let Some(store) = options.trust.as_ref().and_then(|t| t.host_failure.as_ref()) {
        host_failures.push(store.clone());
    }
    // Precedence order (a stable sort keeps the order within a kind): managed layers come
    // first, so a broken managed hook is known before any other hook is judged.
    layers.sort_by_key(|l| l.origin.kind);
    let managed_errors: Vec<ConfigError> = failed
        .iter()
        .filter(|f| f.kind == SourceKind::Managed)
        .map(|f| f.error.clone())
        .collect();
    let managed_trust = managed_trust(&layers);
    let workspace_trust = options.trust.as_ref().map(|t| {
        trust::decide(
            &t.workspace,
            &t.fingerprint,
            &t.plugins,
            &t.input,
            &managed_trust,
        )
    });
    let trusted = workspace_trust
        .as_ref()
        .is_none_or(TrustDecision::is_trusted);
    let settings_layers: Vec<&ConfigLayer> = layers
        .iter()
        .filter(|l| {
            let keep = trusted || !is_workspace_source(l.origin.kind);
            if !keep && sets_settings(&l.settings) {
                warnings.push(ConfigWarning {
                    location: l.origin.location.clone(),
                    path: "$".into(),
                    message: "the workspace is not trusted; the settings of this file are ignored"
                        .into(),
                });
            }
            keep
        })
        .collect();
    let mut settings = merge_settings(
        &settings_layers,
        options.stop_block_cap,
        options.uid,
        &mut warnings,
        &mut errors,
    );
    settings.managed_trust = managed_trust;
    // The lock is the project's word: it binds only in a workspace that is trusted.
    settings.oci_lock = lock
        .filter(|_| trusted)
        .map(|raw| Arc::new(oci::Pins::from_raw(&raw)));
    if !managed_errors.is_empty() {
        settings.managed_broken = Some(broken_reason(&managed_errors));
    }
    let host_places = Arc::new(with_plugin_files(
        &options.host_places,
        &options.project_dir,
        settings.audit_log.as_deref(),
        &layers,
    ));
    let mut groups: HashMap<String, Vec<Group>> = HashMap::new();
    let mut resolution = Resolution {
        options,
        host_places: places::Guarded::new(&host_places, options.real_path),
        workspace_trust: workspace_trust.as_ref(),
        settings,
        errors,
        warnings,
        managed_errors,
        hooks: Vec::new(),
        seen: HashMap::new(),
        ids: HashSet::new(),
    };
    for layer in &layers {
        let hooks_before = resolution.hooks.len();
        let mut layer_groups = Vec::new();
        let mut guard_error = None;
        for raw_group in &layer.settings.groups {
            let errors_before = resolution.errors.len();
            if let Some(group) = resolution.resolve_group(layer, raw_group, &catalogue) {
                layer_groups.push((raw_group.event.clone(), group));
            }
            if layer.origin.kind == SourceKind::Managed
                && guard_error.is_none()
                && catalogue
                    .get(&raw_group.event)
                    .is_some_and(|e| e.is_guard())
            {
                guard_error = resolution.errors.get(errors_before).map(|e| e.path.clone());
            }
        }
        if let Some(entry) = guard_error {
            let mut only: Vec<Group> = layer_groups.iter().map(|(_, g)| g.clone()).collect();
            let marked = guard_entries::disable(&mut only, &layer.origin.location, &entry);
            resolution.hooks.truncate(hooks_before);
            resolution.hooks.extend(marked);
            for ((_, group), marked) in layer_groups.iter_mut().zip(only) {
                *group = marked;
            }
        }
        for (event, group) in layer_groups {
            groups.entry(event).or_default().push(group);
        }
    }
    let Resolution {
        settings,
        mut errors,
        warnings,
        managed_errors,
        mut hooks,
        mut ids,
        ..
    } = resolution;
    let (function_groups, function_errors) = embedded::build(
        &options.functions,
        &catalogue,
        hooks.len(),
        options.home_dir.as_deref(),
    );
    errors.extend(function_errors);
    for (event, mut group) in function_groups {
        for hook in &mut group.hooks {
            let mut owned = hook.as_ref().clone();
            owned.id = unique_id(&mut ids, owned.id);
            apply_governance(&mut owned, &settings);
            *hook = Arc::new(owned);
            hooks.push(hook.clone());
        }
        groups.entry(event).or_default().push(group);
    }
    let digest = Arc::new(PolicyDigest::of(&layers, workspace_trust.as_ref()));
    let mut notices = loaded_notices;
    for error in &errors {
        notices.push(if managed_errors.contains(error) {
            format!(
                "managed policy is broken, so every hook outside managed policy was skipped \
                 until it is fixed: {error}"
            )
        } else {
            format!("config error, hooks skipped: {error}")
        });
    }
    Policy {
        catalogue,
        project_dir: options.project_dir.clone(),
        settings,
        groups,
        hooks,
        errors,
        warnings,
        workspace_trust,
        notices,
        host_places,
        host_failures,
        admission: Admission {
            home_dir: options.home_dir.clone(),
            real_path: options.real_path,
        },
        digest,
    }
}

/// `places`, every plugin file the layers name with its signature, and every file a
/// command hook names ([`places::command_files`]): no grant may write them
/// ([`places::Guard::Write`]).
fn with_plugin_files(
    places: &[places::HostPlace],
    project: &std::path::Path,
    audit_log: Option<&std::path::Path>,
    layers: &[ConfigLayer],
) -> Vec<places::HostPlace> {
    let mut all = places.to_vec();
    if let Some(log) = audit_log {
        let what = "the audit log (managed `auditLog`)";
        all.push(places::HostPlace::new(log, what, places::Guard::Any));
    }
    for layer in layers {
        for raw in layer.settings.groups.iter().flat_map(|g| &g.group.hooks) {
            if let Some(command) = raw.command.as_deref() {
                for file in places::command_files(command, raw.args.as_deref(), project) {
                    let what = "a file a command hook runs";
                    all.push(places::HostPlace::new(file, what, places::Guard::Write));
                }
            }
            if let Some(plugin) = raw
                .plugin
                .as_deref()
                .filter(|p| !p.trim().is_empty() && !oci::OciRef::is_reference(p))
            {
                let file = hook::resolve_plugin_path(&layer.base_dir, plugin);
                let sig = allowlist::signature_path(&file);
                all.push(places::HostPlace::new(
                    file,
                    "a plugin file",
                    places::Guard::Write,
                ));
                all.push(places::HostPlace::new(
                    sig,
                    "a plugin signature",
                    places::Guard::Write,
                ));
            }
        }
    }
    all.sort_by(|a, b| a.path.cmp(&b.path));
    all.dedup();
    all
}

/// One resolution while the layers' hooks are judged in precedence order: what has been
/// decided so far, which later hooks depend on (broken managed policy, duplicates, ids).
struct Resolution<'a> {
    options: &'a ResolveOptions,
    /// The host-owned places, plugin files included.
    host_places: places::Guarded<'a>,
    workspace_trust: Option<&'a TrustDecision>,
    settings: Settings,
    errors: Vec<ConfigError>,
    warnings: Vec<ConfigWarning>,
    /// The managed sources and hooks that failed: managed policy is broken.
    managed_errors: Vec<ConfigError>,
    /// Every hook resolved so far, in config order.
    hooks: Vec<Arc<Hook>>,
    /// The id of the first running hook of each identity (event, matcher, fields).
    seen: HashMap<String, String>,
    /// The ids given so far, kept unique.
    ids: HashSet<String>,
}

impl Resolution<'_> {
    /// Records a hook or matcher that cannot be built. In managed policy that is a guard
    /// that is gone: managed policy is broken and fails closed for every hook judged
    /// after it (managed layers come first, so that is every non-managed hook).
    fn note_build_error(&mut self, layer: &ConfigLayer, path: String, message: String) {
        let error = ConfigError {
            location: layer.origin.location.clone(),
            path,
            message,
        };
        if layer.origin.kind == SourceKind::Managed {
            self.managed_errors.push(error.clone());
            self.settings.managed_broken = Some(broken_reason(&self.managed_errors));
        }
        self.errors.push(error);
    }

    /// Why a hook's directory grant may not be made: it reaches a host-owned place
    /// ([`places::Guarded::refuse`]), whatever the source (managed policy too: deny by default).
    fn reaches_host_place(&self, hook: &Hook) -> Option<String> {
        let HandlerSpec::Wasm(spec) = &hook.handler else {
            return None;
        };
        spec.capabilities
            .dirs
            .iter()
            .enumerate()
            .find_map(|(i, grant)| {
                let expanded = capability::expand_path(
                    &grant.path,
                    &self.options.project_dir,
                    self.options.home_dir.as_deref(),
                )
                .ok()?;
                let write = grant.mode == crate::config::schema::DirMode::ReadWrite;
                self.host_places
                    .refuse(&grant.path, &expanded, write)
                    .map(|why| format!("`capabilities.dirs[{i}]` {why}"))
            })
    }

    /// A group of a layer with its hooks, or `None` when its matcher is invalid.
    fn resolve_group(
        &mut self,
        layer: &ConfigLayer,
        raw_group: &RawEventGroup,
        catalogue: &EventCatalogue,
    ) -> Option<Group> {
        let spec = catalogue
            .get(&raw_group.event)
            .expect("config only keeps known events");
        let group_path = match raw_group.flat {
            Some(entry) => format!("$.hooks[{entry}]"),
            None => format!("$.hooks.{}[{}]", raw_group.event, raw_group.index),
        };
        // Entries that could not be read are this group's entries that cannot be built.
        for (path, message) in raw_group.left_out.iter().flat_map(|(unread, _)| unread) {
            self.note_build_error(layer, path.clone(), message.clone());
        }
        let matcher = match Matcher::parse(raw_group.group.matcher.as_deref(), spec.matcher_syntax)
        {
            Ok(m) => m,
            Err(message) => {
                let path = format!("{group_path}.matcher");
                self.note_build_error(layer, path, message.clone());
                return self.unbuilt_group(layer, raw_group, spec, &group_path, &message);
            }
        };
        if spec.matcher_field.is_none()
            && raw_group
                .group
                .matcher
                .as_deref()
                .is_some_and(|m| !m.is_empty() && m != "*")
        {
            self.warnings.push(ConfigWarning {
                location: layer.origin.location.clone(),
                path: format!("{group_path}.matcher"),
                message: format!(
                    "`{}` has no matcher field; the matcher is ignored",
                    spec.name
                ),
            });
        }
        let chain = raw_group.group.chain == Some(true);
        for message in chain::warnings(&raw_group.group, spec) {
            self.warnings.push(ConfigWarning {
                location: layer.origin.location.clone(),
                path: format!("{group_path}.chain"),
                message,
            });
        }
        let mut group = Group {
            matcher,
            matcher_source: raw_group.group.matcher.clone(),
            sequential: raw_group.group.sequential.unwrap_or(false) || chain,
            chain,
            hooks: Vec::new(),
        };
        for (index, raw) in raw_group.group.hooks.iter().enumerate() {
            let path = match raw_group.flat {
                Some(_) => format!("{group_path}.handler"),
                None => {
                    let at = raw_group.left_out.as_ref().map_or(index, |(_, p)| p[index]);
                    format!("{group_path}.hooks[{at}]")
                }
            };
            if let Some(mut hook) = self.resolve_hook(layer, raw_group, spec, path, raw) {
                if chain {
                    let first = group.hooks.first().map_or(hook.order, |h| h.order);
                    Arc::make_mut(&mut hook).chain = Some(first);
                }
                group.hooks.push(hook.clone());
                self.hooks.push(hook);
            }
        }
        self.finish_required(layer, raw_group, spec, &group_path, &mut group);
        Some(group)
    }

    /// One hook: built, held to the ceilings, given a unique id, and marked with why it
    /// does not run (trust, governance, a duplicate). `None` when it cannot be built or
    /// managed policy refuses it.
    fn resolve_hook(
        &mut self,
        layer: &ConfigLayer,
        raw_group: &RawEventGroup,
        spec: &EventSpec,
        path: String,
        raw: &RawHandler,
    ) -> Option<Arc<Hook>> {
        let mut hook = match hook::build(
            raw,
            spec,
            layer,
            &path,
            &self.settings,
            self.hooks.len(),
            self.options.home_dir.as_deref(),
        ) {
            Ok((hook, hook_warnings)) => {
                self.warnings.extend(hook_warnings);
                hook
            }
            Err(message) => {
                self.note_build_error(layer, path.clone(), message.clone());
                // A required hook that cannot be built stays, as skipped: it fails closed.
                return self.keep_unbuilt(layer, raw_group, raw, spec, path, &message);
            }
        };
        let required = self.required(layer, raw_group, raw, &hook, &path);
        if let Some(message) = self.reaches_host_place(&hook) {
            let message = format!("hook refused: {message}");
            self.note_build_error(layer, path, message.clone());
            // A required hook refused stays, as skipped: it fails closed where it matches.
            return required.then(|| self.keep_refused(hook, message));
        }
        let capped = !matches!(
            layer.origin.kind,
            SourceKind::Managed | SourceKind::Embedded
        );
        if let Some(ceilings) = self.settings.ceilings.as_ref().filter(|_| capped)
            && let Err(message) = ceilings.apply(
                raw,
                &mut hook,
                &self.options.project_dir,
                self.options.home_dir.as_deref(),
                self.options.real_path,
            )
        {
            let message = format!("hook refused by managed policy: {message}");
            self.errors.push(ConfigError {
                location: layer.origin.location.clone(),
                path,
                message: message.clone(),
            });
            return required.then(|| self.keep_refused(hook, message));
        }
        hook.required = required;
        hook.id = unique_id(&mut self.ids, hook.id);
        if is_workspace_source(layer.origin.kind) {
            apply_trust(&mut hook, self.workspace_trust);
        }
        apply_governance(&mut hook, &self.settings);
        // A hook that does not run does not make its duplicates skip.
        if hook.skip.is_none() {
            let identity = required::identity(raw_group, raw, &hook);
            if let Some(first) = self.seen.get(&identity) {
                hook.skip = Some(format!("identical to hook `{first}`, which runs instead"));
                hook.required = false;
            } else {
                self.seen.insert(identity, hook.id.clone());
            }
        }
        Some(Arc::new(hook))
    }
}

/// The skip reason of every non-managed hook while managed policy is broken.
fn broken_reason(managed_errors: &[ConfigError]) -> String {
    let list: Vec<String> = managed_errors.iter().map(ToString::to_string).collect();
    format!(
        "managed policy is broken ({}), so no hook outside managed policy runs until it is fixed",
        list.join("; ")
    )
}

fn is_workspace_source(kind: SourceKind) -> bool {
    matches!(kind, SourceKind::Project | SourceKind::Local)
}

/// Skips a project or local hook of an untrusted workspace; pins the plugins of a trusted
/// one to the digests they were trusted with.
fn apply_trust(hook: &mut Hook, decision: Option<&TrustDecision>) {
    match decision {
        None => {}
        Some(TrustDecision::Untrusted { reason, .. }) => hook.skip = Some(reason.clone()),
        Some(TrustDecision::Trusted { pins, .. }) => {
            if let HandlerSpec::Wasm(spec) = &mut hook.handler
                && spec.sha256.is_none()
            {
                spec.sha256 = pins.get(&spec.plugin).cloned();
            }
        }
    }
}

fn unique_id(ids: &mut HashSet<String>, id: String) -> String {
    let mut candidate = id.clone();
    let mut n = 2;
    while !ids.insert(candidate.clone()) {
        candidate = format!("{id}#{n}");
        n += 1;
    }
    candidate
}

/// Marks hooks that governance turns off, with the reason.
fn apply_governance(hook: &mut Hook, settings: &Settings) {
    if let Some(reason) = settings
        .ceilings
        .as_ref()
        .and_then(|c| c.refuses_type(hook.origin.kind, hook.handler.type_name()))
    {
        hook.skip = Some(reason);
    }
    let managed = hook.origin.kind == SourceKind::Managed;
    let embedded = hook.origin.kind == SourceKind::Embedded;
    let reason = if let Some(broken) = settings
        .managed_broken
        .as_ref()
        .filter(|_| !managed && !embedded)
    {
        Some(broken.clone())
    } else if settings.managed_disable_all_hooks {
        Some("`disableAllHooks` is set in managed policy".to_string())
    } else if settings.disable_all_hooks && !managed {
        Some("`disableAllHooks` is set".to_string())
    } else if settings.allow_managed_hooks_only && !managed && !embedded {
        Some("managed policy sets `allowManagedHooksOnly`; only managed hooks run".to_string())
    } else {
        None
    };
    if let Some(reason) = reason {
        hook.skip = Some(reason);
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    /// Settings of an empty config.
    pub fn settings() -> super::Settings {
        super::settings::merge_settings(&[], None, 0, &mut Vec::new(), &mut Vec::new())
    }
}

#[cfg(test)]
mod required_tests;
#[cfg(test)]
mod tests;
