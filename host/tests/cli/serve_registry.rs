//! The runtime hook registry over `hookhost serve`'s protocol: `register` and `unregister`
//! requests, a session's scope, managed refusals, and registrations that survive a reload.

use serde_json::{Value, json};

use crate::serve::Daemon;
use crate::support::{TestEnv, bash_input, hooks, wait_until};

fn deny(message: &str) -> Value {
    json!({"type": "command", "command": format!("echo '{message}' >&2; exit 2")})
}

fn with_session(mut input: Value, session: &str) -> Value {
    input["session_id"] = json!(session);
    input
}

#[test]
fn hooks_registered_over_the_socket_run_until_unregistered() {
    let env = TestEnv::new();
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    assert_eq!(
        client.call("PreToolUse", bash_input("ls"))["decision"],
        "none"
    );

    client.send(
        &json!({"id": "r1", "register": {"event": "PreToolUse", "matcher": "Bash",
                                         "hook": deny("registered says no")}})
        .to_string(),
    );
    let answer = client.read();
    assert_eq!(answer["id"], "r1", "{answer}");
    let hook_id = answer["registered"]["hookId"].as_u64().expect("a hook id");
    let out = client.call("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny", "{out}");
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("registered says no")
    );
    assert_eq!(out["hooks"][0]["id"], format!("registered:{hook_id}"));
    assert_eq!(
        out["hooks"][0]["source"], "user",
        "a registered hook is a user source"
    );

    // Another connection sees it too: the registry is the project's.
    let mut other = daemon.client();
    assert_eq!(
        other.call("PreToolUse", bash_input("ls"))["decision"],
        "deny"
    );

    client.send(&json!({"id": "u1", "unregister": hook_id}).to_string());
    assert_eq!(client.read(), json!({"id": "u1", "unregistered": hook_id}));
    assert_eq!(
        client.call("PreToolUse", bash_input("ls"))["decision"],
        "none"
    );
    client.send(&json!({"id": "u2", "unregister": hook_id}).to_string());
    let again = client.read();
    assert!(
        again["error"]
            .as_str()
            .unwrap()
            .contains("no hook is registered"),
        "{again}"
    );
}

#[test]
fn a_session_registration_binds_that_session_only() {
    let env = TestEnv::new();
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    client.send(
        &json!({"id": 1, "register": {"event": "PreToolUse", "hook": deny("s1 only")},
                "session": "s1"})
        .to_string(),
    );
    assert!(client.read()["registered"]["hookId"].is_u64());
    let s1 = client.call("PreToolUse", with_session(bash_input("ls"), "s1"));
    let s2 = client.call("PreToolUse", with_session(bash_input("ls"), "s2"));
    assert_eq!(
        (s1["decision"].as_str(), s2["decision"].as_str()),
        (Some("deny"), Some("none"))
    );
}

#[test]
fn a_registration_managed_policy_denies_is_refused_over_the_socket() {
    let env = TestEnv::new();
    env.managed(json!({"allowManagedHooksOnly": true}));
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    client.send(
        &json!({"id": 7, "register": {"event": "PreToolUse", "hook": deny("x")}}).to_string(),
    );
    let answer = client.read();
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("registration refused") && error.contains("allowManagedHooksOnly"),
        "{answer}"
    );
    assert_eq!(
        client.call("PreToolUse", bash_input("ls"))["decision"],
        "none"
    );
    // A malformed registration names what is wrong.
    client.send(&json!({"id": 8, "register": {"event": "PreToolUse"}}).to_string());
    let answer = client.read();
    assert!(
        answer["error"].as_str().unwrap().contains("`hook`"),
        "{answer}"
    );
}

#[test]
fn registrations_survive_a_reload_and_meet_the_new_policy() {
    let env = TestEnv::new();
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    client.send(
        &json!({"id": 1, "register": {"event": "PreToolUse", "hook": deny("kept")}}).to_string(),
    );
    assert!(client.read()["registered"].is_object());
    // A config change rebuilds the host: the registration stays.
    env.project_hooks(hooks(
        "Stop",
        "",
        json!([{"type": "command", "command": "true"}]),
    ));
    let mut out = Value::Null;
    wait_until("the reload", || {
        out = client.call("PreToolUse", bash_input("ls"));
        out["notices"].to_string().contains("config reloaded")
    });
    assert_eq!(out["decision"], "deny", "{out}");
    // Managed policy that now forbids user hooks unregisters it.
    env.managed(json!({"allowManagedHooksOnly": true}));
    wait_until("the managed reload", || {
        client.call("PreToolUse", bash_input("ls"))["decision"] == "none"
    });
}
