//! Per-event cost of a `prompt` hook and of an `mcp_tool` hook, in process and through
//! `hookhost serve`, each beside a bare client doing the same request in the same run.
//!
//! 1. **Prompt hook** (PreToolUse on Bash) against a loopback Anthropic Messages API: the
//!    stand-in server of `hookhost demo` (`host/src/cli/demo/judge.rs`, hyper on this
//!    process's tokio runtime, keep-alive). The baseline is a bare `reqwest` client that
//!    POSTs the very body hookhost sent (taken from the server), with the same headers,
//!    and parses the verdict out of the answer. hookhost's own cost per event is the
//!    difference; the server's own time per request is measured too and shown.
//! 2. **`mcp_tool` hook** (PreToolUse on Bash, `get_current_time` of `mcp-server-time`,
//!    PyPI) against a warm stdio server. The baseline is a bare `rmcp` client over its own
//!    warm `mcp-server-time` process calling the same tool with the same arguments and
//!    reading the text answer. Skipped (said so) when the server is not installed where
//!    `.ci/run` puts it (`<target>/mcp-servers`, or `HOOKHOST_MCP_SERVERS_DIR`).
//!
//! Each is measured in process (`Host::dispatch`, with an audit log) and through
//! `hookhost serve` over a unix socket (one client in lockstep), hookhost and the baseline
//! interleaved round by round, p50 of each. Through the daemon, the round trip of an event
//! no hook matches is shown too (the daemon's floor).
//!
//! `cargo bench -p hookhost --bench model_mcp`; `HOOKHOST_BENCH_N` scales the rounds.

// The demo's stand-in server, the same file (it uses only std, tokio, hyper and serde_json).
#[path = "../src/cli/demo/judge.rs"]
// Its unit tests are the binary's: under this harness-less bench their imports go unused.
#[cfg_attr(test, allow(unused_imports))]
#[allow(dead_code)]
mod judge;

// Only `percentile` of the shared helpers.
#[allow(dead_code)]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use common::percentile;

/// The stand-in's key, handed to hookhost in [`judge::KEY_VAR`].
const KEY: &str = "bench-key";

fn scaled(base: usize) -> usize {
    let scale: f64 = std::env::var("HOOKHOST_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    ((base as f64 * scale) as usize).max(10)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn p50(samples: &mut [Duration]) -> Duration {
    samples.sort();
    percentile(samples, 0.5)
}

fn input(n: usize, tool: &str) -> Value {
    json!({
        "session_id": format!("bench-{}", n % 64),
        "hook_event_name": "PreToolUse",
        "cwd": "/tmp",
        "tool_name": tool,
        "tool_input": {"command": format!("cargo test --workspace -- --test-threads {n}")},
        "tool_use_id": format!("toolu_{n}"),
    })
}

/// `mcp-server-time` where `.ci/run` installs it.
fn time_server() -> Option<PathBuf> {
    let dir = std::env::var_os("HOOKHOST_MCP_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("../mcp-servers"));
    let program = dir.join("time-venv/bin/mcp-server-time");
    program.is_file().then_some(program)
}

fn prompt_settings(url: &str) -> Value {
    json!({
        "modelProvider": {"kind": "anthropic", "baseUrl": url, "apiKeyEnv": judge::KEY_VAR},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "prompt", "prompt": "Does this command weaken the tests? $ARGUMENTS"}
        ]}]}
    })
}

const TIME_ARGS: [&str; 2] = ["--local-timezone", "UTC"];

fn mcp_settings(time: &Path) -> Value {
    json!({
        "mcpServers": {"time": {"command": time, "args": TIME_ARGS}},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "mcp_tool", "server": "time", "tool": "get_current_time",
             "input": {"timezone": "UTC"}}
        ]}]}
    })
}

/// A bare client's one request: the same POST, the verdict parsed out of the answer.
async fn bare_model_request(client: &reqwest::Client, url: &str, body: &bytes::Bytes) {
    let answer: Value = client
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("the bare request")
        .json()
        .await
        .expect("a JSON answer");
    let verdict = &answer["content"][0]["input"];
    assert!(verdict["ok"].is_boolean(), "{answer}");
}

/// A bare rmcp client over its own warm `mcp-server-time`.
struct BareMcp {
    service: rmcp::service::RunningService<rmcp::service::RoleClient, ()>,
    _child: tokio::process::Child,
}

impl BareMcp {
    async fn start(time: &Path) -> BareMcp {
        let mut child = tokio::process::Command::new(time)
            .args(TIME_ARGS)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start mcp-server-time");
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let service = rmcp::serve_client((), (stdout, stdin))
            .await
            .expect("initialize");
        BareMcp {
            service,
            _child: child,
        }
    }

    async fn call(&self) {
        let mut arguments = Map::new();
        arguments.insert("timezone".into(), json!("UTC"));
        let result = self
            .service
            .peer()
            .call_tool(rmcp::model::CallToolRequestParams {
                meta: None,
                name: "get_current_time".into(),
                arguments: Some(arguments),
                task: None,
            })
            .await
            .expect("call_tool");
        let text = result.content[0].as_text().expect("text").text.clone();
        let answer: Value = serde_json::from_str(&text).expect("JSON");
        assert!(answer["datetime"].is_string(), "{text}");
    }
}

fn workspace(dir: &Path) -> PathBuf {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).expect("the project directory");
    project
}

fn isolated_env(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("HOOKHOST_HOME", dir.join("home")),
        ("HOOKHOST_MANAGED_DIR", dir.join("managed")),
        ("HOOKHOST_DATA_DIR", dir.join("data")),
        ("HOOKHOST_CACHE_DIR", dir.join("cache")),
    ]
}

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_daemon(dir: &Path, name: &str, settings: &Value) -> Daemon {
    let socket = dir.join(format!("{name}.sock"));
    let child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .args(["serve", "--socket", socket.to_str().unwrap(), "--settings"])
        .arg(settings.to_string())
        .current_dir(workspace(dir))
        .envs(isolated_env(dir))
        .stderr(Stdio::null())
        .spawn()
        .expect("start the daemon");
    let deadline = Instant::now() + Duration::from_secs(60);
    while UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child, socket }
}

/// One client in lockstep on a daemon.
struct Lockstep {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    n: usize,
}

impl Lockstep {
    fn connect(socket: &Path) -> Lockstep {
        let stream = UnixStream::connect(socket).expect("connect");
        Lockstep {
            writer: stream.try_clone().expect("clone"),
            reader: BufReader::new(stream),
            n: 0,
        }
    }

    /// One event's round trip; checks the hook ran (`expect` in the answer).
    fn round_trip(&mut self, tool: &str, expect: &str) -> Duration {
        self.n += 1;
        let request = json!({"id": self.n, "event": "PreToolUse", "input": input(self.n, tool)})
            .to_string()
            + "\n";
        let started = Instant::now();
        self.writer.write_all(request.as_bytes()).expect("send");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("answer");
        let took = started.elapsed();
        assert!(line.contains(expect), "unexpected answer: {line}");
        took
    }
}

/// Prints one comparison row: both p50s, their difference and ratio.
fn row(what: &str, hookhost: &mut [Duration], baseline: &mut [Duration], base_what: &str) {
    let (h, b) = (p50(hookhost), p50(baseline));
    println!(
        "| {what} | {:.1} | {base_what} {:.1} | {:.1} | {:.2}x |",
        us(h),
        us(b),
        us(h) - us(b),
        h.as_secs_f64() / b.as_secs_f64()
    );
}

fn main() {
    // SAFETY: first thing in `main`, before any other thread exists.
    unsafe { std::env::set_var(judge::KEY_VAR, KEY) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let stand_in = rt
        .block_on(judge::StandIn::start(KEY.into()))
        .expect("the stand-in server");
    let bare_http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest");
    let rounds = scaled(2000);

    println!("hookhost prompt and mcp_tool hooks: per-event cost beside a bare client, p50");
    println!();
    println!("| what | hookhost µs | baseline µs | hookhost − baseline µs | ratio |");
    println!("|---|---:|---:|---:|---:|");

    // 1a. Prompt hook, in process.
    let host = Arc::new(
        hookhost::HostBuilder::new(workspace(dir.path()))
            .settings(prompt_settings(&stand_in.url).to_string())
            .audit_log(dir.path().join("audit-inproc.jsonl"))
            .build(),
    );
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    let dispatch = |n: usize, tool: &'static str| {
        let host = host.clone();
        rt.block_on(async move {
            let started = Instant::now();
            let outcome = host
                .dispatch("PreToolUse", input(n, tool))
                .await
                .expect("dispatch");
            let took = started.elapsed();
            assert_eq!(
                outcome.hooks.len(),
                usize::from(tool == "Bash"),
                "{outcome:?}"
            );
            if let Some(hook) = outcome.hooks.first() {
                assert_eq!(
                    hook.status,
                    hookhost::outcome::HookStatus::Ok,
                    "{outcome:?}"
                );
            }
            took
        })
    };
    for n in 0..50 {
        dispatch(n, "Bash"); // warm: the HTTP client, its connection, the audit log
    }
    let body = stand_in.last_body().expect("hookhost's request");
    let bare = |body: &bytes::Bytes| {
        rt.block_on(async {
            let started = Instant::now();
            bare_model_request(&bare_http, &stand_in.url, body).await;
            started.elapsed()
        })
    };
    let (mut hooked, mut baseline, mut served) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..rounds {
        hooked.push(dispatch(n, "Bash"));
        served.push(*stand_in.times().last().unwrap());
        baseline.push(bare(&body));
    }
    row(
        "prompt hook, in process (`Host::dispatch`)",
        &mut hooked,
        &mut baseline,
        "bare reqwest POST",
    );
    let server_p50 = p50(&mut served);

    // 1b. Prompt hook through `hookhost serve`.
    let daemon = start_daemon(dir.path(), "prompt", &prompt_settings(&stand_in.url));
    let mut client = Lockstep::connect(&daemon.socket);
    for _ in 0..50 {
        client.round_trip("Bash", "\"type\":\"prompt\"");
    }
    let (mut hooked, mut baseline, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        hooked.push(client.round_trip("Bash", "\"status\":\"ok\""));
        baseline.push(bare(&body));
        floor.push(client.round_trip("Read", "\"decision\":\"none\""));
    }
    row(
        "prompt hook, through `hookhost serve` (round trip)",
        &mut hooked,
        &mut baseline,
        "bare reqwest POST",
    );
    drop(client);
    drop(daemon);
    let notes = format!(
        "the stand-in server's own time per request, p50: {:.1} µs; `hookhost serve` round \
         trip of an event no hook matches, p50: {:.1} µs; {rounds} prompt rounds, hookhost \
         and the baseline interleaved",
        us(server_p50),
        us(p50(&mut floor))
    );

    // 2. `mcp_tool` hook against warm stdio servers.
    let Some(time) = time_server() else {
        println!();
        println!("{notes}");
        println!(
            "mcp_tool rows skipped: mcp-server-time is not installed (`.ci/run` installs it \
             into <target>/mcp-servers)"
        );
        return;
    };
    let mcp_rounds = scaled(1000);
    let bare_mcp = rt.block_on(BareMcp::start(&time));
    let bare_call = || {
        rt.block_on(async {
            let started = Instant::now();
            bare_mcp.call().await;
            started.elapsed()
        })
    };
    let host = Arc::new(
        hookhost::HostBuilder::new(workspace(dir.path()))
            .settings(mcp_settings(&time).to_string())
            .audit_log(dir.path().join("audit-mcp.jsonl"))
            .build(),
    );
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    let dispatch = |n: usize| {
        let host = host.clone();
        rt.block_on(async move {
            let started = Instant::now();
            let outcome = host
                .dispatch("PreToolUse", input(n, "Bash"))
                .await
                .expect("dispatch");
            let took = started.elapsed();
            assert_eq!(
                outcome.hooks[0].status,
                hookhost::outcome::HookStatus::Ok,
                "{outcome:?}"
            );
            took
        })
    };
    for n in 0..20 {
        dispatch(n); // the first starts the server
        bare_call();
    }
    let (mut hooked, mut baseline) = (Vec::new(), Vec::new());
    for n in 0..mcp_rounds {
        hooked.push(dispatch(n));
        baseline.push(bare_call());
    }
    row(
        "`mcp_tool` hook, in process (`Host::dispatch`)",
        &mut hooked,
        &mut baseline,
        "bare rmcp `call_tool`",
    );
    let daemon = start_daemon(dir.path(), "mcp", &mcp_settings(&time));
    let mut client = Lockstep::connect(&daemon.socket);
    for _ in 0..20 {
        client.round_trip("Bash", "\"type\":\"mcp_tool\"");
    }
    let (mut hooked, mut baseline) = (Vec::new(), Vec::new());
    for _ in 0..mcp_rounds {
        hooked.push(client.round_trip("Bash", "\"status\":\"ok\""));
        baseline.push(bare_call());
    }
    row(
        "`mcp_tool` hook, through `hookhost serve` (round trip)",
        &mut hooked,
        &mut baseline,
        "bare rmcp `call_tool`",
    );
    println!();
    println!("{notes}");
    println!("{mcp_rounds} mcp_tool rounds, hookhost and the baseline interleaved");
}
