//! The key of a kept session instance (`"instance": "session"`): everything that scopes
//! it. [`SessionKey::new`] is the one place the key is built; an instance serves only
//! events whose key is equal.
//!
//! An instance holds what it was given when it was made: directories opened under the
//! grants and ceilings of that moment, environment values, a memory limiter. So its key
//! is the hook, the session, the project, and a fingerprint of the plugin's digest, the
//! hook's resolved grants (the directories, variables and hosts that are both granted
//! and declared, as [`Live`]), managed policy's [`Ceilings`] over them, and the call's
//! [`Limits`]. The fingerprint hashes the derived `Debug` form of those types, so a field
//! added to any of them enters the key without anyone naming it here. It is computed once
//! per hook and what it was made under ([`policy_print`], cached on first use and kept
//! while the hook's digest, grants, ceilings and limits compare equal): an event's key
//! then costs comparisons and the hashes of short strings, not a formatting per event.
//! The cache ([`Prints`]) belongs to the loaded plugin, so it goes when the plugin is
//! reloaded or dropped, and one runtime's hooks never share it with another's.
//!
//! A key that differs only in its fingerprint replaces the instance under the old one
//! ([`SessionKey::supersedes`]): a reload with a narrower grant drops the wider
//! instance, it does not keep it beside the new one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::limits::Limits;
use crate::policy::capability::Live;
use crate::policy::ceiling::Ceilings;

/// The key of a kept instance. `.0` is the hook's label (its id), which eviction groups
/// by; `.1` is the rest of its scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct SessionKey(pub(super) String, Scope);

/// What scopes an instance besides its hook.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Scope {
    session: String,
    project: PathBuf,
    /// sha256 of the plugin digest, resolved grants, ceilings and limits.
    grants: [u8; 32],
}

/// What an instance was made under, besides hook, session and project.
pub(super) struct Grants<'a> {
    /// The plugin's sha256.
    pub(super) digest: &'a str,
    /// The resolved grants.
    pub(super) live: &'a Live,
    /// Managed policy's ceilings over them, when the hook's source is capped.
    pub(super) ceilings: Option<&'a Ceilings>,
    /// Fuel, memory and timeout.
    pub(super) limits: &'a Limits,
    /// The loaded plugin's fingerprint cache.
    pub(super) prints: &'a Prints,
}

impl SessionKey {
    /// The key of hook `hook`'s instance for `session` in `project` under `grants`.
    pub(super) fn new(
        hook: &str,
        session: &str,
        project: &Path,
        grants: &Grants<'_>,
    ) -> SessionKey {
        SessionKey(
            hook.to_owned(),
            Scope {
                session: session.to_owned(),
                project: project.to_path_buf(),
                grants: policy_print(hook, grants),
            },
        )
    }

    /// Whether `other` is an instance of the same hook, session and project made under
    /// other grants: it must not serve again, and goes when this key's instance is made.
    pub(super) fn supersedes(&self, other: &SessionKey) -> bool {
        self.0 == other.0
            && self.1.session == other.1.session
            && self.1.project == other.1.project
            && self.1.grants != other.1.grants
    }
}

/// What a hook's fingerprint was computed from, and the fingerprint.
struct Printed {
    digest: String,
    live: Live,
    ceilings: Option<Ceilings>,
    limits: Limits,
    print: [u8; 32],
}

/// The fingerprints computed for the hooks (by label) of one loaded plugin, kept with it
/// ([`super::load::Loaded`]).
#[derive(Default)]
pub(super) struct Prints(Mutex<HashMap<String, Printed>>);

/// Hooks kept in one [`Prints`]; past this many the cache starts again.
const MAX_PRINTS: usize = 4096;

/// The fingerprint of what hook `hook`'s instance is made under: the one computed for it
/// before when everything it was computed from compares equal, else computed now.
fn policy_print(hook: &str, grants: &Grants<'_>) -> [u8; 32] {
    let mut prints = grants.prints.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = prints.get(hook)
        && p.digest == grants.digest
        && p.live == *grants.live
        && p.ceilings.as_ref() == grants.ceilings
        && p.limits == *grants.limits
    {
        return p.print;
    }
    let print = fingerprint(grants);
    if prints.len() >= MAX_PRINTS {
        prints.clear();
    }
    prints.insert(
        hook.to_owned(),
        Printed {
            digest: grants.digest.to_owned(),
            live: grants.live.clone(),
            ceilings: grants.ceilings.cloned(),
            limits: *grants.limits,
            print,
        },
    );
    print
}

/// The fingerprint of what an instance was made under. Each part is length-prefixed, so
/// no two different lists of parts hash alike.
fn fingerprint(grants: &Grants<'_>) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in [
        grants.digest.to_owned(),
        format!("{:?}", grants.live),
        format!("{:?}", grants.ceilings),
        format!("{:?}", grants.limits),
    ] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().into()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::schema::RawCapabilities;
    use crate::policy::capability::{Declared, DirRequest, intersect};

    /// The resolved grants of `raw` (JSON of a hook's `capabilities`) for a plugin that
    /// declares everything, in `project`.
    fn live(raw: serde_json::Value, project: &Path) -> Live {
        let raw: RawCapabilities = serde_json::from_value(raw).unwrap();
        let declared = Declared {
            dirs: vec![DirRequest {
                path: "*".into(),
                write: true,
            }],
            env: vec!["A".into()],
            http: vec!["*".into()],
            model: true,
        };
        intersect(&raw, &declared, project, Some(Path::new("/home/u")))
            .unwrap()
            .0
    }

    const LIMITS: Limits = Limits {
        fuel: 1_000,
        memory_bytes: 1 << 20,
        timeout: Duration::from_secs(1),
    };

    fn key(project: &str, live: &Live, ceilings: Option<&Ceilings>, limits: &Limits) -> SessionKey {
        let grants = Grants {
            digest: "d1",
            live,
            ceilings,
            limits,
            prints: &Prints::default(),
        };
        SessionKey::new("hook", "s1", Path::new(project), &grants)
    }

    #[test]
    fn every_part_of_the_scope_is_in_the_key() {
        let project = Path::new("/p");
        let base = live(
            serde_json::json!({"dirs": [{"path": "${workspace}/data", "mode": "rw"}],
                               "env": ["A"], "http": ["api.example.com"]}),
            project,
        );
        let reference = key("/p", &base, None, &LIMITS);
        assert_eq!(reference, key("/p", &base.clone(), None, &LIMITS), "stable");

        // Each change of one thing an instance was made under gives another key that
        // supersedes the old one (same hook, session and project).
        let narrower: Vec<(&str, Live)> = vec![
            (
                "dir read-only",
                live(
                    serde_json::json!({"dirs": [{"path": "${workspace}/data", "mode": "ro"}],
                                       "env": ["A"], "http": ["api.example.com"]}),
                    project,
                ),
            ),
            (
                "other dir",
                live(
                    serde_json::json!({"dirs": [{"path": "${workspace}/other", "mode": "rw"}],
                                       "env": ["A"], "http": ["api.example.com"]}),
                    project,
                ),
            ),
            (
                "no env",
                live(
                    serde_json::json!({"dirs": [{"path": "${workspace}/data", "mode": "rw"}],
                                       "http": ["api.example.com"]}),
                    project,
                ),
            ),
            (
                "other host",
                live(
                    serde_json::json!({"dirs": [{"path": "${workspace}/data", "mode": "rw"}],
                                       "env": ["A"], "http": ["other.example.com"]}),
                    project,
                ),
            ),
        ];
        for (what, narrower) in &narrower {
            let other = key("/p", narrower, None, &LIMITS);
            assert_ne!(other, reference, "{what}");
            assert!(other.supersedes(&reference), "{what}");
        }
        for (what, limits) in [
            (
                "fuel",
                Limits {
                    fuel: 999,
                    ..LIMITS
                },
            ),
            (
                "memory",
                Limits {
                    memory_bytes: 1 << 19,
                    ..LIMITS
                },
            ),
            (
                "timeout",
                Limits {
                    timeout: Duration::from_millis(999),
                    ..LIMITS
                },
            ),
        ] {
            let other = key("/p", &base, None, &limits);
            assert!(other.supersedes(&reference), "{what}");
        }
        let ceilings = Ceilings::default();
        assert!(key("/p", &base, Some(&ceilings), &LIMITS).supersedes(&reference));
        let other_digest = SessionKey::new(
            "hook",
            "s1",
            project,
            &Grants {
                digest: "d2",
                live: &base,
                ceilings: None,
                limits: &LIMITS,
                prints: &Prints::default(),
            },
        );
        assert!(other_digest.supersedes(&reference), "another plugin build");

        // Another project, session or hook is another place: a key there neither equals
        // nor supersedes this one.
        let elsewhere = key("/q", &base, None, &LIMITS);
        assert_ne!(elsewhere, reference);
        assert!(!elsewhere.supersedes(&reference));
        let other_session = SessionKey::new(
            "hook",
            "s2",
            project,
            &Grants {
                digest: "d1",
                live: &base,
                ceilings: None,
                limits: &LIMITS,
                prints: &Prints::default(),
            },
        );
        assert!(other_session != reference && !other_session.supersedes(&reference));
        assert!(
            !reference.supersedes(&reference),
            "a key does not supersede itself"
        );
    }

    /// The cached fingerprint is the one computed afresh, and follows the grants back
    /// and forth (a widened, then narrowed again grant gets each its own key).
    #[test]
    fn the_cached_fingerprint_is_the_computed_one() {
        let project = Path::new("/p");
        let wide = live(
            serde_json::json!({"dirs": [{"path": "${workspace}/data", "mode": "rw"}]}),
            project,
        );
        let narrow = live(
            serde_json::json!({"dirs": [{"path": "${workspace}/data", "mode": "ro"}]}),
            project,
        );
        let prints = Prints::default();
        let grants = |live| Grants {
            digest: "d1",
            live,
            ceilings: None,
            limits: &LIMITS,
            prints: &prints,
        };
        for live in [&wide, &narrow, &wide, &narrow] {
            let key = SessionKey::new("cached-hook", "s1", project, &grants(live));
            assert_eq!(key.1.grants, fingerprint(&grants(live)));
            assert_eq!(
                key,
                SessionKey::new("cached-hook", "s1", project, &grants(live))
            );
        }
        assert_ne!(fingerprint(&grants(&wide)), fingerprint(&grants(&narrow)));
    }
}
