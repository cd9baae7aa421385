//! Which program the drop-in runs: the small client `hookhost-dispatch --format claude`
//! when it is installed beside this `hookhost` and answers (the same call at less than
//! the start of `hookhost`: the book's daemon chapter, "The dispatch daemon"), else `hookhost dispatch
//! --format claude`. Both forms are hookhost's drop-in (`drop_in::is_installed_form`), so
//! `install` adds neither where either is, and `uninstall` removes both.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hookhost::config::file::{Owners, Rule};

/// The small client's name, beside `hookhost`.
pub(super) const CLIENT: &str = "hookhost-dispatch";

/// How long the small client may take to show `hookhost dispatch --help`.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// The most of its output read.
const ANSWER_CAP: u64 = 64 << 10;

/// The small client beside `exe` (this `hookhost`, resolved), when it is a regular,
/// executable file of this user or root that no one else can write
/// ([`Rule::Believed`]), and it answers: `hookhost-dispatch --help` shows `hookhost
/// dispatch`'s usage (it runs, and reaches this `hookhost`). `None` otherwise.
pub(super) fn small_client_beside(exe: &Path) -> Option<PathBuf> {
    let client = exe.parent()?.join(CLIENT);
    let meta = std::fs::symlink_metadata(&client).ok()?;
    let executable = meta.is_file() && meta.mode() & 0o111 != 0;
    if !executable || Rule::Believed(Owners::MeOrRoot).judge(&meta).is_some() {
        return None;
    }
    answers(&client).then_some(client)
}

/// Whether `client --help` (no daemon, no stdin) exits 0 within [`ANSWER_WITHIN`] with
/// `hookhost dispatch`'s usage on stdout.
fn answers(client: &Path) -> bool {
    let mut command = Command::new(client);
    command
        .arg("--help")
        .env("HOOKHOST_DISPATCH_DAEMON", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let Ok(mut child) =
        hookhost::handlers::descendants::spawn_own(|| command.spawn(), |c| Some(c.id()))
    else {
        return false;
    };
    let Some(stdout) = child.stdout.take() else {
        return false;
    };
    let reader = std::thread::spawn(move || {
        let mut shown = Vec::new();
        let _ = stdout.take(ANSWER_CAP).read_to_end(&mut shown);
        shown
    });
    let status = wait_within(&mut child, ANSWER_WITHIN);
    let shown = reader.join().unwrap_or_default();
    status.is_some_and(|s| s.success())
        && String::from_utf8_lossy(&shown).contains("Usage: hookhost dispatch")
}

/// `child`'s exit status once it ends within `time`; past it, the child is killed (and
/// reaped) and `None` is returned.
pub(super) fn wait_within(
    child: &mut std::process::Child,
    time: Duration,
) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if started.elapsed() < time => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}
