//! Workspace trust decisions: whether the project and local hooks of a workspace may run.
//!
//! A workspace is trusted when managed policy pre-trusts its path, when the user trusted
//! it (`hookhost trust`) and its fingerprint is unchanged since, or when the caller trusts
//! it explicitly for one run (`--trust-workspace`, `HOOKHOST_TRUST_WORKSPACE=1`). Managed
//! policy may forbid trust; then only pre-trusted paths are trusted.
//!
//! The fingerprint is the sha256 of each hook file (`.hookhost/hooks.json`,
//! `.hookhost/hooks.local.json`) and of each plugin they reference, with the real path
//! behind any symlink. Any change (content, a symlink pointing elsewhere, a file that
//! appears or disappears) untrusts the workspace until it is trusted again. Computing it
//! reads files and lives in [`crate::trust`]; deciding is pure and lives here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the fingerprint records of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileState {
    /// sha256 of the content, hex; `None` when the file is absent or unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The real path, when it differs from the path (a symlink somewhere on the way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// File path (as the config names it) → state.
pub type Fingerprint = BTreeMap<String, FileState>;

/// How the caller asks for the workspace to be judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustInput {
    /// Compare the current fingerprint with the one recorded when the user trusted the
    /// workspace (`None`: never trusted). `Err` when the trust store cannot be read:
    /// the workspace is then untrusted, with the message.
    Recorded(Result<Option<Fingerprint>, String>),
    /// The caller trusts the workspace for this run (`--trust-workspace`).
    Explicit,
    /// `HOOKHOST_TRUST_WORKSPACE=1` trusts the workspace for this run, unless managed
    /// policy sets `forbidEnvironmentTrust`; then trust is judged as
    /// [`TrustInput::Recorded`] on the store's answer given here.
    Environment(Result<Option<Fingerprint>, String>),
    /// Not trusted (the library's default when no trust store is given).
    Untrusted,
}

/// Managed policy's say on trust.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedTrust {
    /// Glob patterns of workspace paths that are trusted without asking.
    pub trusted: Vec<String>,
    /// Users may not trust workspaces.
    pub forbid: bool,
    /// `HOOKHOST_TRUST_WORKSPACE` does not trust (`forbidEnvironmentTrust`).
    pub forbid_environment: bool,
}

/// Why a workspace is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TrustedBy {
    /// `trustedWorkspaces` in managed policy.
    Managed,
    /// `hookhost trust`, fingerprint unchanged.
    User,
    /// `--trust-workspace` / `HOOKHOST_TRUST_WORKSPACE=1` for this run.
    Explicit,
}

/// The decision for one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustDecision {
    /// Project and local hooks run. `pins` maps each referenced plugin to the digest it
    /// had when the fingerprint was taken: the sandbox refuses other bytes, so a plugin
    /// swapped after this decision does not run either.
    Trusted {
        /// Why.
        by: TrustedBy,
        /// Plugin path → sha256.
        pins: BTreeMap<PathBuf, String>,
    },
    /// Project and local hooks are skipped with `reason`.
    Untrusted {
        /// The notice: why, and how to trust.
        reason: String,
        /// What changed since the workspace was trusted (empty if it never was).
        changes: Vec<String>,
    },
}

impl TrustDecision {
    /// Whether project and local hooks run.
    pub fn is_trusted(&self) -> bool {
        matches!(self, TrustDecision::Trusted { .. })
    }
}

/// Whether `workspace` matches a managed `trustedWorkspaces` pattern (a glob, or a
/// directory whose subdirectories are trusted too when it ends in `/**`).
pub fn pre_trusted(workspace: &Path, patterns: &[String]) -> bool {
    patterns.iter().any(|pattern| {
        globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map(|g| g.compile_matcher().is_match(workspace))
            .unwrap_or(false)
    })
}

/// Decides whether the workspace is trusted. `plugins` maps each plugin file to its key
/// in the fingerprint (their digests become pins).
pub fn decide(
    workspace: &Path,
    current: &Fingerprint,
    plugins: &BTreeMap<PathBuf, String>,
    input: &TrustInput,
    managed: &ManagedTrust,
) -> TrustDecision {
    let shown = workspace.display();
    let pins = || {
        plugins
            .iter()
            .filter_map(|(path, key)| Some((path.clone(), current.get(key)?.sha256.clone()?)))
            .collect()
    };
    if pre_trusted(workspace, &managed.trusted) {
        return TrustDecision::Trusted {
            by: TrustedBy::Managed,
            pins: BTreeMap::new(),
        };
    }
    if managed.forbid {
        return TrustDecision::Untrusted {
            reason: format!(
                "workspace `{shown}` is not trusted and managed policy forbids trusting \
                 workspaces (`forbidWorkspaceTrust`); its project and local hooks do not run"
            ),
            changes: Vec::new(),
        };
    }
    let how = format!(
        "review its `.hookhost/` and run `hookhost trust {shown}` (or pass \
         `--trust-workspace` / set `HOOKHOST_TRUST_WORKSPACE=1` for one run)"
    );
    let switch_ignored = managed.forbid_environment && matches!(input, TrustInput::Environment(_));
    let ignored_switch;
    let input = match input {
        TrustInput::Environment(_) if !managed.forbid_environment => &TrustInput::Explicit,
        TrustInput::Environment(recorded) => {
            ignored_switch = TrustInput::Recorded(recorded.clone());
            &ignored_switch
        }
        other => other,
    };
    let decision = decide_input(&shown, input, current, &how, pins);
    match decision {
        TrustDecision::Untrusted { reason, changes } if switch_ignored => {
            TrustDecision::Untrusted {
                reason: format!(
                    "{reason} (HOOKHOST_TRUST_WORKSPACE is ignored: managed policy sets \
                     `forbidEnvironmentTrust`)"
                ),
                changes,
            }
        }
        decision => decision,
    }
}

fn decide_input(
    shown: &std::path::Display<'_>,
    input: &TrustInput,
    current: &Fingerprint,
    how: &str,
    pins: impl Fn() -> BTreeMap<PathBuf, String>,
) -> TrustDecision {
    match input {
        TrustInput::Explicit => TrustDecision::Trusted {
            by: TrustedBy::Explicit,
            pins: pins(),
        },
        TrustInput::Environment(_) => unreachable!("resolved by `decide`"),
        TrustInput::Untrusted | TrustInput::Recorded(Ok(None)) => TrustDecision::Untrusted {
            reason: format!(
                "workspace `{shown}` is not trusted, so its project and local hooks do not run; {how}"
            ),
            changes: Vec::new(),
        },
        TrustInput::Recorded(Err(e)) => TrustDecision::Untrusted {
            reason: format!(
                "workspace `{shown}` is treated as untrusted: the trust store cannot be read ({e})"
            ),
            changes: Vec::new(),
        },
        TrustInput::Recorded(Ok(Some(recorded))) => {
            let changes = changes(recorded, current);
            if changes.is_empty() {
                TrustDecision::Trusted {
                    by: TrustedBy::User,
                    pins: pins(),
                }
            } else {
                TrustDecision::Untrusted {
                    reason: format!(
                        "workspace `{shown}` changed since it was trusted ({}); its project and \
                         local hooks do not run until it is trusted again: {how}",
                        changes.join("; ")
                    ),
                    changes,
                }
            }
        }
    }
}

/// What differs between a recorded fingerprint and the current one, one line per file.
pub fn changes(recorded: &Fingerprint, current: &Fingerprint) -> Vec<String> {
    let mut out = Vec::new();
    let absent = FileState::default();
    let names: std::collections::BTreeSet<&String> =
        recorded.keys().chain(current.keys()).collect();
    for name in names {
        let old = recorded.get(name).unwrap_or(&absent);
        let new = current.get(name).unwrap_or(&absent);
        if old == new {
            continue;
        }
        let change = match (&old.sha256, &new.sha256) {
            (None, Some(_)) => format!("`{name}` was added"),
            (Some(_), None) => format!("`{name}` was removed"),
            (Some(a), Some(b)) if a != b => format!("`{name}` was modified"),
            _ => String::new(),
        };
        let mut parts: Vec<String> = Vec::new();
        if !change.is_empty() {
            parts.push(change);
        }
        if old.target != new.target && (old.sha256.is_some() || new.sha256.is_some()) {
            let show = |t: &Option<String>, n: &str| t.clone().unwrap_or_else(|| n.to_string());
            parts.push(format!(
                "`{name}` now points to `{}` (was `{}`)",
                show(&new.target, name),
                show(&old.target, name)
            ));
        }
        out.extend(parts);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(files: &[(&str, Option<&str>, Option<&str>)]) -> Fingerprint {
        files
            .iter()
            .map(|(n, sha, target)| {
                (
                    n.to_string(),
                    FileState {
                        sha256: sha.map(String::from),
                        target: target.map(String::from),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn decision_table() {
        let ws = Path::new("/src/repo");
        let now = fp(&[
            (".hookhost/hooks.json", Some("aa"), None),
            ("/src/repo/p.wasm", Some("bb"), None),
        ]);
        let plugins: BTreeMap<PathBuf, String> = [(
            PathBuf::from("/src/repo/p.wasm"),
            "/src/repo/p.wasm".to_string(),
        )]
        .into();
        let none = ManagedTrust::default();
        let pre = ManagedTrust {
            trusted: vec!["/src/**".into()],
            ..ManagedTrust::default()
        };
        let forbid = ManagedTrust {
            forbid: true,
            ..ManagedTrust::default()
        };
        let no_env = ManagedTrust {
            forbid_environment: true,
            ..ManagedTrust::default()
        };
        let changed = fp(&[
            (".hookhost/hooks.json", Some("aa"), None),
            ("/src/repo/p.wasm", Some("b0"), None),
        ]);
        // (input, managed, trusted by, reason contains)
        let rows: Vec<(TrustInput, &ManagedTrust, Option<TrustedBy>, &str)> = vec![
            (
                TrustInput::Untrusted,
                &none,
                None,
                "hookhost trust /src/repo",
            ),
            (
                TrustInput::Recorded(Ok(None)),
                &none,
                None,
                "is not trusted",
            ),
            (
                TrustInput::Recorded(Ok(Some(now.clone()))),
                &none,
                Some(TrustedBy::User),
                "",
            ),
            (
                TrustInput::Recorded(Ok(Some(changed))),
                &none,
                None,
                "`/src/repo/p.wasm` was modified",
            ),
            (
                TrustInput::Recorded(Err("bad json".into())),
                &none,
                None,
                "bad json",
            ),
            (TrustInput::Explicit, &none, Some(TrustedBy::Explicit), ""),
            (TrustInput::Untrusted, &pre, Some(TrustedBy::Managed), ""),
            (TrustInput::Explicit, &forbid, None, "forbidWorkspaceTrust"),
            (
                TrustInput::Recorded(Ok(Some(now.clone()))),
                &forbid,
                None,
                "forbids",
            ),
            // HOOKHOST_TRUST_WORKSPACE=1: explicit trust unless managed policy forbids it,
            // then the store decides.
            (
                TrustInput::Environment(Ok(None)),
                &none,
                Some(TrustedBy::Explicit),
                "",
            ),
            (
                TrustInput::Environment(Ok(None)),
                &no_env,
                None,
                "HOOKHOST_TRUST_WORKSPACE is ignored: managed policy sets `forbidEnvironmentTrust`",
            ),
            (
                TrustInput::Environment(Ok(Some(now.clone()))),
                &no_env,
                Some(TrustedBy::User),
                "",
            ),
            (TrustInput::Explicit, &no_env, Some(TrustedBy::Explicit), ""),
            (
                TrustInput::Environment(Ok(None)),
                &forbid,
                None,
                "forbidWorkspaceTrust",
            ),
        ];
        for (input, managed, want, words) in rows {
            match (decide(ws, &now, &plugins, &input, managed), want) {
                (TrustDecision::Trusted { by, pins }, Some(want)) => {
                    assert_eq!(by, want, "{input:?}");
                    if by != TrustedBy::Managed {
                        assert_eq!(pins[Path::new("/src/repo/p.wasm")], "bb");
                    }
                }
                (TrustDecision::Untrusted { reason, .. }, None) => {
                    assert!(reason.contains(words), "{input:?}: {reason}")
                }
                (got, want) => panic!("{input:?}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn changes_name_each_file_and_symlink_moves() {
        let old = fp(&[
            ("a.json", Some("1"), None),
            ("b.json", Some("2"), Some("/x/b1.json")),
            ("gone.wasm", Some("3"), None),
            ("same", Some("4"), None),
        ]);
        let new = fp(&[
            ("a.json", Some("9"), None),
            ("b.json", Some("2"), Some("/x/b2.json")),
            ("new.json", Some("5"), None),
            ("same", Some("4"), None),
        ]);
        assert_eq!(
            changes(&old, &new),
            [
                "`a.json` was modified",
                "`b.json` now points to `/x/b2.json` (was `/x/b1.json`)",
                "`gone.wasm` was removed",
                "`new.json` was added",
            ]
        );
        assert!(changes(&new, &new).is_empty());
    }

    #[test]
    fn pre_trusted_paths_are_globs() {
        let p = |s: &str| vec![s.to_string()];
        assert!(pre_trusted(Path::new("/srv/a"), &p("/srv/*")));
        assert!(!pre_trusted(Path::new("/srv/a/b"), &p("/srv/*")));
        assert!(pre_trusted(Path::new("/srv/a/b"), &p("/srv/**")));
        assert!(pre_trusted(Path::new("/srv/a"), &p("/srv/a")));
        assert!(!pre_trusted(Path::new("/srv/ab"), &p("/srv/a")));
        assert!(!pre_trusted(Path::new("/srv/a"), &p("[")));
    }
}
