//! Test fixtures: an isolated environment for the `hookhost` binary and a loopback HTTP
//! server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A temporary project, user home, managed dir and data dir, and the commands to run
/// `hookhost` in them without touching the real user's config.
pub struct TestEnv {
    _root: tempfile::TempDir,
    pub project: PathBuf,
    pub home: PathBuf,
    pub managed: PathBuf,
    pub data: PathBuf,
}

/// One finished `hookhost` process.
pub struct Run {
    /// The process id of `hookhost`.
    pub pid: u32,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The stdout parsed as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Polls `ready` every 20 ms; panics naming `what` after 20 s.
pub fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The example plugin `deny-dangerous-bash`, built for wasm32-wasip2 by the test-plugins
/// artifacts crate.
pub fn deny_dangerous_bash() -> &'static Path {
    Path::new(hookhost_test_plugins::plugins::DENY_DANGEROUS_BASH)
}

impl TestEnv {
    /// The audit log's entries so far; a line still being written, and the chain's own
    /// lines (genesis, checkpoints: `kind`), are skipped.
    pub fn audit_entries(&self) -> Vec<Value> {
        std::fs::read_to_string(self.data.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|entry| entry.get("kind").is_none())
            .collect()
    }

    pub fn new() -> TestEnv {
        let root = tempfile::tempdir().unwrap();
        // Canonical paths, so that comparisons with what hooks print (pwd) hold.
        let base = root.path().canonicalize().unwrap();
        let env = TestEnv {
            project: base.join("project"),
            home: base.join("home"),
            managed: base.join("managed"),
            data: base.join("data"),
            _root: root,
        };
        for dir in [&env.project, &env.home, &env.managed, &env.data] {
            std::fs::create_dir_all(dir).unwrap();
        }
        env
    }

    pub fn write(&self, path: impl AsRef<Path>, text: &str) -> PathBuf {
        let path = self.project.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes `.hookhost/hooks.json`.
    pub fn project_hooks(&self, config: Value) {
        self.write(".hookhost/hooks.json", &config.to_string());
    }

    pub fn local_hooks(&self, config: Value) {
        self.write(".hookhost/hooks.local.json", &config.to_string());
    }

    /// Names `url` in the user's `allowedHttpHookUrls` (unless the user's file already
    /// sets the list or a `modelProvider`): the user vouches for a test's model server,
    /// so that it gets the API key (`handlers/model/endpoint.rs` `key_withheld`).
    pub fn vouch_for_model_server(&self, url: &str) {
        let file = self.home.join("hooks.json");
        let mut config: Value = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_else(|| serde_json::json!({}));
        let Some(fields) = config.as_object_mut() else {
            return;
        };
        // A list of the test's own loopback servers grows; one the test wrote stays.
        let ours = |list: &Value| {
            list.as_array().is_some_and(|l| {
                l.iter().all(|p| {
                    p.as_str()
                        .is_some_and(|p| p.starts_with("http://127.0.0.1:") && p.ends_with("/*"))
                })
            })
        };
        if fields.contains_key("modelProvider")
            || fields.get("allowedHttpHookUrls").is_some_and(|l| !ours(l))
        {
            return;
        }
        let list = fields
            .entry("allowedHttpHookUrls")
            .or_insert_with(|| serde_json::json!([]));
        list.as_array_mut()
            .unwrap()
            .push(serde_json::json!(format!("{url}/*")));
        std::fs::write(&file, config.to_string()).unwrap();
    }

    pub fn user_hooks(&self, config: Value) {
        std::fs::write(self.home.join("hooks.json"), config.to_string()).unwrap();
    }

    pub fn managed(&self, config: Value) {
        std::fs::write(self.managed.join("managed.json"), config.to_string()).unwrap();
    }

    /// An executable script in the project; returns its absolute path.
    pub fn script(&self, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write(format!("hooks/{name}"), &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        cmd.current_dir(&self.project)
            .env("HOOKHOST_HOME", &self.home)
            .env("HOOKHOST_MANAGED_DIR", &self.managed)
            .env("HOOKHOST_DATA_DIR", &self.data)
            .env("HOOKHOST_CACHE_DIR", self.data.join("cache"))
            .env_remove("HOOKHOST_STOP_BLOCK_CAP")
            .env_remove("HOOKHOST_DEPTH")
            // The project is the working directory unless a test says otherwise, even
            // when the tests run inside an agent's session.
            .env_remove("CLAUDE_PROJECT_DIR")
            .env_remove("HOOKHOST_PROJECT_DIR")
            .env_remove("HOOKHOST_AUDIT_LOG")
            // The dispatch daemon is on by default; its own tests turn it back on.
            .env("HOOKHOST_DISPATCH_DAEMON", "off")
            .env_remove("HOOKHOST_DISPATCH_DAEMON_IDLE_SECS")
            // Most tests are about what hooks do, not about trust: they trust the
            // workspace explicitly. The trust tests use `untrusted_command`.
            .env("HOOKHOST_TRUST_WORKSPACE", "1");
        cmd
    }

    /// `command()` without explicit trust: the workspace is judged by the trust store.
    pub fn untrusted_command(&self) -> Command {
        let mut cmd = self.command();
        cmd.env_remove("HOOKHOST_TRUST_WORKSPACE");
        cmd
    }

    /// Runs `hookhost ARGS` with `stdin`, judging trust by the store.
    pub fn run_untrusted(&self, args: &[&str], stdin: &str) -> Run {
        self.run_with(self.untrusted_command().args(args), stdin)
    }

    /// Runs `hookhost ARGS` with `stdin`.
    pub fn run(&self, args: &[&str], stdin: &str) -> Run {
        self.run_with(self.command().args(args), stdin)
    }

    pub fn run_with(&self, cmd: &mut Command, stdin: &str) -> Run {
        run_bytes(cmd, stdin.as_bytes())
    }

    /// `hookhost dispatch EVENT` with `input`; returns the outcome JSON.
    pub fn dispatch(&self, event: &str, input: Value) -> Value {
        let run = self.run(&["dispatch", event], &input.to_string());
        assert_eq!(run.code, 0, "dispatch failed: {}", run.stderr);
        run.json()
    }
}

/// Runs `cmd` with `stdin` (any bytes) and collects what it printed.
pub fn run_bytes(cmd: &mut Command, stdin: &[u8]) -> Run {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // A process that exits without reading its input (a usage error) closes the
    // pipe first: that is its answer, not a failure of the test.
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => {}
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    Run {
        pid,
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// `"<a>:<b>"` for each hook of an outcome, e.g. `hook_fields(out, "id", "status")`.
pub fn hook_fields(out: &Value, a: &str, b: &str) -> Vec<String> {
    let hooks = out["hooks"].as_array().expect("an outcome has hooks");
    hooks
        .iter()
        .map(|h| format!("{}:{}", h[a].as_str().unwrap(), h[b].as_str().unwrap()))
        .collect()
}

/// A PreToolUse input for a Bash command.
pub fn bash_input(command: &str) -> Value {
    serde_json::json!({
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "t1"
    })
}

/// A hook list for one event with one matcher group.
pub fn hooks(event: &str, matcher: &str, handlers: Value) -> Value {
    serde_json::json!({"hooks": {event: [{"matcher": matcher, "hooks": handlers}]}})
}

/// One request the test server received.
#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A loopback HTTP/1.1 server: answers every request with the response the handler
/// picks by path and records what it received.
pub struct TestServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

type Responder = dyn Fn(&Request) -> (u16, String, Duration) + Send + Sync;

impl TestServer {
    pub fn start(
        respond: impl Fn(&Request) -> (u16, String, Duration) + Send + Sync + 'static,
    ) -> TestServer {
        TestServer::listen(None, respond)
    }

    /// An HTTPS server for `localhost` with a fresh self-signed certificate; its PEM is
    /// returned for the client to trust (`SSL_CERT_FILE`).
    pub fn start_tls(
        respond: impl Fn(&Request) -> (u16, String, Duration) + Send + Sync + 'static,
    ) -> (TestServer, String) {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
            .expect("a self-signed certificate");
        let cert_pem = certified.cert.pem();
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.key_pair.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
        let mut server = TestServer::listen(Some(Arc::new(config)), respond);
        server.url = server.url.replace("http://127.0.0.1", "https://localhost");
        (server, cert_pem)
    }

    fn listen(
        tls: Option<Arc<rustls::ServerConfig>>,
        respond: impl Fn(&Request) -> (u16, String, Duration) + Send + Sync + 'static,
    ) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let respond: Arc<Responder> = Arc::new(respond);
        let seen = requests.clone();
        std::thread::spawn(move || {
            // Bounded: a test never sends more than a few hundred requests.
            for stream in listener.incoming().take(500).flatten() {
                let (respond, seen, tls) = (respond.clone(), seen.clone(), tls.clone());
                std::thread::spawn(move || {
                    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
                    match tls {
                        None => serve(stream, &*respond, &seen),
                        Some(config) => {
                            let Ok(connection) = rustls::ServerConnection::new(config) else {
                                return;
                            };
                            let tls = rustls::StreamOwned::new(connection, stream);
                            serve(tls, &*respond, &seen);
                        }
                    }
                });
            }
        });
        TestServer { url, requests }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(stream: impl Read + Write, respond: &Responder, seen: &Mutex<Vec<Request>>) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
            headers.push((name.to_string(), value.trim().to_string()));
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok();
    let request = Request {
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let (status, body, delay) = respond(&request);
    seen.lock().unwrap().push(request);
    std::thread::sleep(delay);
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

/// Whether any process is still running with `marker` in its command line.
pub fn process_running(marker: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|cmdline| {
            String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(marker)
        })
}

/// Caps the address space of the process `cmd` starts at 4 GiB: an attack that makes
/// the host read `/dev/zero` into memory fails it with an allocation error instead of
/// taking the machine's memory.
pub fn cap_memory(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let cap = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Runs `cmd` with `stdin`; kills it and returns `None` when it has not finished within
/// `limit` (an attack that hangs the host).
///
/// The process's address space is capped at 4 GiB: an attack that makes the host read
/// `/dev/zero` into memory fails it with an allocation error instead of taking the
/// machine's memory (no wasm engine runs in these tests, which would need more).
pub fn run_bounded(cmd: &mut Command, stdin: &str, limit: Duration) -> Option<Run> {
    run_until(cap_memory(cmd), stdin, limit)
}

/// Runs `cmd` with `stdin`; kills it and returns `None` when it has not finished within
/// `limit`. No cap of its own on the address space (see [`run_bounded`]).
pub fn run_until(cmd: &mut Command, stdin: &str, limit: Duration) -> Option<Run> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_string();
    std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stdout.read_to_end(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        text
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Some(Run {
        pid,
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err.join().unwrap()).into_owned(),
    })
}

/// Gives `to` the environment changes of `from` (what a wrapper such as `setpriv` or
/// `unshare` must pass on to the `hookhost` it runs).
pub fn copy_env(from: &Command, to: &mut Command) {
    for (name, value) in from.get_envs() {
        match value {
            Some(value) => to.env(name, value),
            None => to.env_remove(name),
        };
    }
}

/// `chown -R uid:uid dir`.
pub fn chown_tree(dir: &Path, uid: u32) {
    let status = Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
}

/// `cmd` run as uid/gid 65534 through `setpriv`, with the same environment and
/// directory.
pub fn as_nobody(cmd: &mut Command) -> Command {
    as_uid(cmd, 65534)
}

/// `cmd` run as uid and gid `uid` (no other groups) through `setpriv`, with the same
/// environment and directory.
pub fn as_uid(cmd: &mut Command, uid: u32) -> Command {
    let mut wrapped = Command::new("setpriv");
    wrapped
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "--",
        ])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    copy_env(cmd, &mut wrapped);
    wrapped
}
