//! `agent` hooks against the loopback model server, in both wire formats: the model
//! reads the workspace through the hook's tools and answers with the verdict tool; paths
//! outside the workspace, `..`, symlinks out, FIFOs and private files are refused with a
//! tool error the model sees; `maxTurns`, the timeout and the token budgets are failures
//! under `onFailure`; PermissionRequest refuses agent hooks at load.

use serde_json::{Value, json};

use crate::model_server::{INPUT_TOKENS, ModelServer, OUTPUT_TOKENS, Reply, VERDICT_TOOL};
use crate::support::{Run, TestEnv, bash_input, hooks};

const KEY: &str = "sk-test-agent-key";

#[derive(Clone, Copy, Debug)]
enum Wire {
    Anthropic,
    OpenAi,
}

fn verdict(ok: bool, reason: &str) -> Reply {
    Reply::Verdict(json!({"ok": ok, "reason": reason, "impossible": false}))
}

fn agent_hook(wire: Wire, extra: Value) -> Value {
    let mut hook = json!({"type": "agent", "id": "verifier",
                          "prompt": "Check this against POLICY.md: $ARGUMENTS"});
    if let Wire::OpenAi = wire {
        hook["provider"] = json!("openai");
        hook["model"] = json!("llama3.2");
    }
    if let (Value::Object(hook), Value::Object(extra)) = (&mut hook, extra) {
        hook.extend(extra);
    }
    hook
}

/// `hookhost dispatch EVENT` with the model server as the provider's endpoint.
fn dispatch(env: &TestEnv, server: &ModelServer, event: &str, input: &Value) -> Run {
    env.vouch_for_model_server(&server.url);
    let mut cmd = env.command();
    cmd.args(["dispatch", event])
        .env("ANTHROPIC_BASE_URL", &server.url)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .env("OPENAI_API_KEY", KEY);
    let run = env.run_with(&mut cmd, &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

#[test]
fn an_agent_hook_reads_a_workspace_file_then_denies_quoting_it() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let env = TestEnv::new();
        env.write(
            "POLICY.md",
            "Rule 7: never run `make deploy` on a Friday.\n",
        );
        let server = ModelServer::start(vec![
            Reply::Tool("Read", json!({"file_path": "POLICY.md"})),
            verdict(
                false,
                "POLICY.md: Rule 7: never run `make deploy` on a Friday.",
            ),
        ]);
        env.project_hooks(hooks(
            "PreToolUse",
            "Bash",
            json!([agent_hook(wire, json!({}))]),
        ));
        let out = dispatch(&env, &server, "PreToolUse", &bash_input("make deploy")).json();
        assert_eq!(out["decision"], "deny", "{wire:?} {out}");
        assert!(
            out["reason"].as_str().unwrap().contains("Rule 7"),
            "{wire:?} {out}"
        );
        // As a prompt hook with `continueOnBlock: true`: the turn goes on.
        assert_ne!(out["continue"], false, "{wire:?} {out}");

        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{wire:?}");
        let tools = requests[0].tools();
        for name in ["Read", "Grep", "Glob", "LS", VERDICT_TOOL] {
            assert!(
                tools.iter().any(|t| t == name),
                "{wire:?} {name}: {tools:?}"
            );
        }
        assert!(requests[0].prompt().contains("make deploy"), "$ARGUMENTS");
        let results = requests[1].tool_results();
        assert_eq!(results.len(), 1, "{wire:?}");
        assert!(
            results[0]
                .0
                .contains("Rule 7: never run `make deploy` on a Friday."),
            "{wire:?} the file went back to the model: {results:?}"
        );
        assert!(!results[0].1, "not an error");

        let report = &out["hooks"][0];
        assert_eq!(report["type"], "agent");
        assert_eq!(report["turns"], 2, "{report}");
        assert_eq!(
            report["tokens"],
            2 * (INPUT_TOKENS + OUTPUT_TOKENS),
            "{report}"
        );
        assert!(report["durationMs"].is_number());
        let diagnostics = report["diagnostics"].as_str().unwrap();
        assert!(diagnostics.contains("Read POLICY.md"), "{diagnostics}");
        assert!(!diagnostics.contains("Rule 7"), "no content in the report");
        let audit = env.audit_entries();
        let line = &audit.last().unwrap()["hooks"][0];
        assert_eq!(line["turns"], 2, "{line}");
        assert_eq!(line["tokens"], 2 * (INPUT_TOKENS + OUTPUT_TOKENS), "{line}");
    }
}

#[test]
fn paths_outside_the_workspace_symlinks_out_fifos_and_private_files_are_refused() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let env = TestEnv::new();
        env.write("ok.txt", "fine\n");
        let outside = env.home.join("outside-secret.txt");
        std::fs::write(&outside, "OUTSIDE-SECRET\n").unwrap();
        std::os::unix::fs::symlink(&outside, env.project.join("link-out")).unwrap();
        std::os::unix::fs::symlink(&env.home, env.project.join("dir-out")).unwrap();
        let fifo = env.project.join("pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        env.write(".claude/settings.local.json", "{\"PRIVATE-SECRET\": 1}");
        let refused = [
            json!({"file_path": "/etc/passwd"}),
            json!({"file_path": "../home/outside-secret.txt"}),
            json!({"file_path": "link-out"}),
            json!({"file_path": "dir-out/outside-secret.txt"}),
            json!({"file_path": "pipe"}),
            json!({"file_path": ".claude/settings.local.json"}),
        ];
        let mut script: Vec<Reply> = refused
            .iter()
            .map(|input| Reply::Tool("Read", input.clone()))
            .collect();
        script.push(Reply::Tool("LS", json!({"path": ".."})));
        script.push(Reply::Tool("Grep", json!({"pattern": "SECRET"})));
        script.push(Reply::Tool("Glob", json!({"pattern": "**/*"})));
        script.push(Reply::Tool("Read", json!({"file_path": "ok.txt"})));
        script.push(verdict(true, ""));
        let server = ModelServer::start(script);
        env.project_hooks(hooks(
            "PreToolUse",
            "Bash",
            json!([agent_hook(wire, json!({}))]),
        ));
        let out = dispatch(&env, &server, "PreToolUse", &bash_input("ls")).json();
        // The FIFO did not hang the run: it ended with the verdict, not the timeout.
        assert_eq!(out["hooks"][0]["status"], "ok", "{wire:?} {out}");
        assert_eq!(out["decision"], "none", "{wire:?} {out}");

        let last = server.requests().pop().unwrap();
        let results = last.tool_results();
        assert_eq!(results.len(), refused.len() + 4, "{wire:?} {results:?}");
        for (index, (text, is_error)) in results.iter().take(refused.len() + 1).enumerate() {
            assert!(
                text.starts_with("refused"),
                "{wire:?} call {index} answered {text:?}"
            );
            if let Wire::Anthropic = wire {
                assert!(is_error, "{wire:?} call {index}: is_error");
            }
        }
        let grep = &results[refused.len() + 1].0;
        let glob = &results[refused.len() + 2].0;
        for text in [grep, glob] {
            assert!(!text.contains("SECRET"), "{wire:?} {text}");
            assert!(!text.contains("settings.local.json"), "{wire:?} {text}");
            assert!(!text.contains("outside-secret"), "{wire:?} {text}");
        }
        assert!(glob.contains("ok.txt"), "{wire:?} {glob}");
        assert!(results[refused.len() + 3].0.contains("fine"), "{wire:?}");
        for (text, _) in &results {
            assert!(!text.contains("root:"), "{wire:?} /etc/passwd leaked");
        }
        let diagnostics = out["hooks"][0]["diagnostics"].as_str().unwrap();
        assert!(
            diagnostics.contains("Read /etc/passwd (refused)"),
            "{diagnostics}"
        );
    }
}

#[test]
fn max_turns_the_timeout_and_token_budgets_are_failures_under_on_failure() {
    let env = TestEnv::new();
    let looking = || Reply::Tool("LS", json!({"path": "."}));

    // maxTurns: the model never answers with the verdict.
    let server = ModelServer::start(vec![looking(), looking(), looking()]);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([agent_hook(Wire::OpenAi, json!({"maxTurns": 2}))]),
    ));
    let out = dispatch(&env, &server, "PreToolUse", &bash_input("ls")).json();
    assert_eq!(out["decision"], "none", "fail open by default: {out}");
    let report = &out["hooks"][0];
    assert_eq!(report["failure"], "limit", "{report}");
    assert!(
        report["message"].as_str().unwrap().contains("maxTurns"),
        "{report}"
    );
    assert_eq!(report["turns"], 2);
    assert_eq!(server.requests().len(), 2);

    let server = ModelServer::start(vec![looking(), looking(), looking()]);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([agent_hook(
            Wire::Anthropic,
            json!({"maxTurns": 2, "onFailure": "block"})
        )]),
    ));
    let out = dispatch(&env, &server, "PreToolUse", &bash_input("ls")).json();
    assert_eq!(out["decision"], "deny", "onFailure: block: {out}");

    // The timeout: a model that never answers.
    let server = ModelServer::start(vec![looking(), Reply::Stall]);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([agent_hook(
            Wire::Anthropic,
            json!({"timeout": 1, "onFailure": "block"})
        )]),
    ));
    let out = dispatch(&env, &server, "PreToolUse", &bash_input("ls")).json();
    assert_eq!(out["hooks"][0]["status"], "timeout", "{out}");
    assert_eq!(out["hooks"][0]["turns"], 1, "{out}");
    assert_eq!(out["decision"], "deny", "{out}");

    // The hook's own token budget: spent after the second turn, no third request. The
    // server bills 4,000 input tokens a request; each request's own text is estimated
    // well under that before it is sent, so two turns fit and the third does not.
    let billed = 4_000;
    let budget = 2 * (billed + OUTPUT_TOKENS) - 1;
    let server = ModelServer::billing(billed, vec![looking(), looking(), verdict(true, "")]);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([agent_hook(Wire::Anthropic, json!({"tokenBudget": budget}))]),
    ));
    let out = dispatch(&env, &server, "PreToolUse", &bash_input("ls")).json();
    let report = &out["hooks"][0];
    assert_eq!(report["failure"], "limit", "{report}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("tokenBudget") && message.contains("is spent"),
        "{report}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);

    // Managed `ceilings.models.tokensPerEvent` holds agent hooks too.
    let server = ModelServer::billing(billed, vec![looking(), looking(), verdict(true, "")]);
    env.managed(json!({"ceilings": {"models": {"tokensPerEvent": budget}}}));
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([agent_hook(Wire::Anthropic, json!({}))]),
    ));
    let out = dispatch(&env, &server, "PreToolUse", &bash_input("ls")).json();
    let report = &out["hooks"][0];
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("tokensPerEvent"),
        "{report}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn agent_hooks_are_refused_on_permission_request_at_load() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PermissionRequest",
        "Bash",
        json!([{"type": "agent", "prompt": "may it?"}]),
    ));
    let run = env.run(&["validate"], "");
    assert_eq!(run.code, 1, "{}", run.stdout);
    let project = env
        .project
        .join(".hookhost/hooks.json")
        .display()
        .to_string();
    let text = format!("{}{}", run.stdout, run.stderr);
    let expected = format!(
        "{project}: $.hooks.PermissionRequest[0].hooks[0]: `type`: agent hooks are refused on `PermissionRequest`"
    );
    assert!(text.contains(&expected), "{text}");

    // `maxTurns` and `tokenBudget` are agent fields only, and at least 1.
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "agent", "prompt": "p", "maxTurns": 0},
               {"type": "prompt", "prompt": "p", "maxTurns": 3}]),
    ));
    let run = env.run(&["validate"], "");
    let text = format!("{}{}", run.stdout, run.stderr);
    assert!(
        text.contains("hooks[0]: `maxTurns` must be at least 1"),
        "{text}"
    );
    assert!(
        text.contains("hooks[1]: `maxTurns` is not a field of a prompt hook"),
        "{text}"
    );
}

/// Over `hookhost serve`, an agent hook whose provider is `embedder` asks the dispatching
/// client with the tools and the conversation so far; the client's `toolCalls` run
/// against the workspace and their results come back in the next request's `turns`.
#[test]
fn over_serve_the_dispatching_client_runs_an_agent_hooks_turns() {
    let env = TestEnv::new();
    env.write("RULES.txt", "no force pushes\n");
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "agent", "prompt": "Check $ARGUMENTS", "provider": "embedder"}]),
    ));
    let daemon = crate::serve::Daemon::start(&env);
    let mut client = daemon.client();
    client.request(json!(1), "PreToolUse", bash_input("git push --force"));
    let asked = client.read();
    let tools: Vec<&str> = asked["model"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"Read") && tools.contains(&VERDICT_TOOL),
        "{asked}"
    );
    let read = json!({"id": "r1", "name": "Read", "input": {"file_path": "RULES.txt"}});
    client.send(
        &json!({"id": asked["id"], "modelResult": {"text": "", "toolCalls": [read]}}).to_string(),
    );
    let asked = client.read();
    let turns = &asked["model"]["turns"];
    assert_eq!(turns[0]["role"], "assistant", "{asked}");
    assert_eq!(turns[1]["role"], "toolResults", "{asked}");
    let content = turns[1]["results"][0]["content"].as_str().unwrap();
    assert!(content.contains("no force pushes"), "{asked}");
    let verdict = json!({"id": "v1", "name": VERDICT_TOOL,
                         "input": {"ok": false, "reason": "RULES.txt says no", "impossible": false}});
    client.send(
        &json!({"id": asked["id"], "modelResult": {"text": "", "toolCalls": [verdict]}})
            .to_string(),
    );
    let answer = client.read();
    let out = &answer["outcome"];
    assert_eq!(out["decision"], "deny", "{answer}");
    assert_eq!(out["reason"], "RULES.txt says no");
    assert_eq!(out["hooks"][0]["turns"], 2);
}
