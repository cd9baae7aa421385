//! Capability grants of wasm hooks: validation at config time, resolution of `${workspace}`
//! and `${home}`, host patterns for outgoing HTTP ([`HostPattern`], in `host_pattern`), and
//! the intersection of what the config grants with what the plugin declares (a capability is
//! live only when both say so).

use std::path::{Component, Path, PathBuf};

mod host_pattern;

use host_pattern::HostMatch;
pub use host_pattern::{HostPattern, Scheme};

use crate::config::schema::{DirMode, RawCapabilities};

/// Expands `${workspace}` and `${home}` at the start of a grant path and checks that the
/// result is absolute and has no `..`.
///
/// # Errors
///
/// A message naming the path and what is wrong with it.
pub fn expand_path(path: &str, workspace: &Path, home: Option<&Path>) -> Result<PathBuf, String> {
    let expanded = if let Some(rest) = path.strip_prefix("${workspace}") {
        join_rest(workspace, rest, path)?
    } else if let Some(rest) = path.strip_prefix("${home}") {
        let home = home.ok_or_else(|| format!("`{path}`: the home directory is unknown"))?;
        join_rest(home, rest, path)?
    } else if path.contains("${") {
        return Err(format!(
            "`{path}`: only `${{workspace}}` and `${{home}}` may start a path"
        ));
    } else {
        PathBuf::from(path)
    };
    if !expanded.is_absolute() {
        return Err(format!(
            "`{path}` must be absolute or start with `${{workspace}}` or `${{home}}`"
        ));
    }
    if expanded.components().any(|c| c == Component::ParentDir) {
        return Err(format!("`{path}` must not contain `..`"));
    }
    Ok(expanded)
}

/// What a grant or ceiling path starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathBase {
    /// `${workspace}`.
    Workspace,
    /// `${home}`.
    Home,
    /// An absolute path.
    Absolute,
}

/// Splits a grant or ceiling path into what it starts from and the rest after it
/// (`${workspace}/src` → `(Workspace, "src")`; an absolute path is all base). Checking
/// a resolved directory against a ceiling resolves only the base (the workspace or home
/// may be reached through a symlink) and takes the rest as written, so that a symlink a
/// repository puts inside the workspace cannot move the ceiling.
pub fn path_base(path: &str) -> (PathBase, &str) {
    if let Some(tail) = path.strip_prefix("${workspace}") {
        (PathBase::Workspace, tail.trim_start_matches('/'))
    } else if let Some(tail) = path.strip_prefix("${home}") {
        (PathBase::Home, tail.trim_start_matches('/'))
    } else {
        (PathBase::Absolute, "")
    }
}

fn join_rest(base: &Path, rest: &str, path: &str) -> Result<PathBuf, String> {
    if rest.is_empty() {
        return Ok(base.to_path_buf());
    }
    match rest.strip_prefix('/') {
        Some(tail) => Ok(base.join(tail)),
        None => Err(format!("`{path}`: a `/` must follow the variable")),
    }
}

/// Checks the grants of a hook at config time: paths, guest paths, env names, host
/// patterns. Returns the JSON path of the offending field and the message.
///
/// # Errors
///
/// `(field, message)` for the first invalid grant.
pub fn validate(raw: &RawCapabilities) -> Result<(), (String, String)> {
    let any_workspace = Path::new("/workspace");
    let any_home = Path::new("/home");
    for (i, dir) in raw.dirs.iter().enumerate() {
        expand_path(&dir.path, any_workspace, Some(any_home))
            .map_err(|e| (format!("capabilities.dirs[{i}].path"), e))?;
        if let Some(guest) = &dir.guest
            && (!guest.starts_with('/') || guest.split('/').any(|part| part == ".."))
        {
            return Err((
                format!("capabilities.dirs[{i}].guest"),
                format!("`{guest}` must be absolute, without `..`"),
            ));
        }
    }
    for (i, name) in raw.env.iter().enumerate() {
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err((
                format!("capabilities.env[{i}]"),
                format!("`{name}` is not an environment variable name"),
            ));
        }
    }
    for (i, pattern) in raw.http.iter().enumerate() {
        HostPattern::parse(pattern).map_err(|e| (format!("capabilities.http[{i}]"), e))?;
    }
    if raw.model.is_some_and(|m| m.tokens_per_event == 0) {
        return Err((
            "capabilities.model.tokensPerEvent".into(),
            "must be at least 1 (a grant of no tokens is no grant)".into(),
        ));
    }
    Ok(())
}

/// A directory a plugin asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirRequest {
    /// `${workspace}`, `${home}`, an absolute path, or `*`.
    pub path: String,
    /// Whether it wants to write.
    pub write: bool,
}

/// The capabilities a plugin declares in `describe`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// Directories.
    pub dirs: Vec<DirRequest>,
    /// Env var names.
    pub env: Vec<String>,
    /// Host patterns, or `*`.
    pub http: Vec<String>,
    /// Whether it imports `hookhost:hook/model` (0.2.0 and later): a plugin declares the
    /// model by importing it, since the import is what it would call.
    pub model: bool,
}

/// A preopened directory that is live for one hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveDir {
    /// The grant's path as configured (`${workspace}/data`), for messages.
    pub grant: String,
    /// The host directory.
    pub host: PathBuf,
    /// Where the guest sees it.
    pub guest: String,
    /// Read-write (else read-only).
    pub write: bool,
}

/// The capabilities of one hook that are both granted and declared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    /// Preopened directories.
    pub dirs: Vec<LiveDir>,
    /// Env var names (values are read from the host's environment at each call).
    pub env: Vec<String>,
    /// Granted host patterns that the plugin's declarations cover.
    pub http: Vec<HostPattern>,
    /// Declared host patterns (a request must match one of these too), `None` for `*`.
    pub http_declared: Option<Vec<HostPattern>>,
    /// The model: the tokens per event granted (`capabilities.model.tokensPerEvent`),
    /// when the plugin also imports `hookhost:hook/model`.
    pub model: Option<u64>,
}

impl Live {
    /// Whether an outgoing request is allowed: some grant and some declaration allow it.
    pub fn allows_http(&self, scheme: Scheme, host: &str, port: Option<u16>) -> bool {
        self.http.iter().any(|p| p.allows(scheme, host, port))
            && self
                .http_declared
                .as_ref()
                .is_none_or(|d| d.iter().any(|p| p.allows(scheme, host, port)))
    }
}

/// Intersects the grants of a hook with the plugin's declarations. Grants the plugin did
/// not declare are dropped with a warning; declared capabilities that are not granted are
/// simply absent.
///
/// # Errors
///
/// A grant that cannot be resolved (unknown home directory, invalid pattern).
pub fn intersect(
    raw: &RawCapabilities,
    declared: &Declared,
    workspace: &Path,
    home: Option<&Path>,
) -> Result<(Live, Vec<String>), String> {
    let mut live = Live::default();
    let mut warnings = Vec::new();
    for dir in &raw.dirs {
        let requests: Vec<&DirRequest> = declared
            .dirs
            .iter()
            .filter(|d| d.path == "*" || d.path == dir.path || Some(&d.path) == dir.guest.as_ref())
            .collect();
        if requests.is_empty() {
            warnings.push(format!(
                "directory grant `{}` is not declared by the plugin; not mounted",
                dir.path
            ));
            continue;
        }
        let wants_write = requests.iter().any(|r| r.write);
        let host = expand_path(&dir.path, workspace, home)?;
        let guest = dir
            .guest
            .clone()
            .unwrap_or_else(|| host.to_string_lossy().into_owned());
        let granted_write = dir.mode == DirMode::ReadWrite;
        if granted_write && !wants_write {
            warnings.push(format!(
                "`{}` is granted read-write but the plugin asks read-only; mounted read-only",
                dir.path
            ));
        }
        live.dirs.push(LiveDir {
            grant: dir.path.clone(),
            host,
            guest,
            write: granted_write && wants_write,
        });
    }
    for name in &raw.env {
        if declared.env.contains(name) {
            live.env.push(name.clone());
        } else {
            warnings.push(format!(
                "env grant `{name}` is not declared by the plugin; not passed"
            ));
        }
    }
    let any_host = declared.http.iter().any(|d| d == "*");
    let declared_patterns: Vec<HostPattern> = declared
        .http
        .iter()
        .filter(|d| *d != "*")
        .filter_map(|d| HostPattern::parse(d).ok())
        .collect();
    for text in &raw.http {
        let pattern = HostPattern::parse(text)?;
        let covered = any_host || declared.http.iter().any(|d| d.eq_ignore_ascii_case(text)) || {
            match (&pattern.host, pattern.port) {
                (HostMatch::Exact(h), port) => declared_patterns
                    .iter()
                    .any(|d| d.allows(pattern.scheme, h, port)),
                (HostMatch::Subdomains(_), _) => false,
            }
        };
        if covered {
            live.http.push(pattern);
        } else {
            warnings.push(format!(
                "HTTP grant `{text}` is not declared by the plugin; not allowed"
            ));
        }
    }
    live.http_declared = (!any_host).then_some(declared_patterns);
    if let Some(grant) = &raw.model {
        if declared.model {
            live.model = Some(grant.tokens_per_event);
        } else {
            warnings.push(
                "model grant is not declared by the plugin (it does not import \
                 `hookhost:hook/model`, which 0.1.0 plugins cannot); not live"
                    .to_string(),
            );
        }
    }
    Ok((live, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::schema::RawDirGrant;
    use Scheme::{Http, Https};

    #[test]
    fn paths_expand_variables_and_refuse_relative_and_dotdot() {
        let ws = Path::new("/w");
        let home = Path::new("/h");
        assert_eq!(
            expand_path("${workspace}", ws, Some(home)).unwrap(),
            PathBuf::from("/w")
        );
        assert_eq!(
            expand_path("${workspace}/sub/x", ws, Some(home)).unwrap(),
            PathBuf::from("/w/sub/x")
        );
        assert_eq!(
            expand_path("${home}/.cache", ws, Some(home)).unwrap(),
            PathBuf::from("/h/.cache")
        );
        assert_eq!(
            expand_path("/abs", ws, None).unwrap(),
            PathBuf::from("/abs")
        );
        for bad in [
            "relative",
            "${workspace}/../etc",
            "${workspacex}",
            "/a/${home}",
            "${workspace}x",
        ] {
            assert!(expand_path(bad, ws, Some(home)).is_err(), "{bad}");
        }
        assert!(
            expand_path("${home}", ws, None)
                .unwrap_err()
                .contains("home")
        );
    }

    fn grants(dirs: &[(&str, DirMode)], env: &[&str], http: &[&str]) -> RawCapabilities {
        RawCapabilities {
            dirs: dirs
                .iter()
                .map(|(p, m)| RawDirGrant {
                    path: p.to_string(),
                    guest: None,
                    mode: *m,
                })
                .collect(),
            env: env.iter().map(|s| s.to_string()).collect(),
            http: http.iter().map(|s| s.to_string()).collect(),
            model: None,
        }
    }

    #[test]
    fn live_capabilities_are_granted_and_declared() {
        let raw = grants(
            &[
                ("${workspace}", DirMode::ReadWrite),
                ("/data", DirMode::ReadOnly),
            ],
            &["TOKEN", "OTHER"],
            &["api.example.com", "http://127.0.0.1:9000"],
        );
        let declared = Declared {
            dirs: vec![DirRequest {
                path: "${workspace}".into(),
                write: false,
            }],
            env: vec!["TOKEN".into(), "NOT_GRANTED".into()],
            http: vec!["*.example.com".into(), "api.example.com".into()],
            model: false,
        };
        let (live, warnings) = intersect(&raw, &declared, Path::new("/w"), None).unwrap();
        assert_eq!(
            live.dirs,
            vec![LiveDir {
                grant: "${workspace}".into(),
                host: "/w".into(),
                guest: "/w".into(),
                write: false
            }]
        );
        assert_eq!(live.env, vec!["TOKEN"]);
        assert_eq!(live.http.len(), 1);
        assert!(live.allows_http(Https, "api.example.com", None));
        assert!(!live.allows_http(Http, "127.0.0.1", Some(9000)));
        assert!(
            !live.allows_http(Https, "other.example.com", None),
            "declared but not granted"
        );
        let joined = warnings.join("\n");
        for expected in ["read-only", "`/data`", "`OTHER`", "127.0.0.1:9000"] {
            assert!(
                joined.contains(expected),
                "missing warning for {expected}: {joined}"
            );
        }
    }

    #[test]
    fn star_declarations_accept_any_grant() {
        let raw = grants(
            &[("/data", DirMode::ReadWrite)],
            &[],
            &["http://127.0.0.1:9000"],
        );
        let declared = Declared {
            dirs: vec![
                DirRequest {
                    path: "*".into(),
                    write: false,
                },
                DirRequest {
                    path: "*".into(),
                    write: true,
                },
            ],
            env: vec![],
            http: vec!["*".into()],
            model: false,
        };
        let (live, warnings) = intersect(&raw, &declared, Path::new("/w"), None).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(live.dirs[0].write);
        assert!(live.allows_http(Http, "127.0.0.1", Some(9000)));
        assert!(!live.allows_http(Http, "127.0.0.1", Some(9001)));
    }

    /// One check for both WIT versions: the model is live only when granted and
    /// imported, and a 0.1.0 plugin (which cannot import it) never gets it.
    #[test]
    fn the_model_is_live_only_when_granted_and_imported() {
        let mut raw = grants(&[], &[], &[]);
        raw.model = Some(crate::config::schema::RawModelGrant {
            tokens_per_event: 300,
        });
        let imports = Declared {
            model: true,
            ..Declared::default()
        };
        let (live, warnings) = intersect(&raw, &imports, Path::new("/w"), None).unwrap();
        assert_eq!(live.model, Some(300));
        assert!(warnings.is_empty(), "{warnings:?}");
        let (live, warnings) =
            intersect(&raw, &Declared::default(), Path::new("/w"), None).unwrap();
        assert_eq!(live.model, None);
        assert!(warnings[0].contains("hookhost:hook/model"), "{warnings:?}");
        let (live, _) = intersect(&grants(&[], &[], &[]), &imports, Path::new("/w"), None).unwrap();
        assert_eq!(live.model, None, "imported but not granted");
        raw.model = Some(crate::config::schema::RawModelGrant {
            tokens_per_event: 0,
        });
        assert_eq!(
            validate(&raw).unwrap_err().0,
            "capabilities.model.tokensPerEvent"
        );
    }

    #[test]
    fn paths_split_into_base_and_rest() {
        assert_eq!(path_base("${workspace}"), (PathBase::Workspace, ""));
        assert_eq!(
            path_base("${workspace}/src/x"),
            (PathBase::Workspace, "src/x")
        );
        assert_eq!(path_base("${home}/.cache"), (PathBase::Home, ".cache"));
        assert_eq!(path_base("/tmp/hooks"), (PathBase::Absolute, ""));
    }

    #[test]
    fn validation_names_the_field() {
        let mut raw = grants(&[("relative/dir", DirMode::ReadOnly)], &[], &[]);
        assert_eq!(validate(&raw).unwrap_err().0, "capabilities.dirs[0].path");
        raw.dirs.clear();
        raw.http = vec!["ok.com".into(), "ftp://bad".into()];
        assert_eq!(validate(&raw).unwrap_err().0, "capabilities.http[1]");
        raw.http.clear();
        raw.env = vec!["A=B".into()];
        assert_eq!(validate(&raw).unwrap_err().0, "capabilities.env[0]");
    }
}
