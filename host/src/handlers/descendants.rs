//! A command hook's descendants end with it (issue 24.11).
//!
//! Every command hook runs under a **keeper** of its own: the process `spawn` forks (in
//! `pre_exec`, before the hook's program is executed) forks once more; the child becomes
//! the hook, the parent stays as the keeper and never executes anything. The keeper is
//! a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every descendant of the hook that is
//! orphaned (a double fork, a `setsid` child, one that redirected its output and went to
//! the background) is re-parented to it rather than to init, whatever process group or
//! session it moved to. When the hook's process exits, or the host asks ([`end`]: the
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
//! Limits: a process started on the hook's behalf by another process (a service
//! manager, `at`, a container daemon) is not its descendant and is not ended; and if
//! the keeper itself is killed with `SIGKILL`, the hook dies with it (its
//! `PR_SET_PDEATHSIG`) but what the hook had started is re-parented above the keeper.
//! A hook can do that on purpose (`kill -9 $PPID`, the same user):
//! `tests/cli/attacks/second_round.rs` keeps that attack, ignored until a pid namespace
//! or a cgroup holds the hook.
//! Without `/proc/thread-self/children` the keeper ends the hook's process group only.

use std::io;
use std::time::Duration;

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
