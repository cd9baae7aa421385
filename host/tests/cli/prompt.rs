//! `prompt` hooks against a loopback model server that speaks the Anthropic and the
//! OpenAI wire formats and records what it was sent: the request (model, headers,
//! schema, the prompt with the input JSON), the outcome per event (§1.10 of the hooks
//! reference), failures (timeout, malformed answers, API errors) under `onFailure`, the
//! URL checks, the managed ceilings, and the key that never reaches a log.

use serde_json::{Value, json};

use crate::model_server::{INPUT_TOKENS, ModelServer, OUTPUT_TOKENS, Reply};
use crate::support::{Run, TestEnv, bash_input, hooks};

/// A key that must never appear anywhere but in the one request header.
const KEY: &str = "sk-ant-test-0123456789-NEVER-LOGGED";

fn deny(reason: &str) -> Reply {
    Reply::Verdict(json!({"ok": false, "reason": reason, "impossible": false}))
}

fn allow() -> Reply {
    Reply::Verdict(json!({"ok": true, "reason": "", "impossible": false}))
}

/// `hookhost dispatch EVENT` with the model server as Anthropic's endpoint and the key
/// set; the caller's own model variables are removed.
fn dispatch_with(env: &TestEnv, server: &ModelServer, event: &str, input: &Value) -> Run {
    env.vouch_for_model_server(&server.url);
    let mut cmd = env.command();
    cmd.args(["dispatch", event])
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("ANTHROPIC_BASE_URL", &server.url)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("HOOKHOST_LOG", "debug");
    let run = env.run_with(&mut cmd, &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

fn prompt_hook(extra: Value) -> Value {
    let mut hook = json!({"type": "prompt", "prompt": "Is this command safe? $ARGUMENTS"});
    if let (Value::Object(hook), Value::Object(extra)) = (&mut hook, extra) {
        hook.extend(extra);
    }
    hook
}

fn stop_input() -> Value {
    json!({"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": false})
}

#[test]
fn pre_tool_use_asks_anthropic_with_the_input_and_the_schema_and_a_no_denies_and_ends_the_turn() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![deny("rm -rf is destructive")]);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([prompt_hook(json!({"model": "haiku", "id": "judge"}))]),
    ));
    let run = dispatch_with(&env, &server, "PreToolUse", &bash_input("rm -rf /"));
    let out = run.json();
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(out["reason"], "rm -rf is destructive");
    assert_eq!(out["continue"], false, "the turn ends by default: {out}");
    let report = &out["hooks"][0];
    assert_eq!(report["type"], "prompt");
    assert_eq!(report["tokens"], INPUT_TOKENS + OUTPUT_TOKENS, "{report}");
    assert!(report["durationMs"].is_number());

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.body["model"], "claude-haiku-4-5",
        "the `haiku` alias"
    );
    assert_eq!(request.body["tool_choice"]["type"], "tool");
    let tool = &request.body["tools"][0];
    assert_eq!(tool["name"], request.body["tool_choice"]["name"]);
    assert_eq!(tool["input_schema"]["properties"]["ok"]["type"], "boolean");
    assert_eq!(tool["input_schema"]["additionalProperties"], false);
    let prompt = request.prompt();
    assert!(prompt.starts_with("Is this command safe? {"), "{prompt}");
    assert!(prompt.contains(r#""command":"rm -rf /""#), "{prompt}");
    assert!(!prompt.contains("$ARGUMENTS"), "{prompt}");

    // The audit line carries the tokens, never the key.
    let audit = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    let entries = env.audit_entries();
    assert_eq!(
        entries.last().unwrap()["hooks"][0]["tokens"],
        INPUT_TOKENS + OUTPUT_TOKENS
    );
    assert!(!audit.contains(KEY) && !run.stderr.contains(KEY) && !run.stdout.contains(KEY));
}

#[test]
fn continue_on_block_denies_and_keeps_the_turn_and_ok_allows() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![deny("not that"), allow()]);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([prompt_hook(json!({"continueOnBlock": true}))]),
    ));
    let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(out["reason"], "not that");
    assert_eq!(out["continue"], true, "{out}");
    assert_eq!(
        server.requests()[0].body["model"],
        "claude-haiku-4-5",
        "the fast model by default"
    );
    let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
    assert_eq!(out["decision"], "none", "{out}");
    assert_eq!(out["hooks"][0]["status"], "ok");
}

#[test]
fn stop_feeds_the_reason_back_unless_impossible() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![
        deny("the tests were not run"),
        Reply::Verdict(json!({"ok": false, "reason": "cannot be done", "impossible": true})),
    ]);
    env.project_hooks(json!({"hooks": {"Stop": [{"hooks": [prompt_hook(json!({}))]}]}}));
    let out = dispatch_with(&env, &server, "Stop", &stop_input()).json();
    assert_eq!(out["decision"], "block", "{out}");
    assert_eq!(out["reason"], "the tests were not run");
    assert_eq!(out["continue"], true, "the reason is fed back: {out}");
    let prompt = server.requests()[0].prompt();
    assert!(prompt.contains(r#""stop_hook_active":false"#), "{prompt}");
    let out = dispatch_with(&env, &server, "Stop", &stop_input()).json();
    assert_eq!(
        out["decision"], "none",
        "impossible lets the stop go: {out}"
    );
}

#[test]
fn permission_request_refusals_have_no_effect() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![deny("no")]);
    env.project_hooks(hooks(
        "PermissionRequest",
        "Bash",
        json!([prompt_hook(json!({}))]),
    ));
    let mut input = bash_input("ls");
    input["hook_event_name"] = json!("PermissionRequest");
    let out = dispatch_with(&env, &server, "PermissionRequest", &input).json();
    assert_eq!(server.requests().len(), 1, "the model was asked");
    assert_eq!(out["decision"], "none", "{out}");
    assert_eq!(out["continue"], true);
    assert!(
        out["hookSpecificOutput"]
            .as_object()
            .is_none_or(|o| o.is_empty()),
        "{out}"
    );
}

#[test]
fn an_openai_compatible_provider_from_model_provider_settings() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![deny("nope")]);
    let mut config = hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))]));
    config["modelProvider"] = json!({
        "kind": "openai",
        "baseUrl": format!("{}/v1", server.url),
        "apiKeyEnv": "HOOK_TEST_MODEL_KEY",
        "defaultModel": "llama3.2"
    });
    env.user_hooks(config);
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse"])
        .env("HOOK_TEST_MODEL_KEY", KEY)
        .env_remove("ANTHROPIC_API_KEY");
    let run = env.run_with(&mut cmd, &bash_input("ls").to_string());
    let out = run.json();
    assert_eq!(out["decision"], "deny", "{out} {}", run.stderr);
    let requests = server.requests();
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization").map(str::to_string),
        Some(format!("Bearer {KEY}"))
    );
    assert_eq!(request.header("anthropic-version"), None);
    assert_eq!(request.body["model"], "llama3.2");
    let format = &request.body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_eq!(
        format["json_schema"]["schema"]["required"],
        json!(["ok", "reason", "impossible"])
    );
    assert!(request.prompt().contains(r#""tool_name":"Bash""#));
    assert_eq!(out["hooks"][0]["tokens"], INPUT_TOKENS + OUTPUT_TOKENS);
}

#[test]
fn malformed_answers_are_asked_once_more_then_fail_open_or_closed() {
    let env = TestEnv::new();
    // Unparseable, then a verdict: the retry answers.
    let server = ModelServer::start(vec![Reply::Text("I think it is fine".into()), deny("no")]);
    env.project_hooks(hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))])));
    let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(
        out["hooks"][0]["tokens"],
        2 * (INPUT_TOKENS + OUTPUT_TOKENS),
        "both calls are counted"
    );

    // Unparseable twice: a failure, open by default, closed with onFailure: block.
    for (on_failure, decision) in [("continue", "none"), ("block", "deny")] {
        let server = ModelServer::start(vec![
            Reply::Verdict(json!({"ok": "yes"})),
            Reply::Text("{\"ok\": true} trailing".into()),
        ]);
        env.project_hooks(hooks(
            "PreToolUse",
            "Bash",
            json!([prompt_hook(json!({"onFailure": on_failure}))]),
        ));
        let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
        assert_eq!(server.requests().len(), 2, "one retry, no more");
        assert_eq!(out["decision"], decision, "{on_failure}: {out}");
        let report = &out["hooks"][0];
        assert_eq!(report["status"], "failed", "{report}");
        assert_eq!(report["failure"], "invalidOutput", "{report}");
        assert!(
            report["message"]
                .as_str()
                .unwrap()
                .contains("not a verdict"),
            "{report}"
        );
    }
}

#[test]
fn api_errors_and_timeouts_are_failures_under_on_failure() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![Reply::Error(500, "overloaded".into())]);
    env.project_hooks(hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))])));
    let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
    assert_eq!(out["decision"], "none", "fail open: {out}");
    let report = &out["hooks"][0];
    assert_eq!(report["failure"], "http", "{report}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("500") && message.contains("overloaded"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1, "an API error is not retried");

    // A server that never answers, and a hook timeout of one second.
    let server = ModelServer::start(vec![Reply::Stall]);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([prompt_hook(json!({"timeout": 1, "onFailure": "block"}))]),
    ));
    let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
    assert_eq!(out["hooks"][0]["status"], "timeout", "{out}");
    assert_eq!(out["decision"], "deny", "onFailure: block: {out}");
}

#[test]
fn the_key_is_never_logged_even_when_the_server_echoes_it() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![Reply::Error(401, format!("invalid x-api-key: {KEY}"))]);
    env.project_hooks(hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))])));
    let run = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls"));
    assert_eq!(server.requests()[0].header("x-api-key"), Some(KEY));
    let out = run.json();
    assert_eq!(out["hooks"][0]["failure"], "http", "{out}");
    let audit = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    assert!(audit.contains("invalid x-api-key"), "{audit}");
    for (what, text) in [
        ("stdout", &run.stdout),
        ("stderr", &run.stderr),
        ("audit", &audit),
    ] {
        assert!(!text.contains(KEY), "the key is in {what}: {text}");
    }
}

#[test]
fn an_endpoint_outside_the_allowlists_is_not_contacted() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![deny("no")]);
    let mut config = hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))]));
    config["allowedHttpHookUrls"] = json!(["https://api.anthropic.com/*"]);
    env.project_hooks(config);
    // (The user's list too, so that the test server is named by no file.)
    env.user_hooks(json!({"allowedHttpHookUrls": ["https://api.anthropic.com/*"]}));
    let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
    let report = &out["hooks"][0];
    assert_eq!(report["failure"], "refused", "{report}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("allowedHttpHookUrls") && message.contains("from ANTHROPIC_BASE_URL"),
        "the refusal names the setting and where the endpoint came from: {report}"
    );
    assert_eq!(server.requests().len(), 0, "nothing was sent");

    // A base URL from the environment that is not loopback, with no allowlist naming it:
    // refused (a repository can set the variable).
    std::fs::remove_file(env.home.join("hooks.json")).unwrap();
    env.project_hooks(hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))])));
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse"])
        .env("ANTHROPIC_BASE_URL", "https://models.example.invalid")
        .env("ANTHROPIC_API_KEY", KEY);
    let out = env.run_with(&mut cmd, &bash_input("ls").to_string()).json();
    let message = out["hooks"][0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("`ANTHROPIC_BASE_URL`"), "{message}");
    assert_eq!(out["hooks"][0]["failure"], "refused");
}

#[test]
fn managed_model_ceilings_hold_hosts_providers_and_the_token_budget() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![]);
    env.project_hooks(hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))])));
    env.managed(json!({"ceilings": {"models": {"hosts": ["api.anthropic.com"]}}}));
    let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
    let message = out["hooks"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("ceilings.models.hosts"), "{out}");
    assert_eq!(server.requests().len(), 0);

    // A provider outside the ceiling: the hook is refused where the policy loads.
    env.managed(json!({"ceilings": {"models": {"providers": ["openai"]}}}));
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([prompt_hook(json!({"provider": "anthropic"}))]),
    ));
    let run = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls"));
    let text = format!("{}{}", run.stdout, run.stderr);
    assert!(text.contains("ceilings.models.providers"), "{text}");
    assert_eq!(server.requests().len(), 0);

    // A token budget that one answer spends (the server bills 1,000 input tokens): the
    // retry is not sent.
    let server = ModelServer::billing(1_000, vec![Reply::Text("unparseable".into())]);
    env.managed(json!({"ceilings": {"models": {"tokensPerEvent": 1_000}}}));
    env.project_hooks(hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))])));
    let out = dispatch_with(&env, &server, "PreToolUse", &bash_input("ls")).json();
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{out}");
    let max_tokens = requests[0].body["max_tokens"].as_u64().unwrap();
    assert!(
        (1..1_000).contains(&max_tokens),
        "output capped to what the request's input leaves of the budget: {max_tokens}"
    );
    let message = out["hooks"][0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("tokensPerEvent"), "{message}");
}

#[test]
fn a_claude_settings_file_with_model_provider_and_prompt_hooks_loads_and_runs() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![deny("from claude settings")]);
    let settings = env.write(
        ".claude/settings.json",
        &json!({
            "modelProvider": {"kind": "anthropic", "defaultModel": "sonnet"},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "prompt", "prompt": "Judge: $ARGUMENTS", "timeout": 30,
                 "statusMessage": "judging"}
            ]}]}
        })
        .to_string(),
    );
    env.vouch_for_model_server(&server.url);
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse", "--settings"])
        .arg(&settings)
        .env("ANTHROPIC_BASE_URL", &server.url)
        .env("ANTHROPIC_API_KEY", KEY);
    let run = env.run_with(&mut cmd, &bash_input("ls").to_string());
    let out = run.json();
    assert_eq!(out["decision"], "deny", "{out} {}", run.stderr);
    assert_eq!(server.requests()[0].body["model"], "claude-sonnet-4-5");
}

/// Over `hookhost serve`, a hook whose provider is `embedder` asks the client that
/// dispatched the event: `{"id": "model-N", "model": {…}}`, answered by
/// `{"id": "model-N", "modelResult": {…}}`; a client that does not answer is a timeout,
/// and a late or unknown answer is refused.
#[test]
fn over_serve_the_dispatching_client_answers_embedder_prompt_hooks() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([prompt_hook(json!({"provider": "embedder", "timeout": 1}))]),
    ));
    let daemon = crate::serve::Daemon::start(&env);
    let mut client = daemon.client();
    client.request(json!(1), "PreToolUse", bash_input("rm -rf /"));
    let asked = client.read();
    let id = asked["id"].clone();
    assert!(id.as_str().unwrap().starts_with("model-"), "{asked}");
    let model = &asked["model"];
    assert!(
        model["prompt"]
            .as_str()
            .unwrap()
            .contains(r#""command":"rm -rf /""#),
        "{asked}"
    );
    assert_eq!(model["schema"]["required"][0], "ok");
    let verdict = json!({"ok": false, "reason": "the client says no", "impossible": false});
    client.send(
        &json!({"id": id, "modelResult": {"text": verdict.to_string(), "inputTokens": 4, "outputTokens": 2}})
            .to_string(),
    );
    let answer = client.read();
    assert_eq!(answer["id"], 1, "{answer}");
    let out = &answer["outcome"];
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(out["reason"], "the client says no");
    assert_eq!(out["hooks"][0]["tokens"], 6);

    // No answer: the hook times out (fail open); the late answer is refused.
    client.request(json!(2), "PreToolUse", bash_input("ls"));
    let asked = client.read();
    let answer = client.read();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(
        answer["outcome"]["hooks"][0]["status"], "timeout",
        "{answer}"
    );
    assert_eq!(answer["outcome"]["decision"], "none");
    client.send(&json!({"id": asked["id"], "modelResult": {"text": "{}"}}).to_string());
    let refused = client.read();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("no model request"),
        "{refused}"
    );
}

/// In a workspace that is not trusted, the project's `modelProvider` is ignored with its
/// other settings: it cannot send the user's prompt hooks (and their key) elsewhere.
#[test]
fn an_untrusted_projects_model_provider_redirects_nothing() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![deny("redirected")]);
    env.user_hooks(hooks("PreToolUse", "Bash", json!([prompt_hook(json!({}))])));
    env.project_hooks(json!({"modelProvider": {
        "kind": "openai", "baseUrl": format!("{}/v1", server.url), "apiKeyEnv": "ANTHROPIC_API_KEY",
        "defaultModel": "m"
    }}));
    let mut cmd = env.untrusted_command();
    cmd.args(["dispatch", "PreToolUse"])
        .env("ANTHROPIC_API_KEY", KEY);
    // The user's hook goes to its own provider's endpoint (not reachable here: the
    // Anthropic default), never to the project's.
    cmd.env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
    let out = env.run_with(&mut cmd, &bash_input("ls").to_string()).json();
    assert_eq!(server.requests().len(), 0, "{out}");
    assert_eq!(out["hooks"][0]["type"], "prompt", "{out}");
    assert_eq!(out["hooks"][0]["failure"], "http", "{out}");
}
