//! The one list of places hookhost owns ([`host_owned_places`]): read here, where I/O is
//! allowed, and handed to policy ([`crate::policy::ResolveOptions::host_places`]), which
//! refuses every directory grant that is, contains or lies inside one of them
//! ([`crate::policy::places`]); the sandbox checks each opened grant against the same list
//! again (`handlers/wasm/grants.rs`). A place added to hookhost is added here, and the
//! generating test (`host/tests/it/places.rs`) then grants it, its parents and its inside.

use std::path::{Path, PathBuf};

use crate::config::{self, SourceOptions};
use crate::handlers::wasm::CompileCache;
use crate::policy::places::{Guard, HostPlace, OWNED_DIR_NAMES};

/// What else a host writes or believes, beyond its sources: the trust store, the audit
/// log and the session files of this host (each may be outside the data directory).
#[derive(Debug, Clone, Default)]
pub struct HostFiles<'a> {
    /// The trust store file.
    pub trust_store: Option<&'a Path>,
    /// The audit log file.
    pub audit_log: Option<&'a Path>,
    /// The directory of per-session files (`CLAUDE_ENV_FILE`).
    pub session_files: Option<&'a Path>,
}

/// Every place hookhost trusts with its own safety, each with what it is and which grants
/// it refuses ([`Guard::Any`]: every grant; [`Guard::Write`]: read-write ones):
///
/// - `HOOKHOST_HOME` / the user config (`~/.config/hookhost`): any;
/// - the data directory (`HOOKHOST_DATA_DIR`, `~/.local/share/hookhost`: trust store,
///   sessions, audit log, env files, daemons), and this host's trust store, audit log and
///   session files wherever they are: any;
/// - the compile cache (`HOOKHOST_CACHE_DIR`, `~/.cache/hookhost/wasm`: native code and the
///   key that authenticates it): any (the sandbox adds its own cache directory too);
/// - `hookhost serve`'s default socket (`$XDG_RUNTIME_DIR/hookhost.sock`): any;
/// - the agents' user settings that `hookhost install` writes (`CLAUDE_CONFIG_DIR` or
///   `~/.claude`, `CODEX_HOME` or `~/.codex`, `~/.gemini`, `COPILOT_HOME` or `~/.copilot`,
///   `~/.cursor`, OpenCode's `$XDG_CONFIG_HOME/opencode` or `~/.config/opencode`; they
///   also hold the agents' credentials): any (`AGENT_DIRS`);
/// - managed policy (`/etc/hookhost` or `HOOKHOST_MANAGED_DIR`): write;
/// - the project's `.hookhost/` (hook files, plugins), `.claude/` and `.codex/` (the
///   project settings `install --project` writes), and its `.git/` (hooks and config
///   that git runs natively): write. These names are host-owned wherever they are
///   ([`crate::policy::places::OWNED_DIR_NAMES`], with `CLAUDE.md`/`AGENTS.md` by
///   [`crate::policy::places::OWNED_FILE_NAMES`]): the sandbox refuses a guest's write
///   to a path with one of them below any grant, by the real path of the target
///   (`handlers/wasm/guest_fs.rs`);
/// - private files inside those public places (`.claude/settings.local.json`,
///   `.hookhost/hooks.local.json`: [`crate::policy::places::PRIVATE_FILES`]): hidden from
///   the guest (not found, left out of listings) even under a read-only grant;
/// - the hookhost binary that runs (what the agents' settings call): write;
/// - the plugin files of the config and their `.sig` signatures: write (added by
///   [`crate::policy::resolve`], which reads the config).
pub fn host_owned_places(sources: &SourceOptions, files: &HostFiles<'_>) -> Vec<HostPlace> {
    let workspaces = config::env::workspaces_of(Some(&sources.project_dir));
    let mut places = Vec::new();
    let mut add = |path: Option<PathBuf>, what: &str, guard: Guard| {
        if let Some(path) = path.filter(|p| p.is_absolute()) {
            places.push(HostPlace::new(path, what, guard));
        }
    };
    // The user config where it is, where the config base puts it by default, and under
    // the home directory whatever `XDG_CONFIG_HOME` says.
    let user_default = config::env::config_base(&workspaces)
        .0
        .map(|base| base.join("hookhost"));
    let under_home = sources
        .home_dir
        .as_ref()
        .map(|home| home.join(".config").join("hookhost"));
    add(sources.user_dir.clone(), "the user config", Guard::Any);
    add(user_default, "the user config", Guard::Any);
    add(under_home, "the user config", Guard::Any);
    add(
        Some(config::env::data_dir_judged(&workspaces).0),
        "the data directory (trust store, sessions, audit log, env files)",
        Guard::Any,
    );
    add(
        files.trust_store.map(Path::to_path_buf),
        "the trust store",
        Guard::Any,
    );
    add(
        files.audit_log.map(Path::to_path_buf),
        "the audit log",
        Guard::Any,
    );
    add(
        files.session_files.map(Path::to_path_buf),
        "the session files",
        Guard::Any,
    );
    add(CompileCache::default_dir(), "the compile cache", Guard::Any);
    // The defaults too, whatever `HOOKHOST_DATA_DIR` / `HOOKHOST_CACHE_DIR` say now: the
    // agent's `hookhost dispatch` runs without them beside a `serve` started with them,
    // and trusts the default trust store and cache (as the user config above).
    let data = "the data directory (trust store, sessions, audit log, env files)";
    let cache = "the compile cache";
    add(
        config::env::data_base(&workspaces)
            .0
            .map(|b| b.join("hookhost")),
        data,
        Guard::Any,
    );
    add(
        config::env::cache_base(&workspaces)
            .0
            .map(|b| b.join("hookhost")),
        cache,
        Guard::Any,
    );
    if let Some(home) = &sources.home_dir {
        add(Some(home.join(".local/share/hookhost")), data, Guard::Any);
        add(Some(home.join(".cache/hookhost")), cache, Guard::Any);
    }
    // `hookhost serve`'s default socket (`cli/serve.rs` `default_socket`); the other
    // default, in the data directory, is guarded with it. A plugin that may write beside
    // it can replace it with a file, and no agent reaches the daemon again.
    add(
        config::env::path_var("XDG_RUNTIME_DIR", &workspaces)
            .ok()
            .flatten()
            .map(|dir| dir.join("hookhost.sock")),
        "`hookhost serve`'s socket",
        Guard::Any,
    );
    let home = sources.home_dir.clone();
    for (var, under_var, dir, what) in AGENT_DIRS {
        // The same choice `hookhost install` makes (`cli/install`), read through the one
        // reader of the environment; any absolute value is guarded (refusing more grants
        // is the safe side), whether or not `install` would accept it.
        if let Some(var) = var {
            add(
                config::env::path_var(var, &[])
                    .ok()
                    .flatten()
                    .map(|d| match under_var {
                        "" => d,
                        under => d.join(under),
                    }),
                what,
                Guard::Any,
            );
        }
        add(home.as_ref().map(|h| h.join(dir)), what, Guard::Any);
    }
    add(sources.managed_dir.clone(), "managed policy", Guard::Write);
    add(
        Some(PathBuf::from(config::env::SYSTEM_MANAGED_DIR)),
        "managed policy",
        Guard::Write,
    );
    // The project's own, from the one list of names that are host-owned wherever they
    // are (`policy::places::OWNED_DIR_NAMES`; the sandbox refuses a guest's writes below
    // any of them by name, nested ones included).
    for (dir, what) in OWNED_DIR_NAMES {
        add(
            Some(sources.project_dir.join(dir)),
            &format!("the project's {what}"),
            Guard::Write,
        );
    }
    add(
        std::env::current_exe().ok(),
        "the hookhost binary",
        Guard::Write,
    );
    places.sort_by(|a, b| a.path.cmp(&b.path));
    places.dedup();
    places
}

/// What the agents' user settings directories are called in [`host_owned_places`].
const AGENT_SETTINGS: [&str; 6] = [
    "Claude Code's user settings",
    "Codex's user settings",
    "Gemini CLI's user settings",
    "Copilot CLI's user settings",
    "Cursor's user settings",
    "OpenCode's user config",
];

/// Every agent's user directory that `hookhost install` writes (and the agent runs hooks
/// or plugins from): the variable that moves it and the part under that variable's
/// value, the default under the home directory, and what it is.
const AGENT_DIRS: [(Option<&str>, &str, &str, &str); 6] = [
    (Some("CLAUDE_CONFIG_DIR"), "", ".claude", AGENT_SETTINGS[0]),
    (Some("CODEX_HOME"), "", ".codex", AGENT_SETTINGS[1]),
    (None, "", ".gemini", AGENT_SETTINGS[2]),
    (Some("COPILOT_HOME"), "", ".copilot", AGENT_SETTINGS[3]),
    (None, "", ".cursor", AGENT_SETTINGS[4]),
    (
        Some("XDG_CONFIG_HOME"),
        "opencode",
        ".config/opencode",
        AGENT_SETTINGS[5],
    ),
];

/// Why hookhost may not append the hooks' `export` lines to `file` as the agent's
/// `CLAUDE_ENV_FILE` (`dispatch/env_forward.rs`): it is, or lies inside, a place hookhost
/// owns (its user config, data directory, trust store, audit log, compile cache, managed
/// policy, the project's `.hookhost/` …: lines appended there would be read as hookhost's
/// own config or state). The agents' settings directories hold the agent's real env files
/// (Claude Code's per-session ones), so inside them only a JSON or Markdown file (the
/// settings, credentials, `CLAUDE.md` the agent reads as config) is refused. The file is
/// compared as written and with its existing ancestors resolved.
pub fn agent_env_file_refusal(file: &Path, places: &[HostPlace]) -> Option<String> {
    let real = crate::policy::places::real_or_parent(
        file,
        crate::policy::ceiling::RealPath(crate::config::file::real_path),
    );
    let config_like = file
        .extension()
        .is_some_and(|e| e == "json" || e == "md" || e == "jsonl");
    places.iter().find_map(|place| {
        let inside = |path: &Path| path.starts_with(&place.path);
        if !(inside(file) || real.as_deref().is_some_and(inside)) {
            return None;
        }
        if AGENT_SETTINGS.contains(&place.what.as_str()) && !config_like {
            return None;
        }
        Some(format!(
            "CLAUDE_ENV_FILE `{}` is refused: it lies in {} (`{}`), which hookhost owns; \
             the hooks' exported variables do not reach the agent",
            crate::text::escape(&file.display().to_string()),
            place.what,
            place.path.display()
        ))
    })
}

/// Why `file`, the environment's `CLAUDE_ENV_FILE`, is not where Claude Code itself puts
/// it, or `None` when it is. Claude Code 2.1.332 creates one file per hook and event in
/// `<config dir>/session-env/<session id>/<event>-hook-<n>.sh`, the config dir being
/// `CLAUDE_CONFIG_DIR` or `~/.claude`, and sources it before each later Bash command; any
/// other path (`~/.bashrc`, `~/.profile`, a file the repository's `env` block named) would
/// carry the hooks' `export` lines past the session into every later shell. So the file
/// must be exactly two plain names below `session-env` of that config dir, as written and
/// with its existing ancestors resolved. Checked where the variable is read
/// ([`crate::HostBuilder::standard_sources`]), beside [`agent_env_file_refusal`]; an
/// embedder's explicit [`crate::HostBuilder::agent_env_file`] is its own choice. A
/// `CLAUDE_CONFIG_DIR` inside one of `workspaces` is a repository's word (its `env`
/// block), not Claude Code's config dir: ignored, as every path variable of the
/// environment is ([`config::env::check_path`]), so `~/.claude` is the layout.
pub fn claude_env_file_refusal(
    file: &Path,
    home: Option<&Path>,
    workspaces: &[PathBuf],
) -> Option<String> {
    let mut config_dirs: Vec<PathBuf> = Vec::new();
    config_dirs.extend(
        config::env::path_var("CLAUDE_CONFIG_DIR", workspaces)
            .ok()
            .flatten(),
    );
    if config_dirs.is_empty() {
        config_dirs.extend(home.map(|h| h.join(".claude")));
    }
    let real = crate::policy::ceiling::RealPath(crate::config::file::real_path);
    let pinned = |path: &Path, dir: &Path| {
        path.strip_prefix(dir.join("session-env"))
            .is_ok_and(|rest| {
                let parts: Vec<_> = rest.components().collect();
                parts.len() == 2
                    && parts
                        .iter()
                        .all(|c| matches!(c, std::path::Component::Normal(_)))
            })
    };
    let fits = config_dirs.iter().any(|dir| {
        let real_dir = crate::policy::places::real_or_parent(dir, real);
        // The directories resolved, the file's own name as written: a symlink there is
        // the no-follow open's to refuse (`dispatch/env_forward.rs`), by that name.
        let real_file = file
            .parent()
            .and_then(|parent| crate::policy::places::real_or_parent(parent, real))
            .zip(file.file_name())
            .map(|(parent, name)| parent.join(name));
        pinned(file, dir)
            && match (real_file, real_dir) {
                (Some(f), Some(d)) => pinned(&f, &d),
                _ => false,
            }
    });
    if fits {
        return None;
    }
    let expected = match config_dirs.first() {
        Some(dir) => format!("`{}/session-env/<session>/<file>`", dir.display()),
        None => "`$CLAUDE_CONFIG_DIR/session-env/<session>/<file>` (no home directory)".into(),
    };
    Some(format!(
        "CLAUDE_ENV_FILE `{}` is refused: it is not where Claude Code puts it ({}); the \
         hooks' exported variables do not reach the agent",
        crate::text::escape(&file.display().to_string()),
        crate::text::escape(&expected)
    ))
}
