//! Temporary profiling driver (not committed).
use hookhost::HostBuilder;
use hookhost::serve::{HostFactory, Server};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let plugin = args[1].clone();
    let events: usize = args[2].parse().unwrap();
    let audit = args.get(3).filter(|a| *a != "-").cloned();
    let instance = args.get(4).cloned().unwrap_or("event".into());
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let cwd = project.display().to_string();
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "wasm", "plugin": plugin, "instance": instance}]}]}})
    .to_string();
    let sessions_dir = dir.path().join("sessions");
    let factory: HostFactory = Arc::new(move |project, sessions, gate| {
        let mut builder = HostBuilder::new(project).settings(settings.clone());
        if let Some(audit) = &audit {
            builder = builder.audit_log(audit);
        }
        gate.apply(builder)
            .session_store(sessions)
            .session_files(&sessions_dir)
            .async_launcher(hookhost::AsyncLauncher::InProcess)
            .build()
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let server = Server::new(project, factory);
        let (client, daemon) = tokio::io::duplex(1 << 16);
        let (reader, writer) = tokio::io::split(daemon);
        let served = tokio::spawn(server.serve_connection(reader, writer, true));
        let (client_reader, mut client_writer) = tokio::io::split(client);
        let mut answers = BufReader::new(client_reader);
        let lines: Vec<Vec<u8>> = (0..events + 100).map(|n| {
            let input = json!({"session_id": format!("bench-{}", n % 64), "hook_event_name": "PreToolUse", "cwd": cwd,
                "tool_name": "Bash", "tool_input": {"command": format!("cargo test --workspace -- --test-threads {n}"), "description": "run the tests"},
                "tool_use_id": format!("toolu_{n}")});
            (json!({"id": n, "event": "PreToolUse", "input": input}).to_string() + "\n").into_bytes()
        }).collect();
        let mut answer = Vec::with_capacity(64 << 10);
        let started = Instant::now();
        for (i, line) in lines.iter().enumerate() {
            client_writer.write_all(line).await.unwrap();
            answer.clear();
            answers.read_until(b'\n', &mut answer).await.unwrap();
            if i == 0 { eprintln!("{}", String::from_utf8_lossy(&answer)); }
        }
        eprintln!("{:.2} us/event", started.elapsed().as_secs_f64() * 1e6 / lines.len() as f64);
        drop(client_writer); drop(answers);
        served.await.unwrap();
    });
}
