//! A command hook's descendants end with it (issue 24.11).
//!
//! Every command hook runs under a **keeper** of its own: the process `spawn` forks (in
//! `pre_exec`, before the hook's program is executed) forks once more; the child becomes
//! the hook, the parent stays as the keeper and never executes anything. The keeper is
//! a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every descendant of the hook that is
//! orphaned (a double fork, a `setsid` child, one that redirected its output and went to
//! the background) is re-parented to it rather than to init, whatever process group or
//! session it moved to. When the hook's process exits, or the host asks (`end`: the
//! hook's timeout, a cancelled dispatch), or the host dies (`PR_SET_PDEATHSIG`), the
//! keeper kills the hook's process group and then every child it still has, until none
//! is left, and exits with the hook's status. Each hook has its own keeper, so the
//! one-shot CLI, the dispatch daemon and `serve`, which run many hooks at once, end
//! exactly the descendants of the hook that ended.
//!
//! Gracefully: when the host asks (or dies), the keeper sends `SIGTERM` to the hook's
//! process group and waits up to the hook's `killGrace` for the group to be gone before
//! the `SIGKILL`; a hook that traps `TERM` can clean up. When the hook's own process
//! exits while something it started still runs (`sleep 3 & echo '{}'`, holding its
//! stdout), the keeper kills the rest at once: the hook is answered when its process
//! exits (its answer is in the pipe by then), and the host reads a pipe that something
//! which escaped the keeper still holds for [`DRAIN`] at most.
//!
//! A keeper killed with `SIGKILL` (a hook can do that on purpose: `kill -9 $PPID`, the
//! same user) takes the hook with it (its `PR_SET_PDEATHSIG`), but what the hook had
//! started is re-parented above the keeper. The `hookhost` program is therefore a child
//! subreaper too ([`adopt_orphans`], called by the CLI only: a library's host leaves its
//! embedder's children alone): those orphans are re-parented to it, and at the end of
//! every dispatch it kills and reaps every child it did not start itself
//! ([`end_adopted`]; it starts each of its own through [`spawn_own`], which records
//! them). Limits: a process started on the hook's behalf by another process (a service
//! manager, `at`, a container daemon) is not its descendant and is not ended; an orphan
//! of a one-shot `hookhost` that is itself killed goes to init. Without
//! `/proc/thread-self/children` the keeper ends the hook's process group only.

use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Whether this process adopts its hooks' orphans ([`adopt_orphans`]).
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// Whether this process ever started a child ([`spawn_own`], the one way it starts one).
/// Until it has, nothing can be re-parented to it (an orphan is a descendant of a child
/// of its own), so [`end_adopted`] has nothing to look for: a daemon that runs only wasm
/// hooks does not read `/proc` after every event.
static SPAWNED: AtomicBool = AtomicBool::new(false);

/// The children this process started itself ([`spawn_own`]): keepers, async runners,
/// the dispatch daemon. Locked across each spawn and each sweep, so a child being
/// started is never taken for an orphan.
static OWN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): a hook's descendant
/// orphaned by its keeper's death is re-parented here, and [`end_adopted`] ends it. Only
/// for a program that starts every child of its own through [`spawn_own`] (the `hookhost`
/// command line); whether the kernel agreed.
pub fn adopt_orphans() -> bool {
    // SAFETY: prctl with integer arguments has no memory-safety preconditions.
    let set = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } == 0;
    ADOPTING.store(set, Ordering::SeqCst);
    set
}

/// Starts a child of this process's own with `spawn` (its pid from `pid`) and records it,
/// so that [`end_adopted`] never takes it for an orphan.
///
/// # Errors
///
/// What `spawn` returns.
pub fn spawn_own<T>(
    spawn: impl FnOnce() -> io::Result<T>,
    pid: impl FnOnce(&T) -> Option<u32>,
) -> io::Result<T> {
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    // Before the spawn: a sweep that starts after it must look.
    SPAWNED.store(true, Ordering::SeqCst);
    let child = spawn()?;
    if let Some(pid) = pid(&child) {
        own.insert(pid);
    }
    Ok(child)
}

/// Kills (`SIGKILL`) and reaps every child of this process that it did not start (the
/// orphans of hooks whose keeper was killed, adopted as subreaper), then their children
/// in turn, until none is left: each is waited for by its pid, so its own children are
/// re-parented here before the next look. Children of its own that are gone are
/// forgotten. Nothing unless [`adopt_orphans`] was called and a child was ever started
/// ([`spawn_own`]).
pub fn end_adopted() {
    if !ADOPTING.load(Ordering::SeqCst) || !SPAWNED.load(Ordering::SeqCst) {
        return;
    }
    loop {
        let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
        let Some(children) = children() else { return };
        // Forgotten only once reaped (no longer a child at all): a list read while it
        // changed may miss a child that is still this process's own.
        own.retain(|pid| children.contains(pid) || still_a_child(*pid));
        let adopted: Vec<u32> = children.difference(&own).copied().collect();
        if adopted.is_empty() {
            return;
        }
        for pid in &adopted {
            // SAFETY: kill has no memory-safety preconditions; the pid is an unreaped
            // child of this process, so it cannot have been reused.
            unsafe {
                libc::kill(*pid as libc::pid_t, libc::SIGKILL);
            }
        }
        drop(own);
        for pid in adopted {
            loop {
                // SAFETY: waitpid with a null status pointer.
                let got = unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
                if got >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break;
                }
            }
        }
    }
}

/// Whether `pid` is still a child of this process (running, or exited and not reaped).
fn still_a_child(pid: u32) -> bool {
    // SAFETY: waitid writes into valid local storage; WNOWAIT leaves the child as it is.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        ) == 0
    }
}

/// The children of every thread of this process (`/proc/self/task/*/children`); `None`
/// when they cannot be listed.
fn children() -> Option<BTreeSet<u32>> {
    let mut found = BTreeSet::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        // The one reader: a regular file of at most 1 MiB (a pid is at most 8 bytes).
        let path = task.path().join("children");
        let Ok((list, _)) = crate::config::file::read_regular(&path, 1 << 20) else {
            continue;
        };
        let list = String::from_utf8_lossy(&list);
        found.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    Some(found)
}

/// How long the host reads a hook's pipes after its keeper exited (only a process that
/// escaped the keeper can still hold them).
pub const DRAIN: Duration = Duration::from_millis(250);

/// Adds the keeper to `command` (which must lead its own process group); `grace` is the
/// hook's `killGrace`, between the `SIGTERM` and the `SIGKILL` when it is ended.
pub(super) fn keep_descendants(command: &mut tokio::process::Command, grace: Duration) {
    let host = std::process::id() as libc::pid_t;
    let grace = nanos(grace);
    // SAFETY: the closure runs in the child between `fork` and `exec`, and makes only
    // async-signal-safe calls (`sigprocmask`, `prctl`, `fork`, `setpgid`, `getppid`, and
    // in the keeper `sigwaitinfo`, `waitpid`, `kill`, `open`/`read`/`close`, `_exit`);
    // `sigtimedwait`, `clock_gettime`; it allocates nothing.
    unsafe {
        command.pre_exec(move || split(host, grace));
    }
}

/// Asks the keeper of a hook (`keeper`: the pid `spawn` returned) to end the hook and
/// all its descendants now. The keeper is the caller's unreaped child, so its pid
/// cannot have been reused.
pub(super) fn end(keeper: u32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(keeper as libc::pid_t, libc::SIGTERM);
    }
}

/// The signals the keeper waits for: the hook's (and orphans') exits, and its end.
fn keeper_signals() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset to initialise.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGCHLD, libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// A duration in nanoseconds, saturating.
fn nanos(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX)
}

/// In the forked child: forks the hook (which returns, to be executed) and stays as its
/// keeper (which never returns).
fn split(host: libc::pid_t, grace: i64) -> io::Result<()> {
    let set = keeper_signals();
    // SAFETY: async-signal-safe calls on valid local storage (see keep_descendants).
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old);
        let hook = libc::fork();
        if hook < 0 {
            // The spawn fails with the OS error (out of processes: a named failure).
            return Err(io::Error::last_os_error());
        }
        if hook == 0 {
            // The hook: a process group of its own (the keeper kills it whole), dies
            // with its keeper, the signal mask it would have had.
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            return Ok(());
        }
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        keep(hook, libc::getppid() != host, &set, grace)
    }
}

/// The keeper's life: waits for the hook to exit or for its end; when ended, ends the
/// hook's group gracefully (`SIGTERM`, then `SIGKILL` after `grace` ns); then kills
/// every descendant, and exits as the hook did.
///
/// # Safety
///
/// Only in the single-threaded child of a fork.
unsafe fn keep(hook: libc::pid_t, host_gone: bool, set: &libc::sigset_t, grace: i64) -> ! {
    // SAFETY: async-signal-safe calls on valid local storage.
    unsafe {
        // The keeper holds none of the hook's pipes: the host sees their end when the
        // hook and its descendants are gone.
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            for fd in 0..4096 {
                libc::close(fd);
            }
        }
        let mut status: Option<libc::c_int> = None;
        let mut ending = host_gone;
        while status.is_none() && !ending {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let signal = libc::sigwaitinfo(set, &mut info);
            if signal == libc::SIGCHLD || signal < 0 {
                status = reap(hook).or(status);
            } else {
                ending = true;
            }
        }
        if status.is_none() {
            // Ended while running: TERM to the group, KILL after the grace, sooner when
            // the group is gone.
            libc::killpg(hook, libc::SIGTERM);
            let deadline = now().saturating_add(grace);
            loop {
                status = reap(hook).or(status);
                let group_gone = libc::kill(-hook, 0) != 0
                    && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
                if (status.is_some() && group_gone) || !wait_until(set, deadline) {
                    break;
                }
            }
        }
        libc::killpg(hook, libc::SIGKILL);
        sweep();
        match status {
            Some(s) if libc::WIFEXITED(s) => libc::_exit(libc::WEXITSTATUS(s)),
            Some(s) if libc::WIFSIGNALED(s) => {
                let signal = libc::WTERMSIG(s);
                libc::signal(signal, libc::SIG_DFL);
                let mut only: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut only);
                libc::sigaddset(&mut only, signal);
                libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
                libc::kill(libc::getpid(), signal);
                libc::_exit(128 + signal)
            }
            _ => {
                libc::kill(libc::getpid(), libc::SIGKILL);
                libc::_exit(137)
            }
        }
    }
}

/// The monotonic clock, in nanoseconds.
///
/// # Safety
///
/// None beyond the call's (async-signal-safe).
unsafe fn now() -> i64 {
    // SAFETY: a zeroed timespec is valid storage for clock_gettime.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        (ts.tv_sec as i64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as i64)
    }
}

/// Waits for one of `set` until `deadline` (ns of [`now`]); `false` when the deadline
/// has passed.
///
/// # Safety
///
/// Only in the keeper.
unsafe fn wait_until(set: &libc::sigset_t, deadline: i64) -> bool {
    // SAFETY: async-signal-safe calls on valid local storage.
    unsafe {
        let left = deadline.saturating_sub(now());
        if left <= 0 {
            return false;
        }
        let ts = libc::timespec {
            tv_sec: (left / 1_000_000_000) as libc::time_t,
            tv_nsec: (left % 1_000_000_000) as libc::c_long,
        };
        libc::sigtimedwait(set, std::ptr::null_mut(), &ts);
        true
    }
}

/// Reaps every child that has exited; the hook's wait status when it is among them.
///
/// # Safety
///
/// Only in the keeper.
unsafe fn reap(hook: libc::pid_t) -> Option<libc::c_int> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into valid local storage.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        if pid == hook {
            found = Some(status);
        }
    }
}

/// Kills every child of the keeper (orphaned descendants of the hook re-parent to it,
/// so killing a child brings its own children here next) until it has none. Without a
/// readable list of children, only those already gone are reaped.
///
/// # Safety
///
/// Only in the keeper.
unsafe fn sweep() {
    loop {
        // SAFETY: async-signal-safe calls on valid local storage.
        unsafe {
            if !kill_children() {
                while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
                return;
            }
            if libc::waitpid(-1, std::ptr::null_mut(), 0) < 0
                && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
            {
                return; // ECHILD: none left
            }
        }
    }
}

/// Sends `SIGKILL` to every child listed in `/proc/thread-self/children` (the keeper
/// has one thread); whether the list could be read.
///
/// # Safety
///
/// Only in the keeper.
unsafe fn kill_children() -> bool {
    // SAFETY: open/read/close/kill on a static path and a local buffer.
    unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let mut buf = [0u8; 512];
        let mut pid: libc::pid_t = 0;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            for &byte in &buf[..n as usize] {
                if byte.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(libc::pid_t::from(byte - b'0'));
                } else {
                    if pid > 0 {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    pid = 0;
                }
            }
        }
        if pid > 0 {
            libc::kill(pid, libc::SIGKILL);
        }
        libc::close(fd);
        true
    }
}

#[cfg(test)]
mod tests {
    /// The class of children `end_adopted` must not take for orphans: every process the
    /// crate spawns (`.spawn()` of a `Command`), found in its source, is spawned through
    /// `spawn_own`. (The demo's `cargo` builds run to their end with `.output()` or
    /// `.status()` before any event is dispatched.)
    #[test]
    fn every_process_the_crate_spawns_is_its_own() {
        fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (n, line) in text.lines().enumerate() {
                        let code = line.split("//").next().unwrap_or("");
                        // Built here, so that this line is not one of them.
                        if code.contains(&[".spawn", "()"].concat()) {
                            found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                        }
                    }
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        assert!(found.len() >= 3, "{found:#?}");
        // Programs of the crate that never adopt orphans (no `adopt_orphans`, no
        // `PR_SET_CHILD_SUBREAPER`): nothing is re-parented to them, so a child of theirs
        // needs no record. Each is checked to stay one.
        const NOT_SUBREAPERS: &[(&str, &str)] = &[(
            "src/dispatch_client.rs",
            "`hookhost-dispatch`: its one child is the `hookhost` it retries a lost \
             daemon's call with",
        )];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for (file, _why) in NOT_SUBREAPERS {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            for adopting in ["adopt_orphans", "PR_SET_CHILD_SUBREAPER"] {
                assert!(!text.contains(adopting), "{file} adopts orphans");
            }
        }
        let stray: Vec<_> = found
            .iter()
            .filter(|l| {
                !l.contains("spawn_own(")
                    && !NOT_SUBREAPERS
                        .iter()
                        .any(|(file, _)| l.starts_with(&root.join(file).display().to_string()))
            })
            .collect();
        assert!(stray.is_empty(), "spawned outside `spawn_own`: {stray:#?}");
    }
}
