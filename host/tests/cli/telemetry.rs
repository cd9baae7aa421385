//! OpenTelemetry (`host/src/telemetry`): every dispatch a span with a child per hook, and
//! metrics, exported over OTLP/HTTP to a loopback collector that decodes the protobuf
//! with the official definitions (`host/tests/common/otlp_receiver.py`, run by the
//! `opentelemetry-proto` venv that `.ci/run` installs into `<target>/otlp-venv`;
//! `HOOKHOST_OTLP_VENV` to point elsewhere).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::dispatch_daemon::{dispatch, hook_parent, parent_hook_config_with, start, with_daemon};
use crate::skip::skipped;
use crate::support::{TestEnv, bash_input, deny_dangerous_bash, wait_until};

const PARENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";
/// In the tool input of every dispatch here: nothing exported may carry it.
const SECRET: &str = "tool-input-body-7f3a";

/// A running `otlp_receiver.py`; killed when dropped.
struct Collector {
    child: Child,
    port: u16,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Collector {
    /// Starts a receiver (`dead`: one that accepts and never answers), or reports the test
    /// as skipped when the venv is missing.
    fn start(test: &str, dead: bool) -> Option<Collector> {
        let venv = std::env::var_os("HOOKHOST_OTLP_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("../otlp-venv"));
        let python = venv.join("bin/python");
        if !python.exists() {
            skipped(
                test,
                &format!(
                    "no {} (`.ci/run` installs opentelemetry-proto there)",
                    python.display()
                ),
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("received.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/otlp_receiver.py");
        let mut cmd = Command::new(python);
        cmd.arg(script).arg(&file);
        if dead {
            cmd.arg("--dead");
        }
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver prints its port");
        Some(Collector {
            child,
            port,
            file,
            _dir: dir,
        })
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every record received so far.
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|r| r["kind"] == kind)
            .collect()
    }

    fn spans(&self, name: &str) -> Vec<Value> {
        self.of_kind("span")
            .into_iter()
            .filter(|s| s["name"] == name)
            .collect()
    }

    /// Waits until a `hookhost.dispatch` span whose parent is `parent` arrived; returns it.
    fn dispatch_span_with_parent(&self, parent: &str) -> Value {
        wait_until(&format!("a dispatch span under {parent}"), || {
            self.spans("hookhost.dispatch")
                .iter()
                .any(|s| s["parentSpanId"] == parent)
        });
        self.spans("hookhost.dispatch")
            .into_iter()
            .find(|s| s["parentSpanId"] == parent)
            .unwrap()
    }
}

fn traceparent(span: &str) -> String {
    format!("00-{PARENT_TRACE}-{span}-01")
}

/// A command hook that allows, one that blocks, and a wasm plugin, all on Bash.
fn three_hooks(env: &TestEnv) {
    env.project_hooks(parent_hook_config_with(&[
        json!({"type": "command", "command": "echo blocked >&2; exit 2", "id": "blocker"}),
        json!({"type": "wasm", "plugin": deny_dangerous_bash(), "id": "wasm-guard"}),
    ]));
}

fn input() -> Value {
    bash_input(&format!("ls {SECRET}"))
}

#[test]
fn each_dispatch_is_a_span_with_a_child_per_hook_under_the_callers_trace() {
    let Some(collector) = Collector::start(
        "each_dispatch_is_a_span_with_a_child_per_hook_under_the_callers_trace",
        false,
    ) else {
        return;
    };
    let env = TestEnv::new();
    three_hooks(&env);
    let mut cmd = env.command();
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k%201")
        .env("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-not-supported=1")
        .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
        .env("TRACEPARENT", traceparent(PARENT_SPAN))
        .env("TRACESTATE", "vendor=abc");
    let run = dispatch(&env, cmd, &["PreToolUse"], &input());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["decision"], "deny");

    let dispatch_span = collector.dispatch_span_with_parent(PARENT_SPAN);
    assert_eq!(dispatch_span["traceId"], PARENT_TRACE);
    assert_eq!(dispatch_span["traceState"], "vendor=abc");
    let attributes = &dispatch_span["attributes"];
    assert_eq!(attributes["hookhost.event"], "PreToolUse");
    assert_eq!(attributes["session.id"], "s1");
    assert_eq!(attributes["hookhost.decision"], "deny");
    assert_eq!(attributes["hookhost.tool.name"], "Bash");
    assert_eq!(dispatch_span["resource"]["service.name"], "hookhost");
    assert_eq!(dispatch_span["resource"]["deployment.environment"], "test");
    assert_eq!(dispatch_span["scope"], "hookhost");

    wait_until("three hook spans", || {
        collector.spans("hookhost.hook").len() == 3
    });
    let hooks = collector.spans("hookhost.hook");
    let mut seen: Vec<(String, String, String)> = hooks
        .iter()
        .map(|h| {
            assert_eq!(h["traceId"], PARENT_TRACE);
            assert_eq!(h["parentSpanId"], dispatch_span["spanId"], "{h}");
            let a = &h["attributes"];
            assert_eq!(a["hookhost.hook.source"], "project");
            assert!(a["hookhost.hook.duration_ms"].as_f64().is_some(), "{h}");
            (
                a["hookhost.hook.type"].as_str().unwrap().to_string(),
                a["hookhost.hook.status"].as_str().unwrap().to_string(),
                a["hookhost.hook.id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(seen[0].0, "command");
    assert!(seen.contains(&("command".into(), "blocked".into(), "blocker".into())));
    assert!(seen.contains(&("wasm".into(), "ok".into(), "wasm-guard".into())));
    let wasm = hooks
        .iter()
        .find(|h| h["attributes"]["hookhost.hook.type"] == "wasm")
        .unwrap();
    assert!(wasm["attributes"]["hookhost.hook.fuel"].as_i64().unwrap() > 0);
    assert!(
        wasm["attributes"]["hookhost.hook.memory_bytes"]
            .as_i64()
            .unwrap()
            > 0
    );

    // Metrics, flushed at the exit of the one-shot process.
    wait_until("the hook metrics", || {
        let names: Vec<Value> = collector
            .of_kind("metric")
            .iter()
            .map(|m| m["name"].clone())
            .collect();
        [
            "hookhost.dispatches",
            "hookhost.hook.duration",
            "hookhost.hook.blocks",
            "hookhost.hook.fuel",
            "hookhost.hook.memory",
        ]
        .iter()
        .all(|n| names.contains(&json!(n)))
    });
    let blocks = collector
        .of_kind("metric")
        .into_iter()
        .find(|m| m["name"] == "hookhost.hook.blocks")
        .unwrap();
    assert_eq!(
        blocks["points"][0]["attributes"]["hookhost.hook.id"],
        "blocker"
    );
    assert_eq!(blocks["points"][0]["value"], 1);

    // The headers decided, not those the exporter crate would read for itself.
    for request in collector.of_kind("request") {
        let headers = &request["headers"];
        assert_eq!(headers["x-api-key"], "k 1", "{request}");
        assert!(headers.get("x-not-supported").is_none(), "{request}");
        assert_eq!(headers["content-type"], "application/x-protobuf");
    }
    // No tool input, reason or message is exported.
    let text = std::fs::read_to_string(&collector.file).unwrap();
    assert!(!text.contains(SECRET), "the tool input was exported");
    assert!(!text.contains("blocked\\n") && !text.contains("\"blocked\\n\""));
}

#[test]
fn without_an_endpoint_nothing_is_sent() {
    let Some(collector) = Collector::start("without_an_endpoint_nothing_is_sent", false) else {
        return;
    };
    let env = TestEnv::new();
    three_hooks(&env);
    let mut cmd = env.command();
    // Every other variable of the exporter, but no endpoint.
    cmd.env("OTEL_SERVICE_NAME", "hookhost-test")
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k")
        .env("TRACEPARENT", traceparent(PARENT_SPAN))
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    let run = dispatch(&env, cmd, &["PreToolUse"], &input());
    assert_eq!(run.json()["decision"], "deny");
    // The same endpoint, switched off by OTEL_SDK_DISABLED.
    let mut off = env.command();
    off.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("OTEL_SDK_DISABLED", "true");
    let run = dispatch(&env, off, &["PreToolUse"], &input());
    assert_eq!(run.json()["decision"], "deny");
    // A dispatch that does export, after them: once its records are in, nothing of the
    // first two is (the receiver writes in arrival order).
    let mut on = env.command();
    on.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("TRACEPARENT", traceparent("1111111111111111"));
    dispatch(&env, on, &["PreToolUse"], &input());
    collector.dispatch_span_with_parent("1111111111111111");
    let dispatches = collector.spans("hookhost.dispatch");
    assert_eq!(dispatches.len(), 1, "{dispatches:#?}");
    assert!(
        collector
            .of_kind("span")
            .iter()
            .all(|s| s["resource"]["service.name"] == "hookhost"),
        "a span of the dispatch without an endpoint arrived"
    );
}

/// The outcome of a dispatch, without what differs from run to run (durations, the pid
/// the parent hook names).
fn comparable(outcome: &Value) -> Value {
    let mut outcome = outcome.clone();
    outcome["systemMessages"] = Value::Null;
    if let Some(receipt) = outcome.get_mut("receipt").and_then(Value::as_object_mut) {
        receipt.remove("seq");
    }
    for hook in outcome["hooks"].as_array_mut().unwrap() {
        hook["durationMs"] = Value::Null;
        hook["fuel"] = Value::Null;
        hook["memoryBytes"] = Value::Null;
    }
    outcome
}

#[test]
fn a_dead_or_silent_collector_changes_nothing() {
    let Some(silent) = Collector::start("a_dead_or_silent_collector_changes_nothing", true) else {
        return;
    };
    let env = TestEnv::new();
    three_hooks(&env);
    let plain = dispatch(&env, env.command(), &["PreToolUse"], &input());
    let expected = comparable(&plain.json());
    // Under `--format claude` stderr is the block's reason the agent reads.
    let plain_claude = dispatch(&env, env.command(), &["--format", "claude"], &input());
    // A port nothing listens on (bound, then closed), and a collector that accepts and
    // never answers.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    for endpoint in [format!("http://127.0.0.1:{closed}"), silent.endpoint()] {
        for format in [&["PreToolUse"][..], &["--format", "claude"]] {
            let mut cmd = env.command();
            cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);
            let run = dispatch(&env, cmd, format, &input());
            if format.len() == 1 {
                assert_eq!(run.code, 0, "{endpoint}: {}", run.stderr);
                assert_eq!(comparable(&run.json()), expected, "{endpoint}");
            } else {
                assert_eq!(run.code, 2, "{endpoint}: the block stands: {}", run.stderr);
                assert_eq!(run.stderr, plain_claude.stderr, "{endpoint}: the reason");
            }
        }
    }
}

#[test]
fn the_daemon_parents_each_request_by_its_callers_trace_context() {
    let Some(collector) = Collector::start(
        "the_daemon_parents_each_request_by_its_callers_trace_context",
        false,
    ) else {
        return;
    };
    let env = TestEnv::new();
    three_hooks(&env);
    let traced = |span: &str| {
        let mut cmd = with_daemon(&env, 120);
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
            .env("TRACEPARENT", traceparent(span));
        cmd
    };
    let (_, daemon) = start(&env, || traced("2222222222222222"), &["PreToolUse"]);
    collector.dispatch_span_with_parent("2222222222222222");
    for span in ["3333333333333333", "4444444444444444"] {
        let run = dispatch(&env, traced(span), &["PreToolUse"], &input());
        assert_eq!(hook_parent(&run), daemon, "served by the daemon");
        let exported = collector.dispatch_span_with_parent(span);
        assert_eq!(exported["traceId"], PARENT_TRACE);
    }
    // The small client forwards the trace context the same way.
    let mut small = Command::new(env!("CARGO_BIN_EXE_hookhost-dispatch"));
    crate::support::copy_env(&traced("5555555555555555"), &mut small);
    small.current_dir(&env.project).arg("PreToolUse");
    let run = env.run_with(&mut small, &input().to_string());
    assert_eq!(
        hook_parent(&run),
        daemon,
        "the small client's call, served by the daemon"
    );
    collector.dispatch_span_with_parent("5555555555555555");
    // Each span once: the daemon's own environment carried no trace context.
    assert_eq!(collector.spans("hookhost.dispatch").len(), 4);
}

/// A local address other than loopback (the one a packet to a private network would
/// leave from; no packet is sent), or `None`.
fn non_loopback_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.255.255.255:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn an_endpoint_off_the_machine_needs_the_users_or_managed_word() {
    let test = "an_endpoint_off_the_machine_needs_the_users_or_managed_word";
    let Some(collector) = Collector::start(test, false) else {
        return;
    };
    let Some(ip) = non_loopback_address() else {
        skipped(test, "no non-loopback address to reach the receiver by");
        return;
    };
    // The receiver listens on loopback only: a relay on this address forwards to it.
    let relay = std::net::TcpListener::bind((ip, 0)).unwrap();
    let remote = format!("http://{}", relay.local_addr().unwrap());
    let target = collector.port;
    std::thread::spawn(move || {
        for client in relay.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                continue;
            };
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut c, mut s) = (client, server);
            std::thread::spawn(move || std::io::copy(&mut c2, &mut s2));
            std::thread::spawn(move || std::io::copy(&mut s, &mut c));
        }
    });
    let env = TestEnv::new();
    three_hooks(&env);
    let traced = |span: &str| {
        let mut cmd = env.command();
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &remote)
            .env("TRACEPARENT", traceparent(span));
        cmd
    };
    // The environment alone (a repository's `env` block can set it): not sent. Nor with
    // the project's own `allowedHttpHookUrls`.
    dispatch(&env, traced("6666666666666666"), &["PreToolUse"], &input());
    let mut project = parent_hook_config_with(&[]);
    project["allowedHttpHookUrls"] = json!([format!("{remote}/*")]);
    env.project_hooks(project);
    dispatch(&env, traced("7777777777777777"), &["PreToolUse"], &input());
    // The user's own file vouches for it: sent.
    env.user_hooks(json!({"allowedHttpHookUrls": [format!("{remote}/*")]}));
    dispatch(&env, traced("8888888888888888"), &["PreToolUse"], &input());
    collector.dispatch_span_with_parent("8888888888888888");
    // Managed `telemetry.endpoint` wins over the environment, OTEL_SDK_DISABLED included.
    env.user_hooks(json!({}));
    env.managed(json!({"telemetry": {"endpoint": remote, "headers": {"x-fleet": "f1"}}}));
    let mut managed = env.command();
    managed
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_SDK_DISABLED", "true")
        .env("TRACEPARENT", traceparent("9999999999999999"));
    dispatch(&env, managed, &["PreToolUse"], &input());
    collector.dispatch_span_with_parent("9999999999999999");
    let parents: Vec<Value> = collector
        .spans("hookhost.dispatch")
        .iter()
        .map(|s| s["parentSpanId"].clone())
        .collect();
    assert_eq!(
        parents,
        [json!("8888888888888888"), json!("9999999999999999")],
        "only the vouched and the managed endpoint were sent to"
    );
    assert!(
        collector
            .of_kind("request")
            .iter()
            .any(|r| r["headers"]["x-fleet"] == "f1"),
        "managed headers are sent"
    );
}
