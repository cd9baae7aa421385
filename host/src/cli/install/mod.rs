//! `hookhost install --claude|--codex [--user|--project [DIR]]` and `hookhost uninstall`:
//! make hookhost the one command hook of Claude Code (`settings.json`) or Codex
//! (`hooks.json`, the same shape), and take it out again.
//!
//! The file belongs to the user and to the agent, so it is edited the way a careful
//! person would: merged (every other key and hook kept, in their order), idempotent
//! (a drop-in that is there is not added twice), with a backup of the old file, written
//! atomically (a temporary file in the same directory, renamed over it, with the old
//! file's mode), and refused rather than rewritten lossily. hookhost refuses a file it
//! cannot round-trip: comments or trailing commas (not JSON), duplicate keys (one value
//! would be lost), a byte-order mark, text that is not UTF-8, a number that would change;
//! and a path it should not write through: a symlink (it could point anywhere, such as
//! the user settings from a repository's `.claude/`), a FIFO or device, a file above
//! the size cap, a file that changed while it was being edited.

use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};

use hookhost::config::file::{FileError, read_regular};
use hookhost::text::escape;

/// The largest settings file hookhost edits. Claude Code's are a few KiB.
const MAX_SETTINGS_BYTES: u64 = 4 << 20;

/// The command the drop-in runs, after the program.
const DISPATCH_ARGS: &str = "dispatch --format claude";

/// Events whose input has a tool name, so that their matcher group gets `"*"`.
const TOOL_EVENTS: &[&str] = &[
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
];

/// The events the drop-in handles in Claude Code.
const CLAUDE_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
];

/// The events Codex runs command hooks for (reference §2.2).
const CODEX_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Stop",
];

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("agent").required(true).args(["claude", "codex"]))]
#[command(group = clap::ArgGroup::new("scope").args(["user", "project", "file"]))]
pub struct InstallArgs {
    /// Claude Code: `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR`), or with `--project`
    /// the project's `.claude/settings.json`.
    #[arg(long)]
    claude: bool,
    /// Codex: `~/.codex/hooks.json` (`$CODEX_HOME`), or with `--project` the project's
    /// `.codex/hooks.json`.
    #[arg(long)]
    codex: bool,
    /// The user's settings, for every project (the default).
    #[arg(long)]
    user: bool,
    /// The settings of a project: DIR, or the project of the current directory.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    project: Option<Option<PathBuf>>,
    /// This settings file instead (for example the target of a symlinked one).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// The hook command to write (default: `hookhost dispatch --format claude`, with the
    /// absolute path of this binary when `hookhost` on the PATH is another one).
    #[arg(long, value_name = "CMD")]
    command: Option<String>,
    /// Show the change as a diff; write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Which agent's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agent {
    Claude,
    Codex,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Codex => "Codex",
        }
    }

    fn events(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => CLAUDE_EVENTS,
            Agent::Codex => CODEX_EVENTS,
        }
    }
}

impl InstallArgs {
    fn agent(&self) -> Agent {
        if self.codex {
            Agent::Codex
        } else {
            Agent::Claude
        }
    }

    /// The settings file to edit, and whether it is a project's (whose directory must
    /// not be a symlink either: a repository could point `.claude/` anywhere).
    fn target(&self) -> Result<(PathBuf, bool), String> {
        if let Some(file) = &self.file {
            return Ok((
                std::path::absolute(file).map_err(|e| format!("bad `--file`: {e}"))?,
                false,
            ));
        }
        let (dir_name, file_name) = match self.agent() {
            Agent::Claude => (".claude", "settings.json"),
            Agent::Codex => (".codex", "hooks.json"),
        };
        if let Some(project) = &self.project {
            let project = super::project::find(project.as_deref(), None)?;
            return Ok((project.join(dir_name).join(file_name), true));
        }
        let var = match self.agent() {
            Agent::Claude => "CLAUDE_CONFIG_DIR",
            Agent::Codex => "CODEX_HOME",
        };
        let dir = match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => directories::BaseDirs::new()
                .map(|d| d.home_dir().join(dir_name))
                .ok_or("cannot find your home directory; pass `--file`")?,
        };
        Ok((dir.join(file_name), false))
    }

    /// The hook command: `--command`, else `hookhost …` when the `hookhost` on the PATH
    /// is this binary, else this binary's absolute path, quoted for the shell.
    fn command(&self) -> Result<(String, Option<String>), String> {
        if let Some(command) = &self.command {
            return Ok((command.clone(), None));
        }
        let exe = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(|e| format!("cannot find this program's path ({e}); pass `--command`"))?;
        let on_path = std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("hookhost"))
                .find(|candidate| candidate.is_file())
        });
        if on_path.and_then(|p| p.canonicalize().ok()).as_ref() == Some(&exe) {
            return Ok((format!("hookhost {DISPATCH_ARGS}"), None));
        }
        let exe_text = exe.to_str().ok_or_else(|| {
            format!(
                "this program's path `{}` is not UTF-8; pass `--command`",
                escape(&exe.display().to_string())
            )
        })?;
        let note = format!(
            "`hookhost` on your PATH is not this binary, so the hook runs it by its path, {}; \
             after `cargo install --path host --locked` (or with `--command`) it can be plain \
             `hookhost`",
            escape(exe_text)
        );
        Ok((
            format!("{} {DISPATCH_ARGS}", shell_quote(exe_text)),
            Some(note),
        ))
    }
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Whether `command` is a drop-in `hookhost install` writes: the plain form, an absolute
/// path to a `hookhost` binary (quoted or not), or exactly `custom`.
fn is_installed_form(command: &str, custom: Option<&str>) -> bool {
    if custom.is_some_and(|c| c == command) {
        return true;
    }
    let Some(program) = command.strip_suffix(DISPATCH_ARGS) else {
        return false;
    };
    let Some(program) = program.strip_suffix(' ') else {
        return false;
    };
    if program == "hookhost" {
        return true;
    }
    let unquoted = program
        .strip_prefix('\'')
        .and_then(|p| p.strip_suffix('\''))
        .map(|p| p.replace(r"'\''", "'"))
        .unwrap_or_else(|| program.to_string());
    unquoted.starts_with('/') && Path::new(&unquoted).file_name() == Some("hookhost".as_ref())
}

/// Whether a handler already hands its events to hookhost (any form, including one the
/// user wrote, like `HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude`).
fn is_any_drop_in(command: &str, custom: Option<&str>) -> bool {
    is_installed_form(command, custom)
        || (command.contains("hookhost") && command.contains(DISPATCH_ARGS))
}

/// A settings file as read: its text, its parsed value, and what identifies the file.
struct Settings {
    path: PathBuf,
    /// `None`: the file does not exist yet.
    original: Option<Original>,
    value: Map<String, Value>,
}

struct Original {
    text: String,
    mode: u32,
    identity: (u64, u64, u64, i64, i64),
}

fn identity(meta: &std::fs::Metadata) -> (u64, u64, u64, i64, i64) {
    (
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
    )
}

/// Reads and checks the settings file at `path`.
fn read_settings(path: &Path, project_scope: bool) -> Result<Settings, String> {
    let shown = escape(&path.display().to_string()).into_owned();
    if let Some(dir) = path.parent()
        && project_scope
        && std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(format!(
            "`{}` is a symlink; hookhost does not write a project's settings through it (it \
             could lead anywhere, such as your user settings)",
            escape(&dir.display().to_string())
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            let target = std::fs::read_link(path)
                .map(|t| escape(&t.display().to_string()).into_owned())
                .unwrap_or_else(|_| "?".into());
            return Err(format!(
                "`{shown}` is a symlink (to `{target}`); hookhost does not write through it: \
                 pass the file it points to with `--file`, or edit it by hand"
            ));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Settings {
                path: path.to_path_buf(),
                original: None,
                value: Map::new(),
            });
        }
        Err(e) => return Err(format!("cannot read `{shown}`: {e}")),
    }
    let (bytes, meta) = read_regular(path, MAX_SETTINGS_BYTES).map_err(|e| match e {
        FileError::NotRegular(kind) => format!("`{shown}` is not a regular file (it is {kind})"),
        e => format!("cannot read `{shown}`: {e}"),
    })?;
    let refuse = |why: String| {
        format!(
            "`{shown}` {why}; hookhost does not rewrite a file it cannot keep exactly as it \
             is: add the drop-in by hand (see the README's \"Claude Code drop-in\")"
        )
    };
    let text = String::from_utf8(bytes).map_err(|e| refuse(format!("is not UTF-8 text ({e})")))?;
    if text.starts_with('\u{feff}') {
        return Err(refuse("starts with a byte-order mark".into()));
    }
    let mut value = if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str::<CheckedJson>(&text).map_err(|e| {
            refuse(format!(
                "is not plain JSON (comments and trailing commas are not JSON): {e}"
            ))
        })?;
        serde_json::from_str::<Value>(&text).map_err(|e| refuse(format!("is not JSON: {e}")))?
    };
    let Value::Object(map) = value.take() else {
        return Err(refuse("is not a JSON object".into()));
    };
    Ok(Settings {
        path: path.to_path_buf(),
        original: Some(Original {
            text,
            mode: meta.permissions().mode() & 0o7777,
            identity: identity(&meta),
        }),
        value: map,
    })
}

/// Validates JSON without keeping it: refuses duplicate keys (serde_json keeps the last
/// and drops the others) and integers too large to be kept exactly.
struct CheckedJson;

impl<'de> Deserialize<'de> for CheckedJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedJson)
    }
}

impl<'de> Visitor<'de> for CheckedJson {
    type Value = CheckedJson;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_i64<E>(self, _: i64) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_u64<E>(self, _: u64) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<CheckedJson, E> {
        // An integer beyond 64 bits arrives as a float and would be written back rounded.
        if v.fract() == 0.0 && v.abs() >= 9_007_199_254_740_992.0 {
            return Err(E::custom(format!(
                "the number {v} cannot be written back exactly"
            )));
        }
        Ok(CheckedJson)
    }
    fn visit_str<E>(self, _: &str) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_unit<E>(self) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CheckedJson, A::Error> {
        while seq.next_element::<CheckedJson>()?.is_some() {}
        Ok(CheckedJson)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CheckedJson, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "duplicate key `{}`",
                    escape(&key)
                )));
            }
            map.next_value::<CheckedJson>()?;
        }
        Ok(CheckedJson)
    }
}

/// The `hooks` object of the settings, checked to be Claude Code's shape where hookhost
/// looks: an object of arrays.
fn hooks_object<'a>(
    settings: &'a mut Map<String, Value>,
    shown: &str,
) -> Result<Option<&'a mut Map<String, Value>>, String> {
    match settings.get_mut("hooks") {
        None => Ok(None),
        Some(Value::Object(hooks)) => {
            for (event, groups) in hooks.iter() {
                if !groups.is_array() {
                    return Err(format!(
                        "`{shown}`: `hooks.{}` is not an array of matcher groups; fix it first",
                        escape(event)
                    ));
                }
            }
            Ok(Some(hooks))
        }
        Some(_) => Err(format!("`{shown}`: `hooks` is not an object; fix it first")),
    }
}

/// The commands of an event's handlers.
fn commands(groups: &Value) -> impl Iterator<Item = &str> {
    groups
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|group| group.get("hooks")?.as_array())
        .flatten()
        .filter(|h| h.get("type").and_then(Value::as_str) == Some("command"))
        .filter_map(|h| h.get("command")?.as_str())
}

/// Adds the drop-in for each event that has none; returns the events it was added to.
fn add_drop_in(
    settings: &mut Map<String, Value>,
    agent: Agent,
    command: &str,
    custom: Option<&str>,
    shown: &str,
) -> Result<Vec<&'static str>, String> {
    hooks_object(settings, shown)?;
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .expect("checked above");
    let mut added = Vec::new();
    for &event in agent.events() {
        if let Some(groups) = hooks.get(event)
            && commands(groups).any(|c| is_any_drop_in(c, custom))
        {
            continue;
        }
        let mut group = Map::new();
        if TOOL_EVENTS.contains(&event) {
            group.insert("matcher".into(), json!("*"));
        }
        group.insert(
            "hooks".into(),
            json!([{"type": "command", "command": command}]),
        );
        hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .expect("checked above")
            .push(Value::Object(group));
        added.push(event);
    }
    Ok(added)
}

/// Removes every drop-in handler `install` writes; matcher groups, events and the
/// `hooks` object that it leaves empty go too. Returns the events it was removed from.
fn remove_drop_in(
    settings: &mut Map<String, Value>,
    custom: Option<&str>,
    shown: &str,
) -> Result<Vec<String>, String> {
    let Some(hooks) = hooks_object(settings, shown)? else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    let mut emptied = Vec::new();
    for (event, groups) in hooks.iter_mut() {
        let groups = groups.as_array_mut().expect("checked by hooks_object");
        let before = groups.len();
        let mut touched = false;
        groups.retain_mut(|group| {
            let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                return true;
            };
            let count = handlers.len();
            handlers.retain(|h| {
                let ours = h.get("type").and_then(Value::as_str) == Some("command")
                    && h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|c| is_installed_form(c, custom));
                !ours
            });
            if handlers.len() == count {
                return true;
            }
            touched = true;
            !handlers.is_empty()
        });
        if touched {
            removed.push(event.clone());
        }
        if before > 0 && groups.is_empty() {
            emptied.push(event.clone());
        }
    }
    let had_events = !hooks.is_empty();
    for event in emptied {
        hooks.shift_remove(&event);
    }
    if had_events && hooks.is_empty() {
        settings.shift_remove("hooks");
    }
    Ok(removed)
}

/// The text of `value` as Claude Code writes its settings (`JSON.stringify(v, null, 2)`),
/// so that the parts hookhost did not touch keep their bytes.
fn render(value: &Map<String, Value>, trailing_newline: bool) -> Result<String, String> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    if trailing_newline {
        text.push('\n');
    }
    Ok(text)
}

/// Writes `text` to the settings file: a backup of the old file first, then a temporary
/// file in the same directory renamed over it, with the old file's mode (0600 for a new
/// one: settings can hold tokens). Refuses when the file changed since it was read.
fn write_settings(settings: &Settings, text: &str) -> Result<Option<PathBuf>, String> {
    use std::io::Write;
    let path = &settings.path;
    let shown = escape(&path.display().to_string()).into_owned();
    let dir = path
        .parent()
        .ok_or_else(|| format!("`{shown}` has no directory"))?;
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "cannot create `{}`: {e}",
            escape(&dir.display().to_string())
        )
    })?;
    let write_file = |target: &Path, bytes: &[u8], mode: u32| -> std::io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".hookhost-")
            .tempfile_in(dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))?;
        tmp.as_file().sync_all()?;
        tmp.persist(target).map_err(|e| e.error)?;
        Ok(())
    };
    let mode = settings.original.as_ref().map_or(0o600, |o| o.mode);
    let mut backup = None;
    if let Some(original) = &settings.original {
        let mut name = path.file_name().unwrap_or_default().to_owned();
        name.push(".hookhost-backup");
        let backup_path = dir.join(name);
        write_file(&backup_path, original.text.as_bytes(), original.mode)
            .map_err(|e| format!("cannot write the backup of `{shown}`: {e}"))?;
        backup = Some(backup_path);
    }
    let now = std::fs::symlink_metadata(path).ok();
    let unchanged = match (&settings.original, &now) {
        (None, None) => true,
        (Some(original), Some(meta)) => identity(meta) == original.identity,
        _ => false,
    };
    if !unchanged {
        return Err(format!(
            "`{shown}` changed while hookhost was editing it; nothing was written, run the \
             command again"
        ));
    }
    write_file(path, text.as_bytes(), mode).map_err(|e| format!("cannot write `{shown}`: {e}"))?;
    Ok(backup)
}

/// The change from `old` to `new` as a unified diff.
fn diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(path, &format!("{path} (after)"))
        .to_string()
}

/// `hookhost install`.
pub fn install(args: InstallArgs) -> Result<ExitCode, String> {
    let agent = args.agent();
    let (path, project_scope) = args.target()?;
    let (command, note) = args.command()?;
    let shown = escape(&path.display().to_string()).into_owned();
    let mut settings = read_settings(&path, project_scope)?;
    let added = add_drop_in(
        &mut settings.value,
        agent,
        &command,
        args.command.as_deref(),
        &shown,
    )?;
    if added.is_empty() {
        outln!(
            "{shown} already hands every event to hookhost ({}); nothing changed",
            agent.name()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let old = settings.original.as_ref().map_or("", |o| o.text.as_str());
    let new = render(&settings.value, old.is_empty() || old.ends_with('\n'))?;
    if args.dry_run {
        out!("{}", escape_diff(&diff(&shown, old, &new)));
        outln!("(dry run: nothing written)");
        return Ok(ExitCode::SUCCESS);
    }
    let backup = write_settings(&settings, &new)?;
    outln!(
        "installed the hookhost drop-in in {shown} ({}), for {}",
        agent.name(),
        added.join(", ")
    );
    outln!("  command: {}", escape(&command));
    if let Some(backup) = backup {
        outln!(
            "  the previous file is in {}",
            escape(&backup.display().to_string())
        );
    }
    if let Some(note) = note {
        outln!("  note: {note}");
    }
    outln!(
        "next: put hooks in a project's .hookhost/hooks.json and run `hookhost trust` there; \
         until then its hooks do not run and {} shows a message saying so",
        agent.name()
    );
    Ok(ExitCode::SUCCESS)
}

/// `hookhost uninstall`.
pub fn uninstall(args: InstallArgs) -> Result<ExitCode, String> {
    let agent = args.agent();
    let (path, project_scope) = args.target()?;
    let shown = escape(&path.display().to_string()).into_owned();
    let mut settings = read_settings(&path, project_scope)?;
    let Some(original) = &settings.original else {
        outln!("{shown} does not exist; nothing to remove");
        return Ok(ExitCode::SUCCESS);
    };
    let removed = remove_drop_in(&mut settings.value, args.command.as_deref(), &shown)?;
    if removed.is_empty() {
        outln!(
            "{shown} has no hookhost drop-in ({}); nothing changed",
            agent.name()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let old = original.text.as_str();
    let new = render(&settings.value, old.ends_with('\n'))?;
    if args.dry_run {
        out!("{}", escape_diff(&diff(&shown, old, &new)));
        outln!("(dry run: nothing written)");
        return Ok(ExitCode::SUCCESS);
    }
    let backup = write_settings(&settings, &new)?;
    outln!(
        "removed the hookhost drop-in from {shown} ({}), for {}",
        agent.name(),
        removed.join(", ")
    );
    if let Some(backup) = backup {
        outln!(
            "  the previous file is in {}",
            escape(&backup.display().to_string())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A diff for the terminal: each line escaped (the file's strings are JSON-escaped
/// already, but its keys and any raw bytes are the user's).
fn escape_diff(diff: &str) -> String {
    diff.lines()
        .map(|line| escape(line).into_owned() + "\n")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn installed_forms_are_recognised() {
        for ours in [
            "hookhost dispatch --format claude",
            "/usr/local/bin/hookhost dispatch --format claude",
            "'/home/a b/.cargo/bin/hookhost' dispatch --format claude",
        ] {
            assert!(is_installed_form(ours, None), "{ours}");
        }
        for theirs in [
            "HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude",
            "./hookhost-wrapper dispatch --format claude",
            "hookhost dispatch --format claude; rm -rf ~",
            "echo hookhost dispatch --format claude",
        ] {
            assert!(!is_installed_form(theirs, None), "{theirs}");
        }
        assert!(is_any_drop_in(
            "HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude",
            None
        ));
        assert!(is_installed_form("my-hook", Some("my-hook")));
    }

    #[test]
    fn shell_quoting_keeps_one_word() {
        assert_eq!(shell_quote("/usr/bin/hookhost"), "/usr/bin/hookhost");
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
        assert!(is_installed_form(
            &format!("{} {DISPATCH_ARGS}", shell_quote("/a b/it's/hookhost")),
            None
        ));
    }

    #[test]
    fn install_then_uninstall_gives_back_the_same_bytes() {
        let original = "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\n        \"matcher\": \"Bash\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"./guard.sh\"\n          }\n        ]\n      }\n    ]\n  },\n  \"env\": {\n    \"A\": \"1\"\n  }\n}\n";
        let mut value = parse(original);
        assert_eq!(render(&value, true).unwrap(), original, "round trip");
        let added = add_drop_in(
            &mut value,
            Agent::Claude,
            "hookhost dispatch --format claude",
            None,
            "f",
        )
        .unwrap();
        assert_eq!(added, CLAUDE_EVENTS);
        // The user's hook and keys are kept, in their order.
        let keys: Vec<&String> = value.keys().collect();
        assert_eq!(keys, ["model", "hooks", "env"]);
        assert_eq!(
            value["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "./guard.sh"
        );
        assert_eq!(value["hooks"]["PreToolUse"][1]["matcher"], "*");
        assert!(value["hooks"]["Stop"][0].get("matcher").is_none());
        // Idempotent.
        assert!(
            add_drop_in(
                &mut value,
                Agent::Claude,
                "hookhost dispatch --format claude",
                None,
                "f"
            )
            .unwrap()
            .is_empty()
        );
        let removed = remove_drop_in(&mut value, None, "f").unwrap();
        assert_eq!(removed.len(), CLAUDE_EVENTS.len());
        assert_eq!(render(&value, true).unwrap(), original);
    }

    #[test]
    fn uninstall_keeps_handlers_it_did_not_write() {
        let mut value = parse(
            r#"{"hooks": {"Stop": [{"hooks": [
                {"type": "command", "command": "hookhost dispatch --format claude"},
                {"type": "command", "command": "./mine.sh"}]}],
              "PreToolUse": [{"matcher": "*", "hooks": [
                {"type": "command", "command": "HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude"}]}]}}"#,
        );
        let removed = remove_drop_in(&mut value, None, "f").unwrap();
        assert_eq!(removed, ["Stop"]);
        assert_eq!(
            Value::Object(value),
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./mine.sh"}]}],
                   "PreToolUse": [{"matcher": "*", "hooks": [
                     {"type": "command", "command": "HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude"}]}]}})
        );
    }

    #[test]
    fn what_cannot_round_trip_is_refused() {
        for bad in [
            "{\"a\": 1, \"a\": 2}",
            "{\"a\": {\"b\": 1, \"b\": 1}}",
            "{\"n\": 123456789012345678901234567890}",
            "{\"a\": 1,}",
            "{// comment\n\"a\": 1}",
        ] {
            assert!(serde_json::from_str::<CheckedJson>(bad).is_err(), "{bad}");
        }
        for good in ["{\"a\": [1, 2.5, -3, 1e3, null, true, \"x\"]}", "{}", "[]"] {
            assert!(serde_json::from_str::<CheckedJson>(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn a_wrong_shape_is_refused_not_replaced() {
        let mut value = parse(r#"{"hooks": []}"#);
        let e = add_drop_in(&mut value, Agent::Codex, "x", None, "f").unwrap_err();
        assert!(e.contains("`hooks` is not an object"), "{e}");
        let mut value = parse(r#"{"hooks": {"Stop": {}}}"#);
        let e = add_drop_in(&mut value, Agent::Codex, "x", None, "f").unwrap_err();
        assert!(e.contains("`hooks.Stop`"), "{e}");
    }
}
