//! Sandboxed plugins that consult the model (`hookhost:hook@0.2.0`'s `model` import),
//! end to end: `hookhost dispatch` runs `plugins/model-judge` (built with the guest SDK,
//! `event.ask_model`) against the loopback model server as the Anthropic endpoint. The
//! plugin's request passes the same provider resolution as a prompt hook's; the model's
//! no denies; the grant's token budget runs out into an error; without a grant there is
//! no model; the report and the audit line carry the tokens and calls; a plugin waiting
//! on a model that never answers is stopped at its timeout.

use serde_json::{Value, json};

use crate::model_server::{INPUT_TOKENS, ModelServer, OUTPUT_TOKENS, Reply};
use crate::support::{Run, TestEnv, bash_input, hooks};

const KEY: &str = "sk-ant-plugin-test-NEVER-LOGGED";
const SPENT: u64 = INPUT_TOKENS + OUTPUT_TOKENS;
/// Input tokens the budget tests' server bills per request.
const BILLED: u64 = 1_000;

fn judge(extra: Value) -> Value {
    let mut hook = json!({
        "type": "wasm",
        "id": "judge",
        "plugin": hookhost_test_plugins::plugins::MODEL_JUDGE,
    });
    if let (Value::Object(hook), Value::Object(extra)) = (&mut hook, extra) {
        hook.extend(extra);
    }
    hook
}

fn verdict(ok: bool, reason: &str) -> Reply {
    Reply::Text(json!({"ok": ok, "reason": reason}).to_string())
}

fn dispatch(env: &TestEnv, server: &ModelServer, command: &str) -> Run {
    // The user's hooks.json names the loopback server, as a user must for the key to go.
    env.vouch_for_model_server(&server.url);
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("ANTHROPIC_BASE_URL", &server.url)
        .env("ANTHROPIC_API_KEY", KEY);
    let run = env.run_with(&mut cmd, &bash_input(command).to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

#[test]
fn a_plugin_asks_the_model_and_denies_when_it_says_no() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![verdict(false, "it deletes the repository")]);
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([judge(json!({
            "model": "haiku",
            "capabilities": {"model": {"tokensPerEvent": 1000}}
        }))]),
    ));
    let run = dispatch(&env, &server, "rm -rf .git");
    let out = run.json();
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(out["reason"], "it deletes the repository");
    let report = &out["hooks"][0];
    assert_eq!(report["type"], "wasm");
    assert_eq!(report["status"], "blocked", "a deny is a block: {report}");
    assert_eq!(report["tokens"], SPENT, "{report}");
    assert_eq!(report["turns"], 1, "one call answered: {report}");
    let diagnostics = report["diagnostics"].as_str().unwrap_or_default();
    assert!(
        diagnostics.contains("model: anthropic model `claude-haiku-4-5`")
            && diagnostics.contains("1 calls"),
        "{diagnostics}"
    );

    // What was sent: the hook's provider and model, the command, the grant as the cap.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.body["model"], "claude-haiku-4-5");
    // Lowered to what the request's input (its text at four bytes a token) leaves of the
    // grant.
    let text = request.prompt().len() + request.body["system"].as_str().map_or(0, str::len);
    assert_eq!(
        request.body["max_tokens"],
        1000 - (text as u64).div_ceil(4),
        "lowered to the grant"
    );
    assert!(
        request.prompt().contains("rm -rf .git"),
        "{}",
        request.prompt()
    );
    assert!(
        !request.prompt().contains("session_id"),
        "only the command: {}",
        request.prompt()
    );

    // The audit line carries the tokens and the calls, never the key.
    let entries = env.audit_entries();
    let line = &entries.last().unwrap()["hooks"][0];
    assert_eq!(line["tokens"], SPENT, "{line}");
    assert_eq!(line["turns"], 1, "{line}");
    let audit = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    assert!(!audit.contains(KEY) && !run.stdout.contains(KEY) && !run.stderr.contains(KEY));

    // The server's default answer is `{"ok": true, …}`: allowed.
    let out = dispatch(&env, &server, "ls").json();
    assert_eq!(out["decision"], "none", "{out}");
    assert_eq!(out["hooks"][0]["tokens"], SPENT, "a fresh budget per event");
}

#[test]
fn a_spent_budget_is_an_error_and_nothing_more_is_sent() {
    let env = TestEnv::new();
    // One answer spends the whole budget (the provider bills 1,000 input tokens; the
    // request's own text, about 70 tokens, fits the budget before it is sent); the
    // second vote is refused before sending.
    let server = ModelServer::billing(BILLED, vec![verdict(true, "")]);
    let budget = BILLED + OUTPUT_TOKENS;
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([judge(json!({
            "capabilities": {"model": {"tokensPerEvent": budget}},
            "config": {"votes": 2}
        }))]),
    ));
    let out = dispatch(&env, &server, "ls").json();
    let report = &out["hooks"][0];
    assert_eq!(report["status"], "failed", "{out}");
    assert_eq!(report["failure"], "pluginError", "{report}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("token budget of {budget} per event"))
            && message.contains("capabilities.model.tokensPerEvent"),
        "{message}"
    );
    assert_eq!(report["tokens"], budget, "{report}");
    assert_eq!(report["turns"], 1, "{report}");
    assert_eq!(server.requests().len(), 1, "the refused call was not sent");
    assert_eq!(out["decision"], "none", "onFailure continue: {out}");
    let entries = env.audit_entries();
    let line = &entries.last().unwrap()["hooks"][0];
    assert_eq!(line["tokens"], budget, "{line}");
}

#[test]
fn without_a_grant_the_plugin_gets_no_model() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![verdict(false, "never asked")]);
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([judge(json!({"onFailure": "block"}))]),
    ));
    let out = dispatch(&env, &server, "rm -rf /").json();
    let report = &out["hooks"][0];
    assert_eq!(report["status"], "failed", "{out}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("not granted") && message.contains("capabilities.model"),
        "{message}"
    );
    assert!(report.get("tokens").is_none(), "no live grant: {report}");
    assert!(server.requests().is_empty(), "the model was never asked");
    assert_eq!(
        out["decision"], "deny",
        "fails closed under onFailure block: {out}"
    );
}

#[test]
fn a_managed_ceiling_below_the_grant_refuses_the_hook() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![]);
    env.managed(json!({"ceilings": {"models": {"tokensPerEvent": 10}}}));
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([judge(
            json!({"capabilities": {"model": {"tokensPerEvent": 1000}}})
        )]),
    ));
    let run = dispatch(&env, &server, "ls");
    let text = format!("{}{}", run.stdout, run.stderr);
    assert!(
        text.contains("hook refused by managed policy")
            && text.contains("1000 is above the managed ceiling of 10")
            && text.contains("ceilings.models.tokensPerEvent"),
        "{text}"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn a_plugin_waiting_on_a_silent_model_is_stopped_at_its_timeout() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![Reply::Stall]);
    // Compiled into this environment's cache first: the hook's 1 s is for the call.
    let plugin = hookhost_test_plugins::plugins::MODEL_JUDGE;
    let inspect = env.run(&["plugin", "inspect", plugin], "");
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([judge(json!({
            "timeout": 1,
            "capabilities": {"model": {"tokensPerEvent": 1000}}
        }))]),
    ));
    let out = dispatch(&env, &server, "ls").json();
    let report = &out["hooks"][0];
    assert_eq!(report["status"], "timeout", "{out}");
    let message = report["message"].as_str().unwrap();
    assert!(message.contains("timed out after 1 s"), "{message}");
    assert_eq!(
        server.requests().len(),
        1,
        "the call was sent, then cut off"
    );
}

#[test]
fn a_plugin_flooding_the_model_runs_out_of_fuel_and_sends_one_request() {
    let env = TestEnv::new();
    let server = ModelServer::start(vec![]);
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{
            "type": "wasm",
            "plugin": hookhost_test_plugins::plugins::HOSTILE_RAW,
            "config": {"attack": "model-flood", "arg": "again?"},
            "limits": {"fuel": 5_000_000},
            "capabilities": {"model": {"tokensPerEvent": SPENT}}
        }]),
    ));
    let out = dispatch(&env, &server, "ls").json();
    let report = &out["hooks"][0];
    assert_eq!(report["status"], "failed", "{out}");
    assert_eq!(report["failure"], "limit", "{report}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("fuel exhausted") && message.contains("host calls"),
        "{message}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "the spent budget sent nothing more"
    );
    assert_eq!(report["tokens"], SPENT, "{report}");
}
