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

mod drop_in;
mod program;
mod settings;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use hookhost::text::escape;

use drop_in::{DISPATCH_ARGS, add_drop_in, remove_drop_in};
use settings::{read_settings, render, write_settings};

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
        let workspaces = hookhost::config::env::workspaces_of(None);
        let dir = match hookhost::config::env::path_var(var, &workspaces)? {
            Some(dir) => dir,
            None => hookhost::config::env::home_dir()
                .map(|d| d.join(dir_name))
                .ok_or("cannot find your home directory; pass `--file`")?,
        };
        Ok((dir.join(file_name), false))
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
        let (program, name, args) = match program::small_client_beside(&exe) {
            Some(client) => (client, program::CLIENT, program::CLIENT_ARGS),
            None => (exe, "hookhost", DISPATCH_ARGS),
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
        Ok((format!("{} {args}", shell_quote(program_text)), Some(note)))
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
    use drop_in::is_installed_form;

    #[test]
    fn shell_quoting_keeps_one_word() {
        assert_eq!(shell_quote("/usr/bin/hookhost"), "/usr/bin/hookhost");
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
        assert!(is_installed_form(
            &format!("{} {DISPATCH_ARGS}", shell_quote("/a b/it's/hookhost")),
            None
        ));
    }
}
