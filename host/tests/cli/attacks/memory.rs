//! Attacks: host memory (see attacks/mod.rs). One hoarding plugin per kind of resource a
//! plugin can make the host hold (linear memory, directory listings, descriptors,
//! wasi-http `fields`, pollables, outgoing bodies and their streams written to the brim,
//! incoming responses of a body that never ends),
//! each in its own `hookhost dispatch` process: the process's peak resident memory stays
//! within what the caps document for one hook (its memory limit for linear memory and the
//! bytes charged with it, and as much again for the resource table's entries, each
//! holding at most its share of the limit), above the same process answering an ordinary
//! event. The peak is the process's own (`VmHWM`), read while it waits to write its
//! answer.

use std::io::{Read, Write};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::attacks::grants::hostile_raw;
use crate::attacks::sandbox::stalling::endless_server;
use crate::support::{TestEnv, hooks};

/// The hook's memory limit.
const LIMIT_MB: u64 = 64;

/// Runs `hookhost dispatch PreToolUse` with the raw plugin in `attack` and returns what it
/// said and the process's peak resident memory in bytes (`VmHWM`, of the process's own
/// address space: `wait4`'s `ru_maxrss` would count the forking test process too).
///
/// The peak is read while the process is still there and done: its standard output is
/// a pipe filled beforehand, so the process blocks writing its answer, after all its
/// work, until the peak has been read.
fn peak_of(env: &TestEnv, attack: &str, arg: &str, n: u64, http: &str) -> (String, u64) {
    use std::os::fd::AsRawFd;
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{
            "type": "wasm",
            "id": format!("hoard-{attack}"),
            "plugin": hostile_raw(),
            "timeout": 60,
            "limits": {"memoryMb": LIMIT_MB, "fuel": 20_000_000_000u64},
            "capabilities": {"dirs": [{"path": "${workspace}/data", "mode": "ro"}],
                             "http": ["api.example.com", http]},
            "config": {"attack": attack, "arg": arg, "n": n}
        }]),
    ));
    let (mut reader, mut writer) = std::io::pipe().unwrap();
    // Fill the pipe (non-blocking for the fill only: the flag is the pipe's, shared with
    // the child).
    let fd = writer.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    let chunk = [b' '; 4096];
    let mut filled = 0usize;
    while let Ok(n) = writer.write(&chunk) {
        filled += n;
    }
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
    let input = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}});
    let mut child = env
        .command()
        .args(["dispatch", "PreToolUse"])
        .stdin(Stdio::piped())
        .stdout(writer)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    // Wait until the process is blocked writing its answer to the full pipe (syscall 1,
    // `write`, on descriptor 1): its work is done.
    let proc_dir = format!("/proc/{}", child.id());
    loop {
        let syscall = std::fs::read_to_string(format!("{proc_dir}/syscall")).unwrap_or_default();
        if syscall.starts_with("1 0x1 ") {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "dispatch exited early");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = std::fs::read_to_string(format!("{proc_dir}/status")).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"));
    let mut out = String::new();
    reader.read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success());
    let out = &out[filled..];
    let outcome: Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let said = outcome["hooks"][0].to_string() + &outcome["additionalContext"].to_string();
    (said, peak_kb * 1024)
}

#[test]
fn one_hoarding_plugin_per_resource_kind_keeps_the_host_within_the_documented_caps() {
    let env = TestEnv::new();
    let data = env.project.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("f"), "f").unwrap();
    for i in 0..2000 {
        std::fs::write(data.join(format!("{i:04}-{}", "n".repeat(200))), "").unwrap();
    }
    // The first run compiles the plugin into the cache; the second is the baseline.
    let endless = endless_server(true);
    let http = format!("http://127.0.0.1:{endless}");
    let _ = peak_of(&env, "echo", "", 0, &http);
    let (said, baseline) = peak_of(&env, "echo", "", 0, &http);
    assert!(said.contains("raw echo"), "{said}");
    let limit = LIMIT_MB << 20;
    // Linear memory and what is charged with it (one limit), plus the resource table's
    // entries at the most each may hold (as much again), plus slack for the allocator.
    let cap = baseline + 2 * limit + (16 << 20);
    for (attack, arg, n) in [
        ("hold", "", LIMIT_MB - 8),
        ("hoard-listings", "", 1_000_000),
        ("hoard-descriptors", "f", 1_000_000),
        ("fields", "15", 1_000_000),
        ("pollables", "", 10_000_000),
        ("hoard-bodies", "", 1_000_000),
        // Eight responses of a body that never ends, each read a byte into and held.
        ("http-hold", &format!("{http}/x"), 8),
    ] {
        let (said, peak) = peak_of(&env, attack, arg, n, &http);
        eprintln!(
            "{attack}: peak {} MiB (baseline {} MiB): {said}",
            peak >> 20,
            baseline >> 20
        );
        assert!(
            peak <= cap,
            "{attack}: peak {} MiB over the cap of {} MiB (baseline {} MiB): {said}",
            peak >> 20,
            cap >> 20,
            baseline >> 20
        );
    }
}
