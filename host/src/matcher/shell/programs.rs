//! The programs that run code given in their arguments (shells' `-c`, `eval`, `trap`,
//! interpreters' `-e`, awk, builtins that name variables), and the tables of their names.

use super::{Analyzer, Value};

/// Shells whose `-c` string is a script the walk follows; without `-c` they read commands
/// from stdin or a file, which the filter cannot see.
pub(super) const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "lksh", "pdksh", "oksh", "ash", "yash",
    "posh", "rbash", "fish", "csh", "tcsh", "elvish", "nu", "xonsh", "ion", "rc", "es",
];

/// Programs known to leave their arguments alone: none of them runs a word it is given as a
/// command, in any option (so not `sort`, whose `--compress-program` runs one, nor `rg`
/// with `--pre`, `less` with `+!cmd`, `man -P`, `sed`'s `e`, `tar -I`, or `git`, whose
/// `bisect run`, `submodule foreach` and `-c alias.x=!cmd` run commands). Only after one of
/// these is the first word the only command; after **any other program** (a runner the
/// filter has never heard of: `uv run`, `npm exec`, `bundle exec`, `docker exec`,
/// `nix develop -c`, `foo bar`) every later word may start the command, so a pattern that
/// matches any suffix of the words runs the hook. Fail safe: a program missing here makes
/// the filter run the hook more often, never less. The builtins that name variables
/// ([`NAMING_BUILTINS`]) leave their arguments alone too (their subscripts are checked on
/// their own).
pub(crate) const LEAVE_ARGUMENTS_ALONE: &[&str] = &[
    "echo",
    "printf",
    "cat",
    "tac",
    "ls",
    "dir",
    "pwd",
    "cd",
    "pushd",
    "popd",
    "dirs",
    "true",
    "false",
    ":",
    "grep",
    "egrep",
    "fgrep",
    "head",
    "tail",
    "wc",
    "uniq",
    "cut",
    "tr",
    "paste",
    "fold",
    "fmt",
    "nl",
    "od",
    "hexdump",
    "xxd",
    "base64",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "stat",
    "file",
    "du",
    "df",
    "touch",
    "mkdir",
    "rmdir",
    "rm",
    "cp",
    "mv",
    "ln",
    "chmod",
    "chown",
    "chgrp",
    "date",
    "sleep",
    "id",
    "whoami",
    "groups",
    "uname",
    "hostname",
    "which",
    "whereis",
    "type",
    "tee",
    "diff",
    "cmp",
    "comm",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "seq",
    "yes",
    "printenv",
    "kill",
    "ps",
    "pgrep",
    "jq",
    "curl",
    "wget",
    "shift",
    "exit",
    "return",
    "break",
    "continue",
    "umask",
    "getopts",
];

/// Whether `program` (a file name, as written) is known to leave its arguments alone.
pub(super) fn leaves_arguments_alone(program: &str) -> bool {
    LEAVE_ARGUMENTS_ALONE.contains(&program) || NAMING_BUILTINS.contains(&program)
}

/// Wrappers that append arguments of their own to the command they run.
pub(super) const APPENDING_WRAPPERS: &[&str] = &["xargs", "parallel", "find"];

/// Programs and builtins that run code the filter cannot see (files, aliases, callbacks):
/// the line is unknown.
pub(super) const OPAQUE: &[&str] = &[
    "source", ".", "alias", "hash", "enable", "fc", "bind", "complete", "compgen", "let",
];

/// Interpreters and the options that give them code on the command line.
pub(super) const INTERPRETERS: &[(&str, &[&str])] = &[
    ("python", &["c"]),
    ("pypy", &["c"]),
    ("perl", &["e", "E"]),
    ("ruby", &["e"]),
    ("node", &["e", "p", "-eval", "-print"]),
    ("nodejs", &["e", "p", "-eval", "-print"]),
    ("bun", &["e", "p", "-eval", "-print"]),
    ("deno", &["e", "-eval"]),
    ("php", &["r"]),
    ("lua", &["e"]),
    ("luajit", &["e"]),
    ("rscript", &["e"]),
    ("osascript", &["e"]),
    ("pwsh", &["c", "command", "encodedcommand", "ec"]),
    ("powershell", &["c", "command", "encodedcommand", "ec"]),
    ("tclsh", &[]),
    ("wish", &[]),
    ("expect", &["c"]),
    ("jshell", &[]),
    ("irb", &[]),
    ("groovy", &["e"]),
    ("julia", &["e", "E"]),
];

/// awk dialects: their program can run commands (`system()`, pipes).
pub(super) const AWKS: &[&str] = &["awk", "gawk", "mawk", "nawk", "busybox-awk"];

/// Builtins whose arguments name variables; a name with a subscript (`a[$(cmd)]`) runs the
/// subscript as arithmetic, which runs command substitutions in the variable's value.
pub(crate) const NAMING_BUILTINS: &[&str] = &[
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "read",
    "unset",
    "mapfile",
    "readarray",
    "printf",
    "test",
    "[",
    // `wait -p NAME` assigns to NAME (a subscript runs); kept out of the programs that
    // leave their arguments alone with `jobs`, whose `-x` runs its arguments.
    "wait",
];

impl Analyzer {
    /// What a program does with its arguments, when it runs code from them.
    pub(super) fn program(&mut self, base: &str, args: &[Value], depth: usize, sound: bool) {
        let lower = base.to_lowercase();
        let name = lower.as_str();
        if SHELLS.contains(&name) {
            self.shell(name, args, depth, sound);
        } else if name == "eval" {
            let mut script = String::new();
            for arg in args {
                let Some(s) = arg.as_static() else {
                    self.fail(sound, "`eval` of an expansion".to_string());
                    return;
                };
                if !script.is_empty() {
                    script.push(' ');
                }
                script.push_str(s);
            }
            self.script(&script, depth + 1, sound);
        } else if name == "trap" {
            let operand = args
                .iter()
                .find(|a| !matches!(a.as_static(), Some("-p" | "-l" | "-P" | "--")));
            match operand {
                None => {}
                Some(Value::Static(s)) => self.script(s, depth + 1, sound),
                Some(Value::Dynamic { .. }) => {
                    self.fail(sound, "`trap` of an expansion".to_string());
                }
            }
        } else if OPAQUE.contains(&name) {
            self.fail(
                sound,
                format!("`{name}` runs commands the filter cannot see"),
            );
        } else if let Some(flags) = interpreter_flags(name) {
            self.interpreter(name, flags, args, sound);
        } else if AWKS.contains(&name) {
            self.awk(args, sound);
        } else if NAMING_BUILTINS.contains(&name) {
            self.naming_builtin(name, args, sound);
        }
    }

    /// `sh -c 'script'` is followed; a shell without `-c` reads commands the filter cannot
    /// see (stdin, a file).
    pub(super) fn shell(&mut self, name: &str, args: &[Value], depth: usize, sound: bool) {
        let mut has_c = false;
        let mut i = 0;
        while i < args.len() {
            let Some(arg) = args[i].as_static() else {
                self.fail(
                    sound,
                    format!("`{name}` is given an option from an expansion"),
                );
                return;
            };
            if arg == "--" || arg == "-" {
                i += 1;
                break;
            }
            if let Some(long) = arg.strip_prefix("--") {
                if long == "command" {
                    has_c = true;
                } else if let Some(script) = long.strip_prefix("command=") {
                    self.script(script, depth + 1, sound);
                    return;
                } else if matches!(long, "rcfile" | "init-file") {
                    i += 1;
                }
                i += 1;
                continue;
            }
            let Some(cluster) = arg.strip_prefix('-').or_else(|| arg.strip_prefix('+')) else {
                break;
            };
            if cluster.is_empty() {
                break;
            }
            if arg.starts_with('-') && cluster.contains('c') {
                has_c = true;
            }
            // `-o pipefail`, `-O extglob`: the option takes the next word.
            if cluster.ends_with(['o', 'O']) {
                i += 1;
            }
            i += 1;
        }
        if !has_c {
            self.fail(
                sound,
                format!("`{name}` reads its commands from standard input or a file"),
            );
            return;
        }
        match args.get(i) {
            None => self.fail(sound, format!("`{name} -c` without a command")),
            Some(Value::Dynamic { .. }) => {
                self.fail(sound, format!("`{name} -c` of an expansion"));
            }
            Some(Value::Static(script)) => self.script(script, depth + 1, sound),
        }
    }

    pub(super) fn interpreter(&mut self, name: &str, flags: &[&str], args: &[Value], sound: bool) {
        // Every option is checked, not only those before the script: an option's own
        // argument (`-W ignore`) would otherwise pass for the script.
        let mut operand = None;
        for arg in args {
            let Some(arg) = arg.as_static() else {
                if operand.is_none() {
                    self.fail(
                        sound,
                        format!("`{name}` is given an option from an expansion"),
                    );
                    return;
                }
                continue;
            };
            if arg == "--" {
                break;
            }
            let Some(option) = arg.strip_prefix('-') else {
                operand.get_or_insert(arg);
                continue;
            };
            let inline = flags.iter().any(|flag| match flag.strip_prefix('-') {
                // A long option: `--eval`, `--eval=…`.
                Some(long) => option
                    .strip_prefix('-')
                    .is_some_and(|o| o == long || o.starts_with(&format!("{long}="))),
                // A word option (`-Command`), or a short one alone or in a cluster (`-c`,
                // `-Bc`).
                None if flag.len() > 1 => option.eq_ignore_ascii_case(flag),
                None => !option.starts_with('-') && option.contains(flag),
            });
            if inline || option.is_empty() {
                self.fail(
                    sound,
                    format!("`{name}` runs code given on the command line"),
                );
                return;
            }
        }
        match operand {
            None => self.fail(
                sound,
                format!("`{name}` reads its code from standard input"),
            ),
            Some("eval") if name == "deno" => {
                self.fail(
                    sound,
                    "`deno eval` runs code given on the command line".into(),
                );
            }
            Some(_) => {}
        }
    }

    pub(super) fn awk(&mut self, args: &[Value], sound: bool) {
        let mut i = 0;
        while i < args.len() {
            let Some(arg) = args[i].as_static() else {
                self.fail(sound, "`awk` is given an expansion".to_string());
                return;
            };
            match arg {
                "-f" | "--file" => return,
                "-e" | "--source" => {
                    if let Some(program) = args.get(i + 1) {
                        self.awk_program(program, sound);
                    }
                    i += 2;
                }
                "-v" | "-F" | "--assign" | "--field-separator" => i += 2,
                "--" => {
                    if let Some(program) = args.get(i + 1) {
                        self.awk_program(program, sound);
                    }
                    return;
                }
                _ if arg.starts_with('-') && arg.len() > 1 => i += 1,
                _ => {
                    self.awk_program(&args[i], sound);
                    return;
                }
            }
        }
    }

    pub(super) fn awk_program(&mut self, program: &Value, sound: bool) {
        match program {
            Value::Static(p) if !(p.contains("system") || p.contains('|')) => {}
            _ => self.fail(
                sound,
                "an awk program that may run commands (`system`, pipes)".to_string(),
            ),
        }
    }

    pub(super) fn naming_builtin(&mut self, name: &str, args: &[Value], sound: bool) {
        match name {
            // Only `-v NAME` names a variable.
            "printf" | "test" | "[" => {
                let mut iter = args.iter();
                while let Some(arg) = iter.next() {
                    if arg.as_static() == Some("-v")
                        && let Some(var) = iter.next()
                    {
                        self.variable_name(var, sound);
                    }
                }
            }
            _ => {
                for arg in args {
                    let prefix = arg.prefix();
                    if let Some(options) = prefix
                        .strip_prefix('-')
                        .or_else(|| prefix.strip_prefix('+'))
                    {
                        // `declare -i`: values are arithmetic; `-n`: a name reference;
                        // `mapfile -C`: a callback.
                        if matches!(
                            name,
                            "declare" | "typeset" | "local" | "export" | "readonly"
                        ) && options.contains(['i', 'n'])
                            || matches!(name, "mapfile" | "readarray") && options.contains('C')
                        {
                            self.fail(sound, format!("`{name} -{options}` may run code"));
                            return;
                        }
                        if arg.as_static().is_none() {
                            self.fail(
                                sound,
                                format!("`{name}` is given an option from an expansion"),
                            );
                            return;
                        }
                        continue;
                    }
                    let named = match prefix.split_once('=') {
                        Some((var, _)) => Value::Static(var.to_string()),
                        None => arg.clone(),
                    };
                    self.variable_name(&named, sound);
                }
            }
        }
    }
}

/// The file name of a program path.
pub(super) fn basename(program: &str) -> String {
    program.rsplit('/').next().unwrap_or(program).to_string()
}

pub(super) fn interpreter_flags(name: &str) -> Option<&'static [&'static str]> {
    INTERPRETERS.iter().find_map(|(interpreter, flags)| {
        let matches = name == *interpreter
            || name
                .strip_prefix(interpreter)
                .is_some_and(|version| version.chars().all(|c| c.is_ascii_digit() || c == '.'));
        matches.then_some(*flags)
    })
}
