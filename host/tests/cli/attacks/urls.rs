//! Attacks on `allowedHttpHookUrls`: URLs that look allowed but mean another place. For
//! every refused URL the loopback server must see nothing (the request is not sent), and
//! the hook reports why; the allowed controls do arrive.

use std::time::Duration;

use serde_json::json;

use crate::support::{TestEnv, TestServer, bash_input, hooks};

const OK: &str =
    r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "sent"}}"#;

/// Dispatches one HTTP hook to `url` under `allowed`; returns the hook's report.
fn post(env: &TestEnv, url: &str, allowed: &[String]) -> serde_json::Value {
    let mut config = hooks("PreToolUse", "Bash", json!([{"type": "http", "url": url}]));
    config["allowedHttpHookUrls"] = json!(allowed);
    env.project_hooks(config);
    let run = env.run(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    assert_eq!(run.code, 0, "{url}: {}", run.stderr);
    run.json()["hooks"][0].clone()
}

#[test]
fn urls_that_mean_another_place_are_not_sent() {
    let env = TestEnv::new();
    let server = TestServer::start(|_| (200, OK.to_string(), Duration::ZERO));
    let port = server.url.rsplit(':').next().unwrap().to_string();
    let p = |s: &str| s.replace("PORT", &port);
    // (allowlist, URL): each URL reaches the loopback server if it is sent.
    let refused: &[(&str, &str)] = &[
        (
            "http://*.example.com/*",
            "http://127.0.0.1:PORT/.example.com/",
        ),
        (
            "http://*.example.com:*/*",
            "http://127.0.0.1:PORT/x.example.com",
        ),
        (
            "http://hooks.internal:*/*",
            "http://hooks.internal:1@127.0.0.1:PORT/",
        ),
        (
            "http://hooks.internal/*",
            "http://hooks.internal@127.0.0.1:PORT/",
        ),
        ("http://127.0.0.1:*/*", "http://user:secret@127.0.0.1:PORT/"),
        ("http://example.com/*", "http://example.com@127.0.0.1:PORT/"),
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/hooks/../admin",
        ),
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/hooks/%2e%2e/admin",
        ),
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/hooks/.%2E/admin",
        ),
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/hooks/..%2fadmin",
        ),
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/hooks/%2e%2e%2fadmin",
        ),
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/hooks\\..\\admin",
        ),
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/hooks/..%5cadmin",
        ),
        ("http://localhost:PORT/*", "http://127.0.0.1:PORT/"),
        ("http://localhost:PORT/*", "http://0x7f.1:PORT/"),
        ("http://localhost:PORT/*", "http://2130706433:PORT/"),
        ("http://localhost:PORT/*", "http://0177.0.0.1:PORT/"),
        ("http://localhost:PORT/*", "http://[::ffff:127.0.0.1]:PORT/"),
        ("http://10.1.1.1:PORT/*", "http://0x7f.1:PORT/"),
        ("http://127.0.0.1/*", "http://127.0.0.1:PORT/"),
        ("https://127.0.0.1:PORT/*", "http://127.0.0.1:PORT/"),
        ("http://127.0.0.1:PORT/hook", "http://127.0.0.1:PORT/hook2"),
        (
            "http://127.0.0.1:PORT/hook",
            "http://127.0.0.1:PORT/hook/../hook2",
        ),
        ("http://*.127.0.0.1:*/*", "http://127.0.0.1:PORT/"),
        (
            "http://127.0.0.1:PORT@evil.example/*",
            "http://127.0.0.1:PORT/",
        ),
    ];
    for &(allowed, url) in refused {
        let (allowed, url) = (p(allowed), p(url));
        let hook = post(&env, &url, std::slice::from_ref(&allowed));
        assert_eq!(hook["status"], "failed", "{allowed} vs {url}: {hook}");
        let message = hook["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("not contacted"),
            "{allowed} vs {url}: {message}"
        );
        assert!(
            server.requests().is_empty(),
            "{allowed} vs {url} was sent: {:?}",
            server.requests()
        );
    }

    // Controls: the same server is reached when the URL is allowed, in any spelling the
    // parser normalises.
    let allowed: &[(&str, &str, &str)] = &[
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/hooks/a#frag",
            "/hooks/a",
        ),
        ("http://0x7f.1:PORT/ok", "http://127.0.0.1:PORT/ok", "/ok"),
        ("http://127.0.0.1:*/*", "http://2130706433:PORT/odd", "/odd"),
        (
            "http://127.0.0.1:PORT/hooks/*",
            "http://127.0.0.1:PORT/x/../hooks/b",
            "/hooks/b",
        ),
        (
            "http://127.0.0.1:PORT/a/*",
            "http://127.0.0.1:PORT/a/x@y",
            "/a/x@y",
        ),
    ];
    for (i, &(pattern, url, path)) in allowed.iter().enumerate() {
        let hook = post(&env, &p(url), &[p(pattern)]);
        assert_eq!(hook["status"], "ok", "{pattern} vs {url}: {hook}");
        let requests = server.requests();
        assert_eq!(requests.len(), i + 1, "{url}");
        assert_eq!(requests[i].path, path, "{url}");
    }
}

#[test]
fn an_invalid_pattern_is_a_config_error_that_allows_nothing() {
    let env = TestEnv::new();
    let server = TestServer::start(|_| (200, OK.to_string(), Duration::ZERO));
    let url = format!("{}/x", server.url);
    let hook = post(&env, &url, &["http://a*.example.com/*".into()]);
    assert_eq!(hook["status"], "failed", "{hook}");
    assert!(server.requests().is_empty());
    let run = env.run(&["validate"], "");
    assert!(
        run.stderr.contains("$.allowedHttpHookUrls[0]") && run.stderr.contains("a `*` in the host"),
        "{}",
        run.stderr
    );
}
