//! The `if` rule against runners: every program not known to leave its arguments alone
//! may run the command after it (`shell/programs.rs`, `LEAVE_ARGUMENTS_ALONE`).

use std::path::Path;

use super::*;
use crate::matcher::shell;
use serde_json::json;

fn bash(rule: &str, command: &str) -> bool {
    IfRule::parse(rule, None).unwrap().matches(
        "Bash",
        &json!({ "command": command }),
        Path::new("/repo"),
        Path::new("/repo"),
    )
}

/// Runners and wrappers from package managers, containers, secret stores, toolchains and
/// shells: each runs the command after it, so `RUNNER git push origin main` runs the
/// guard. None of them is named in the code: they match because they are not known to
/// leave their arguments alone (the closed list of wrappers that came before is here too).
const RUNNERS: &[&str] = &[
    "uv run",
    "uv run --with rich",
    "uvx",
    "npm exec",
    "npm exec --",
    "npx",
    "npx -y",
    "pnpm exec",
    "pnpm dlx",
    "pnpx",
    "yarn exec",
    "yarn dlx",
    "bunx",
    "bun x",
    "bun run",
    "bundle exec",
    "rbenv exec",
    "pyenv exec",
    "poetry run",
    "pipx run",
    "pdm run",
    "hatch run",
    "rye run",
    "conda run -n base",
    "mamba run -n base",
    "pixi run",
    "docker exec ctr",
    "docker exec -it ctr",
    "docker run --rm img",
    "podman exec ctr",
    "kubectl exec pod --",
    "op run --",
    "op run --env-file=.env --",
    "aws-vault exec prof --",
    "doppler run --",
    "chamber exec svc --",
    "dotenv --",
    "direnv exec .",
    "mise exec --",
    "asdf exec",
    "fnm exec --",
    "volta run",
    "nvm exec",
    "devbox run",
    "flox activate --",
    "nix develop -c",
    "nix shell nixpkgs#git -c",
    "nix run nixpkgs#git --",
    "guix shell --",
    "toolbox run",
    "distrobox enter box --",
    "cargo run --",
    "go run . --",
    "just run",
    "sudo",
    "sudo -u x",
    "sudo -E -H --",
    "doas",
    "run0",
    "pkexec",
    "su -c",
    "runuser -u x --",
    "env",
    "env -i",
    "env -i PATH=/bin",
    "env -u HOME",
    "time",
    "time -p",
    "nice",
    "nice -n 5",
    "ionice -c3",
    "chrt -i 0",
    "taskset 1",
    "numactl -C 0",
    "timeout 5",
    "stdbuf -o0",
    "setsid",
    "setpriv --reuid=1",
    "nohup",
    "unbuffer",
    "chronic",
    "strace -f",
    "ltrace",
    "valgrind",
    "gdb --args",
    "perf record --",
    "catchsegv",
    "xargs",
    "xargs -0",
    "parallel",
    "flock /tmp/lock",
    "chroot /",
    "unshare -r",
    "nsenter -t 1 -m",
    "ip netns exec ns",
    "watch -n1",
    "busybox",
    "toybox",
    "fakeroot",
    "firejail",
    "bwrap --bind / /",
    "systemd-run --user",
    "proot",
    "torsocks",
    "proxychains4",
    "caffeinate -i",
    "ssh host",
    "entr -r",
    "retry --",
    "with-contenv",
    "dbus-launch",
    "xvfb-run -a",
    "command",
    "builtin",
    "exec",
    "exec -a name",
    "coproc",
    "--",
    "tmux new-session -d",
    "screen -dm",
    "foo",
    "foo bar",
    "my-runner --flag value",
    "./bin/run",
    "/opt/x/bin/wrap -q",
];

#[test]
fn every_runner_runs_the_guard() {
    let mut skipped = Vec::new();
    for runner in RUNNERS {
        for tail in ["git push", "git push origin main", "/usr/bin/git push -f"] {
            let command = format!("{runner} {tail}");
            if !bash("Bash(git push *)", &command) {
                skipped.push(command);
            }
        }
    }
    assert!(skipped.is_empty(), "skipped on:\n{}", skipped.join("\n"));
}

/// The other side: the filter skips only after a program known to leave its arguments
/// alone. Every such program, generated from the code's own list, followed by `git push`.
#[test]
fn only_programs_that_leave_their_arguments_alone_keep_the_words_out() {
    let known = shell::LEAVE_ARGUMENTS_ALONE
        .iter()
        .chain(shell::NAMING_BUILTINS)
        .filter(|p| !matches!(**p, "[" | "test"));
    for program in known {
        let command = format!("{program} git push origin main");
        assert!(!bash("Bash(git push *)", &command), "{command}");
        // Written with another case it is another program (on a case-sensitive file
        // system), which the filter does not know: the guard runs.
        let upper = format!("{} git push", program.to_uppercase());
        if upper != command && program.chars().any(|c| c.is_ascii_lowercase()) {
            assert!(bash("Bash(git push *)", &upper), "{upper}");
        }
    }
    assert!(!bash("Bash(git push *)", "[ git push ]"));
    assert!(!bash("Bash(git push *)", "test git push"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Any program the filter does not know, with any options, before `git push`: the
    /// guard runs.
    #[test]
    fn an_unknown_program_before_git_push_runs_the_guard(
        program in "[a-z][a-z0-9_-]{0,12}",
        options in proptest::collection::vec(
            "-[a-zA-Z]{1,3}|--[a-z]{1,8}(=[a-z0-9]{1,5})?|[a-z0-9]{1,6}",
            0..5,
        ),
    ) {
        proptest::prop_assume!(!shell::LEAVE_ARGUMENTS_ALONE.contains(&program.as_str()));
        proptest::prop_assume!(!shell::NAMING_BUILTINS.contains(&program.as_str()));
        let command = format!("{program} {} git push origin main", options.join(" "));
        proptest::prop_assert!(bash("Bash(git push *)", &command), "{}", command);
    }
}

/// Routes to `git push` that no earlier table named (red team, issue 23). Got through
/// before: `jobs -x` (listed as leaving its arguments alone, runs them), `wait -p NAME`
/// (assigns to NAME: a subscript runs), and options between `git` and its subcommand
/// (`git --no-pager push`, `git -c k=v push`, `git -C /tmp push`).
#[test]
fn unnamed_routes_to_git_push_run_the_guard() {
    let mut through = Vec::new();
    for command in [
        "jobs -x git push",
        "sleep 1 & wait -n -p 'a[$(git push)]'",
        "git -C /tmp push origin main",
        "git -C . push origin main",
        "git --git-dir=.git --work-tree=. push",
        "git --no-pager push",
        "git -c core.x=y push",
        "echo git push | sh",
        "echo git push | bash",
        "printf 'git push' | sh -s",
        "bash <<EOF\ngit push\nEOF",
        "sh -s <<< 'git push'",
        "env -S 'git push'",
        "env --split-string='git push'",
        "busybox sh -c 'git push'",
        "set -- git push; \"$@\"",
        "x=git; $x push",
        "${PAGER:-git} push",
        "mapfile -C 'git push' -c 1 < /etc/hostname",
        "readarray -C 'git push' -c 1 arr < /etc/hostname",
        "x='$(git push)'; echo \"${x@P}\"",
        "x='a[$(git push)]'; echo $((x))",
        "x='a[$(git push)]'; [[ $x -eq 1 ]]",
        "x='a[$(git push)]'; (( x ))",
        "declare -i y; x='a[$(git push)]'; y=x",
        "printf -v 'a[$(git push)]' x",
        "read 'a[$(git push)]' <<< x",
        "test -v 'a[$(git push)]'",
        "[ -v 'a[$(git push)]' ]",
        "unset 'a[$(git push)]'",
        "kill -l $(git push)",
        "wait $(git push)",
        "stdbuf -oL git push",
        "echo x | xargs -I{} git push",
        "xargs -a /dev/null git push",
        "find . -maxdepth 0 -execdir git push \\;",
        "find . -maxdepth 0 -ok git push \\;",
        "awk 'BEGIN{system(\"git push\")}'",
        "python3 -c 'import os; os.system(\"git push\")'",
        "sort --compress-program='git push' x",
        "tar -I 'git push' -cf x y",
        "less +'!git push' x",
        "GIT_SSH_COMMAND='x' git push",
        "git push --dry-run",
        "cat x | tee >(git push)",
        "ls -la; exec git push",
        "echo $'git push' | sh",
        "eval \"$(echo git push)\"",
        "type git && git push",
        "hash -p /usr/bin/git g; g push",
        "alias g=git; g push",
        "shopt -s expand_aliases; alias g='git push'; g",
        "git push 2>&-",
        "exec -c git push",
        "coproc { git push; }",
        "trap -- 'git push' DEBUG; :",
        "PROMPT_COMMAND='git push' bash -i",
        "BASH_ENV=<(echo git push) bash -c :",
        "env BASH_ENV=x bash -c true",
        "chroot / git push",
        "flock /tmp/l git push",
        "ionice -c3 git push",
        "taskset 1 git push",
        "watch -n1 git push",
        "script -qc 'git push' /dev/null",
        "ssh localhost git push",
        "su -c 'git push'",
        "runuser -u x -- git push",
        "setsid git push",
        "unbuffer git push",
        "strace -f git push",
        "make -f <(printf 'a:\\n\\tgit push')",
        "cat <<'EOF' | sh\ngit push\nEOF",
    ] {
        if !bash("Bash(git push *)", command) {
            through.push(command);
        }
    }
    assert!(
        through.is_empty(),
        "got through:\n{}",
        through.join("\n---\n")
    );
}

/// One list of the variables a shell runs as code (`config::env::SHELL_CODE_VARIABLES`
/// and exported functions): each, assigned in front of a command, makes the `if` filter
/// run the hook (`Bash(git push *)` on `NAME=x true`), and each is kept from command hooks
/// (`is_code_loading`). A name added to the list is covered both ways.
#[test]
fn every_shell_code_variable_runs_the_hook_and_never_reaches_a_command_hook() {
    use crate::config::env::{SHELL_CODE_VARIABLES, SHELL_FUNCTION_PREFIX, is_code_loading};
    let function = format!("{SHELL_FUNCTION_PREFIX}f");
    let names = SHELL_CODE_VARIABLES
        .iter()
        .copied()
        .chain([function.as_str()]);
    for name in names {
        let command = format!("{name}=x true");
        assert!(
            shell::analyze(&command).unknown.is_some(),
            "{name}: the analysis sees through it"
        );
        assert!(bash("Bash(git push *)", &command), "{command}");
        assert!(
            is_code_loading(name.as_bytes()),
            "{name} reaches command hooks"
        );
    }
    // An ordinary assignment is seen through.
    assert!(!bash("Bash(git push *)", "LANG=x true"));
}
