//! `hookhost serve` under systemd's socket activation: it listens on the descriptor its
//! supervisor passes (3, `LISTEN_FDS=1`, `LISTEN_PID` naming it), and leaves that socket's
//! file to the supervisor; `contrib/systemd/` has the user units.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::serve::Daemon;
use crate::support::{TestEnv, bash_input, hooks, wait_until};

/// `sh -c 'LISTEN_PID=$$ … exec hookhost serve ARGS'` in the test environment, with
/// `listener` as its descriptor 3: the shell's pid is the daemon's once it `exec`s, which
/// is how a supervisor names the process it passes the socket to.
fn activated(env: &TestEnv, listener: &UnixListener, listen_pid: &str, args: &str) -> Command {
    let template = env.command();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            r#"LISTEN_PID={listen_pid} LISTEN_FDS=1 exec "$0" serve {args}"#
        ))
        .arg(env!("CARGO_BIN_EXE_hookhost"))
        .current_dir(template.get_current_dir().unwrap());
    for (name, value) in template.get_envs() {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    // The default socket is then the data directory's, which must stay unmade.
    cmd.env_remove("XDG_RUNTIME_DIR");
    let fd = listener.as_raw_fd();
    // SAFETY: between fork and exec, only dup2 and fcntl (async-signal-safe) run, on
    // descriptors this process owns.
    unsafe {
        cmd.pre_exec(move || {
            let done = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if done < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    cmd
}

#[test]
fn serve_listens_on_the_socket_its_supervisor_passes() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo 'no rm' >&2; exit 2"}]),
    ));
    let socket = env.data.join("activated.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let stderr = env.data.join("serve.stderr");
    let mut cmd = activated(&env, &listener, "$$", "");
    cmd.stderr(std::fs::File::create(&stderr).unwrap());
    let child = cmd.spawn().unwrap();
    // The daemon's copy is the only one: what answers is hookhost.
    drop(listener);
    let mut daemon = Daemon {
        child,
        socket: socket.clone(),
    };
    let outcome = daemon.client().call("PreToolUse", bash_input("rm -rf /"));
    assert_eq!(outcome["decision"], "deny", "{outcome}");
    assert_eq!(outcome["hooks"][0]["status"], "blocked", "{outcome}");
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert!(said.contains("(socket activation)"), "{said}");
    assert!(
        !env.data.join("hookhost.sock").exists(),
        "it bound its default socket too"
    );
    assert_eq!(daemon.terminate(), 0);
    // The socket's file is the supervisor's: still there for the next start.
    assert!(
        is_socket(&socket),
        "the daemon removed its supervisor's socket"
    );
}

/// `LISTEN_PID` of another process (variables inherited from an activated parent): the
/// descriptors are not this daemon's, and it binds its own socket as without them.
#[test]
fn variables_for_another_process_are_not_taken() {
    let env = TestEnv::new();
    let passed = env.data.join("passed.sock");
    let listener = UnixListener::bind(&passed).unwrap();
    let own = env.data.join("own.sock");
    let mut cmd = activated(
        &env,
        &listener,
        "1",
        &format!("--socket '{}'", own.display()),
    );
    let child = cmd.stderr(Stdio::null()).spawn().unwrap();
    wait_until("its own socket", || {
        std::os::unix::net::UnixStream::connect(&own).is_ok()
    });
    let mut daemon = Daemon {
        child,
        socket: own.clone(),
    };
    let outcome = daemon.client().call("PreToolUse", bash_input("ls"));
    assert_eq!(outcome["decision"], "none", "{outcome}");
    assert_eq!(daemon.terminate(), 0);
    assert!(!own.exists(), "its own socket is removed at the end");
    drop(listener);
}

fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Red team, stop 36: `LISTEN_PID` naming the daemon with descriptor 3 closed made it take
/// a closed descriptor and abort (IO safety, exit 134). It refuses, naming why.
#[test]
fn activation_without_a_descriptor_3_is_refused_not_a_crash() {
    let env = TestEnv::new();
    let template = env.command();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" serve 3<&-"#)
        .arg(env!("CARGO_BIN_EXE_hookhost"))
        .current_dir(template.get_current_dir().unwrap());
    for (name, value) in template.get_envs() {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    cmd.env_remove("XDG_RUNTIME_DIR").stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("passed no descriptor 3"), "{stderr}");
}
