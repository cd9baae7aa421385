//! Attacks through `PATH`: a repository that plants `./sh`, `./bash` and `./cat` must not
//! get them run by anyone's hooks when the user's `PATH` has an empty or relative entry
//! (`PATH=:/usr/bin`, `PATH=.:/bin`), as many do by accident.

use serde_json::json;

use crate::support::{TestEnv, bash_input, hook_fields, hooks};

/// A program in the repository that leaves a mark when it runs.
fn plant(env: &TestEnv, path: &str) {
    use std::os::unix::fs::PermissionsExt;
    let marker = env
        .project
        .join(format!("pwned-{}", path.replace('/', "-")));
    let file = env.write(
        path,
        &format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display()),
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn pwned(env: &TestEnv) -> Vec<String> {
    std::fs::read_dir(&env.project)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("pwned-"))
        .collect()
}

#[test]
fn empty_and_relative_path_entries_never_run_the_repositorys_programs() {
    let system_path = "/usr/local/bin:/usr/bin:/bin";
    for hostile in [
        format!(":{system_path}"),
        format!("{system_path}:"),
        format!("/usr/bin::{system_path}"),
        format!(".:{system_path}"),
        format!("bin:./bin:{system_path}"),
    ] {
        let env = TestEnv::new();
        for program in ["sh", "bash", "cat", "bin/sh", "bin/bash", "bin/cat"] {
            plant(&env, program);
        }
        let out_file = env.project.join("hook-path");
        let handlers = |source: &str| {
            json!([
                {"type": "command", "id": format!("{source}-shell"), "command": format!("echo \"$PATH\" > '{}'; echo x | cat", out_file.display())},
                {"type": "command", "id": format!("{source}-bash"), "shell": "bash", "command": "echo x | cat"},
                {"type": "command", "id": format!("{source}-exec"), "command": "cat", "args": ["/dev/null"]}
            ])
        };
        // Every source: the user's own, managed policy, and the repository's.
        env.user_hooks(hooks("PreToolUse", "*", handlers("user")));
        env.managed(hooks("PreToolUse", "*", handlers("managed")));
        env.project_hooks(hooks("PreToolUse", "*", handlers("project")));
        let run = env.run_with(
            env.command()
                .args(["dispatch", "PreToolUse"])
                .env("PATH", &hostile),
            &bash_input("ls").to_string(),
        );
        assert_eq!(run.code, 0, "{hostile}: {}", run.stderr);
        let out = run.json();
        assert_eq!(pwned(&env), Vec::<String>::new(), "{hostile}: {out}");
        for status in hook_fields(&out, "id", "status") {
            assert!(status.ends_with(":ok"), "{hostile}: {status}: {out}");
        }
        // The hooks' own PATH has no entry that names the repository either.
        let path = std::fs::read_to_string(&out_file).unwrap();
        assert!(
            path.trim().split(':').all(|entry| entry.starts_with('/')),
            "{hostile}: the hook got PATH={path}"
        );
    }
}

#[test]
fn relative_exec_paths_are_the_projects_own_and_bare_names_need_an_absolute_entry() {
    let env = TestEnv::new();
    env.script("mine", "touch ran-mine");
    plant(&env, "only-here");
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([
            {"type": "command", "id": "relative", "command": "./hooks/mine", "args": []},
            {"type": "command", "id": "bare", "command": "only-here", "args": []}
        ]),
    ));
    // Dispatched from another directory: `./hooks/mine` is still the project's.
    let run = env.run_with(
        env.command()
            .args(["dispatch", "PreToolUse", "--project"])
            .arg(&env.project)
            .current_dir(&env.home)
            .env("PATH", ".:/usr/bin:/bin"),
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert!(env.project.join("ran-mine").exists(), "{out}");
    assert_eq!(out["hooks"][1]["status"], "failed", "{out}");
    let message = out["hooks"][1]["message"].as_str().unwrap();
    assert!(
        message.contains("`only-here` is not in PATH") && message.contains("absolute entries"),
        "{message}"
    );
    assert_eq!(pwned(&env), Vec::<String>::new());
}
