//! Stop 35's red team: the fixes of the last stop (the model import of wasm plugins,
//! bounded MCP bytes, the model key rule, the `CLAUDE_ENV_FILE` pin, refused input under
//! `--format claude`) attacked with members nobody named. Each test is the attack; what
//! got through was fixed at its chokepoint (named on the test), and what still gets
//! through is `#[ignore]`d with why.

use serde_json::json;

use crate::model_server::{INPUT_TOKENS, ModelServer, OUTPUT_TOKENS};
use crate::support::{TestEnv, bash_input, hooks};

/// `CLAUDE_ENV_FILE` in Claude Code's own layout (`~/.claude/session-env/<s>/<file>`, so
/// the pin lets it pass), but the file there is a hard link to `~/.bashrc`: the no-follow
/// open sees a regular file with no symlink anywhere, and the hooks' `export` lines went
/// into every later shell of the user. Fixed at `config/file.rs` `open_checked`, the one
/// open every write of the host passes: a file opened to be written that has other names
/// is refused. The control (the same path, no hard link) is still written.
#[test]
fn claude_env_file_hard_linked_to_a_startup_file_is_refused() {
    let env = TestEnv::new();
    let fake_home = env.home.parent().unwrap().join("fakehome");
    let session_dir = fake_home.join(".claude/session-env/s");
    std::fs::create_dir_all(&session_dir).unwrap();
    let bashrc = fake_home.join(".bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let linked = session_dir.join("sessionstart-hook-0.sh");
    std::fs::hard_link(&bashrc, &linked).unwrap();
    env.user_hooks(hooks(
        "SessionStart",
        "",
        json!([{"type": "command",
                "command": "printf 'export %s=1\\n' PWNED >> \"$CLAUDE_ENV_FILE\""}]),
    ));
    let run_with = |file: &std::path::Path| {
        let mut cmd = env.command();
        cmd.args(["dispatch", "SessionStart"])
            .env("HOME", &fake_home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("CLAUDE_ENV_FILE", file);
        let input = json!({"session_id": "s", "hook_event_name": "SessionStart",
                           "source": "startup", "cwd": env.project});
        let run = env.run_with(&mut cmd, &input.to_string());
        assert_eq!(run.code, 0, "{}", run.stderr);
        run
    };
    let run = run_with(&linked);
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "# the user's\n",
        "the hooks' exports reached ~/.bashrc through a hard link: {}",
        run.stdout
    );
    assert!(
        run.stdout.contains("CLAUDE_ENV_FILE") && run.stdout.contains("hard links"),
        "{}",
        run.stdout
    );
    // The control: the same path, its own file.
    std::fs::remove_file(&linked).unwrap();
    run_with(&linked);
    assert_eq!(
        std::fs::read_to_string(&linked).unwrap(),
        "export PWNED=1\n"
    );
}

/// `CLAUDE_CONFIG_DIR` set to a directory of the workspace (a repository's `env` block
/// reaches every hook's environment, Claude Code's own config dir stays `~/.claude`):
/// the pin took the repository's directory as the layout, so Claude Code's real env file
/// under `~/.claude/session-env/` was refused and the hooks' exports reached the agent no
/// more (a repository turning the forwarding off). Fixed at `host/places.rs`
/// `claude_env_file_refusal`: `CLAUDE_CONFIG_DIR` is judged as every path variable is
/// (`config::env::check_path`), a workspace's ignored. The file inside the workspace stays
/// refused (`CLAUDE_ENV_FILE` is a path variable too).
#[test]
fn a_workspace_claude_config_dir_neither_moves_nor_blocks_the_env_file() {
    let env = TestEnv::new();
    let fake_home = env.home.parent().unwrap().join("fakehome");
    let real = fake_home.join(".claude/session-env/s");
    std::fs::create_dir_all(&real).unwrap();
    let repo_dir = env.project.join(".claude-config");
    std::fs::create_dir_all(repo_dir.join("session-env/s")).unwrap();
    env.user_hooks(hooks(
        "SessionStart",
        "",
        json!([{"type": "command",
                "command": "printf 'export %s=1\\n' PWNED >> \"$CLAUDE_ENV_FILE\""}]),
    ));
    let run_with = |file: &std::path::Path| {
        let mut cmd = env.command();
        cmd.args(["dispatch", "SessionStart"])
            .env("HOME", &fake_home)
            .env("CLAUDE_CONFIG_DIR", &repo_dir)
            .env("CLAUDE_ENV_FILE", file);
        let input = json!({"session_id": "s", "hook_event_name": "SessionStart",
                           "source": "startup", "cwd": env.project});
        let run = env.run_with(&mut cmd, &input.to_string());
        assert_eq!(run.code, 0, "{}", run.stderr);
        run
    };
    let inside = repo_dir.join("session-env/s/sessionstart-hook-0.sh");
    let run = run_with(&inside);
    assert!(
        !std::fs::read_to_string(&inside)
            .unwrap_or_default()
            .contains("PWNED"),
        "the exports went into the workspace: {}",
        run.stdout
    );
    let own = real.join("sessionstart-hook-0.sh");
    let run = run_with(&own);
    assert_eq!(
        std::fs::read_to_string(&own).unwrap_or_default(),
        "export PWNED=1\n",
        "Claude Code's own file was refused for the repository's CLAUDE_CONFIG_DIR: {}",
        run.stdout
    );
}

/// Input that is JSON but not an object (`[]`, `"x"`, `5`, `null`) under `--format
/// claude` with the event named: the host refused it (`InputNotObject`, no hook saw it)
/// but answered exit 1, a non-blocking error, so the tool ran as if every hook had
/// allowed it, where input that is not JSON at all blocks. Fixed at
/// `dispatch/input.rs` `parse`, the one reader of an input: it is an object or it is
/// refused, and every refused input takes `cli/dispatch.rs` `unreadable` (a block).
#[test]
fn json_that_is_not_an_object_blocks_under_the_claude_format() {
    let env = TestEnv::new();
    let marker = env.project.join("hook-ran");
    env.user_hooks(hooks(
        "PreToolUse",
        "",
        json!([{"type": "command",
                "command": format!("touch {}", marker.display())}]),
    ));
    for stdin in [
        &b"[]"[..],
        b"\"PreToolUse\"",
        b"5",
        b"null",
        b"\xef\xbb\xbf[1]",
    ] {
        let run = crate::support::run_bytes(
            env.command()
                .args(["dispatch", "PreToolUse", "--format", "claude"]),
            stdin,
        );
        let shown = String::from_utf8_lossy(stdin);
        assert_eq!(
            run.code, 2,
            "{shown}: refused but not blocked: {}",
            run.stderr
        );
        assert!(!marker.exists(), "{shown}: a hook ran");
    }
    // The control: an object is read, and its hook runs.
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(marker.exists(), "the control's hook did not run");
}

/// A plugin granted a budget of 16 tokens sends one request of 40,000 bytes of text
/// (about 10,000 tokens): the budget lowered only the output asked for (`max_tokens`) and
/// refused only once spent, so the first call went out whole and the provider billed
/// hundreds of times the grant. Fixed at `handlers/model/mod.rs` `Resolved::complete`,
/// which every model request passes (prompt, agent and plugin calls): a request whose
/// text, estimated at four bytes a token, does not fit what is left is not sent.
#[test]
fn one_large_request_cannot_overshoot_the_token_budget() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![]);
    env.vouch_for_model_server(&server.url);
    let budget = INPUT_TOKENS + OUTPUT_TOKENS;
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{
            "type": "wasm",
            "plugin": hookhost_test_plugins::plugins::HOSTILE_RAW,
            "config": {"attack": "model-flood", "arg": "word ".repeat(8_000)},
            "limits": {"fuel": 5_000_000},
            "capabilities": {"model": {"tokensPerEvent": budget}}
        }]),
    ));
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("ANTHROPIC_BASE_URL", &server.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-stop35");
    let run = env.run_with(&mut cmd, &bash_input("ls").to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        server.requests().is_empty(),
        "a request of ~10,000 tokens was sent under a budget of {budget}: {}",
        run.stdout
    );
}
