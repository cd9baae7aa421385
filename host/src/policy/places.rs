//! Host-owned places are out of every grant: the pure half of the chokepoint.
//!
//! hookhost trusts some files and directories with its own safety: its config, its data
//! (trust store, sessions, audit log, env files), managed policy, the compile cache (native
//! code and the key that authenticates it), the plugin files and their signatures, the
//! agents' settings that run hookhost (and would run anything else written there), and the
//! project's own hook files. [`crate::host_owned_places`] (in `host/places.rs`, where I/O
//! is allowed) lists them; [`refuse`] is the one rule a directory grant must pass, at build
//! ([`super::resolve`], for every hook of every source) and again when the sandbox opens
//! the grant's directory (`handlers/wasm/grants.rs`, on the real path of the opened
//! handle). A grant that **is**, **contains** or **lies inside** a host-owned place is
//! refused, naming both.
//!
//! Two levels, because the two kinds of place leak differently:
//! - [`Guard::Any`] (the default, and what any new place gets unless it is shown to be
//!   public): no grant at all, read-only included. Reading the user config, the data
//!   directory or the agent's user settings leaks the trust store, session state, env
//!   files, credentials and keys as surely as writing them takes the host over.
//! - [`Guard::Write`]: no read-write grant. For places whose content is public to the
//!   plugin anyway: the project's `.hookhost/`, `.claude/` and `.codex/` (repository
//!   content, inside the `${workspace}` that a plugin is routinely granted read-only),
//!   managed policy (world-readable by design, every user's hookhost reads it), and the
//!   plugin files and signatures (their bytes are what is being run). Writing any of
//!   them is the known attack (a hook or a plugin of the attacker's choosing runs next).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ceiling::RealPath;

/// Which grants a host-owned place refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Guard {
    /// Every grant, read-only or read-write.
    Any,
    /// Read-write grants (read-only ones may reach it: its content is public).
    Write,
}

/// A place hookhost trusts with its own safety.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPlace {
    /// Where it is (absolute; it may not exist yet: a grant over where it would be
    /// created is refused as well).
    pub path: PathBuf,
    /// What it is, for messages (`the trust store`, `the user config`).
    pub what: String,
    /// Which grants it refuses.
    pub guard: Guard,
}

impl HostPlace {
    /// A place of `guard` level.
    pub fn new(path: impl Into<PathBuf>, what: impl Into<String>, guard: Guard) -> HostPlace {
        HostPlace {
            path: path.into(),
            what: what.into(),
            guard,
        }
    }

    /// Whether a grant (read-write when `write`) is held to this place.
    pub fn guards(&self, write: bool) -> bool {
        write || self.guard == Guard::Any
    }
}

/// Names that make a directory host-owned wherever it is, below any grant as much as at
/// the project's top: what they hold is run or believed natively by git, hookhost or an
/// agent (a nested repository's `.git/config` sets `core.fsmonitor`, a nested
/// `.claude/settings.json` adds hooks). No guest may create, write, rename, link or
/// remove a path with a component of one of these names ([`owned_by_name`]), and no
/// read-write grant may have one on its path. [`crate::host_owned_places`] lists the
/// project's own from here.
pub const OWNED_DIR_NAMES: &[(&str, &str)] = &[
    (".hookhost", "hook files (hooks and plugins hookhost runs)"),
    (".claude", "Claude Code settings (hooks Claude Code runs)"),
    (".codex", "Codex settings (hooks Codex runs)"),
    (".gemini", "Gemini CLI settings (hooks Gemini CLI runs)"),
    (".cursor", "Cursor settings (hooks Cursor runs)"),
    (
        ".opencode",
        "OpenCode's plugins (JavaScript OpenCode runs in process)",
    ),
    (
        ".github",
        "GitHub settings (hooks Copilot CLI runs, workflows CI runs)",
    ),
    (
        ".git",
        "a git directory (hooks and config git runs natively)",
    ),
];

/// File names the agents read as instructions wherever they are (a nested `CLAUDE.md` is
/// read when the agent works in its directory), and git's `HEAD`, the one file without
/// which no directory is a git directory: no guest may create, write, rename, link or
/// remove one.
pub const OWNED_FILE_NAMES: &[(&str, &str)] = &[
    ("CLAUDE.md", "instructions Claude Code reads"),
    ("CLAUDE.local.md", "private instructions Claude Code reads"),
    ("AGENTS.md", "instructions Codex reads"),
    (
        "hookhost.lock",
        "the project's plugin pins (the digests its `oci://` plugins run at)",
    ),
    (
        "HEAD",
        "a git HEAD (beside `objects/` and `refs/` it makes its directory a git directory, \
         whatever its name, and git runs that directory's config)",
    ),
];

/// Private files that live inside public places: the user's local settings, which may
/// hold tokens and are not committed. A read-only grant may contain them (the
/// `${workspace}` a plugin is routinely granted does), but the guest never sees them:
/// opening, stat-ing, linking or renaming one answers "no such file", and directory
/// listings leave them out ([`private_by_name`]). Each is (directory name, file name),
/// wherever that directory is.
pub const PRIVATE_FILES: &[(&str, &str, &str)] = &[
    (
        ".claude",
        "settings.local.json",
        "Claude Code's local settings",
    ),
    (
        ".hookhost",
        "hooks.local.json",
        "hookhost's local hook file",
    ),
];

/// What `path` (absolute, symlinks resolved) is by its names: a component named in
/// [`OWNED_DIR_NAMES`], or a last component named in [`OWNED_FILE_NAMES`]. Names are
/// compared as a case-insensitive filesystem compares them ([`folded`]): on casefolded
/// ext4, vfat, NTFS or a shared folder, `.GIT/config` is `.git/config`, `hookhoſt.lock`
/// (a long s) is `hookhost.lock`, and `.git.` is `.git` on vfat.
pub fn owned_by_name(path: &Path) -> Option<&'static str> {
    let names = || path.components().filter_map(|c| c.as_os_str().to_str());
    for name in names() {
        let name = folded(name);
        if let Some((_, what)) = OWNED_DIR_NAMES.iter().find(|(n, _)| folded(n) == name) {
            return Some(what);
        }
    }
    let last = folded(path.file_name()?.to_str()?);
    OWNED_FILE_NAMES
        .iter()
        .find(|(n, _)| folded(n) == last)
        .map(|(_, what)| *what)
}

/// `name` as the case-insensitive filesystems hookhost may run on compare it, as far as
/// the owned and private names go (red team, stop 37: only ASCII case was folded): ASCII
/// lowercase; the characters whose Unicode case folding is ASCII letters (ext4's casefold
/// is NFD plus full case folding: `ſ` is `s`, the Kelvin sign `k`, the ligatures `ﬆ`
/// and `ﬁ` two letters); default-ignorable characters dropped (older kernels' casefold
/// ignored them); and trailing dots and spaces dropped (vfat strips them).
pub fn folded(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '\u{17f}' => out.push('s'),
            '\u{212a}' => out.push('k'),
            '\u{fb00}' => out.push_str("ff"),
            '\u{fb01}' => out.push_str("fi"),
            '\u{fb02}' => out.push_str("fl"),
            '\u{fb03}' => out.push_str("ffi"),
            '\u{fb04}' => out.push_str("ffl"),
            '\u{fb05}' | '\u{fb06}' => out.push_str("st"),
            // Default-ignorable code points.
            '\u{ad}'
            | '\u{34f}'
            | '\u{61c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}' => {}
            c => out.push(c.to_ascii_lowercase()),
        }
    }
    let kept = out.trim_end_matches(['.', ' ']).len();
    out.truncate(kept);
    out
}

/// What `path` (absolute, symlinks resolved) is if it is a private file ([`PRIVATE_FILES`])
/// or lies inside one; names compared as [`owned_by_name`] compares them ([`folded`]).
pub fn private_by_name(path: &Path) -> Option<&'static str> {
    let names: Vec<&str> = path
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .collect();
    names.windows(2).find_map(|pair| {
        PRIVATE_FILES
            .iter()
            .find(|(dir, file, _)| {
                folded(pair[0]) == folded(dir) && folded(pair[1]) == folded(file)
            })
            .map(|(_, _, what)| *what)
    })
}

/// The host-owned places a policy's grants are checked against.
pub type HostPlaces = Arc<Vec<HostPlace>>;

/// How `grant` stands to `place`, both absolute paths compared by components: `is`,
/// `contains` or `lies inside`; `None` when neither is within the other.
pub fn relation(grant: &Path, place: &Path) -> Option<&'static str> {
    if grant == place {
        Some("is")
    } else if place.starts_with(grant) {
        Some("contains")
    } else if grant.starts_with(place) {
        Some("lies inside")
    } else {
        None
    }
}

/// `path` with its longest existing ancestor resolved by `real` and the rest as written:
/// where a place that does not exist yet would be created.
pub fn real_or_parent(path: &Path, real: RealPath) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut cursor = path;
    loop {
        if let Some(found) = (real.0)(cursor) {
            let mut out = found;
            out.extend(rest.iter().rev());
            return Some(out);
        }
        rest.push(cursor.file_name()?);
        cursor = cursor.parent()?;
    }
}

/// Why a directory grant may not be made: it is, contains or lies inside a host-owned
/// place. `grant` is the grant as written (`${home}/.config`), `expanded` after `${…}`
/// expansion; both it and each place are compared as written and with symlinks resolved
/// by `real` (the sandbox repeats the check on the opened directory, so a symlink made
/// after the build is caught there).
pub fn refuse(
    grant: &str,
    expanded: &Path,
    write: bool,
    places: &[HostPlace],
    real: RealPath,
) -> Option<String> {
    Guarded::new(places, real).refuse(grant, expanded, write)
}

/// Host-owned places, each compared as written and resolved by `real`
/// ([`real_or_parent`]), resolved at the first grant checked (most resolutions have
/// none) and kept for the rest.
pub struct Guarded<'a> {
    places: &'a [HostPlace],
    real: RealPath,
    paths: std::cell::OnceCell<Vec<Vec<PathBuf>>>,
}

impl<'a> Guarded<'a> {
    /// `places`, to be resolved by `real`.
    pub fn new(places: &'a [HostPlace], real: RealPath) -> Guarded<'a> {
        Guarded {
            places,
            real,
            paths: std::cell::OnceCell::new(),
        }
    }

    /// [`refuse`], with each place resolved once.
    pub fn refuse(&self, grant: &str, expanded: &Path, write: bool) -> Option<String> {
        let paths = self.paths.get_or_init(|| {
            let resolve = |place: &HostPlace| {
                let mut paths = vec![place.path.clone()];
                paths.extend(real_or_parent(&place.path, self.real));
                paths
            };
            self.places.iter().map(resolve).collect()
        });
        refuse_resolved(grant, expanded, write, self.places, paths, self.real)
    }
}

fn refuse_resolved(
    grant: &str,
    expanded: &Path,
    write: bool,
    places: &[HostPlace],
    place_paths: &[Vec<PathBuf>],
    real: RealPath,
) -> Option<String> {
    let mut grant_paths = vec![expanded.to_path_buf()];
    grant_paths.extend(real_or_parent(expanded, real));
    for (place, place_paths) in places.iter().zip(place_paths) {
        if !place.guards(write) {
            continue;
        }
        for g in &grant_paths {
            for p in place_paths {
                if let Some(how) = relation(g, p) {
                    return Some(message(grant, g, write, how, place));
                }
            }
        }
    }
    if write {
        for g in &grant_paths {
            if let Some(what) = owned_by_name(g) {
                return Some(format!(
                    "`{grant}` (rw) reaches {what} at `{}`, host-owned by its name wherever \
                     it is: no read-write grant may reach it",
                    g.display()
                ));
            }
        }
    }
    None
}

/// The refusal, naming the grant (as written, and where it resolved when that differs)
/// and the place.
pub fn message(grant: &str, at: &Path, write: bool, how: &str, place: &HostPlace) -> String {
    let shown = if Path::new(grant) == at {
        format!("`{grant}`")
    } else {
        format!("`{grant}` (`{}`)", at.display())
    };
    let (mode, rule) = match (write, place.guard) {
        (_, Guard::Any) => (
            if write { "rw" } else { "ro" },
            "no grant may reach it, read-only or read-write",
        ),
        (_, Guard::Write) => ("rw", "no read-write grant may reach it"),
    };
    format!(
        "{shown} ({mode}) {how} {} `{}`, a place hookhost owns: {rule}",
        place.what,
        place.path.display()
    )
}

/// The files a command hook names (`tools/check.sh`, `${CLAUDE_PROJECT_DIR}/hooks/x`,
/// `python3 ./lint.py`): every word of its command (and exec-form arguments) that holds a
/// `/`, with the project placeholders substituted and a relative one taken against the
/// project, as the runner takes it. The host runs them natively on the next event, so no
/// grant may write them ([`Guard::Write`], added by [`super::resolve`]). Words are split at
/// blanks and shell operators, quotes dropped: a command hook's arguments are scripts,
/// configs and data as often as its program, and refusing a write grant over a data file is the safe
/// side. The project itself and the places above it are never taken (`cd
/// "$CLAUDE_PROJECT_DIR"` would otherwise refuse every write grant in the workspace).
pub fn command_files(command: &str, args: Option<&[String]>, project: &Path) -> Vec<PathBuf> {
    const PLACEHOLDERS: [&str; 4] = [
        "${CLAUDE_PROJECT_DIR}",
        "${HOOKHOST_PROJECT_DIR}",
        "$CLAUDE_PROJECT_DIR",
        "$HOOKHOST_PROJECT_DIR",
    ];
    let project_text = project.to_string_lossy();
    let mut out = Vec::new();
    for text in std::iter::once(command).chain(args.into_iter().flatten().map(String::as_str)) {
        let mut text = text.to_owned();
        for placeholder in PLACEHOLDERS {
            // A mark while splitting: the project's path may hold blanks.
            text = text.replace(placeholder, "\u{1}");
        }
        // Quotes and backslashes join the parts of one shell word: dropped, not split.
        let unquoted: String = text.chars().filter(|c| !"'\"\\".contains(*c)).collect();
        for word in unquoted.split(|c: char| c.is_whitespace() || "`;|&()<>=".contains(c)) {
            let word = word.replace('\u{1}', &project_text);
            if !word.contains('/') {
                continue;
            }
            let path = project.join(word);
            if project.starts_with(&path) || path == Path::new("/") {
                continue;
            }
            out.push(path);
        }
    }
    out
}

#[cfg(test)]
mod tests {

    /// Red team, stop 37: names were compared without ASCII case only; a case-insensitive
    /// filesystem folds more (ext4's casefold: full Unicode folding; vfat: trailing dots).
    #[test]
    fn owned_and_private_names_are_compared_as_a_casefolding_filesystem_does() {
        for owned in [
            "/w/hookhoſt.lock",
            "/w/HOOKHO\u{fb06}.LOCK",
            "/w/hookhost.lock.",
            "/w/hookhost.lock ",
            "/w/hook\u{200d}host.lock",
            "/w/.hoo\u{212a}host/hooks.json",
            "/w/.git./config",
            "/w/.g\u{fe0f}it/config",
            "/w/CLAUDE.md..",
            "/w/sub/HEAD.",
        ] {
            assert!(owned_by_name(Path::new(owned)).is_some(), "{owned}");
        }
        for free in [
            "/w/hookhost.locks",
            "/w/ghost.lock",
            "/w/.gitx/config",
            "/w/HEADS",
        ] {
            assert_eq!(owned_by_name(Path::new(free)), None, "{free}");
        }
        assert!(private_by_name(Path::new("/w/.clau\u{200b}de/settings.local.json.")).is_some());
    }

    use super::*;

    fn places() -> Vec<HostPlace> {
        vec![
            HostPlace::new("/h/.config/hookhost", "the user config", Guard::Any),
            HostPlace::new("/w/.hookhost", "the project's hook files", Guard::Write),
        ]
    }

    #[test]
    fn equal_containing_and_inside_are_refused_by_level() {
        let none = RealPath::default();
        for (grant, write, refused) in [
            ("/h/.config/hookhost", false, Some("is")),
            ("/h/.config", true, Some("contains")),
            ("/", false, Some("contains")),
            ("/h/.config/hookhost/plugins", false, Some("lies inside")),
            ("/h/.config/other", true, None),
            ("/h/.config/hookhostx", true, None),
            ("/w", false, None),
            ("/w", true, Some("contains")),
            ("/w/.hookhost/plugins", true, Some("lies inside")),
            ("/w/src", true, None),
        ] {
            let got = refuse(grant, Path::new(grant), write, &places(), none);
            match refused {
                None => assert_eq!(got, None, "{grant} {write}"),
                Some(how) => {
                    let got = got.unwrap_or_else(|| panic!("{grant} {write} not refused"));
                    assert!(got.contains(&format!(" {how} ")), "{got}");
                }
            }
        }
    }

    #[test]
    fn owned_and_private_names_are_found_wherever_they_are() {
        for (path, owned) in [
            ("/w/src/.git/config", true),
            ("/w/src/.git", true),
            ("/w/a/.claude/settings.json", true),
            ("/w/a/.hookhost", true),
            ("/w/a/.codex/x", true),
            ("/w/a/CLAUDE.md", true),
            ("/w/a/AGENTS.md", true),
            ("/w/a/CLAUDE.md.bak", false),
            ("/w/a/.gitignore", false),
            ("/w/a/git/config", false),
            // Copilot CLI's project hooks live in `.github/hooks/` (and CI runs the
            // workflows beside them): host-owned since stop 37, as the other agents'.
            ("/w/a/.github/workflows/ci.yml", true),
            ("/w/a/.github/hooks/hookhost.json", true),
            ("/w/a/.gemini/settings.json", true),
            ("/w/a/.cursor/hooks.json", true),
            ("/w/a/.opencode/plugins/hookhost.js", true),
            ("/w/a/github/hooks", false),
            ("/w/a/.geminirc", false),
        ] {
            assert_eq!(owned_by_name(Path::new(path)).is_some(), owned, "{path}");
        }
        for (dir, file, _) in PRIVATE_FILES {
            let path = PathBuf::from("/w/deep").join(dir).join(file);
            assert!(private_by_name(&path).is_some(), "{}", path.display());
            assert!(private_by_name(&path.join("x")).is_some());
            assert!(private_by_name(&PathBuf::from("/w").join(file)).is_none());
        }
        assert!(private_by_name(Path::new("/w/.claude/settings.json")).is_none());
        // A read-write grant with an owned name on its path is refused at build.
        let none = RealPath::default();
        let got = refuse(
            "${workspace}/src/.git",
            Path::new("/w/src/.git"),
            true,
            &[],
            none,
        );
        assert!(got.unwrap().contains("a git directory"));
        assert_eq!(
            refuse("/w/src/.git", Path::new("/w/src/.git"), false, &[], none),
            None
        );
    }

    #[test]
    fn the_files_a_command_hook_names_are_its_words_with_a_slash() {
        let p = Path::new("/w");
        assert_eq!(
            command_files(
                "sh tools/check.sh && \"${CLAUDE_PROJECT_DIR}\"/hooks/x --cfg=./c.toml; cd $CLAUDE_PROJECT_DIR",
                Some(&["/opt/bin/y".to_string()]),
                p
            ),
            [
                "/w/tools/check.sh",
                "/w/hooks/x",
                "/w/./c.toml",
                "/opt/bin/y"
            ]
            .map(PathBuf::from)
            .to_vec()
        );
        assert!(command_files("ls / >/dev/null", None, p) == vec![PathBuf::from("/dev/null")]);
    }

    #[test]
    fn places_and_grants_are_compared_after_symlinks() {
        // `/link` resolves to `/h`; `/h/.config/hookhost` does not exist yet.
        let real = RealPath(|p| {
            if p == Path::new("/link") || p == Path::new("/h") {
                Some(PathBuf::from("/h"))
            } else if p == Path::new("/") {
                Some(PathBuf::from("/"))
            } else {
                None
            }
        });
        let got = refuse("/link", Path::new("/link"), false, &places(), real).unwrap();
        assert!(
            got.contains("`/link` (`/h`) (ro) contains the user config"),
            "{got}"
        );
        assert_eq!(
            real_or_parent(Path::new("/link/.config/hookhost"), real),
            Some(PathBuf::from("/h/.config/hookhost"))
        );
    }
}
