//! The demo's peers for its model and MCP steps: the stand-in judge ([`super::judge`]),
//! with a key of the demo's own, and `mcp-server-time` when it is installed.
//!
//! **Where the time server is looked for**, first found wins:
//! 1. `HOOKHOST_DEMO_TIME_SERVER` (a path variable, judged like the others): when set, the
//!    only place looked;
//! 2. `mcp-server-time` in an absolute directory of `PATH` (`pip install mcp-server-time`,
//!    `pipx install mcp-server-time`);
//! 3. beside the build the binary is in: `<target>/mcp-servers/time-venv/bin/`, where
//!    `.ci/run` installs it (so `cargo run -p hookhost -- demo` in a clone CI prepared
//!    finds it).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::judge::{KEY_VAR, StandIn};

/// The server's program name.
pub const TIME_SERVER: &str = "mcp-server-time";

/// `mcp-server-time`, or why the demo has none.
pub fn time_server() -> Result<PathBuf, String> {
    let workspaces = hookhost::config::env::workspaces_of(None);
    let runnable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    match hookhost::config::env::path_var("HOOKHOST_DEMO_TIME_SERVER", &workspaces) {
        Err(why) => return Err(why),
        Ok(Some(path)) if runnable(&path) => return Ok(path),
        Ok(Some(path)) => {
            return Err(format!(
                "`HOOKHOST_DEMO_TIME_SERVER` names {}, which is not an executable file",
                hookhost::text::escape(&path.display().to_string())
            ));
        }
        Ok(None) => {}
    }
    let on_path = hookhost::config::env::var("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(TIME_SERVER))
        .find(|p| runnable(p));
    if let Some(path) = on_path {
        return Ok(path);
    }
    let beside = beside_build();
    if let Some(path) = beside.as_ref().filter(|p| runnable(p)) {
        return Ok(path.clone());
    }
    let looked = beside.map_or_else(String::new, |p| {
        format!(
            " nor in {}",
            hookhost::text::escape(&p.display().to_string())
        )
    });
    Err(format!(
        "{TIME_SERVER} is not installed: not on PATH{looked} (where .ci/run installs it); \
         `pip install mcp-server-time`, or set HOOKHOST_DEMO_TIME_SERVER to its program"
    ))
}

/// `<target>/mcp-servers/time-venv/bin/mcp-server-time` for a binary at
/// `<target>/<profile>/hookhost`.
fn beside_build() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let target = exe.parent()?.parent()?;
    Some(
        target
            .join("mcp-servers")
            .join("time-venv")
            .join("bin")
            .join(TIME_SERVER),
    )
}

/// A fresh key for the stand-in (it accepts no other), as hex.
pub fn fresh_key() -> String {
    let mut bytes = [0u8; 16];
    // Without randomness the key is fixed: it guards a loopback stand-in only.
    let _ = getrandom::getrandom(&mut bytes);
    format!("demo-{}", hex::encode(bytes))
}

/// Hands `key` to the demo's prompt hooks in [`KEY_VAR`], the variable their
/// `modelProvider.apiKeyEnv` names (the key is read from the environment only, as any
/// provider key). Refused, with why, once the process has a second thread: setting a
/// variable while another thread may read the environment is undefined behaviour.
pub fn hand_key_to_hooks(key: &str) -> Result<(), String> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .map_err(|e| format!("cannot count this process's threads: {e}"))?;
    if threads != 1 {
        return Err(format!(
            "the process already runs {threads} threads, so the stand-in's key cannot be \
             set in `{KEY_VAR}`"
        ));
    }
    // SAFETY: this process has one thread (counted just above), so nothing reads the
    // environment concurrently.
    unsafe { std::env::set_var(KEY_VAR, key) };
    Ok(())
}

/// The settings of this run (a `--settings` source: the port and the program change
/// between runs, so they are not in the files kept for the user): the stand-in as the
/// `anthropic` provider, and the time server when there is one.
pub fn run_settings(stand_in: &StandIn, time: Option<&Path>) -> Value {
    let mut settings = json!({
        "modelProvider": {
            "kind": "anthropic",
            "baseUrl": stand_in.url,
            "apiKeyEnv": KEY_VAR,
        }
    });
    if let Some(time) = time {
        settings["mcpServers"] = json!({
            "time": {"command": time.display().to_string(), "args": ["--local-timezone", "UTC"]}
        });
    }
    settings
}
