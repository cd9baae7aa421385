//! The `if` rule's table tests: `Bash(...)` rules against shell lines, path and tool-name
//! rules, and the bounds on rules and commands.

use std::path::{Path, PathBuf};

use super::*;
use crate::matcher::shell;
use serde_json::json;

/// A rule compiled without a home directory.
fn parse_rule(rule: &str) -> Result<IfRule, String> {
    IfRule::parse(rule, None)
}

fn bash(rule: &str, command: &str) -> bool {
    parse_rule(rule).unwrap().matches(
        "Bash",
        &json!({ "command": command }),
        Path::new("/repo"),
        Path::new("/repo"),
    )
}

/// Attacks on a `git push` guard, each of which runs `git push` (the CLI test
/// `attacks::if_rule` runs its own table of them in a real bash with a stub `git`).
const GIT_PUSH_RUNS: &[&str] = &[
    "git push",
    "git push origin main",
    "git push;",
    "cd repo && git push",
    "make || git push -f",
    "ls; git push",
    "echo x | git push",
    "git push &",
    "git push & wait",
    "true\ngit push",
    "! git push",
    "(git push)",
    "( (git push) )",
    "{ git push; }",
    "{ { git push; }; }",
    "bash -c 'git push'",
    "sh -c \"git push\"",
    "dash -c 'git push'",
    "bash -lc 'git push'",
    "bash -ec 'git push'",
    "bash -o pipefail -c 'git push'",
    "bash --norc -c 'git push'",
    "env bash -c 'git push'",
    "/bin/sh -c 'git push'",
    "/usr/bin/env sh -c 'git push'",
    "command git push",
    "command -p git push",
    "builtin eval 'git push'",
    "exec git push",
    "nohup git push",
    "echo x | xargs sh -c 'git push'",
    "echo push | xargs git",
    "time git push",
    "time -p git push",
    "eval 'git push'",
    "eval git push",
    "eval \"git\" 'push'",
    "if true; then git push; fi",
    "if git push; then :; fi",
    "if false; then :; else git push; fi",
    "if false; then :; elif true; then git push; fi",
    "while true; do git push; break; done",
    "until git push; do :; done",
    "for i in 1; do git push; done",
    "case x in x) git push;; esac",
    "f() { git push; }; f",
    "function f { git push; }; f",
    "echo $(git push)",
    "echo \"$(git push)\"",
    "x=$(git push)",
    "echo `git push`",
    "cat <(git push)",
    "cat < <(git push)",
    "echo $(echo $(git push))",
    "cat <<EOF\n$(git push)\nEOF",
    "cat <<EOF\n'$(git push)'\nEOF",
    "git push <<EOF\nx\nEOF",
    "g'i't push",
    "\"git\" push",
    "\\git push",
    "$'\\x67it' push",
    "$'\\147it' push",
    "$'\\u0067it' push",
    "git p\"us\"h",
    "git 'push'",
    "git $'push'",
    "git \\\npush",
    "gi\\\nt push",
    "# a comment\ngit push",
    "true # comment\ngit push",
    "VAR=x git push",
    "A=1 B=2 git push",
    "/usr/bin/git push",
    "./git push",
    "GIT push",
    "git  push",
    "git\tpush",
    "git push 2>&1 | tee log",
    "git push || true",
    "git push && echo done",
    "exec 3>&1; git push",
    "bash -c \"sh -c 'eval \\\"git push\\\"'\"",
    "sudo git push",
    "sudo -u root git push",
    "sudo -- git push",
    "sudo env X=1 bash -c 'git push'",
    "env X=1 git push",
    "env -i PATH=/usr/bin git push",
    "timeout 5 git push",
    "nice -n 5 git push",
    "find . -maxdepth 0 -exec git push \\;",
    "trap 'git push' EXIT",
    "x='git push'; eval \"$x\"",
    "coproc git push",
    "exec -a name git push",
    "~/bin/git push",
    "command -- git push",
    "time -- git push",
    "time -p -- git push",
    "nohup -- git push",
    "coproc NAME { git push; }",
    "select x in a; do git push; break; done <<< 1",
    "[[ -n $(git push) ]]",
    "case $(git push) in *) ;; esac",
    "for x in $(git push); do :; done",
    "cat <<< $(git push)",
    "echo >(git push)",
    "git push |& cat",
    "function f() { git push; }; f",
    "f() ( git push ); f",
    "{ git push ; } 2>/dev/null",
    "git push&>/dev/null",
    "if [ \"$(git push)\" ]; then :; fi",
    "exec 3< <(git push); cat <&3",
    "a=( $(git push) )",
    "declare x=$(git push)",
    "export x=$(git push)",
    "echo \"${x/y/$(git push)}\"",
    "echo $[ $(git push) ]",
    "echo x#; git push",
    "echo \"$(echo \"$(git push)\")\"",
    "echo ${x:=$(git push)}",
    "echo ${#x[$(git push)]}",
    "a[$(git push)]=1",
    "x=1 y=$(git push) true",
    ": \"$(git push)\"",
    "command eval 'git push'",
    "exec eval 'git push'",
    "eval eval \"'git push'\"",
    "env -- git push",
    "sudo -E -H -- git push",
    "nohup nice -n1 timeout 5 git push",
    "git push 2>/dev/null >&2",
    ">out git push",
    "2>&1 git push",
    "true\r\ngit push",
];

/// Commands a `git push` guard is skipped on: nothing in them runs `git push`.
const GIT_PUSH_SKIPS: &[&str] = &[
    "git status",
    "git pushx",
    "gitk",
    "git",
    "echo git push",
    "ls -la",
    "cargo test && cargo build",
    "npm run build && npm test",
    "cat file | grep push",
    "git commit -m 'push later'",
    "echo hello > out.txt",
    "for f in *.rs; do wc -l \"$f\"; done",
    "[ -f x ] && echo ok",
    "export PATH=$PATH:/x; cargo build",
    "cd /tmp && ls",
    "echo \"$HOME\"",
    "x=1; echo $x",
    "git log | head -5",
    "bash -c 'git status'",
    "sudo ls",
    "grep -r \"pattern\" src/",
    "cat <<'EOF'\nhello\nEOF",
    "printf '%s\\n' a b",
    "read -r line < file",
    "echo ${#x}",
    "echo \"${arr[@]}\"",
];

/// Commands where the filter cannot be sure, so the hook runs.
const GIT_PUSH_UNKNOWN: &[&str] = &[
    "echo 'unterminated",
    "echo $(",
    "$cmd push",
    "${GIT} push",
    "\"$(echo git)\" push",
    "git $SUB",
    "git $(echo push)",
    "git pu?h",
    "git p*",
    "/usr/bin/gi? push",
    "{git,push}",
    "git {push,pull}",
    "echo 'git push' | sh",
    "bash <<EOF\ngit push\nEOF",
    "bash <<< 'git push'",
    "sh script.sh",
    "bash",
    "source ./script.sh",
    ". ./script.sh",
    "alias x=y",
    "python3 -c 'import os; os.system(\"g\"+\"it push\")'",
    "python3 - <<EOF\nprint(1)\nEOF",
    "perl -e 'system(\"git\", \"push\")'",
    "node -e 'x'",
    "awk 'BEGIN{system(\"git push\")}'",
    "x='a[$(git push)]'; echo $((x))",
    "echo $((i+1))",
    "y=$(printf 'a[$(%s push)]' git); echo $((y))",
    "[[ $x -eq 1 ]]",
    "echo ${!name}",
    "echo ${x@P}",
    "echo ${x:-$(git push)}",
    "echo ${a[$i]}",
    "PS4='$(git push)' bash -xc true",
    "declare -i x=y",
    "printf -v \"$name\" x",
    "eval \"$cmd\"",
    "bash -c \"$cmd\"",
    "sudo $CMD",
    "trap \"$handler\" EXIT",
    "hash -p /usr/bin/git x; x push",
    "let x=1",
    "ssh host 'git push'",
    "env -S 'git push'",
    "watch git push",
    "x=$'\\xff'; $'\\xffgit' push",
    "$'\\cAgit' push",
    "git${IFS}push",
    "$(which git) push",
    "bash -c 'git \"$@\"' _ push",
    "IFS=,; x=git,push; $x",
    "exec \"$@\"",
];

/// Identical rules share one compilation (5,000 hooks with one `if` hold one rule); a
/// different rule or home does not, and a rule is compiled again once none holds it.
#[test]
fn identical_rules_share_one_compilation() {
    let home = Path::new("/home/u");
    let a = IfRule::parse("Bash(git push *)", Some(home)).unwrap();
    let b = IfRule::parse("  Bash(git push *) ", Some(home)).unwrap();
    assert!(a.shares(&b));
    let other_home = IfRule::parse("Bash(git push *)", Some(Path::new("/home/v"))).unwrap();
    assert!(!a.shares(&other_home));
    assert!(!a.shares(&IfRule::parse("Bash(git pull *)", Some(home)).unwrap()));
    let weak = Arc::downgrade(&a.0);
    drop((a, b));
    assert!(weak.upgrade().is_none(), "the table holds no rule alive");
    // Nor its allocation: the entry leaves the table with the rule (a rule no other
    // test compiles).
    let rule = "Bash(the-table-lets-go *)";
    drop(IfRule::parse(rule, Some(home)).unwrap());
    let key = (rule.to_string(), Some(home.to_path_buf()));
    let table = COMPILED.lock().unwrap();
    assert!(!table.as_ref().unwrap().rules.contains_key(&key));
}

#[test]
fn git_push_guard_table() {
    let rule = "Bash(git push *)";
    // Every wrong row is listed, not only the first.
    let mut wrong = Vec::new();
    for &command in GIT_PUSH_RUNS.iter().chain(GIT_PUSH_UNKNOWN) {
        if !bash(rule, command) {
            wrong.push(format!("must run on {command:?}"));
        }
    }
    for &command in GIT_PUSH_SKIPS {
        if bash(rule, command) {
            wrong.push(format!("must skip {command:?}"));
        }
    }
    assert!(wrong.is_empty(), "{rule}:\n{}", wrong.join("\n"));
}

#[test]
fn bash_rules() {
    let rows: &[(&str, &str, bool)] = &[
        ("Bash(git *)", "git push origin main", true),
        ("Bash(git *)", "git", true),
        ("Bash(git *)", "gitk", false),
        ("Bash(git *)", "/opt/git/bin/git -C x log", true),
        ("Bash(git push *)", "GIT_DIR=x FOO=1 git push", true),
        ("Bash(git push *)", "echo 'git push && x'", true),
        ("Bash(git push *)", "git commit -m 'then git push'", true),
        ("Bash(rm -rf *)", "rm -rf /", true),
        ("Bash(rm -rf *)", "rm -r /", false),
        ("Bash(rm *)", "rm x", true),
        ("Bash(rm *)", "/bin/rm x", true),
        ("Bash(rm *)", "sudo rm -rf /", true),
        ("Bash(rm *)", "r\\m x", true),
        ("Bash(rm *)", "\"rm\" x", true),
        ("Bash(rm *)", "find . -name '*.o' -exec rm {} +", true),
        ("Bash(rm *)", "ls | xargs rm", true),
        ("Bash(rm *)", "ls | xargs -0 rm -f", true),
        ("Bash(rm *)", "busybox rm x", true),
        ("Bash(rm *)", "ls | xargs -I{} rm {}", true),
        ("Bash(rm *)", "command rm -rf /", true),
        ("Bash(rm *)", "bash -c 'r\"m\" -rf /'", true),
        ("Bash(rm *)", "$(printf rm) -rf /", true),
        ("Bash(rm *)", "rmdir x", false),
        // git runs commands from its words (`git bisect run rm x`): not a program known to
        // leave them alone, so a suffix that matches runs the hook.
        ("Bash(rm *)", "git rm x", true),
        ("Bash(rm *)", "ls -la", false),
        ("Bash(rm *)", "echo rm", false),
        ("Bash(rm *)", "for f in a b; do rm \"$f\"; done", true),
        ("Bash(npm run test:*)", "npm run test --watch", true),
        ("Bash(npm run test:*)", "npm run build", false),
        ("Bash(npm test)", "npm test", true),
        ("Bash(npm test)", "cd x && npm test", true),
        ("Bash(npm test)", "npm test -- -u", false),
        ("Bash(./deploy.sh *)", "./deploy.sh prod", true),
        ("Bash(./deploy.sh *)", "bash -c './deploy.sh prod'", true),
        ("Bash(./deploy.sh *)", "/srv/app/deploy.sh prod", true),
        ("Bash(* --force)", "git push --force", true),
        ("Bash(* --force)", "git push", false),
        ("Bash(*)", "anything", true),
        ("Bash()", "anything", true),
        ("Bash", "anything at all", true),
    ];
    for &(rule, command, expected) in rows {
        assert_eq!(bash(rule, command), expected, "{rule} vs {command:?}");
    }
}

#[test]
fn a_missing_or_odd_command_runs_the_hook() {
    let rule = parse_rule("Bash(git push *)").unwrap();
    let cwd = Path::new("/");
    for input in [json!({}), json!({"command": 7}), json!({"command": null})] {
        assert!(rule.matches("Bash", &input, cwd, cwd), "{input}");
    }
}

/// Runs `f` on a thread with a tokio worker's stack or less.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn commands_beyond_the_limits_run_the_hook_without_crashing() {
    let too_deep = [
        format!("echo {}ls{}", "$(".repeat(100_000), ")".repeat(100_000)),
        format!("echo {}ls{}", "$(echo ".repeat(80), ")".repeat(80)),
        format!("{}ls{}", "{ ".repeat(50_000), "; }".repeat(50_000)),
        format!("{}ls{}", "{ ".repeat(3_000), "; }".repeat(3_000)),
        format!(
            "{}ls{}",
            "if a; then ".repeat(20_000),
            "; fi".repeat(20_000)
        ),
        format!("ls {}", "$(".repeat(100_000)),
        "ls -la; ".repeat(1 << 20),
    ];
    for command in too_deep {
        let shown = command[..40.min(command.len())].to_string();
        assert!(
            on_small_stack(move || bash("Bash(git push *)", &command)),
            "{shown}"
        );
    }
    // Long but flat: parsed (or not) without a crash, whatever the answer.
    for command in [format!("ls {}", "a ".repeat(30_000)), "\"'".repeat(30_000)] {
        on_small_stack(move || bash("Bash(git push *)", &command));
    }
}

#[test]
fn nesting_within_the_limits_is_understood_on_a_small_stack() {
    let within = [
        format!("echo {}ls{}", "$(echo ".repeat(60), ")".repeat(60)),
        // Compound commands to the bound (`shell::MAX_NESTING`; past it the line is unknown).
        format!("{}ls{}", "{ ".repeat(12), "; }".repeat(12)),
        format!("{}ls{}", "( { ".repeat(6), "; } )".repeat(6)),
        format!("{}ls{}", "if a; then ".repeat(12), "; fi".repeat(12)),
        format!("{}ls{}", "while a; do ".repeat(12), "; done".repeat(12)),
        // Within each script, and 60 levels of them.
        format!("echo {}ls{}", "$( ( echo ".repeat(60), " ) )".repeat(60)),
    ];
    for command in within {
        let shown = command[..40.min(command.len())].to_string();
        let analysis = on_small_stack(move || shell::analyze(&command));
        assert_eq!(analysis.unknown, None, "{shown}");
        assert!(!analysis.commands.is_empty());
    }
}

#[test]
fn patterns_are_bounded() {
    let long = format!("Bash({})", "a".repeat(3 << 20));
    let e = parse_rule(&long).unwrap_err();
    assert!(
        e.contains("longer than") && e.len() < 300,
        "{}",
        &e[..e.len().min(300)]
    );
    let stars = format!("Bash({})", "*".repeat(100_000));
    let e = parse_rule(&stars).unwrap_err();
    assert!(
        e.contains("wildcards") && e.len() < 300,
        "{}",
        &e[..e.len().min(300)]
    );
    // The most wildcards allowed, against the longest command parsed: still a regex
    // search, linear in the command.
    let rule = format!("Bash({}x)", "a*".repeat(MAX_WILDCARDS - 1));
    let rule = parse_rule(&rule).unwrap();
    let command = format!("echo {}", "a".repeat(60_000));
    assert!(!rule.matches(
        "Bash",
        &json!({ "command": command }),
        Path::new("/"),
        Path::new("/")
    ));
}

#[test]
fn path_rules() {
    let rows: &[(&str, &str, &str, bool)] = &[
        ("Edit(*.ts)", "Edit", "/repo/src/a.ts", true),
        ("Edit(*.ts)", "Write", "/repo/a.ts", true),
        ("Edit(*.ts)", "MultiEdit", "/repo/a.ts", true),
        ("Edit(*.ts)", "Read", "/repo/a.ts", false),
        ("Edit(*.ts)", "Edit", "/repo/a.rs", false),
        ("Write(src/**)", "Write", "/repo/src/deep/a.rs", true),
        ("Write(src/**)", "Write", "/repo/lib/src/a.rs", false),
        ("Write(**/src/**)", "Write", "/repo/lib/src/a.rs", true),
        ("Read(.env)", "Read", "/repo/config/.env", true),
        ("Read(//etc/**)", "Read", "/etc/passwd", true),
        ("Read(/secrets/*)", "Read", "/repo/secrets/k", true),
        ("Read(./src/*.rs)", "Read", "src/main.rs", true),
        // `..` is resolved before matching: where the path ends is what counts
        ("Write(src/**)", "Write", "/repo/lib/../src/a.rs", true),
        ("Write(src/**)", "Write", "lib/../src/a.rs", true),
        ("Write(src/**)", "Write", "/repo/src/../lib/a.rs", false),
        ("Read(//etc/**)", "Read", "/tmp/../etc/shadow", true),
        ("Read(/secrets/*)", "Read", "/repo/x/./../secrets/k", true),
        ("Edit(*.ts)", "Edit", "/repo/a.ts/../b.rs", false),
    ];
    for &(rule, tool, path, expected) in rows {
        let r = parse_rule(rule).unwrap();
        let got = r.matches(
            tool,
            &json!({ "file_path": path }),
            Path::new("/repo"),
            Path::new("/repo"),
        );
        assert_eq!(got, expected, "{rule} vs {tool} {path}");
    }
}

/// `~/` is anchored at the home directory the rule was compiled with, never at the
/// process's `$HOME` (the matcher reads no environment); without one it matches nothing.
#[test]
fn home_rules_use_the_home_directory_given_at_load() {
    let edit = |home: Option<&Path>, path: &str| {
        IfRule::parse("Edit(~/.ssh/**)", home).unwrap().matches(
            "Edit",
            &json!({ "file_path": path }),
            Path::new("/repo"),
            Path::new("/repo"),
        )
    };
    // A home that is not this process's `$HOME`, written with `..` (normalized at load).
    let home = Path::new("/home/nobody-else/../alice");
    assert!(edit(Some(home), "/home/alice/.ssh/id_ed25519"));
    assert!(edit(Some(home), "/home/alice/x/../.ssh/config"));
    assert!(!edit(Some(home), "/home/alice/.sshx/k"));
    assert!(!edit(Some(home), "/home/bob/.ssh/k"));
    // Only the home given at load anchors `~/`: not root's (the `$HOME` of CI), nor any
    // other (the matcher reads no environment; `.ci/check-layout` keeps it so).
    for other in ["/root/.ssh/k", "/home/bob/.ssh/k"] {
        assert!(!edit(Some(home), other));
        assert!(!edit(None, other));
    }
    assert!(!edit(None, "/home/alice/.ssh/k"));
}

#[test]
fn a_huge_cwd_is_not_compiled_and_still_matches() {
    let cwd = PathBuf::from(format!("/{}", "d".repeat(3 << 20)));
    for (rule, path) in [("Edit(*.ts)", "a.ts"), ("Edit(src/*.ts)", "src/a.ts")] {
        let r = parse_rule(rule).unwrap();
        assert!(
            r.matches(
                "Edit",
                &json!({ "file_path": path }),
                &cwd,
                Path::new("/repo")
            ),
            "{rule}"
        );
    }
}

#[test]
fn tool_name_rules() {
    let input = json!({});
    let cwd = Path::new("/");
    assert!(
        parse_rule("WebFetch")
            .unwrap()
            .matches("WebFetch", &input, cwd, cwd)
    );
    assert!(
        !parse_rule("WebFetch")
            .unwrap()
            .matches("Bash", &input, cwd, cwd)
    );
    assert!(
        parse_rule("mcp__memory")
            .unwrap()
            .matches("mcp__memory__create", &input, cwd, cwd)
    );
    assert!(
        !parse_rule("mcp__memory")
            .unwrap()
            .matches("mcp__memoryx__create", &input, cwd, cwd)
    );
    assert!(
        parse_rule("mcp__*")
            .unwrap()
            .matches("mcp__a__b", &input, cwd, cwd)
    );
    let fetch = parse_rule("WebFetch(https://example.com/*)").unwrap();
    assert!(fetch.matches(
        "WebFetch",
        &json!({"url": "https://example.com/x"}),
        cwd,
        cwd
    ));
    assert!(!fetch.matches("WebFetch", &json!({"url": "https://evil.com/x"}), cwd, cwd));
}

#[test]
fn invalid_rules_are_rejected() {
    for rule in ["Bash(git", "Ba sh", "", "Edit([)"] {
        assert!(parse_rule(rule).is_err(), "{rule}");
    }
}

/// Path and tool globs are compiled when an event reaches them, into a bounded cache:
/// more distinct globs than it holds still answer, and the cache stays bounded.
#[test]
fn globs_compile_into_a_bounded_cache() {
    use super::lazy_glob::{CACHED_GLOBS, LazyGlob};
    let (cwd, project) = (Path::new("/p"), Path::new("/p"));
    let rules: Vec<IfRule> = (0..CACHED_GLOBS * 2)
        .map(|i| IfRule::parse(&format!("Read(./a/{i}/**)"), None))
        .collect::<Result<_, _>>()
        .unwrap();
    for round in 0..2 {
        for (i, rule) in rules.iter().enumerate() {
            let input = |path: String| json!({"file_path": path});
            assert!(
                rule.matches("Read", &input(format!("a/{i}/x/y")), cwd, project),
                "{round} {i}"
            );
            assert!(
                !rule.matches("Read", &input(format!("a/{i}x/y")), cwd, project),
                "{round} {i}"
            );
            assert!(LazyGlob::cached() <= CACHED_GLOBS);
        }
    }
    let tool = IfRule::parse("Web*", None).unwrap();
    assert!(tool.matches("WebFetch", &json!({}), cwd, project));
    assert!(!tool.matches("Bash", &json!({}), cwd, project));
    assert!(IfRule::parse("Read(a/[b)", None).is_err());
}
