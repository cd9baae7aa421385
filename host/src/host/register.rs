//! [`Host::register`] and [`Host::unregister`]: hooks added at runtime, for every session
//! or one, while events are being dispatched. A registration is config-shaped (an event,
//! a matcher, one handler entry as in `hooks.json`); it is parsed by the config parser and
//! admitted by the policy's own resolution ([`crate::policy::Policy::admit`]), so it
//! passes every guard a hook of `~/.hookhost/hooks.json` passes, as a **user** source.
//! The policy is not rebuilt: the admitted hook joins the host's registry
//! ([`crate::dispatch::registry`]), which dispatch reads without a lock.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Host;
use crate::config::{self, ConfigError, ConfigLayer, ConfigWarning, Origin, SourceKind};
use crate::dispatch::registry::{FIRST_ORDER, HookId, RegistryFull, Snapshot};
use crate::policy::{Group, Policy};

/// A hook to register: an event, an optional matcher, and one handler entry exactly as
/// in `hooks.json` (`{"type": "command", "command": "…"}`, HTTP, wasm).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    /// The event (`PreToolUse`, …).
    pub event: String,
    /// The matcher, as in config (absent: every subject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The handler entry.
    pub hook: Value,
    /// The session it is for (absent: every session). Dropped when that session ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl Registration {
    /// A registration of `hook` (a handler entry as in `hooks.json`) on `event`, for every
    /// subject and every session.
    pub fn new(event: impl Into<String>, hook: Value) -> Registration {
        Registration {
            event: event.into(),
            matcher: None,
            hook,
            session: None,
        }
    }

    /// Only for subjects `matcher` accepts.
    pub fn matcher(mut self, matcher: impl Into<String>) -> Registration {
        self.matcher = Some(matcher.into());
        self
    }

    /// Only for the session `session` (dropped when it ends).
    pub fn session(mut self, session: impl Into<String>) -> Registration {
        self.session = Some(session.into());
        self
    }
}

/// Why a registration was refused: each problem with the registration, the JSON path and
/// the field, as a config error of a file would say it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct RegisterError {
    /// The problems.
    pub errors: Vec<ConfigError>,
}

impl From<RegistryFull> for RegisterError {
    fn from(full: RegistryFull) -> RegisterError {
        RegisterError {
            errors: vec![ConfigError {
                location: "registered hook".into(),
                path: "$".into(),
                message: full.to_string(),
            }],
        }
    }
}

/// A registration the host kept: its id and the warnings its entry had.
#[derive(Debug, Clone)]
pub struct Receipt {
    /// What [`Host::unregister`] takes.
    pub id: HookId,
    /// Entries kept with a warning (an unknown field, …).
    pub warnings: Vec<ConfigWarning>,
}

/// Admits `registration` under `policy`, named `id`.
fn admit(
    policy: &Policy,
    registration: &Registration,
    id: HookId,
) -> Result<(String, Group, Vec<ConfigWarning>), RegisterError> {
    let location = format!("registered hook `{id}`");
    let error = |path: &str, message: String| RegisterError {
        errors: vec![ConfigError {
            location: location.clone(),
            path: path.into(),
            message,
        }],
    };
    if policy.catalogue.get(&registration.event).is_none() {
        return Err(error(
            "$.event",
            format!(
                "unknown event `{}`; `hookhost events` lists them",
                crate::text::escape(&registration.event)
            ),
        ));
    }
    let mut group = json!({"hooks": [registration.hook]});
    if let Some(matcher) = &registration.matcher {
        group["matcher"] = json!(matcher);
    }
    let text = json!({"hooks": {&registration.event: [group]}}).to_string();
    let (settings, mut warnings) =
        config::parse_settings(&text, &location, false, &policy.catalogue)
            .map_err(|e| RegisterError { errors: vec![e] })?;
    let layer = ConfigLayer {
        origin: Origin {
            kind: SourceKind::User,
            location: location.clone(),
        },
        base_dir: policy.project_dir.clone(),
        settings,
        file: None,
        sha256: None,
    };
    let order = FIRST_ORDER + usize::try_from(id.0).unwrap_or(usize::MAX - FIRST_ORDER);
    let admitted = policy
        .admit(&layer, order, &id.to_string())
        .map_err(|errors| RegisterError { errors })?;
    warnings.extend(admitted.warnings);
    Ok((admitted.event, admitted.group, warnings))
}

impl Host {
    /// Registers a hook while the host serves: admitted by this host's policy as a hook
    /// of the user's own config would be (managed denials, `allowManagedHooksOnly`,
    /// `ceilings`, the plugin allowlist, the host-owned places, the matcher and `if`
    /// syntax), without rebuilding the policy; dispatches that start after it returns run
    /// it (after every configured hook, in registration order). At most
    /// [`crate::dispatch::registry::MAX_REGISTERED`] per host and
    /// [`crate::dispatch::registry::MAX_REGISTERED_PER_SESSION`] per session.
    ///
    /// # Errors
    ///
    /// The registration is invalid, policy refuses it (or would skip it), or the registry
    /// is full; each error names the registration, the JSON path and the field.
    pub fn register(&self, registration: Registration) -> Result<HookId, RegisterError> {
        self.register_with_warnings(registration)
            .map(|receipt| receipt.id)
    }

    /// [`Host::register`], with the warnings of the entry.
    ///
    /// # Errors
    ///
    /// As [`Host::register`].
    pub fn register_with_warnings(
        &self,
        registration: Registration,
    ) -> Result<Receipt, RegisterError> {
        let policy = self.dispatcher.policy().clone();
        let source = serde_json::to_value(&registration).unwrap_or(Value::Null);
        let in_process = self.dispatcher.runs_async_in_process();
        let mut warnings = Vec::new();
        let id = self
            .dispatcher
            .registry()
            .insert(registration.session.clone(), source, |id| {
                let (event, group, found) = admit(&policy, &registration, id)?;
                let hook = &group.hooks[0];
                if hook.mode != crate::policy::RunMode::Sync && !in_process {
                    return Err(RegisterError {
                        errors: vec![ConfigError {
                            location: format!("registered hook `{id}`"),
                            path: hook.config_path.clone(),
                            message: "an async hook can be registered only on a host that \
                                      runs async hooks in process (a detached runner reads \
                                      the config again and would not find it)"
                                .into(),
                        }],
                    });
                }
                warnings = found;
                Ok::<_, RegisterError>((event, group))
            })?;
        Ok(Receipt { id, warnings })
    }

    /// Unregisters a hook; whether it was registered. Dispatches that started before keep
    /// the set they started with.
    pub fn unregister(&self, id: HookId) -> bool {
        self.dispatcher.registry().remove(id)
    }

    /// The hooks registered now.
    pub fn registered(&self) -> Arc<Snapshot> {
        self.dispatcher.registry().snapshot()
    }

    /// This host (just rebuilt from `previous`'s sources) with `previous`'s registered
    /// hooks, each admitted again by this host's policy; one the new policy refuses is
    /// unregistered (logged). The registry itself is shared, so a registration made on
    /// `previous` meanwhile is not lost.
    pub fn adopting_registrations(self, previous: &Host) -> Host {
        let registry = previous.dispatcher.registry().clone();
        let policy = self.dispatcher.policy().clone();
        let removed = registry.readmit(|entry| {
            let registration: Registration = serde_json::from_value(entry.source.clone()).ok()?;
            match admit(&policy, &registration, entry.id) {
                Ok((_, group, _)) => Some(group),
                Err(e) => {
                    tracing::warn!(
                        "registered hook {} unregistered by the new config: {e}",
                        entry.id
                    );
                    None
                }
            }
        });
        drop(removed);
        Host {
            dispatcher: self.dispatcher.clone().with_registry(registry),
            ..self
        }
    }
}

#[cfg(test)]
#[path = "register_tests.rs"]
mod tests;
