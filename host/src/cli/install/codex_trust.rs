//! Codex 0.171 runs a command hook only once it is trusted: it keeps a `trusted_hash` per
//! hook in its `config.toml` (`[hooks.state."<hooks.json>:<event>:<group>:<handler>"]`),
//! set when the user approves the hook in the TUI's `/hooks`, and skips an untrusted hook
//! without a word.
//!
//! `install --codex` writes those entries the way Codex itself computes them: it asks the
//! user's own `codex` (the one on the PATH) through its app server's `hooks/list`, which
//! answers each hook's key, command, source file, `currentHash` and trust status, and
//! trusts exactly the hooks that are hookhost's drop-in in the file it just wrote. The
//! hash is Codex's, so a Codex that hashes differently tomorrow still gets its own
//! answer; hookhost never reimplements it. Without a `codex` on the PATH (or when it does
//! not answer), `install` says exactly what to approve, and `hookhost hooks` / `validate`
//! warn while a drop-in has no trust entry. `uninstall --codex` removes the entries of
//! the drop-ins it removes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toml_edit::{DocumentMut, Item, Table};

use hookhost::text::escape;

use super::settings::{read_text, write_settings};

/// The most of `hooks.json` and `config.toml` read.
const CAP: u64 = 4 << 20;
/// The most of the app server's output read.
const ANSWER_CAP: u64 = 16 << 20;
/// How long the app server may take to list the hooks.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// Codex's name of an event in a trust key (`PreToolUse` → `pre_tool_use`).
fn snake(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Each command handler in the Codex hooks file `value`: its event, Codex's position of
/// it after the file's path in a trust key (`:pre_tool_use:1:0`), its matcher group and
/// the handler.
fn handlers(value: &Value) -> Vec<(&str, String, &Value, &Value)> {
    let mut found = Vec::new();
    let Some(hooks) = value.get("hooks").and_then(Value::as_object) else {
        return found;
    };
    for (event, groups) in hooks {
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            for (h, handler) in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                found.push((
                    event.as_str(),
                    format!(":{}:{g}:{h}", snake(event)),
                    group,
                    handler,
                ));
            }
        }
    }
    found
}

/// The trust keys of hookhost's drop-ins (`custom`: the `--command` one) in the Codex
/// hooks file `path` (its JSON `value`): `(event, key)`.
pub(super) fn drop_in_keys(
    path: &Path,
    value: &Value,
    custom: Option<&str>,
) -> Vec<(String, String)> {
    handlers(value)
        .into_iter()
        .filter(|(_, _, _, handler)| {
            let command = handler.get("command").and_then(Value::as_str);
            command.is_some_and(|c| super::drop_in::is_installed_form(c, custom))
        })
        .map(|(event, at, _, _)| (event.to_string(), format!("{}{at}", path.display())))
        .collect()
}

/// The trust keys of hookhost's drop-ins in the Codex hooks file `path` ([`drop_in_keys`])
/// under each name Codex may give the file: the path, and its canonical path (Codex
/// resolves `$CODEX_HOME`, so a `~/.codex` that is a link has its keys under the link's
/// target); for `uninstall`, which removes both.
pub(super) fn keys_by_every_name(
    path: &Path,
    value: &Value,
    custom: Option<&str>,
) -> Vec<(String, String)> {
    let mut keys = drop_in_keys(path, value, custom);
    if let Ok(canonical) = path.canonicalize()
        && canonical != path
    {
        keys.extend(drop_in_keys(&canonical, value, custom));
    }
    keys
}

/// The positions (`:event:group:handler`) in the Codex hooks file `value` of the
/// handlers that are exactly the drop-in `install` writes for `command`: `{"type":
/// "command", "command": COMMAND}` and nothing else (no `async`, `timeout`,
/// `statusMessage`), in a group whose matcher, if any, is every tool (`*`), under an event
/// `install` writes ([`super::CODEX_EVENTS`]). A handler
/// running that command another way (a repository's asynchronous one, or one behind a
/// matcher no tool has, which would look installed and guard nothing) is not one.
fn exact_drop_ins(value: &Value, command: &str) -> Vec<String> {
    let drop_in = json!({"type": "command", "command": command});
    handlers(value)
        .into_iter()
        // Only under the events `install` writes: another spelling (`preToolUse`) has
        // the same position in a key (`:pre_tool_use:0:0`) as the real event's first
        // hook, whatever that is.
        .filter(|(event, _, _, _)| super::CODEX_EVENTS.contains(event))
        .filter(|(_, _, group, handler)| {
            let group_is_plain = group.as_object().is_some_and(|g| {
                g.keys().all(|k| k == "hooks" || k == "matcher")
                    && g.get("matcher").is_none_or(|m| m == "*")
            });
            **handler == drop_in && group_is_plain
        })
        .map(|(_, at, _, _)| at)
        .collect()
}

/// Whether Codex's config text has a `trusted_hash` for `key`.
fn has_trust(config: &str, key: &str) -> bool {
    config.parse::<DocumentMut>().is_ok_and(|doc| {
        doc.get("hooks")
            .and_then(|h| h.get("state"))
            .and_then(|s| s.get(key))
            .and_then(|t| t.get("trusted_hash"))
            .is_some_and(|h| h.is_str())
    })
}

fn read(path: &Path) -> Option<String> {
    let (bytes, _) = hookhost::config::file::read_regular(path, CAP).ok()?;
    String::from_utf8(bytes).ok()
}

/// The text `install --codex` prints when it could not trust the drop-in in
/// `hooks_json` (`why`): what the user must approve for Codex to run it.
fn approve_text(hooks_json: &Path, custom: Option<&str>, why: &str) -> String {
    let value = read(hooks_json)
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let keys: Vec<String> = drop_in_keys(hooks_json, &value, custom)
        .into_iter()
        .map(|(event, key)| format!("    {} ({})", escape(&event), escape(&key)))
        .collect();
    format!(
        "  Codex skips a hook it has not trusted, without a word, and hookhost could not \
         trust this one ({why}): start `codex`, type `/hooks`, and approve the hookhost \
         hook of each event:\n{}\n  (`hookhost validate` warns until each has a trust entry \
         in config.toml)",
        keys.join("\n")
    )
}

/// Codex's directory: `$CODEX_HOME`, else `~/.codex`. A `$CODEX_HOME` hookhost refuses
/// (relative, or in the workspace: a repository's) is an error, never `~/.codex` in its
/// place: the `codex` asked and the user's Codex read `$CODEX_HOME`, so trust written to
/// `~/.codex/config.toml` would be trust in a file neither reads.
fn codex_home() -> Result<PathBuf, String> {
    let workspaces = hookhost::config::env::workspaces_of(None);
    let refused = |why: String| why.replace("; the default is used", "");
    match hookhost::config::env::path_var("CODEX_HOME", &workspaces).map_err(refused)? {
        Some(dir) => Ok(dir),
        None => hookhost::config::env::home_dir()
            .map(|h| h.join(".codex"))
            .ok_or_else(|| "cannot find Codex's directory".to_string()),
    }
}

/// A hook as Codex's app server lists it.
struct Listed {
    key: String,
    command: String,
    /// `sourcePath`, as Codex wrote it (the start of its keys).
    source: String,
    hash: String,
    trusted: bool,
}

/// The absolute directories of the PATH (never `.` or another relative one, which would
/// find a repository's program).
fn absolute_path_dirs() -> Vec<PathBuf> {
    hookhost::config::env::var("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .filter(|dir| dir.is_absolute())
                .collect()
        })
        .unwrap_or_default()
}

/// The `codex` on the PATH, in an absolute directory ([`absolute_path_dirs`]), resolved,
/// when it is an executable file of this user or root that no one else can write
/// ([`Rule::Believed`]), in directories no one else can write either ([`Rule::Holder`]:
/// of this user or root, sticky when others can write them), up to `/`: whoever can
/// write one of them can put their own `codex` there, and its answer decides what Codex
/// trusts.
fn codex_program() -> Option<PathBuf> {
    use hookhost::config::file::{Owners, Rule};
    use std::os::unix::fs::MetadataExt;
    let found = absolute_path_dirs()
        .into_iter()
        .map(|dir| dir.join("codex"))
        .find(|candidate| candidate.is_file())?
        .canonicalize()
        .ok()?;
    let meta = std::fs::metadata(&found).ok()?;
    let believed = meta.is_file()
        && meta.mode() & 0o111 != 0
        && Rule::Believed(Owners::MeOrRoot).judge(&meta).is_none();
    let held = found
        .ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|meta| Rule::Holder.judge(&meta).is_none()));
    (believed && held).then_some(found)
}

/// The hooks `codex` (its directory `home`) lists for `cwd` (`codex app-server`, JSON-RPC over stdio:
/// `initialize`, `initialized`, `hooks/list`), read within [`ANSWER_WITHIN`] and
/// [`ANSWER_CAP`].
fn list_hooks(codex: &Path, home: &Path, cwd: &Path) -> Result<Vec<Listed>, String> {
    let mut command = Command::new(codex);
    // What it runs by name (`#!/usr/bin/env node` starts the npm package's `codex`) is
    // looked for in the PATH's absolute directories only, as `codex` itself was: never a
    // repository's `./node` in the project this runs in.
    let path = std::env::join_paths(absolute_path_dirs())
        .map_err(|e| format!("cannot run `codex app-server`: {e}"))?;
    command
        .arg("app-server")
        .env("PATH", path)
        // The directory whose config.toml hookhost edits, so that the trust it reads is
        // the trust it writes.
        .env("CODEX_HOME", home)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child =
        hookhost::handlers::descendants::spawn_own(|| command.spawn(), |c| Some(c.id()))
            .map_err(|e| format!("cannot run `codex app-server`: {e}"))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("cannot talk to `codex app-server`".into());
    };
    let cwd_text = cwd.to_string_lossy();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"clientInfo": {"name": "hookhost", "version": env!("CARGO_PKG_VERSION")}}}),
        json!({"jsonrpc": "2.0", "method": "initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [cwd_text]}}),
    ];
    let (sent, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout.take(ANSWER_CAP));
        let mut line = String::new();
        while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && value.get("id") == Some(&json!(2))
            {
                let _ = sent.send(value);
                return;
            }
            line.clear();
        }
    });
    let written = requests
        .iter()
        .try_for_each(|r| writeln!(stdin, "{r}"))
        .and_then(|()| stdin.flush());
    let answer = written
        .map_err(|e| format!("cannot talk to `codex app-server`: {e}"))
        .and_then(|()| {
            answer
                .recv_timeout(ANSWER_WITHIN)
                .map_err(|_| "`codex app-server` did not list the hooks".to_string())
        });
    // Its end of input ends the app server; a server that stays is stopped.
    drop(stdin);
    super::program::wait_within(&mut child, Duration::from_secs(5));
    // What it started and left running (re-parented to this program, a child
    // subreaper) ends with it.
    hookhost::handlers::descendants::end_adopted();
    let answer = answer?;
    if let Some(error) = answer.get("error") {
        return Err(format!(
            "`codex app-server` refused `hooks/list`: {}",
            escape(&error.to_string())
        ));
    }
    let text =
        |hook: &Value, field: &str| hook.get(field).and_then(Value::as_str).map(String::from);
    Ok(answer
        .pointer("/result/data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|entry| {
            entry
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|hook| {
            Some(Listed {
                key: text(hook, "key")?,
                command: text(hook, "command")?,
                source: text(hook, "sourcePath")?,
                hash: text(hook, "currentHash")?,
                trusted: text(hook, "trustStatus").as_deref() == Some("trusted"),
            })
        })
        .collect())
}

/// Whether the hook Codex listed is a drop-in `install` wrote, so hookhost may trust
/// it: `command` exactly, listed from the file `install` wrote (`hooks_json`, by that
/// path or its canonical one, as Codex names `$CODEX_HOME`: never another path that
/// leads to it, such as a repository's `.codex/hooks.json` linked to the user's, whose
/// key the repository could later fill with its own file), under the key Codex gives one
/// of the `positions` of an exact drop-in in it ([`exact_drop_ins`]: never another
/// hook's key, even when a `codex` answers so).
fn is_ours(hook: &Listed, hooks_json: &Path, positions: &[String], command: &str) -> bool {
    let source = Path::new(&hook.source);
    let named = source == hooks_json
        || hooks_json
            .canonicalize()
            .is_ok_and(|canonical| canonical == source);
    named
        && hook.command == command
        && positions
            .iter()
            .any(|at| hook.key == format!("{}{at}", hook.source))
}

/// The `[hooks.state]` table of Codex's config `doc`, made if missing (as a dotted
/// header's parent, so no empty `[hooks]` appears).
fn state_table(doc: &mut DocumentMut) -> Result<&mut Table, String> {
    let hooks = doc.entry("hooks").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let hooks = hooks.as_table_mut().ok_or("its `hooks` is not a table")?;
    let state = hooks.entry("state").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    state
        .as_table_mut()
        .ok_or_else(|| "its `hooks.state` is not a table".to_string())
}

/// Edits Codex's `config.toml` with `change` (which says whether it changed anything),
/// the careful way `install` edits every file (backup, atomic swap, refused if it changed
/// meanwhile); the backup's path when it wrote.
fn edit_config(
    change: impl FnOnce(&mut DocumentMut) -> Result<bool, String>,
) -> Result<Option<Option<PathBuf>>, String> {
    let path = codex_home()?.join("config.toml");
    let shown = escape(&path.display().to_string()).into_owned();
    let settings = read_text(&path, false)?;
    let old = settings.original.as_ref().map_or("", |o| o.text.as_str());
    let mut doc: DocumentMut = old
        .parse()
        .map_err(|e| format!("`{shown}` is not TOML hookhost can edit: {e}"))?;
    if !change(&mut doc).map_err(|e| format!("`{shown}`: {e}"))? {
        return Ok(None);
    }
    write_settings(&settings, &doc.to_string()).map(Some)
}

/// Trusts, in Codex's `config.toml`, the hooks of `hooks_json` that run exactly
/// `command` (the drop-in `install` wrote: never another hook that merely looks like
/// one, such as a repository's `/proc/self/cwd/bin/hookhost dispatch --format codex`,
/// which Codex must still ask about) that the
/// `codex` on the PATH lists for `cwd` and has not trusted, with the hash it computes;
/// the lines `install` prints.
pub(super) fn trust(hooks_json: &Path, cwd: &Path, command: &str, custom: Option<&str>) -> String {
    let mut text = trust_listed(hooks_json, cwd, command, custom);
    if let Some(note) = not_the_drop_in(hooks_json, command, custom) {
        text = format!("{text}\n{note}");
    }
    text
}

/// The line naming the events whose hookhost hook in `hooks_json` is not the drop-in
/// `install` writes ([`exact_drop_ins`]: a repository's behind a matcher no tool has, or
/// asynchronous): `install` added none there (the event has one) and trusted none, so
/// hookhost does not run for that event until the user looks.
fn not_the_drop_in(hooks_json: &Path, command: &str, custom: Option<&str>) -> Option<String> {
    let value = read(hooks_json)
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .unwrap_or(Value::Null);
    let exact = exact_drop_ins(&value, command);
    let mut events: Vec<String> = Vec::new();
    for (event, _) in drop_in_keys(hooks_json, &value, custom) {
        let has_exact = exact
            .iter()
            .any(|at| at.starts_with(&format!(":{}:", snake(&event))));
        if !has_exact && !events.contains(&event) {
            events.push(event);
        }
    }
    (!events.is_empty()).then(|| {
        format!(
            "  not trusted: the hookhost hook of {} is not the drop-in `install` writes \
             (another matcher, `async`, `timeout` or `statusMessage`), so Codex skips it: \
             make it `{{\"type\": \"command\", \"command\": \"{}\"}}` in a group with \
             the matcher `*`, or approve it in Codex's `/hooks` if you mean it",
            events
                .iter()
                .map(|e| escape(e).into_owned())
                .collect::<Vec<_>>()
                .join(", "),
            escape(command)
        )
    })
}

/// [`trust`], the hooks `codex` lists; the lines `install` prints.
fn trust_listed(hooks_json: &Path, cwd: &Path, command: &str, custom: Option<&str>) -> String {
    let home = match codex_home() {
        Ok(home) => home,
        Err(why) => return approve_text(hooks_json, custom, &escape(&why)),
    };
    let Some(codex) = codex_program() else {
        return approve_text(
            hooks_json,
            custom,
            "no `codex` on the PATH to ask for the hash (one in an absolute directory, your \
             file or root's, that only its owner can write, in directories no one else \
             can write)",
        );
    };
    let listed = match list_hooks(&codex, &home, cwd) {
        Ok(listed) => listed,
        Err(why) => return approve_text(hooks_json, custom, &why),
    };
    let written = read(hooks_json)
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let positions = exact_drop_ins(&written, command);
    let ours: Vec<Listed> = listed
        .into_iter()
        .filter(|hook| is_ours(hook, hooks_json, &positions, command))
        .collect();
    if ours.is_empty() {
        return approve_text(
            hooks_json,
            custom,
            "`codex` does not list it (an untrusted project?)",
        );
    }
    let to_trust: Vec<&Listed> = ours.iter().filter(|hook| !hook.trusted).collect();
    if to_trust.is_empty() {
        return "  Codex already trusts hookhost's drop-ins".into();
    }
    let written = edit_config(|doc| {
        let state = state_table(doc)?;
        for hook in &to_trust {
            let entry = state
                .entry(&hook.key)
                .or_insert_with(|| Item::Table(Table::new()));
            let entry = entry
                .as_table_mut()
                .ok_or_else(|| format!("its `hooks.state.\"{}\"` is not a table", hook.key))?;
            entry["trusted_hash"] = toml_edit::value(hook.hash.as_str());
        }
        Ok(true)
    });
    match written {
        Ok(backup) => {
            let mut text = format!(
                "  trusted in Codex's config.toml, with the hash `codex` computes: {}",
                to_trust
                    .iter()
                    .map(|h| escape(&h.key).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if let Some(Some(backup)) = backup {
                text += &format!(
                    "\n  the previous config.toml is in {}",
                    escape(&backup.display().to_string())
                );
            }
            text
        }
        Err(why) => approve_text(hooks_json, custom, &why),
    }
}

/// Removes from Codex's `config.toml` the trust entries of `keys` (the drop-ins
/// `uninstall` removed); the line it prints, if it removed any.
pub(super) fn untrust(keys: &[(String, String)]) -> Result<Option<String>, String> {
    if keys.is_empty() {
        return Ok(None);
    }
    let mut removed = Vec::new();
    edit_config(|doc| {
        let Some(state) = doc
            .get_mut("hooks")
            .and_then(|h| h.get_mut("state"))
            .and_then(Item::as_table_like_mut)
        else {
            return Ok(false);
        };
        for (_, key) in keys {
            if state.remove(key).is_some() {
                removed.push(escape(key).into_owned());
            }
        }
        Ok(!removed.is_empty())
    })?;
    Ok((!removed.is_empty())
        .then(|| format!("  removed Codex's trust entries: {}", removed.join(", "))))
}

/// A warning for each hookhost drop-in in the user's Codex `hooks.json` that Codex has
/// no trust entry for (so it does not run it).
pub(crate) fn warnings() -> Vec<String> {
    let Ok(home) = codex_home() else {
        return Vec::new();
    };
    let hooks_json = home.join("hooks.json");
    let Some(value) = read(&hooks_json).and_then(|t| serde_json::from_str::<Value>(&t).ok()) else {
        return Vec::new();
    };
    let config = read(&home.join("config.toml")).unwrap_or_default();
    // Codex names the file by its canonical path (it resolves `$CODEX_HOME`).
    let canonical = hooks_json
        .canonicalize()
        .unwrap_or_else(|_| hooks_json.clone());
    drop_in_keys(&hooks_json, &value, None)
        .into_iter()
        .zip(drop_in_keys(&canonical, &value, None))
        .filter(|((_, key), (_, resolved))| {
            !has_trust(&config, key) && !has_trust(&config, resolved)
        })
        .map(|((event, key), _)| {
            format!(
                "Codex does not run hookhost's {event} hook yet: it is not trusted (no \
                 `trusted_hash` for \"{key}\" in {}); run `hookhost install --codex` again \
                 with `codex` on the PATH, or approve it in Codex's `/hooks`",
                home.join("config.toml").display()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_keys_and_entries() {
        assert_eq!(snake("PreToolUse"), "pre_tool_use");
        let value = serde_json::json!({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./mine"}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "hookhost dispatch --format codex"}]}]}});
        let keys = drop_in_keys(Path::new("/h/hooks.json"), &value, None);
        assert_eq!(
            keys,
            [(
                "PreToolUse".to_string(),
                "/h/hooks.json:pre_tool_use:1:0".to_string()
            )]
        );
        let config =
            "[hooks.state.\"/h/hooks.json:pre_tool_use:1:0\"]\ntrusted_hash = \"sha256:ab\"\n";
        assert!(has_trust(config, &keys[0].1));
        assert!(!has_trust(
            "[hooks.state.\"/h/hooks.json:pre_tool_use:1:0\"]\n[other]\ntrusted_hash = 1\n",
            &keys[0].1
        ));
        // A comment or a string that looks like the entry is not one.
        assert!(!has_trust(
            "# [hooks.state.\"/h/hooks.json:pre_tool_use:1:0\"]\n# trusted_hash = \"x\"\n",
            &keys[0].1
        ));
    }

    /// The entries go under `[hooks.state."key"]`, keeping every other byte, with no
    /// empty `[hooks]` header; removing them leaves the rest as it was.
    #[test]
    fn state_entries_keep_the_rest_of_the_file() {
        let old = "# mine\nmodel = \"m\" # keep\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        let mut doc: DocumentMut = old.parse().unwrap();
        let state = state_table(&mut doc).unwrap();
        state
            .entry("/h/hooks.json:stop:0:0")
            .or_insert_with(|| Item::Table(Table::new()))["trusted_hash"] =
            toml_edit::value("sha256:ab");
        let new = doc.to_string();
        assert!(new.starts_with(old), "{new}");
        assert!(!new.contains("[hooks]\n"), "{new}");
        assert!(has_trust(&new, "/h/hooks.json:stop:0:0"));
        let mut doc: DocumentMut = new.parse().unwrap();
        doc["hooks"]["state"]
            .as_table_like_mut()
            .unwrap()
            .remove("/h/hooks.json:stop:0:0");
        assert!(!has_trust(&doc.to_string(), "/h/hooks.json:stop:0:0"));
        // `hooks` of another type is refused, never overwritten.
        let mut doc: DocumentMut = "hooks = 1\n".parse().unwrap();
        assert!(state_table(&mut doc).is_err());
    }

    /// Red team (stop 38): a repository's `.codex/hooks.json` (`install --codex
    /// --project`) can hold hookhost's exact command another way: asynchronous, with a
    /// timeout or status message, or behind a matcher no tool has (it looks installed and
    /// guards nothing). Only the drop-in exactly as `install` writes it is trusted; one
    /// identical to it has Codex's same hash, so trusting it trusts nothing more.
    #[test]
    fn only_the_exact_drop_in_is_trusted() {
        let c = "hookhost dispatch --format codex";
        let value = serde_json::json!({"hooks": {"PreToolUse": [
            {"matcher": "NoSuchTool", "hooks": [{"type": "command", "command": c}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": c, "async": true}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": c, "timeout": 1}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": c, "statusMessage": "ok"}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": format!("{c} ")}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": c}]}],
            "Stop": [{"hooks": [{"type": "command", "command": c}]}],
            "stop": [{"hooks": [{"type": "command", "command": c}]},
                     {"hooks": [{"type": "command", "command": c}]}]}});
        assert_eq!(
            exact_drop_ins(&value, c),
            [":pre_tool_use:5:0".to_string(), ":stop:0:0".to_string()]
        );
        let hook = |key: &str, source: &str| Listed {
            key: key.into(),
            command: c.into(),
            source: source.into(),
            hash: "sha256:x".into(),
            trusted: false,
        };
        let positions = exact_drop_ins(&value, c);
        let path = Path::new("/nowhere/hooks.json");
        assert!(is_ours(
            &hook("/nowhere/hooks.json:stop:0:0", "/nowhere/hooks.json"),
            path,
            &positions,
            c
        ));
        for (key, source) in [
            // Another position, another file, a key that is not the source's.
            (
                "/nowhere/hooks.json:pre_tool_use:0:0",
                "/nowhere/hooks.json",
            ),
            (
                "/repo/.codex/hooks.json:stop:0:0",
                "/repo/.codex/hooks.json",
            ),
            ("/repo/.codex/hooks.json:stop:0:0", "/nowhere/hooks.json"),
        ] {
            assert!(!is_ours(&hook(key, source), path, &positions, c), "{key}");
        }
    }
}
