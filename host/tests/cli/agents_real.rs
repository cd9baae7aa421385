//! One guard, every agent, with the real clients: Codex CLI 0.171.0, Gemini CLI 0.61.0,
//! Copilot CLI 1.0.102 and OpenCode 1.18.33, each run offline against a loopback model
//! server speaking its wire format (`host/tests/common/agent_model.py`) that asks for
//! a destructive shell command (`touch MARKER; mkfs.ext4 -n …`: the marker stands in for
//! the destruction). For each agent: a control run without hookhost
//! creates the marker; with `hookhost install --AGENT` and the sandboxed
//! `deny-dangerous-bash` plugin on `PreToolUse` / `Bash` (hookhost's words, whatever the
//! agent calls its shell tool) the marker is not created and the reason reaches the
//! model; a rewrite hook's command is what runs. `.ci/run` installs the CLIs into
//! `<target>/agents/<name>`; where one is missing the test says `SKIPPED` (CI fails on it).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::skip::skipped;
use crate::support::{Run, TestEnv, deny_dangerous_bash, hooks, run_until};

/// The reason `deny-dangerous-bash` gives for the command below.
const REASON: &str = "raw disk device";

/// One agent under test.
struct Agent {
    /// `--format` and `install --AGENT`.
    id: &'static str,
    /// The npm package and version `.ci/run` installs.
    package: &'static str,
    /// The launcher under `<target>/agents/<id>/node_modules/.bin`.
    bin: &'static str,
    /// The model server's mode.
    wire: &'static str,
}

const CODEX: Agent = Agent {
    id: "codex",
    package: "@openai/codex@0.171.0",
    bin: "codex",
    wire: "responses",
};
const GEMINI: Agent = Agent {
    id: "gemini",
    package: "@google/gemini-cli@0.61.0",
    bin: "gemini",
    wire: "gemini",
};
const COPILOT: Agent = Agent {
    id: "copilot",
    package: "@github/copilot@1.0.102",
    bin: "copilot",
    wire: "chat",
};
const OPENCODE: Agent = Agent {
    id: "opencode",
    package: "opencode-ai@1.18.33",
    bin: "opencode",
    wire: "chat",
};

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hookhost"))
        .parent()
        .and_then(Path::parent)
        .expect("the target directory")
        .to_path_buf()
}

impl Agent {
    /// Its launcher, if installed; else the test is reported as skipped.
    fn binary(&self, test: &str) -> Option<PathBuf> {
        let bin = target_dir()
            .join("agents")
            .join(self.id)
            .join("node_modules/.bin")
            .join(self.bin);
        if bin.exists() {
            Some(bin)
        } else {
            skipped(
                test,
                &format!("{} is not installed (.ci/run installs it)", self.package),
            );
            None
        }
    }
}

/// The loopback model server, killed on drop.
struct Model {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Model {
    fn start(wire: &str, command: &str, dir: &Path) -> Model {
        let log = dir.join("model-requests.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/agent_model.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args([wire, command])
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the model server");
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        let url = format!("http://127.0.0.1:{}", port.trim());
        Model { child, url, log }
    }

    /// Every request body the agent sent.
    fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a run left behind.
struct Ran {
    /// Keeps the directories until the test has looked.
    _env: TestEnv,
    /// The agent's home (`HOME`).
    home: PathBuf,
    run: Run,
    work: PathBuf,
    requests: String,
    audit: String,
    /// The tools the agent offered the model, over all its requests.
    offered: Vec<String>,
}

/// The names of the tools in the model requests of `log` (one JSON line each): Chat
/// Completions' `function.name`, the Responses API's `name` (a built-in tool: its
/// `type`), Gemini's `functionDeclarations`.
fn offered_tools(log: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in log.lines() {
        let Ok(request) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        for tool in request["body"]["tools"].as_array().into_iter().flatten() {
            let declared = tool["functionDeclarations"].as_array();
            let own = [&tool["name"], &tool["function"]["name"], &tool["type"]]
                .into_iter()
                .find_map(Value::as_str)
                .filter(|_| declared.is_none());
            let found = declared
                .into_iter()
                .flatten()
                .filter_map(|d| d["name"].as_str())
                .chain(own);
            for name in found {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
    }
    names
}

/// Runs `agent` once in a fresh work directory, its model asking for `command`; with
/// hookhost installed (by `hookhost install --AGENT`) and `config` as the user's hooks
/// when `config` is given.
fn run_agent(agent: &Agent, binary: &Path, command: &str, config: Option<Value>) -> Ran {
    let env = TestEnv::new();
    let work = env.project.clone();
    let home = env.data.parent().unwrap().join("agent-home");
    std::fs::create_dir_all(&home).unwrap();
    let model = Model::start(agent.wire, command, env.data.parent().unwrap());
    let hookhost = env!("CARGO_BIN_EXE_hookhost");
    let mut cmd = Command::new(binary);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("PWD", &work)
        .env("HOOKHOST_HOME", &env.home)
        .env("HOOKHOST_MANAGED_DIR", &env.managed)
        .env("HOOKHOST_DATA_DIR", &env.data)
        .env("HOOKHOST_CACHE_DIR", env.data.join("cache"))
        .env("HOOKHOST_DISPATCH_DAEMON", "off")
        .current_dir(&work);
    let prompt = "run the command";
    match agent.id {
        "codex" => {
            let codex_home = home.join(".codex");
            std::fs::create_dir_all(&codex_home).unwrap();
            std::fs::write(
                codex_home.join("config.toml"),
                format!(
                    "model = \"mock-model\"\nmodel_provider = \"mock\"\n\
                     check_for_update_on_startup = false\n[model_providers.mock]\n\
                     name = \"mock\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
                     env_key = \"MOCK_API_KEY\"\nrequest_max_retries = 0\n\
                     stream_max_retries = 0\nsupports_websockets = false\n",
                    model.url
                ),
            )
            .unwrap();
            // A hook that only looks like hookhost's (a program named `hookhost` in a
            // repository): `install --codex` must leave it for Codex to ask about.
            std::fs::write(
                codex_home.join("hooks.json"),
                json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command":
                    "/proc/self/cwd/lookalike/hookhost dispatch --format codex"}]}]}})
                .to_string(),
            )
            .unwrap();
            cmd.env("CODEX_HOME", &codex_home)
                .env("MOCK_API_KEY", "x")
                .args([
                    "exec",
                    "--skip-git-repo-check",
                    "--dangerously-bypass-approvals-and-sandbox",
                    // No `--dangerously-bypass-hook-trust`: Codex 0.171 runs only hooks
                    // it trusts, and `install --codex` wrote their trust entries.
                    prompt,
                ]);
        }
        "gemini" => {
            let dir = home.join(".gemini");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("settings.json"),
                json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
                       "privacy": {"usageStatisticsEnabled": false},
                       "general": {"disableAutoUpdate": true, "disableUpdateNag": true}})
                .to_string(),
            )
            .unwrap();
            cmd.env("GEMINI_API_KEY", "x")
                .env("GOOGLE_GEMINI_BASE_URL", &model.url)
                .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
                .args(["-p", prompt, "--yolo", "-m", "mock-model"]);
        }
        "copilot" => {
            cmd.env("COPILOT_HOME", home.join(".copilot"))
                .env("COPILOT_OFFLINE", "true")
                .env("COPILOT_AUTO_UPDATE", "false")
                .env("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", model.url))
                .env("COPILOT_PROVIDER_API_KEY", "x")
                .env("COPILOT_MODEL", "mock-model")
                .args(["-p", prompt, "--allow-all-tools", "--no-auto-update"]);
        }
        "opencode" => {
            let config = home.join("opencode.json");
            std::fs::write(
                &config,
                json!({"model": "mock/mock-model",
                       "permission": {"bash": "allow", "edit": "allow"},
                       "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                         "options": {"baseURL": format!("{}/v1", model.url), "apiKey": "x"},
                         "models": {"mock-model": {"name": "Mock", "tool_call": true,
                           "limit": {"context": 100000, "output": 4096}}}}}})
                .to_string(),
            )
            .unwrap();
            for (var, dir) in [
                ("XDG_CONFIG_HOME", ".config"),
                ("XDG_DATA_HOME", ".local/share"),
                ("XDG_CACHE_HOME", ".cache"),
                ("XDG_STATE_HOME", ".local/state"),
            ] {
                cmd.env(var, home.join(dir));
            }
            cmd.env("OPENCODE_CONFIG", &config)
                .env("OPENCODE_DISABLE_MODELS_FETCH", "true")
                .env("OPENCODE_DISABLE_AUTOUPDATE", "true")
                .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "true")
                .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "true")
                .args(["run", prompt]);
        }
        other => unreachable!("{other}"),
    }
    if let Some(config) = config {
        env.user_hooks(config);
        let mut install = Command::new(hookhost);
        install
            .args(["install", &format!("--{}", agent.id), "--command"])
            .arg(format!("{hookhost} dispatch --format {}", agent.id))
            .env("HOME", &home)
            .current_dir("/");
        // `install --codex` asks the `codex` on the PATH for the hooks' trust hashes.
        let mut path = vec![binary.parent().unwrap().to_path_buf()];
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        install.env("PATH", std::env::join_paths(path).unwrap());
        for var in ["CODEX_HOME", "COPILOT_HOME", "XDG_CONFIG_HOME"] {
            if let Some((_, Some(value))) = cmd.get_envs().find(|(k, _)| *k == var) {
                install.env(var, value);
            }
        }
        let installed = install.output().unwrap();
        assert!(
            installed.status.success(),
            "install --{}: {}",
            agent.id,
            String::from_utf8_lossy(&installed.stderr)
        );
        if agent.id == "codex" {
            let said = String::from_utf8_lossy(&installed.stdout);
            assert!(said.contains("trusted in Codex's config.toml"), "{said}");
            let config =
                std::fs::read_to_string(home.join(".codex/config.toml")).unwrap_or_default();
            assert!(config.contains(":pre_tool_use:0:0"), "{config}");
            assert!(
                !config.contains(":stop:0:0"),
                "the look-alike is trusted: {config}"
            );
        }
    }
    let run = run_until(&mut cmd, "", Duration::from_secs(240)).expect("the agent finished");
    let audit = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap_or_default();
    let requests = model.requests();
    Ran {
        _env: env,
        home,
        run,
        work,
        offered: offered_tools(&requests),
        requests: tail(&requests),
        audit,
    }
}

/// The end of what the model was sent (where the tool results are), for messages.
fn tail(text: &str) -> String {
    let start = text.len().saturating_sub(6000);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    text[start..].to_string()
}

/// The destructive command, creating `marker` in the work directory (the `mkfs` is a dry
/// run of a file that is not there: harmless, but what the plugin refuses; Codex refuses
/// `rm -f` commands itself, so `rm` would prove nothing of hookhost).
fn destructive(marker: &str) -> String {
    format!("touch {marker}; mkfs.ext4 -n ./no-such-image 2>/dev/null; true")
}

/// Control, guard and rewrite for one agent.
fn guards(agent: &Agent, test: &str, rewrites: bool) {
    let Some(binary) = agent.binary(test) else {
        return;
    };
    // Control: without hookhost the command runs.
    let control = run_agent(agent, &binary, &destructive("MARKER"), None);
    assert!(
        control.work.join("MARKER").exists(),
        "control run: {} ran the command without hookhost\nstdout: {}\nstderr: {}\nrequests: {}",
        agent.id,
        control.run.stdout,
        control.run.stderr,
        control.requests
    );
    // Every tool the client offers is decided in the adapter's table (red team, issue
    // 30: Gemini CLI 0.61 offers `grep_search`, which the table did not know, so a guard
    // on `Grep` never ran for it).
    assert!(
        control
            .offered
            .iter()
            .any(|t| ["bash", "run_shell_command", "exec_command"].contains(&t.as_str())),
        "the model server read the offered tools: {:?}",
        control.offered
    );
    let adapter = hookhost::agents::Agent::from_id(agent.id).expect("an adapter");
    let undecided: Vec<&String> = control
        .offered
        .iter()
        .filter(|name| !hookhost::agents::vocabulary::decided(adapter, name))
        .collect();
    assert!(
        undecided.is_empty(),
        "{} offers tools agents/vocabulary.rs neither maps (TOOLS) nor keeps (OWN_NAMES): \
         {undecided:?}",
        agent.id
    );
    // Guard: the sandboxed plugin, on hookhost's own words.
    let guard = hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "wasm", "plugin": deny_dangerous_bash()}]),
    );
    let guarded = run_agent(agent, &binary, &destructive("MARKER"), Some(guard));
    let shown = format!(
        "{}\nstdout: {}\nstderr: {}\nrequests: {}\naudit: {}",
        agent.id, guarded.run.stdout, guarded.run.stderr, guarded.requests, guarded.audit
    );
    assert!(!guarded.work.join("MARKER").exists(), "blocked: {shown}");
    assert!(
        guarded.requests.contains(REASON)
            || guarded.run.stdout.contains(REASON)
            || guarded.run.stderr.contains(REASON),
        "the reason reaches the agent: {shown}"
    );
    assert!(
        guarded
            .audit
            .lines()
            .any(|l| l.contains(&format!("\"agent\":\"{}\"", agent.id))
                && l.contains("\"decision\":\"deny\"")),
        "the audit line names the agent: {shown}"
    );
    if agent.id == "codex" {
        // `uninstall --codex` takes the trust entries out with the drop-in.
        let config = guarded.home.join(".codex/config.toml");
        assert!(
            std::fs::read_to_string(&config)
                .unwrap()
                .contains("trusted_hash")
        );
        let removed = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .args(["uninstall", "--codex", "--command"])
            .arg(format!(
                "{} dispatch --format codex",
                env!("CARGO_BIN_EXE_hookhost")
            ))
            .env("HOME", &guarded.home)
            .env("CODEX_HOME", guarded.home.join(".codex"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&removed.stdout);
        assert!(said.contains("removed Codex's trust entries"), "{said}");
        let left = std::fs::read_to_string(&config).unwrap();
        assert!(!left.contains("trusted_hash"), "{left}");
        assert!(left.contains("model_provider = \"mock\""), "{left}");
    }
    if !rewrites {
        return;
    }
    // Rewrite: what the hook wrote is what runs.
    let rewrite = hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command":
            "printf '%s' '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"updatedInput\":{\"command\":\"touch REWRITTEN\"}}}'"}]),
    );
    let rewritten = run_agent(agent, &binary, "touch ORIGINAL", Some(rewrite));
    let shown = format!(
        "{}\nstdout: {}\nstderr: {}\nrequests: {}",
        agent.id, rewritten.run.stdout, rewritten.run.stderr, rewritten.requests
    );
    assert!(
        rewritten.work.join("REWRITTEN").exists(),
        "rewritten: {shown}"
    );
    assert!(
        !rewritten.work.join("ORIGINAL").exists(),
        "rewritten: {shown}"
    );
}

#[test]
fn codex_runs_the_one_guard_and_the_rewrite() {
    guards(
        &CODEX,
        "agents_real::codex_runs_the_one_guard_and_the_rewrite",
        true,
    );
}

#[test]
fn gemini_runs_the_one_guard_and_the_rewrite() {
    guards(
        &GEMINI,
        "agents_real::gemini_runs_the_one_guard_and_the_rewrite",
        true,
    );
}

#[test]
fn copilot_runs_the_one_guard_and_the_rewrite() {
    guards(
        &COPILOT,
        "agents_real::copilot_runs_the_one_guard_and_the_rewrite",
        true,
    );
}

#[test]
fn opencode_runs_the_one_guard_and_the_rewrite() {
    guards(
        &OPENCODE,
        "agents_real::opencode_runs_the_one_guard_and_the_rewrite",
        true,
    );
}
