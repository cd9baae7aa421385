//! `hookhost install --claude|--codex|--gemini|--copilot|--cursor|--opencode
//! [--user|--project [DIR]]` and `hookhost uninstall`: make hookhost the one hook of the
//! agent (Claude Code's and Gemini's `settings.json`, Codex's and Cursor's `hooks.json`,
//! Copilot's `hooks/hookhost.json`, OpenCode's plugin `plugins/hookhost.js`: the plugin
//! of [`opencode`]), each calling `hookhost dispatch --format AGENT`, and take it out
//! again (docs/book/src/agents/).
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

mod codex_trust;
mod drop_in;
mod opencode;
mod program;
mod settings;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use hookhost::text::escape;

use drop_in::{add_drop_in, remove_drop_in};
use settings::{read_settings, read_text, remove_file, render, write_settings};

/// The events the drop-in handles in Claude Code.
const CLAUDE_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PreSkillShellCommand",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
];

/// The events Codex 0.171 runs command hooks for (other-agents.md).
const CODEX_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Stop",
];

/// Gemini CLI 0.61's events the drop-in handles.
const GEMINI_EVENTS: &[&str] = &[
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "AfterAgent",
    "SessionEnd",
];

/// Copilot CLI 1.0.102's events (only `preToolUse`'s answer is read; the others are for
/// context hooks and the audit log).
const COPILOT_EVENTS: &[&str] = &[
    "sessionStart",
    "userPromptSubmitted",
    "preToolUse",
    "postToolUse",
    "sessionEnd",
];

/// Cursor's events (its hooks reference, Cursor 1.7).
const CURSOR_EVENTS: &[&str] = &[
    "beforeSubmitPrompt",
    "beforeShellExecution",
    "beforeMCPExecution",
    "beforeReadFile",
    "afterFileEdit",
    "stop",
];

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("agent").required(true).args(["claude", "codex", "gemini", "copilot", "cursor", "opencode"]))]
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
    /// Gemini CLI: `~/.gemini/settings.json`, or the project's `.gemini/settings.json`.
    #[arg(long)]
    gemini: bool,
    /// Copilot CLI: `~/.copilot/hooks/hookhost.json` (`$COPILOT_HOME`), or the project's
    /// `.github/hooks/hookhost.json`.
    #[arg(long)]
    copilot: bool,
    /// Cursor: `~/.cursor/hooks.json`, or the project's `.cursor/hooks.json`.
    #[arg(long)]
    cursor: bool,
    /// OpenCode: the plugin `~/.config/opencode/plugins/hookhost.js`, or the project's
    /// `.opencode/plugins/hookhost.js`.
    #[arg(long)]
    opencode: bool,
    /// The user's settings, for every project (the default).
    #[arg(long)]
    user: bool,
    /// The settings of a project: DIR, or the project of the current directory.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    project: Option<Option<PathBuf>>,
    /// This settings file instead (for example the target of a symlinked one).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// The hook command to write (default: `hookhost dispatch --format AGENT`, with the
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
    Gemini,
    Copilot,
    Cursor,
    OpenCode,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Codex => "Codex",
            Agent::Gemini => "Gemini CLI",
            Agent::Copilot => "Copilot CLI",
            Agent::Cursor => "Cursor",
            Agent::OpenCode => "OpenCode",
        }
    }

    /// The `--format` of its drop-in.
    fn format(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Copilot => "copilot",
            Agent::Cursor => "cursor",
            Agent::OpenCode => "opencode",
        }
    }

    fn events(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => CLAUDE_EVENTS,
            Agent::Codex => CODEX_EVENTS,
            Agent::Gemini => GEMINI_EVENTS,
            Agent::Copilot => COPILOT_EVENTS,
            Agent::Cursor => CURSOR_EVENTS,
            Agent::OpenCode => &[],
        }
    }

    /// Whether its file lists handlers directly under each event (no matcher groups):
    /// Copilot's and Cursor's, which also carry `"version": 1`.
    fn flat(self) -> bool {
        matches!(self, Agent::Copilot | Agent::Cursor)
    }

    /// The matcher of every tool.
    fn any_tool(self) -> &'static str {
        if self == Agent::Gemini { ".*" } else { "*" }
    }

    /// A handler of a flat file.
    fn flat_handler(self, command: &str) -> serde_json::Value {
        match self {
            Agent::Copilot => {
                serde_json::json!({"type": "command", "bash": command, "timeoutSec": 30})
            }
            _ => serde_json::json!({"command": command}),
        }
    }

    /// The command of `event`'s drop-in: Copilot's names the event after the command
    /// (its input does not; a `--command` gets it too).
    fn command_for(self, command: &str, event: &str) -> String {
        if self == Agent::Copilot {
            format!("{command} {event}")
        } else {
            command.to_string()
        }
    }

    /// The file, under the project (or the user's directory, `dir` from `var` or home)
    /// for each scope.
    fn places(self) -> (&'static str, Option<&'static str>, &'static str) {
        // (project file, variable naming the user's directory, user file under it or home)
        match self {
            Agent::Claude => (
                ".claude/settings.json",
                Some("CLAUDE_CONFIG_DIR"),
                ".claude/settings.json",
            ),
            Agent::Codex => (".codex/hooks.json", Some("CODEX_HOME"), ".codex/hooks.json"),
            Agent::Gemini => (".gemini/settings.json", None, ".gemini/settings.json"),
            Agent::Copilot => (
                ".github/hooks/hookhost.json",
                Some("COPILOT_HOME"),
                ".copilot/hooks/hookhost.json",
            ),
            Agent::Cursor => (".cursor/hooks.json", None, ".cursor/hooks.json"),
            Agent::OpenCode => (
                ".opencode/plugins/hookhost.js",
                Some("XDG_CONFIG_HOME"),
                ".config/opencode/plugins/hookhost.js",
            ),
        }
    }

    /// Whether the file is hookhost's alone (removed when nothing of it is left).
    fn owns_file(self) -> bool {
        matches!(self, Agent::Copilot | Agent::OpenCode)
    }
}

impl InstallArgs {
    fn agent(&self) -> Agent {
        [
            (self.codex, Agent::Codex),
            (self.gemini, Agent::Gemini),
            (self.copilot, Agent::Copilot),
            (self.cursor, Agent::Cursor),
            (self.opencode, Agent::OpenCode),
        ]
        .into_iter()
        .find_map(|(chosen, agent)| chosen.then_some(agent))
        .unwrap_or(Agent::Claude)
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
        let agent = self.agent();
        let (in_project, var, in_home) = agent.places();
        if let Some(project) = &self.project {
            let project = super::project::find(project.as_deref(), None)?;
            return Ok((project.join(in_project), true));
        }
        let workspaces = hookhost::config::env::workspaces_of(None);
        if let Some(var) = var
            && let Some(dir) = hookhost::config::env::path_var(var, &workspaces)?
        {
            // The variable names the agent's own directory (`$CODEX_HOME`), or for
            // OpenCode the config base (`$XDG_CONFIG_HOME/opencode/plugins`).
            let under = match agent {
                Agent::OpenCode => "opencode/plugins/hookhost.js",
                Agent::Copilot => "hooks/hookhost.json",
                Agent::Claude => "settings.json",
                _ => "hooks.json",
            };
            return Ok((dir.join(under), false));
        }
        let dir = hookhost::config::env::home_dir()
            .ok_or("cannot find your home directory; pass `--file`")?;
        Ok((dir.join(in_home), false))
    }

    /// The hook command: `--command`, else the program the drop-in runs
    /// ([`program::small_client_beside`]: `hookhost-dispatch --format claude` when the
    /// small client sits beside this binary and answers, else `hookhost dispatch --format
    /// claude`), by its plain name when that name on the PATH is that very file, else by
    /// its absolute path, quoted for the shell.
    fn command(&self) -> Result<(String, Option<String>), String> {
        if let Some(command) = &self.command {
            return Ok((command.clone(), None));
        }
        let exe = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(|e| format!("cannot find this program's path ({e}); pass `--command`"))?;
        let format = self.agent().format();
        let client_args = format!("--format {format}");
        let dispatch_args = format!("dispatch --format {format}");
        let (program, name, args) = match program::small_client_beside(&exe) {
            Some(client) => (client, program::CLIENT, client_args.as_str()),
            None => (exe, "hookhost", dispatch_args.as_str()),
        };
        let program = program
            .canonicalize()
            .map_err(|e| format!("cannot find `{name}` ({e}); pass `--command`"))?;
        let on_path = hookhost::config::env::var("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        });
        if on_path.and_then(|p| p.canonicalize().ok()).as_ref() == Some(&program) {
            return Ok((format!("{name} {args}"), None));
        }
        let program_text = program.to_str().ok_or_else(|| {
            format!(
                "the path `{}` is not UTF-8; pass `--command`",
                escape(&program.display().to_string())
            )
        })?;
        let note = format!(
            "`{name}` on your PATH is not {}, so the hook runs it by its path; after `cargo \
             install --path host --locked` (or with `--command`) it can be plain `{name}`",
            escape(program_text)
        );
        Ok((
            format!("{} {args}", hookhost::text::shell_word(program_text)),
            Some(note),
        ))
    }
}
/// The change from `old` to `new` as a unified diff.
fn diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(path, &format!("{path} (after)"))
        .to_string()
}

/// Warnings about agents that will not run hookhost's drop-in yet (Codex's hook trust),
/// for `hookhost hooks` and `validate`.
pub fn agent_warnings() -> Vec<String> {
    codex_trust::warnings()
}

/// `hookhost install`.
pub fn install(args: InstallArgs) -> Result<ExitCode, String> {
    let agent = args.agent();
    let (path, project_scope) = args.target()?;
    let (command, note) = args.command()?;
    let shown = escape(&path.display().to_string()).into_owned();
    if agent == Agent::OpenCode {
        return install_plugin(&args, &path, project_scope, &command, &shown);
    }
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
        // A drop-in written when no `codex` answered is trusted now (what the warning of
        // `hookhost validate` asks for).
        if agent == Agent::Codex && !args.dry_run {
            outln!("{}", trust_codex(&args, &path, project_scope, &command));
        }
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
    if agent == Agent::Codex {
        outln!("{}", trust_codex(&args, &path, project_scope, &command));
    }
    outln!(
        "next: put hooks in a project's .hookhost/hooks.json and run `hookhost trust` there; \
         until then its hooks do not run and {} shows a message saying so",
        agent.name()
    );
    Ok(ExitCode::SUCCESS)
}

/// Has Codex trust the drop-in `command` in `path` ([`codex_trust::trust`]); the lines
/// to print.
fn trust_codex(
    args: &InstallArgs,
    path: &std::path::Path,
    project_scope: bool,
    command: &str,
) -> String {
    // Codex lists a project's hooks for that project; the user's, anywhere.
    let cwd = match project_scope {
        true => path.parent().and_then(|p| p.parent()).map(PathBuf::from),
        false => std::env::current_dir().ok(),
    };
    codex_trust::trust(
        path,
        cwd.as_deref().unwrap_or(std::path::Path::new("/")),
        command,
        args.command.as_deref(),
    )
}

/// `hookhost uninstall`.
pub fn uninstall(args: InstallArgs) -> Result<ExitCode, String> {
    let agent = args.agent();
    let (path, project_scope) = args.target()?;
    let shown = escape(&path.display().to_string()).into_owned();
    if agent == Agent::OpenCode {
        return uninstall_plugin(&args, &path, project_scope, &shown);
    }
    let mut settings = read_settings(&path, project_scope)?;
    let Some(original) = &settings.original else {
        outln!("{shown} does not exist; nothing to remove");
        return Ok(ExitCode::SUCCESS);
    };
    let trust_keys = match agent {
        Agent::Codex => {
            let value = serde_json::Value::Object(settings.value.clone());
            codex_trust::keys_by_every_name(&path, &value, args.command.as_deref())
        }
        _ => Vec::new(),
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
    // A file that was hookhost's alone goes with the drop-in.
    let emptied = agent.owns_file() && settings.value.is_empty();
    let new = if emptied {
        String::new()
    } else {
        render(&settings.value, old.ends_with('\n'))?
    };
    if args.dry_run {
        out!("{}", escape_diff(&diff(&shown, old, &new)));
        outln!("(dry run: nothing written)");
        return Ok(ExitCode::SUCCESS);
    }
    let backup = if emptied {
        Some(remove_file(&settings)?)
    } else {
        write_settings(&settings, &new)?
    };
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
    if let Some(line) = codex_trust::untrust(&trust_keys)? {
        outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `install --opencode`: the plugin file, written whole (the same file: nothing to do; a
/// file that is not hookhost's plugin: refused).
fn install_plugin(
    args: &InstallArgs,
    path: &std::path::Path,
    project_scope: bool,
    command: &str,
    shown: &str,
) -> Result<ExitCode, String> {
    let settings = read_text(path, project_scope)?;
    let new = opencode::plugin(command);
    let old = settings.original.as_ref().map_or("", |o| o.text.as_str());
    if old == new {
        outln!("{shown} already hands every tool call to hookhost (OpenCode); nothing changed");
        return Ok(ExitCode::SUCCESS);
    }
    if settings.original.is_some() && !old.contains(opencode::MARK) {
        return Err(format!(
            "`{shown}` is not hookhost's plugin; move it away or pass another `--file`"
        ));
    }
    if args.dry_run {
        out!("{}", escape_diff(&diff(shown, old, &new)));
        outln!("(dry run: nothing written)");
        return Ok(ExitCode::SUCCESS);
    }
    let backup = write_settings(&settings, &new)?;
    outln!(
        "installed the hookhost plugin {shown} (OpenCode), for tool.execute.before, tool.execute.after"
    );
    outln!("  command: {}", escape(command));
    if let Some(backup) = backup {
        outln!(
            "  the previous file is in {}",
            escape(&backup.display().to_string())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `uninstall --opencode`: removes the plugin file when it is hookhost's.
fn uninstall_plugin(
    args: &InstallArgs,
    path: &std::path::Path,
    project_scope: bool,
    shown: &str,
) -> Result<ExitCode, String> {
    let settings = read_text(path, project_scope)?;
    let Some(original) = &settings.original else {
        outln!("{shown} does not exist; nothing to remove");
        return Ok(ExitCode::SUCCESS);
    };
    if !original.text.contains(opencode::MARK) {
        outln!("{shown} is not hookhost's plugin; nothing changed");
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        out!("{}", escape_diff(&diff(shown, &original.text, "")));
        outln!("(dry run: nothing written)");
        return Ok(ExitCode::SUCCESS);
    }
    let backup = remove_file(&settings)?;
    outln!("removed the hookhost plugin {shown} (OpenCode)");
    outln!(
        "  the previous file is in {}",
        escape(&backup.display().to_string())
    );
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
    use drop_in::{DISPATCH_ARGS, is_installed_form};

    /// Every file `install` writes, for every agent, is a place no plugin grant may
    /// write: the project's under a host-owned name, the user's inside a host-owned
    /// place. An agent added to `install` without its place fails here.
    #[test]
    fn every_file_install_writes_is_host_owned() {
        use hookhost::policy::places::{Guard, owned_by_name};
        let home = std::path::Path::new("/h");
        let sources = hookhost::config::SourceOptions {
            project_dir: "/w".into(),
            home_dir: Some(home.to_path_buf()),
            ..Default::default()
        };
        let places = hookhost::host_owned_places(&sources, &Default::default());
        let all = [
            Agent::Claude,
            Agent::Codex,
            Agent::Gemini,
            Agent::Copilot,
            Agent::Cursor,
            Agent::OpenCode,
        ];
        for agent in all {
            let (in_project, _, in_home) = agent.places();
            assert!(
                owned_by_name(std::path::Path::new(in_project)).is_some(),
                "{}: the project's `{in_project}` is not a host-owned name",
                agent.name()
            );
            let user = home.join(in_home);
            assert!(
                places
                    .iter()
                    .any(|p| p.guard == Guard::Any && user.starts_with(&p.path)),
                "{}: the user's `{}` is not in a host-owned place",
                agent.name(),
                user.display()
            );
        }
    }

    #[test]
    fn the_program_is_one_shell_word() {
        assert_eq!(
            hookhost::text::shell_word("/usr/bin/hookhost"),
            "/usr/bin/hookhost"
        );
        assert_eq!(hookhost::text::shell_word("/a b/it's"), r"'/a b/it'\''s'");
        assert!(is_installed_form(
            &format!(
                "{} {DISPATCH_ARGS}",
                hookhost::text::shell_word("/a b/it's/hookhost")
            ),
            None
        ));
    }
}
