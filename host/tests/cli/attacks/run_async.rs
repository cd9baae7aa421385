//! Attacks on `hookhost run-async`, the detached runner of async hooks: it loads the
//! config again, so whatever changed since the dispatch (a `git checkout` mid-session, a
//! managed switch, a forged job) must not make it run a hook the dispatch did not admit,
//! or one the config does not admit now.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{Run, TestEnv, wait_until};

/// The session's queue of async results.
fn queue(env: &TestEnv, session: &str) -> PathBuf {
    env.data
        .join("sessions")
        .join(hookhost::session::session_key(session))
        .join("async")
}

/// Waits (bounded) until the session has a queued async result (the runner is done
/// with the hook, whether it ran it or refused it) or a hook left its mark.
fn wait_for_result(env: &TestEnv, session: &str) {
    let dir = queue(env, session);
    wait_until(&format!("an async result in {}", dir.display()), || {
        ["pwned", "benign-ran"]
            .iter()
            .any(|mark| env.project.join(mark).exists())
            || std::fs::read_dir(&dir).is_ok_and(|d| {
                d.flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "json"))
            })
    });
}

fn input(session: &str) -> Value {
    json!({"session_id": session, "tool_name": "Bash", "tool_input": {"command": "ls"}})
}

/// Hooks of PostToolUse: a sync hook that rewrites `.hookhost/hooks.json` with `edited`
/// (as a `git checkout` mid-session would) before the async hook `bg` of the same
/// sequential group is started.
fn checkout_then_async(env: &TestEnv, edited: &Value) -> Value {
    let edited_path = env.write("edited.json", &edited.to_string());
    json!({"hooks": {"PostToolUse": [{"sequential": true, "hooks": [
        {"type": "command", "id": "checkout",
         "command": format!("cp '{}' .hookhost/hooks.json", edited_path.display())},
        {"type": "command", "id": "bg", "async": true, "command": "touch benign-ran"}
    ]}]}})
}

/// The same hooks after the checkout: `bg`, same id, now runs the attacker's command.
fn edited_config() -> Value {
    json!({"hooks": {"PostToolUse": [{"sequential": true, "hooks": [
        {"type": "command", "id": "checkout", "command": "true"},
        {"type": "command", "id": "bg", "async": true, "command": "touch pwned"}
    ]}]}})
}

fn notices(outcome: &Value) -> String {
    outcome["notices"].to_string()
}

fn assert_not_pwned(project: &Path) {
    assert!(
        !project.join("pwned").exists(),
        "the runner ran the edited hook"
    );
    assert!(
        !project.join("benign-ran").exists(),
        "the runner ran a hook the config no longer has"
    );
}

/// A workspace trusted for the run (`HOOKHOST_TRUST_WORKSPACE=1`) trusts whatever its
/// hook files say when the runner loads them: the runner must compare what it loaded
/// with what the dispatch admitted, not trust the fresh lookup by id.
#[test]
fn a_hook_edited_between_the_dispatch_and_its_runner_is_refused() {
    let env = TestEnv::new();
    env.project_hooks(checkout_then_async(&env, &edited_config()));
    let first = env.dispatch("PostToolUse", input("edit"));
    assert_eq!(
        crate::support::hook_fields(&first, "id", "status"),
        ["checkout:ok", "bg:async"],
        "{first}"
    );
    wait_for_result(&env, "edit");
    assert_not_pwned(&env.project);
    let next = env.dispatch(
        "PostToolUse",
        json!({"session_id": "edit", "tool_name": "Read"}),
    );
    let said = notices(&next);
    assert!(
        said.contains("refused to run the async hook `bg`")
            && said.contains("changed since the dispatch admitted it")
            && said.contains("handler"),
        "{next}"
    );
}

/// A workspace trusted in the store is untrusted again by the edit: the runner's config
/// skips the project's hooks, and the runner must not run a skipped hook.
#[test]
fn a_hook_skipped_by_the_runners_config_is_refused() {
    let env = TestEnv::new();
    env.project_hooks(checkout_then_async(&env, &edited_config()));
    let trusted = env.run_untrusted(&["trust"], "");
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    let run = env.run_untrusted(&["dispatch", "PostToolUse"], &input("skip").to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["hooks"][1]["status"], "async", "{}", run.stdout);
    wait_for_result(&env, "skip");
    assert_not_pwned(&env.project);
    let next = env.run_untrusted(
        &["dispatch", "Notification"],
        &json!({"session_id": "skip"}).to_string(),
    );
    let said = notices(&next.json());
    assert!(
        said.contains("refused to run the async hook `bg`") && said.contains("does not run now"),
        "{said}"
    );
}

/// Managed policy switched on between the dispatch and the runner: the runner honours
/// the policy it loads (`allowManagedHooksOnly`, `disableAllHooks`).
#[test]
fn a_managed_switch_between_the_dispatch_and_its_runner_is_honoured() {
    for policy in [
        json!({"allowManagedHooksOnly": true}),
        json!({"disableAllHooks": true}),
    ] {
        let env = TestEnv::new();
        let managed = env.write("managed-next.json", &policy.to_string());
        env.user_hooks(
            json!({"hooks": {"PostToolUse": [{"sequential": true, "hooks": [
                {"type": "command", "id": "switch", "command": format!(
                    "cp '{}' '{}'", managed.display(), env.managed.join("managed.json").display())},
                {"type": "command", "id": "bg", "async": true, "command": "touch pwned"}
            ]}]}}),
        );
        env.dispatch("PostToolUse", input("managed"));
        wait_for_result(&env, "managed");
        assert!(!env.project.join("pwned").exists(), "{policy}: ran");
    }
}

fn run_async(env: &TestEnv, cmd: &mut std::process::Command, job: &Value) -> Run {
    env.run_with(
        cmd.args(["run-async", "--project"]).arg(&env.project),
        &job.to_string(),
    )
}

/// Anyone who can start `hookhost run-async` can hand it any job: a job no dispatch
/// issued (here, one without an id) runs nothing, and says so (exit 1, and a refusal per
/// hook with the session's next outcome); an issued one can only run a hook the loaded
/// config admits now, with the record it has now (the tests above).
#[test]
fn a_forged_job_runs_nothing_the_config_does_not_admit() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PostToolUse": [{"hooks": [
        {"type": "command", "id": "bg", "async": true, "command": "touch pwned"}
    ]}]}}));
    let job = |session: &str, admitted: Value| {
        json!({"version": 1, "event": "PostToolUse", "input": {"session_id": session},
               "hooks": [{"id": "bg", "admitted": admitted},
                         {"id": "no-such-hook", "admitted": {}}]})
    };
    // Untrusted workspace: the project's hook is skipped, whatever the job says.
    let run = run_async(
        &env,
        &mut env.untrusted_command(),
        &job("forged", json!({})),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("not a job id"), "{}", run.stderr);
    // Trusted for the run, but the record is not the hook's.
    let run = run_async(
        &env,
        &mut env.command(),
        &job(
            "forged",
            json!({"id": "bg", "handler": {"command": "touch pwned"}}),
        ),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        !env.project.join("pwned").exists(),
        "a forged job ran a hook"
    );
    let next = env.dispatch("Notification", json!({"session_id": "forged"}));
    let said = notices(&next);
    assert_eq!(
        said.matches("refused to run the async hook").count(),
        4,
        "every hook of both jobs is refused: {said}"
    );
    assert!(said.contains("is not a job id"), "{said}");

    // Garbage on stdin is an error of the runner, not a crash and not a run.
    let garbage = env.run_with(
        env.command()
            .args(["run-async", "--project"])
            .arg(&env.project),
        "{\"version\": 1, \"event\": 7}",
    );
    assert_eq!(garbage.code, 1, "{}", garbage.stderr);
    assert!(garbage.stderr.contains("async job"), "{}", garbage.stderr);
}

/// The job travels on the runner's stdin: its command line holds no input and no hook
/// spec (other users see argv in `ps`), and nothing is left in a file.
#[test]
fn the_job_is_not_on_the_runners_command_line() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PostToolUse": [{"hooks": [
        {"type": "command", "id": "bg", "async": true,
         "command": "tr '\\0' ' ' < /proc/$PPID/cmdline > runner-argv; cat > /dev/null"}
    ]}]}}));
    let mut secret_input = input("argv");
    secret_input["tool_input"]["command"] = json!("echo the-secret-input");
    env.dispatch("PostToolUse", secret_input);
    wait_until("the runner's argv", || {
        env.project.join("runner-argv").exists()
    });
    wait_for_result(&env, "argv");
    let argv = std::fs::read_to_string(env.project.join("runner-argv")).unwrap();
    assert!(argv.contains("run-async"), "{argv}");
    assert!(
        !argv.contains("the-secret-input") && !argv.contains("bg"),
        "{argv}"
    );
    let jobs: Vec<_> = walk(&env.data)
        .into_iter()
        .filter(|p| {
            std::fs::read(p).is_ok_and(|b| String::from_utf8_lossy(&b).contains("admitted"))
        })
        .collect();
    assert!(jobs.is_empty(), "a job was left on disk: {jobs:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
