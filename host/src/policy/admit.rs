//! Admitting a hook registered at runtime ([`crate::Host::register`]) into a resolved
//! policy, without resolving the policy again: the registration is one matcher group of
//! one layer, judged by the very function every configured group passes
//! ([`Resolution::resolve_group`](super::Resolution) → `resolve_hook`: the build and its
//! field checks, the host-owned places, the managed ceilings, governance —
//! `allowManagedHooksOnly`, `disableAllHooks`, `ceilings.handlerTypes`, broken managed
//! policy). A hook that would be skipped is refused, not admitted to sit idle.
//!
//! A registered hook is a **user** source ([`SourceKind::User`]): it comes from this
//! user (in process, or over a daemon socket that answers only its own uid), so it is held
//! to what managed policy sets for user hooks, and needs no workspace trust, exactly as a
//! hook in `~/.hookhost/hooks.json` would.

use std::collections::{HashMap, HashSet};

use super::{Group, Policy, Resolution, unique_id};
use crate::config::{ConfigError, ConfigLayer, ConfigWarning, SourceKind};

/// What the admission of a registration needs from the resolution that built the policy
/// (policy does no I/O: these were read by the caller of [`super::resolve`]).
#[derive(Debug, Clone, Default)]
pub struct Admission {
    /// [`super::ResolveOptions::home_dir`].
    pub home_dir: Option<std::path::PathBuf>,
    /// [`super::ResolveOptions::real_path`].
    pub real_path: super::ceiling::RealPath,
}

/// A registration, admitted: its event and its group (one hook).
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The event.
    pub event: String,
    /// The group, its one hook numbered `order` and named `id`.
    pub group: Group,
    /// Entries that were kept with a warning.
    pub warnings: Vec<ConfigWarning>,
}

impl Policy {
    /// Admits the one matcher group of `layer` (a [`SourceKind::User`] layer made from a
    /// registration) through the resolution every configured hook passes, numbering its
    /// hook `order` and naming it `id` (kept unique against this policy's hooks).
    ///
    /// # Errors
    ///
    /// Every reason it may not run, each naming the registration, the JSON path and the
    /// field: a build error, a managed refusal, or the governance that would skip it.
    pub fn admit(
        &self,
        layer: &ConfigLayer,
        order: usize,
        id: &str,
    ) -> Result<Admitted, Vec<ConfigError>> {
        let refuse = |path: &str, message: String| {
            vec![ConfigError {
                location: layer.origin.location.clone(),
                path: path.into(),
                message,
            }]
        };
        debug_assert_eq!(layer.origin.kind, SourceKind::User);
        let [raw_group] = layer.settings.groups.as_slice() else {
            return Err(refuse(
                "$.hooks",
                "a registration is exactly one matcher group of one event".into(),
            ));
        };
        if raw_group.group.hooks.len() != 1 {
            return Err(refuse(
                "$.hooks",
                "a registration is exactly one hook".into(),
            ));
        }
        let options = super::ResolveOptions {
            project_dir: self.project_dir.clone(),
            home_dir: self.admission.home_dir.clone(),
            real_path: self.admission.real_path,
            ..Default::default()
        };
        let mut resolution = Resolution {
            options: &options,
            host_places: super::places::Guarded::new(&self.host_places, options.real_path),
            workspace_trust: self.workspace_trust.as_ref(),
            settings: self.settings.clone(),
            errors: Vec::new(),
            warnings: Vec::new(),
            managed_errors: Vec::new(),
            hooks: Vec::new(),
            seen: HashMap::new(),
            ids: HashSet::new(),
        };
        let group = resolution.resolve_group(layer, raw_group, &self.catalogue);
        if !resolution.errors.is_empty() {
            return Err(resolution.errors);
        }
        let Some(mut group) = group else {
            return Err(refuse("$.hooks", "the matcher group was not built".into()));
        };
        let Some(hook) = group.hooks.first_mut() else {
            return Err(refuse("$.hooks", "the hook was not built".into()));
        };
        if let Some(reason) = &hook.skip {
            let path = hook.config_path.clone();
            return Err(refuse(
                &path,
                format!("refused: it would never run: {reason}"),
            ));
        }
        let mut ids: HashSet<String> = self.hooks.iter().map(|h| h.id.clone()).collect();
        let mut owned = hook.as_ref().clone();
        owned.id = unique_id(&mut ids, id.to_string());
        owned.order = order;
        *hook = std::sync::Arc::new(owned);
        Ok(Admitted {
            event: raw_group.event.clone(),
            group,
            warnings: resolution.warnings,
        })
    }
}
