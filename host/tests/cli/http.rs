//! The HTTP handler: status mapping, header interpolation, URL and env allowlists.

use std::time::Duration;

use serde_json::json;

use crate::support::{TestEnv, TestServer, bash_input, hooks};

const DENY: &str = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "server says no"}}"#;

fn server() -> TestServer {
    TestServer::start(|req| match req.path.as_str() {
        "/deny" => (200, DENY.to_string(), Duration::ZERO),
        "/empty" => (204, String::new(), Duration::ZERO),
        "/text" => (200, "hello".to_string(), Duration::ZERO),
        "/error" => (500, r#"{"decision": "block"}"#.to_string(), Duration::ZERO),
        "/slow" => (200, DENY.to_string(), Duration::from_secs(3)),
        _ => (404, String::new(), Duration::ZERO),
    })
}

#[test]
fn a_2xx_json_answer_decides_and_the_input_is_posted() {
    let env = TestEnv::new();
    let server = server();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "http", "url": format!("{}/deny", server.url)}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny");
    assert_eq!(out["reason"], "server says no");
    assert_eq!(out["hooks"][0]["exitCode"], 200);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
    let body: serde_json::Value = serde_json::from_str(&requests[0].body).unwrap();
    assert_eq!(body["tool_input"]["command"], "ls");
}

/// `https://` hooks work, and trust the system's certificate store plus what managed
/// policy adds (`httpHookCaFile`, here a test CA); a CA named by `SSL_CERT_FILE` or
/// `SSL_CERT_DIR` is not trusted (a repository can set variables for `hookhost
/// dispatch`), and an untrusted certificate is a non-blocking error.
#[test]
fn https_hooks_verify_the_server_certificate() {
    let env = TestEnv::new();
    let (server, cert_pem) = TestServer::start_tls(|_| (200, DENY.to_string(), Duration::ZERO));
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "http", "url": format!("{}/deny", server.url)}]),
    ));
    let planted = env.project.join("test-ca.pem");
    std::fs::write(&planted, &cert_pem).unwrap();
    let input = bash_input("ls").to_string();

    // The repository's CA through the environment: not trusted, nothing sent.
    let run = env.run_with(
        env.command()
            .args(["dispatch", "PreToolUse"])
            .env("SSL_CERT_FILE", &planted)
            .env("SSL_CERT_DIR", &env.project),
        &input,
    );
    let out = run.json();
    assert_eq!(out["decision"], "none", "{out}");
    assert_eq!(out["hooks"][0]["status"], "failed", "{out}");
    let message = out["hooks"][0]["message"].as_str().unwrap();
    assert!(message.contains("certificate"), "{message}");
    assert_eq!(server.requests().len(), 0, "no request reached the server");

    // The same CA named by managed policy: trusted.
    let trusted = env.managed.join("test-ca.pem");
    std::fs::write(&trusted, &cert_pem).unwrap();
    env.managed(json!({"httpHookCaFile": trusted}));
    let run = env.run_with(env.command().args(["dispatch", "PreToolUse"]), &input);
    let out = run.json();
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(out["hooks"][0]["exitCode"], 200);
    assert_eq!(server.requests().len(), 1);
}

/// HTTP hooks connect directly: a proxy named by the environment is never used.
#[test]
fn http_hooks_ignore_proxies_from_the_environment() {
    let env = TestEnv::new();
    let proxy = server();
    let server = server();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "http", "url": format!("{}/deny", server.url)}]),
    ));
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse"]);
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env(var, &proxy.url);
    }
    let out = env.run_with(&mut cmd, &bash_input("ls").to_string()).json();
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(proxy.requests().len(), 0, "the proxy was used");
}

#[test]
fn other_answers_are_non_blocking_errors() {
    let env = TestEnv::new();
    let server = server();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "http", "id": "empty", "url": format!("{}/empty", server.url)},
            {"type": "http", "id": "text", "url": format!("{}/text", server.url)},
            {"type": "http", "id": "error", "url": format!("{}/error", server.url)},
            {"type": "http", "id": "refused", "url": "http://127.0.0.1:9/nothing-listens"},
            {"type": "http", "id": "slow", "url": format!("{}/slow", server.url), "timeout": 1}
        ]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(
        out["decision"], "none",
        "HTTP hooks block only through a JSON decision: {out}"
    );
    let status: Vec<(&str, &str)> = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["id"].as_str().unwrap(), h["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        status,
        [
            ("empty", "ok"),
            ("text", "failed"),
            ("error", "failed"),
            ("refused", "failed"),
            ("slow", "timeout")
        ]
    );
    let notices: Vec<&str> = out["notices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["message"].as_str().unwrap())
        .collect();
    assert!(notices[0].contains("plain text"), "{notices:?}");
    assert!(notices[1].contains("HTTP 500"), "{notices:?}");
    assert!(notices[2].contains("failed"), "{notices:?}");
    assert!(notices[3].contains("timed out"), "{notices:?}");
}

#[test]
fn headers_interpolate_only_allowed_env_vars() {
    let env = TestEnv::new();
    let server = server();
    env.project_hooks(json!({
        "httpHookAllowedEnvVars": ["HOOK_TOKEN", "OTHER_TOKEN"],
        "hooks": {"PreToolUse": [{"hooks": [{
            "type": "http",
            "url": format!("{}/empty", server.url),
            "headers": {"Authorization": "Bearer $HOOK_TOKEN", "X-Other": "${OTHER_TOKEN}", "X-Secret": "[$SECRET_TOKEN]", "X-Outer": "[$OUTER_ONLY]"},
            "allowedEnvVars": ["HOOK_TOKEN", "OTHER_TOKEN", "OUTER_ONLY"]
        }]}]}
    }));
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse"])
        .env("HOOK_TOKEN", "t0k3n")
        .env("OTHER_TOKEN", "other")
        .env("SECRET_TOKEN", "must-not-leak")
        .env("OUTER_ONLY", "not-in-settings-list");
    let run = env.run_with(&mut cmd, &bash_input("ls").to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let request = &server.requests()[0];
    assert_eq!(request.header("authorization"), Some("Bearer t0k3n"));
    assert_eq!(request.header("x-other"), Some("other"));
    assert_eq!(request.header("x-secret"), Some("[]"));
    assert_eq!(
        request.header("x-outer"),
        Some("[]"),
        "httpHookAllowedEnvVars is an outer limit"
    );
}

#[test]
fn allowed_http_hook_urls_is_checked_before_connecting() {
    let env = TestEnv::new();
    let server = server();
    env.project_hooks(json!({
        "allowedHttpHookUrls": ["https://hooks.example.com/*"],
        "hooks": {"PreToolUse": [{"hooks": [{"type": "http", "id": "h", "url": format!("{}/deny", server.url)}]}]}
    }));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none");
    assert_eq!(out["hooks"][0]["status"], "failed");
    assert!(
        out["notices"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not in `allowedHttpHookUrls`")
    );
    assert!(server.requests().is_empty(), "the server was contacted");

    // lists merge across files: the user allows the server too
    env.user_hooks(
        json!({"allowedHttpHookUrls": [format!("{}/*", server.url.to_uppercase().replace("HTTP://", "http://"))]}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny", "{out}");
}
