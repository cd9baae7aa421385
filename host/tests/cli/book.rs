//! Every command the book and the README show runs against the built binary, so the
//! documentation cannot drift from it (the convention is the book's contributing chapter,
//! `docs/book/src/contributing.md`, "Commands in the book"):
//!
//! - a ```` ```console ```` block is a terminal session: each `$ ` line is a command (a
//!   trailing `\`, lines starting `> ` and a here-document continue it), the lines after
//!   it up to the next `$ `
//!   are what it prints (stdout and stderr, interleaved as `2>&1` would), matched line by
//!   line, where a line `...` stands for any number of lines and `[..]` inside a line for
//!   any text; a command with nothing after it is run and its output not checked;
//! - a ```` ```sh ```` block is one script, run with `sh -e`;
//! - either must exit 0: a command expected to fail shows it (`…; echo "exit $?"`);
//! - `console,no-run` and `sh,no-run` are shown and not run (they need a real agent, a
//!   network, minutes of building, or a server that does not exit); they are counted, and
//!   each `hookhost` call in them is held to the binary's `--help`: its subcommand exists
//!   and every `--option` it gives is named there;
//! - `bash`, `shell`, `zsh` and fences without a language are refused, so that no command
//!   escapes by its fence.
//!
//! Each page runs in a sandbox of its own: a fresh `HOME` with an empty `project/` as the
//! working directory, `hookhost` and `hookhost-dispatch` of this build first on `PATH`,
//! an empty managed policy directory (`HOOKHOST_MANAGED_DIR`), the dispatch daemon off
//! (no process outlives the test), and nothing else of the environment. Its blocks run
//! in order, so a page can write a file in one block and use it in the next.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::run_until;

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The pages whose commands run: the README and every chapter of the book.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md")];
    let src = repo().join("docs/book/src");
    let mut stack = vec![src];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// One fenced block of a page.
#[derive(Debug, PartialEq)]
struct Block {
    /// The line of its opening fence (1-based).
    line: usize,
    kind: Kind,
    body: Vec<String>,
}

#[derive(Debug, PartialEq)]
enum Kind {
    Console,
    Sh,
    NoRun,
    /// Not commands: `json`, `rust`, `text`, …
    Other,
    /// A fence the convention refuses, with why.
    Refused(String),
}

/// The fenced blocks of `text`.
fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(usize, String, Kind, Vec<String>)> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start();
        match &mut open {
            Some((indent, marker, _, body)) => {
                if fence.starts_with(marker.as_str()) && fence.trim_end() == marker.as_str() {
                    let (_, _, kind, body) = open.take().unwrap();
                    let line = found_line(i, &body);
                    found.push(Block { line, kind, body });
                } else {
                    let strip = line.len() - line.trim_start().len();
                    body.push(line[strip.min(*indent)..].to_string());
                }
            }
            None => {
                let ticks = fence.len() - fence.trim_start_matches('`').len();
                if ticks >= 3 {
                    let marker = "`".repeat(ticks);
                    let info = fence[ticks..].trim();
                    let indent = line.len() - fence.len();
                    open = Some((indent, marker, kind_of(info), Vec::new()));
                }
            }
        }
    }
    found
}

/// The 1-based line of the opening fence of a block that ends at 0-based line `end`.
fn found_line(end: usize, body: &[String]) -> usize {
    end - body.len()
}

/// What a fence's info string makes of its block.
fn kind_of(info: &str) -> Kind {
    let mut parts = info.split(',').map(str::trim);
    let lang = parts.next().unwrap_or("");
    let attributes: Vec<&str> = parts.collect();
    let no_run = attributes.contains(&"no-run");
    if matches!(lang, "console" | "sh")
        && let Some(unknown) = attributes.iter().find(|a| **a != "no-run")
    {
        return Kind::Refused(format!("unknown attribute `{unknown}` (only `no-run`)"));
    }
    match lang {
        "" => Kind::Refused("a fence without a language (use `text` for plain text)".into()),
        "bash" | "shell" | "zsh" | "shell-session" => Kind::Refused(format!(
            "`{lang}`: commands are `console` or `sh` (with `,no-run` when they cannot run)"
        )),
        "console" | "sh" if no_run => Kind::NoRun,
        "console" => Kind::Console,
        "sh" => Kind::Sh,
        _ => Kind::Other,
    }
}

/// One command of a console block and what it is shown to print.
#[derive(Debug, PartialEq)]
struct Step {
    /// The line of its `$ ` in the page (1-based).
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The commands of a console block whose fence is on line `fence`.
fn steps(fence: usize, body: &[String]) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut lines = body.iter().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let Some(first) = line.strip_prefix("$ ") else {
            match steps.last_mut() {
                Some(step) => step.expected.push(line.clone()),
                None if line.trim().is_empty() => {}
                None => {
                    return Err(format!(
                        "line {}: output before any `$ ` command",
                        fence + 1 + i
                    ));
                }
            }
            continue;
        };
        let mut command = first.to_string();
        // A trailing backslash continues the command, and so does the shell's secondary
        // prompt `> ` (a loop typed over several lines).
        while let Some((_, next)) = lines.peek() {
            let continued = if let Some(rest) = next.strip_prefix("> ") {
                rest
            } else if command.ends_with('\\') {
                next.as_str()
            } else {
                break;
            };
            command.push('\n');
            command.push_str(continued);
            lines.next();
        }
        // A here-document's lines belong to the command, up to its delimiter.
        if let Some(delimiter) = heredoc_delimiter(&command) {
            loop {
                let Some((_, next)) = lines.next() else {
                    return Err(format!(
                        "line {}: here-document `{delimiter}` is not closed",
                        fence + 1 + i
                    ));
                };
                command.push('\n');
                command.push_str(next);
                if next.trim_end() == delimiter {
                    break;
                }
            }
        }
        steps.push(Step {
            line: fence + 1 + i,
            command,
            expected: Vec::new(),
        });
    }
    for step in &mut steps {
        while step.expected.last().is_some_and(|l| l.trim().is_empty()) {
            step.expected.pop();
        }
    }
    Ok(steps)
}

/// The delimiter of a here-document the command opens (`<<'EOF'`, `<<EOF`, `<<-EOF`).
fn heredoc_delimiter(command: &str) -> Option<String> {
    let at = command.find("<<")?;
    let rest = command[at + 2..].trim_start_matches('-').trim_start();
    let word: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// Whether `actual` is what `expected` shows (`...` lines and `[..]` inside lines).
fn matches(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first.trim() == "..." => {
            (0..=actual.len()).any(|skip| matches(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, tail)| line_matches(first, line) && matches(rest, tail)),
    }
}

/// Whether `line` is `pattern`, where `[..]` stands for any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let pattern = pattern.trim_end();
    let line = line.trim_end();
    let mut parts = pattern.split("[..]");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// A page's sandbox: a fresh home with an empty project as the working directory.
struct Sandbox {
    _root: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    managed: PathBuf,
    tmp: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let sandbox = Sandbox {
            home: base.join("home"),
            project: base.join("home/project"),
            managed: base.join("managed"),
            tmp: base.join("tmp"),
            _root: root,
        };
        for dir in [&sandbox.project, &sandbox.managed, &sandbox.tmp] {
            std::fs::create_dir_all(dir).unwrap();
        }
        sandbox
    }

    /// `sh ARGS` in the sandbox, its stderr into its stdout.
    fn shell(&self, args: &[&str]) -> Command {
        let bin = Path::new(env!("CARGO_BIN_EXE_hookhost")).parent().unwrap();
        let mut cmd = Command::new("/bin/sh");
        cmd.args(args)
            .current_dir(&self.project)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env("LANG", "C.UTF-8")
            .env("HOOKHOST_MANAGED_DIR", &self.managed)
            .env("HOOKHOST_DISPATCH_DAEMON", "off");
        cmd
    }

    /// Whether the subcommand a shown-but-not-run call names exists (`hookhost SUB --help`
    /// succeeds, for the longest run of its leading words that does) and its help names
    /// every `--option` the call gives.
    fn check_call(&self, call: &[String]) -> Result<(), String> {
        let subcommand: Vec<&str> = call
            .iter()
            .map(String::as_str)
            .take_while(|w| {
                w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
            })
            .collect();
        let mut help = None;
        for len in (0..=subcommand.len()).rev() {
            let words = subcommand[..len].join(" ");
            if let Ok(text) = self.run(&format!("hookhost {words} --help"), &[]) {
                // A word after a command that has subcommands must be one of them (a
                // word after one without is a positional argument: `completions bash`).
                if len < subcommand.len() && text.contains("\nCommands:") {
                    return Err(format!("names `{}`, not a subcommand", subcommand[len]));
                }
                help = Some(text);
                break;
            }
        }
        let help = help.ok_or("names no subcommand hookhost knows")?;
        for option in call.iter().filter(|w| w.starts_with("--")) {
            let option = option.split('=').next().unwrap_or(option);
            if !help.contains(option) {
                return Err(format!(
                    "gives `{option}`, which its `--help` does not name"
                ));
            }
        }
        Ok(())
    }

    /// Runs `script`; its exit code and its output (stdout, then stderr).
    fn run(&self, script: &str, args: &[&str]) -> Result<String, String> {
        let wrapped = format!("exec 2>&1\n{script}");
        let mut all = vec!["-c", wrapped.as_str(), "sh"];
        all.extend(args);
        let run = run_until(&mut self.shell(&all), "", Duration::from_secs(120))
            .ok_or("did not finish within 120 s")?;
        if run.code != 0 {
            return Err(format!(
                "exited {}:\n{}{}",
                run.code, run.stdout, run.stderr
            ));
        }
        Ok(run.stdout)
    }
}

/// The `hookhost` calls a line of a no-run block makes: the words after each `hookhost`
/// up to the end of its command (`|`, `&&`, `;`, a redirection or a comment), with the
/// brackets of a synopsis (`[--project DIR]`) taken off.
fn hookhost_calls(line: &str) -> Vec<Vec<String>> {
    let line = line
        .trim()
        .trim_start_matches("$ ")
        .trim_start_matches("> ");
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut calls = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if *word != "hookhost" {
            continue;
        }
        let call: Vec<String> = words[i + 1..]
            .iter()
            .take_while(|w| !matches!(**w, "|" | "&&" | "||" | ";" | "#" | ">" | "<" | "\\"))
            .take_while(|w| !w.starts_with('#') && !w.starts_with('>') && !w.starts_with('<'))
            .map(|w| w.trim_matches(['[', ']']).trim_end_matches(';').to_string())
            .filter(|w| !w.is_empty())
            .collect();
        calls.push(call);
    }
    calls
}

/// Counts of what the pages hold, for the summary line.
#[derive(Default)]
struct Tally {
    commands: usize,
    /// `hookhost` calls of no-run blocks whose subcommand and options were checked.
    checked_calls: usize,
    scripts: usize,
    not_run: Vec<String>,
    failures: Vec<String>,
}

fn run_page(page: &Path, tally: &mut Tally) {
    let text = std::fs::read_to_string(page).unwrap();
    let name = page
        .strip_prefix(repo())
        .unwrap_or(page)
        .display()
        .to_string();
    let sandbox = Sandbox::new();
    for block in blocks(&text) {
        let at = format!("{name}:{}", block.line);
        match block.kind {
            Kind::Other => {}
            Kind::Refused(why) => tally.failures.push(format!("{at}: {why}")),
            Kind::NoRun => {
                // Not run, but the subcommands and options it names must still exist.
                for (offset, line) in block.body.iter().enumerate() {
                    for call in hookhost_calls(line) {
                        tally.checked_calls += 1;
                        if let Err(why) = sandbox.check_call(&call) {
                            let line = block.line + 1 + offset;
                            tally.failures.push(format!(
                                "{name}:{line}: `hookhost {}` {why}",
                                call.join(" ")
                            ));
                        }
                    }
                }
                tally.not_run.push(at)
            }
            Kind::Sh => {
                tally.scripts += 1;
                let script = format!("set -e\n{}", block.body.join("\n"));
                if let Err(why) = sandbox.run(&script, &[]) {
                    tally.failures.push(format!("{at}: the sh block {why}"));
                }
            }
            Kind::Console => match steps(block.line, &block.body) {
                Err(why) => tally.failures.push(format!("{name}:{why}")),
                Ok(steps) => {
                    for step in steps {
                        tally.commands += 1;
                        let at = format!("{name}:{}", step.line);
                        match sandbox.run(&step.command, &[]) {
                            Err(why) => tally
                                .failures
                                .push(format!("{at}: `{}` {why}", step.command)),
                            Ok(out) => {
                                let lines: Vec<&str> = out.lines().collect();
                                if !step.expected.is_empty() && !matches(&step.expected, &lines) {
                                    tally.failures.push(format!(
                                        "{at}: `{}` printed\n{out}\nbut the page shows\n{}\n",
                                        step.command,
                                        step.expected.join("\n")
                                    ));
                                }
                            }
                        }
                    }
                }
            },
        }
    }
}

#[test]
fn every_command_the_book_shows_runs_as_shown() {
    let mut tally = Tally::default();
    let pages = pages();
    assert!(
        pages.len() > 20,
        "the book's pages were not found: {pages:?}"
    );
    for page in &pages {
        run_page(page, &mut tally);
    }
    eprintln!(
        "book: {} commands and {} scripts ran from {} pages; {} blocks marked no-run \
         ({} hookhost calls in them checked against --help):\n  {}",
        tally.commands,
        tally.scripts,
        pages.len(),
        tally.not_run.len(),
        tally.checked_calls,
        tally.not_run.join("\n  ")
    );
    assert!(
        tally.failures.is_empty(),
        "{} failures:\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
    // A parser that found nothing would pass everything: the book runs dozens.
    assert!(tally.commands >= 30, "only {} commands ran", tally.commands);
}

/// `.ci/run` runs the tests with the command the README tells a newcomer to run.
#[test]
fn the_readme_shows_the_test_command_ci_runs() {
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let command = ci
        .lines()
        .find(|l| l.contains("cargo test --workspace 2>&1"))
        .and_then(|l| l.split(" 2>&1").next())
        .expect(".ci/run runs `cargo test --workspace`");
    assert!(
        readme.lines().any(|l| l.trim() == command.trim()),
        "README.md does not show `{command}`, the test command .ci/run runs"
    );
}

#[test]
fn the_convention_reads_blocks_commands_and_output() {
    let page = "text\n```console\n$ echo a \\\n  b\na b\n$ cat <<'EOF'\nx\nEOF\n...\n```\n\
                ```sh,no-run\nserve\n```\n```\nplain\n```\n```bash\nls\n```\n```json\n{}\n```\n";
    let found = blocks(page);
    let kinds: Vec<&Kind> = found.iter().map(|b| &b.kind).collect();
    assert_eq!(kinds.len(), 5, "{found:?}");
    assert_eq!(kinds[0], &Kind::Console);
    assert_eq!(kinds[1], &Kind::NoRun);
    assert!(matches!(kinds[2], Kind::Refused(_)));
    assert!(matches!(kinds[3], Kind::Refused(_)));
    assert_eq!(kinds[4], &Kind::Other);
    assert_eq!(found[0].line, 2);
    let steps = steps(found[0].line, &found[0].body).unwrap();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0].command, "echo a \\\n  b");
    assert_eq!(steps[0].expected, ["a b"]);
    assert_eq!(steps[1].command, "cat <<'EOF'\nx\nEOF");
    assert_eq!(steps[1].line, 6);
    assert!(matches(&["a".into(), "...".into()], &["a", "b", "c"]));
    assert!(!matches(&["a".into()], &["a", "b"]));
    assert!(line_matches("trusted [..] at [..]", "trusted /x at 12:00"));
    assert!(!line_matches("trusted [..] at", "trusted /x at 12:00"));
    assert!(matches!(kind_of("console,norun"), Kind::Refused(_)));
    assert_eq!(
        hookhost_calls("hookhost serve [--project DIR] | x && hookhost plugin lock # y"),
        [vec!["serve", "--project", "DIR"], vec!["plugin", "lock"]]
    );
}
