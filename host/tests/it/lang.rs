//! Plugins in other languages: the Python port of deny-dangerous-bash (componentize-py)
//! and the JavaScript port of protect-paths (componentize-js) run through the host and
//! decide exactly as the Rust originals on the same inputs; their compile cache; the
//! scaffolds of `hookhost plugin new` build and pass their tests.
//!
//! The Python and JS components come from `plugins/build-lang.sh` (cached by a stamp of
//! their sources). Without the toolchains these tests skip, each printing
//! `SKIPPED: <test>: <why>` in the normal test output (which `.ci/run` fails on), and
//! `HOOKHOST_REQUIRE_LANG_PLUGINS=1` (set by `.ci/run`) makes them fail outright.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use hookhost::handlers::Verdict;
use hookhost::handlers::wasm::{CacheStatus, WasmRuntime};
use hookhost::outcome::{Decision, HookStatus, Outcome};
use hookhost_test_plugins::plugins;
use serde_json::{Value, json};

use crate::skip::skipped;
use crate::support::*;
use hookhost::handlers::wasm::PluginCall;

/// The Python and JS components.
struct LangPlugins {
    python_deny_dangerous_bash: PathBuf,
    js_protect_paths: PathBuf,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn required() -> bool {
    std::env::var("HOOKHOST_REQUIRE_LANG_PLUGINS").is_ok_and(|v| v == "1")
}

/// Why the plugins are missing, as a skip reason; fails instead when
/// `HOOKHOST_REQUIRE_LANG_PLUGINS=1`.
fn missing(what: &str) -> Result<LangPlugins, String> {
    assert!(
        !required(),
        "HOOKHOST_REQUIRE_LANG_PLUGINS=1 but {what}; run `plugins/build-lang.sh --install DIR`"
    );
    Err(what.to_string())
}

/// The Python and JS plugins for `test`, or `None` after reporting `test` as skipped.
fn lang_plugins_for(test: &str) -> Option<&'static LangPlugins> {
    match lang_plugins() {
        Ok(plugins) => Some(plugins),
        Err(why) => {
            skipped(test, why);
            None
        }
    }
}

/// Builds (or reuses) the Python and JS plugins: into `HOOKHOST_LANG_PLUGINS_DIR` when
/// set (`.ci/run` builds there first), else under the test target directory.
fn lang_plugins() -> Result<&'static LangPlugins, &'static str> {
    static PLUGINS: OnceLock<Result<LangPlugins, String>> = OnceLock::new();
    PLUGINS
        .get_or_init(|| {
            let out = std::env::var_os("HOOKHOST_LANG_PLUGINS_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lang-plugins"));
            let script = repo().join("plugins/build-lang.sh");
            let result = Command::new(&script)
                .arg(&out)
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
            let stderr = String::from_utf8_lossy(&result.stderr);
            match result.status.code() {
                Some(0) => Ok(LangPlugins {
                    python_deny_dangerous_bash: out.join("python_deny_dangerous_bash.wasm"),
                    js_protect_paths: out.join("js_protect_paths.wasm"),
                }),
                Some(3) => missing(stderr.trim()),
                _ => panic!("{} failed:\n{stderr}", script.display()),
            }
        })
        .as_ref()
        .map_err(String::as_str)
}

/// What a hook decided, without timings and ids: the fields the agent acts on.
fn verdict(outcome: &Outcome) -> Value {
    let v = serde_json::to_value(outcome).unwrap();
    let statuses: Vec<Value> = v["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].clone())
        .collect();
    json!({
        "decision": v["decision"],
        "reason": v["reason"],
        "continue": v["continue"],
        "hookSpecificOutput": v["hookSpecificOutput"],
        "notices": v["notices"],
        "statuses": statuses,
    })
}

/// A wasm hook with room for the interpreters (Python's initial memory is ~14 MiB).
fn lang_hook(plugin: &Path, config: Option<Value>) -> Value {
    let mut extra = json!({"id": "hook", "limits": {"memoryMb": 128}});
    if let Some(config) = config {
        extra["config"] = config;
    }
    wasm_hook(plugin.to_str().unwrap(), extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_deny_dangerous_bash_decides_like_the_rust_one() {
    let Some(lang) = lang_plugins_for("python_deny_dangerous_bash_decides_like_the_rust_one")
    else {
        return;
    };
    let project = tempfile::tempdir().unwrap();
    let rust = settings(
        "PreToolUse",
        "*",
        vec![lang_hook(Path::new(plugins::DENY_DANGEROUS_BASH), None)],
    );
    let python = settings(
        "PreToolUse",
        "*",
        vec![lang_hook(&lang.python_deny_dangerous_bash, None)],
    );
    let mut denied = 0;
    let cases: Value = serde_json::from_str(include_str!(
        "../../../plugins/deny-dangerous-bash/cases.json"
    ))
    .unwrap();
    let (deny, allow) = (
        cases["deny"].as_array().unwrap(),
        cases["allow"].as_array().unwrap(),
    );
    let commands = deny.iter().chain(allow).map(|c| c.as_str().unwrap());
    for command in commands {
        let want = dispatch(project.path(), &rust, "PreToolUse", bash(command)).await;
        let got = dispatch(project.path(), &python, "PreToolUse", bash(command)).await;
        assert_eq!(verdict(&got), verdict(&want), "`{command}`");
        assert!(got.notices.is_empty(), "`{command}`: {:?}", got.notices);
        denied += usize::from(got.decision == Decision::Deny);
    }
    assert_eq!(denied, deny.len(), "exactly the `deny` cases are denied");
    assert!(!allow.is_empty(), "the inputs cover both answers");

    // Other tools and events: no opinion from either.
    let edit = json!({"session_id": "s1", "cwd": "/tmp", "tool_name": "Edit",
        "tool_input": {"file_path": "/tmp/a", "old_string": "rm -rf /", "new_string": ""}});
    let want = dispatch(project.path(), &rust, "PreToolUse", edit.clone()).await;
    let got = dispatch(project.path(), &python, "PreToolUse", edit).await;
    assert_eq!(verdict(&got), verdict(&want));
    assert_eq!(got.decision, Decision::None);
}

/// The Python port's own unit tests, on the cases it shares with the Rust plugin (the
/// Rust plugin's run in `.ci/run`, natively). Needs only `python3`.
#[test]
fn python_port_passes_the_shared_rule_cases() {
    let out = must(
        Command::new("python3")
            .args(["-m", "unittest", "-v"])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(repo().join("plugins/python-deny-dangerous-bash")),
    );
    assert!(out.contains("Ran 2 tests") && out.contains("OK"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_protect_paths_decides_like_the_rust_one() {
    let Some(lang) = lang_plugins_for("js_protect_paths_decides_like_the_rust_one") else {
        return;
    };
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path().display().to_string();
    let configs = [
        None,
        Some(json!({"globs": ["secrets/**", "*.key", "docs/?.md"]})),
    ];
    let mut denied = 0;
    for config in configs {
        let rust = settings(
            "PreToolUse",
            "*",
            vec![lang_hook(Path::new(plugins::PROTECT_PATHS), config.clone())],
        );
        let js = settings(
            "PreToolUse",
            "*",
            vec![lang_hook(&lang.js_protect_paths, config.clone())],
        );
        for (tool, path) in [
            ("Edit", ".env".to_string()),
            ("Write", format!("{cwd}/app/.env.local")),
            ("MultiEdit", format!("{cwd}/.git/config")),
            ("Edit", "keys/server.pem".into()),
            ("Write", "/elsewhere/home/id_rsa.pub".into()),
            ("Edit", "./src/main.rs".into()),
            ("Write", format!("{cwd}/environment.md")),
            ("Edit", "git/notes".into()),
            ("Edit", "secrets/deep/token.txt".into()),
            ("Write", format!("{cwd}/a/b/c.key")),
            ("Edit", "docs/a.md".into()),
            ("Edit", "docs/ab.md".into()),
            ("Read", ".env".into()),
            ("Bash", ".env".into()),
        ] {
            let input = json!({"session_id": "s1", "cwd": cwd, "tool_name": tool,
                "tool_input": {"file_path": path, "content": "x"}});
            let want = dispatch(project.path(), &rust, "PreToolUse", input.clone()).await;
            let got = dispatch(project.path(), &js, "PreToolUse", input).await;
            assert_eq!(verdict(&got), verdict(&want), "{tool} {path} {config:?}");
            assert!(got.notices.is_empty(), "{path}: {:?}", got.notices);
            denied += usize::from(got.decision == Decision::Deny);
        }
        let notebook = json!({"session_id": "s1", "cwd": cwd, "tool_name": "NotebookEdit",
            "tool_input": {"notebook_path": "secrets/n.ipynb"}});
        let want = dispatch(project.path(), &rust, "PreToolUse", notebook.clone()).await;
        let got = dispatch(project.path(), &js, "PreToolUse", notebook).await;
        assert_eq!(verdict(&got), verdict(&want));
    }
    assert_eq!(denied, 8, "the inputs cover both answers");

    // A bad config is a failure of the hook in both (fail open, with a notice).
    let bad = Some(json!({"globs": "not-a-list"}));
    let input = json!({"session_id": "s1", "cwd": cwd, "tool_name": "Edit",
        "tool_input": {"file_path": ".env"}});
    for plugin in [
        Path::new(plugins::PROTECT_PATHS),
        lang.js_protect_paths.as_path(),
    ] {
        let config = settings("PreToolUse", "*", vec![lang_hook(plugin, bad.clone())]);
        let outcome = dispatch(project.path(), &config, "PreToolUse", input.clone()).await;
        assert_eq!(outcome.decision, Decision::None, "{}", plugin.display());
        assert_eq!(
            only_report(&outcome).status,
            HookStatus::Failed,
            "{outcome:#?}"
        );
    }
}

/// The interpreters' components load from the compile cache in milliseconds after the
/// first, seconds-long compile; their real imports (all of WASI, and `wasi:http/types`
/// for JS) are linked.
#[test]
fn lang_plugins_compile_once_then_load_from_the_cache() {
    let Some(lang) = lang_plugins_for("lang_plugins_compile_once_then_load_from_the_cache") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    for (plugin, name) in [
        (
            &lang.python_deny_dangerous_bash,
            "python-deny-dangerous-bash",
        ),
        (&lang.js_protect_paths, "js-protect-paths"),
    ] {
        let started = Instant::now();
        let (info, status) = WasmRuntime::new(Some(cache.path().into()))
            .inspect(plugin)
            .unwrap_or_else(|e| panic!("{e}"));
        let compile = started.elapsed();
        assert_eq!(status, CacheStatus::Compiled);
        assert_eq!(info.name, name);
        assert_eq!(info.events, ["PreToolUse"]);

        // A new runtime (a new process, as far as the cache knows).
        let started = Instant::now();
        let (_, status) = WasmRuntime::new(Some(cache.path().into()))
            .inspect(plugin)
            .unwrap();
        let load = started.elapsed();
        assert_eq!(status, CacheStatus::Hit);
        eprintln!("{name}: compile {compile:?}, cached load {load:?}");
        assert!(
            load * 5 < compile && load.as_millis() < 1500,
            "{name}: cached load {load:?} vs compile {compile:?}"
        );
    }
}

/// Python's ~14 MiB initial memory does not fit an 8 MiB cap: the failure says so.
#[test]
fn python_plugin_needs_its_memory_and_says_so() {
    let Some(lang) = lang_plugins_for("python_plugin_needs_its_memory_and_says_so") else {
        return;
    };
    let project = tempfile::tempdir().unwrap();
    let mut small = PluginCall::new(lang.python_deny_dangerous_bash.to_str().unwrap());
    small.memory_bytes = 8 << 20;
    let run = run(&small, "PreToolUse", bash("rm -rf /"), project.path());
    match &run.run.verdict {
        Verdict::Failed(failure) => assert!(
            failure.message.contains("memory") && failure.message.contains("8 MiB"),
            "{failure:?}"
        ),
        other => panic!("an 8 MiB cap let Python run: {other:?}"),
    }
    let mut enough = small.clone();
    enough.memory_bytes = 128 << 20;
    let run = run_ok(&enough, project.path());
    assert_eq!(
        run["hookSpecificOutput"]["permissionDecision"], "deny",
        "{run:#}"
    );
}

fn run_ok(call: &hookhost::handlers::wasm::PluginCall, project: &Path) -> Value {
    let run = run(call, "PreToolUse", bash("rm -rf /"), project);
    run.output_json
        .unwrap_or_else(|| panic!("no output: {:#?}", run.run))
}

/// Runs `cmd`, panicking with its output when it fails.
fn must(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Scaffolds `lang` into a fresh directory with `hookhost plugin new`.
fn scaffold(lang: &str, root: &Path) -> PathBuf {
    let dir = root.join("my-hook");
    let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .args(["plugin", "new", "--lang", lang, "my-hook", "--dir"])
        .arg(&dir)
        .env("HOOKHOST_CACHE_DIR", root.join("cache"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// The scaffold's rules through the host: the default phrase and a configured one are
/// denied, anything else gets no opinion.
async fn check_scaffold_plugin(plugin: &Path) {
    let project = tempfile::tempdir().unwrap();
    let default = settings("PreToolUse", "Bash", vec![lang_hook(plugin, None)]);
    let outcome = dispatch(project.path(), &default, "PreToolUse", bash("rm -rf / now")).await;
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
    assert_eq!(
        outcome.reason.as_deref(),
        Some("my-hook: `rm -rf /` is not allowed")
    );
    let outcome = dispatch(project.path(), &default, "PreToolUse", bash("ls")).await;
    assert_eq!(outcome.decision, Decision::None, "{outcome:#?}");
    assert_eq!(only_report(&outcome).status, HookStatus::Ok);
    let configured = settings(
        "PreToolUse",
        "Bash",
        vec![lang_hook(plugin, Some(json!({"deny": ["deploy"]})))],
    );
    let outcome = dispatch(
        project.path(),
        &configured,
        "PreToolUse",
        bash("make deploy"),
    )
    .await;
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_scaffold_passes_its_test_builds_and_runs() {
    let root = tempfile::tempdir().unwrap();
    let dir = scaffold("rust", root.path());
    // The versions the example plugins already build with, so nothing new is fetched.
    std::fs::copy(repo().join("plugins/Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scaffold-target");
    let cargo = |args: &[&str]| {
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.args(args)
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .env_remove("RUSTC_WORKSPACE_WRAPPER");
        cmd
    };
    let tested = must(&mut cargo(&["test", "--quiet"]));
    assert!(tested.contains("1 passed"), "{tested}");
    must(&mut cargo(&[
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
    ]));
    let wasm = target.join("wasm32-wasip2/release/my_hook.wasm");
    let (info, _) = runtime().inspect(&wasm).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(info.name, "my-hook");
    check_scaffold_plugin(&wasm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_scaffold_passes_its_test_builds_and_runs() {
    let root = tempfile::tempdir().unwrap();
    let dir = scaffold("python", root.path());
    let tested = must(
        Command::new("python3")
            .args(["-m", "unittest", "-v"])
            .current_dir(&dir),
    );
    assert!(tested.contains("OK"), "{tested}");
    if lang_plugins_for("python_scaffold_passes_its_test_builds_and_runs").is_none() {
        return;
    }
    let tool = std::env::var_os("COMPONENTIZE_PY")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("plugins/.toolchain/venv/bin/componentize-py"));
    must(
        Command::new(dir.join("build.sh"))
            .current_dir(&dir)
            .env("COMPONENTIZE_PY", tool),
    );
    check_scaffold_plugin(&dir.join("my_hook.wasm")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_scaffold_passes_its_test_builds_and_runs() {
    let root = tempfile::tempdir().unwrap();
    let dir = scaffold("js", root.path());
    let tested = must(Command::new("node").arg("--test").current_dir(&dir));
    assert!(tested.contains("pass 2"), "{tested}");
    if lang_plugins_for("js_scaffold_passes_its_test_builds_and_runs").is_none() {
        return;
    }
    // The toolchain `npm install` would fetch, already installed for js-protect-paths.
    std::os::unix::fs::symlink(
        repo().join("plugins/js-protect-paths/node_modules"),
        dir.join("node_modules"),
    )
    .unwrap();
    must(Command::new("node").arg("build.mjs").current_dir(&dir));
    check_scaffold_plugin(&dir.join("my_hook.wasm")).await;
}

/// p50 and p90 of `samples`, in milliseconds.
fn percentiles(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9))
}

/// Benchmark, in one run: per-event cost through the host of the Python and JS plugins
/// (fresh instance per event, cached component) beside the same rules as `python3` and
/// `node` command hooks, and each component's uncached vs cached load.
///
/// `cargo test -p hookhost-tests --test it lang::benchmark -- --ignored --nocapture`
/// (dependencies are built with opt-level 2 in the dev profile; see docs/book/src/authoring.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run explicitly with --ignored --nocapture"]
async fn benchmark() {
    let Some(lang) = lang_plugins_for("benchmark") else {
        return;
    };
    const EVENTS: usize = 40;
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path().display().to_string();
    let py_dir = repo().join("plugins/python-deny-dangerous-bash");
    let js_dir = repo().join("plugins/js-protect-paths");
    let python3 = if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let node = if Path::new("/usr/bin/node").exists() {
        "/usr/bin/node"
    } else {
        "node"
    };
    let bash_input = bash("rm -rf /");
    let edit_input = json!({"session_id": "s1", "cwd": cwd, "tool_name": "Edit",
        "tool_input": {"file_path": format!("{cwd}/.env")}});
    let cases: Vec<(String, Value, Value)> = vec![
        (
            "python wasm (deny-dangerous-bash)".into(),
            settings(
                "PreToolUse",
                "*",
                vec![lang_hook(&lang.python_deny_dangerous_bash, None)],
            ),
            bash_input.clone(),
        ),
        (
            format!("{python3} command hook (same rules)"),
            settings(
                "PreToolUse",
                "*",
                vec![json!({"type": "command", "command": python3,
                    "args": [py_dir.join("command_hook.py")]})],
            ),
            bash_input.clone(),
        ),
        (
            "rust wasm (deny-dangerous-bash)".into(),
            settings(
                "PreToolUse",
                "*",
                vec![lang_hook(Path::new(plugins::DENY_DANGEROUS_BASH), None)],
            ),
            bash_input,
        ),
        (
            "js wasm (protect-paths)".into(),
            settings(
                "PreToolUse",
                "*",
                vec![lang_hook(&lang.js_protect_paths, None)],
            ),
            edit_input.clone(),
        ),
        (
            format!("{node} command hook (same rules)"),
            settings(
                "PreToolUse",
                "*",
                vec![json!({"type": "command", "command": node,
                    "args": [js_dir.join("command-hook.mjs")]})],
            ),
            edit_input.clone(),
        ),
        (
            "rust wasm (protect-paths)".into(),
            settings(
                "PreToolUse",
                "*",
                vec![lang_hook(Path::new(plugins::PROTECT_PATHS), None)],
            ),
            edit_input,
        ),
    ];
    println!(
        "\nper event through the host ({EVENTS} events, fresh wasm instance each; RUST_BACKTRACE={}):",
        std::env::var("RUST_BACKTRACE").unwrap_or_default()
    );
    println!(
        "{:<48} {:>9} {:>9} {:>12}",
        "hook", "p50 ms", "p90 ms", "fuel/event"
    );
    for (name, config, input) in cases {
        let host = hookhost::HostBuilder::new(project.path())
            .settings(config.to_string())
            .wasm_runner(runtime())
            .build();
        // Warm-up: compile or load from the cache, first instantiation.
        let first = host.dispatch("PreToolUse", input.clone()).await.unwrap();
        assert_eq!(first.decision, Decision::Deny, "{name}: {first:#?}");
        let mut samples = Vec::with_capacity(EVENTS);
        let mut fuel = None;
        for _ in 0..EVENTS {
            let started = Instant::now();
            let outcome = host.dispatch("PreToolUse", input.clone()).await.unwrap();
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(outcome.decision, Decision::Deny, "{name}");
            fuel = outcome.hooks[0].fuel;
        }
        let (p50, p90) = percentiles(samples);
        let fuel = fuel.map_or("-".to_string(), |f| f.to_string());
        println!("{name:<48} {p50:>9.2} {p90:>9.2} {fuel:>12}");
    }

    println!("\ncomponent load (new runtime each time):");
    println!(
        "{:<30} {:>9} {:>12} {:>14}",
        "component", "size MB", "compile ms", "cached load ms"
    );
    let cache = tempfile::tempdir().unwrap();
    for (name, plugin) in [
        (
            "python_deny_dangerous_bash",
            &lang.python_deny_dangerous_bash,
        ),
        ("js_protect_paths", &lang.js_protect_paths),
        (
            "deny_dangerous_bash (rust)",
            &PathBuf::from(plugins::DENY_DANGEROUS_BASH),
        ),
    ] {
        let size = std::fs::metadata(plugin).unwrap().len() as f64 / 1e6;
        let started = Instant::now();
        let (_, status) = WasmRuntime::new(Some(cache.path().into()))
            .inspect(plugin)
            .unwrap();
        let compile = started.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(status, CacheStatus::Compiled);
        let mut loads = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let (_, status) = WasmRuntime::new(Some(cache.path().into()))
                .inspect(plugin)
                .unwrap();
            loads.push(started.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(status, CacheStatus::Hit);
        }
        let (load, _) = percentiles(loads);
        println!("{name:<30} {size:>9.1} {compile:>12.0} {load:>14.1}");
    }
}
