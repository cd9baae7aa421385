//! Where a daemon lives (its socket, lock and log, keyed by the whole command line and
//! environment), its private directory, and starting one in the background.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{LOG_CAP, MAX_DAEMONS, STALE_AFTER};

/// Where the daemon of this process's command line lives.
pub(super) struct Place {
    pub(super) socket: PathBuf,
    lock: PathBuf,
    log: PathBuf,
    dir: PathBuf,
}

impl Place {
    /// The place for this process's executable, directory, arguments and environment
    /// ([`super::key::daemon_of`], the key `hookhost-dispatch` computes too); `None` when
    /// there can be none (no private directory for the socket, a socket path too long to
    /// bind).
    pub(super) fn of_this_process() -> Option<Place> {
        let exe = std::env::current_exe().ok()?;
        let args = std::env::args_os().skip(1).collect::<Vec<_>>();
        let (dir, name) = super::key::daemon_of(&exe, args.iter().map(|a| a.as_os_str()))?;
        let place = Place {
            socket: dir.join(format!("{name}.sock")),
            lock: dir.join(format!("{name}.lock")),
            log: dir.join(format!("{name}.log")),
            dir,
        };
        place.private_dir().is_ok().then_some(place)
    }

    /// Creates the daemons' directory (mode 0700) and checks that only this user can
    /// reach it ([`hookhost::session::private_dir`]: not a symlink, this user's): a
    /// socket there is trusted with the caller's hook input and output. Unlike session
    /// state (whose files are each checked when opened), a directory found reachable by
    /// others is refused rather than narrowed: it may already hold their sockets. (One
    /// bound there before the user narrowed it is refused when connecting:
    /// [`super::key::served_by_this_user`].)
    fn private_dir(&self) -> Result<(), String> {
        if let Ok(meta) = std::fs::symlink_metadata(&self.dir)
            && hookhost::config::file::Rule::Private.mode_exceeds(&meta)
        {
            return Err(format!(
                "{} is not private to this user",
                self.dir.display()
            ));
        }
        hookhost::session::private_dir(&self.dir).map_err(|e| e.to_string())
    }

    /// Starts a daemon for this command line in the background, unless one holds the
    /// lock already (it is starting or serving) or the directory has its share of
    /// daemons. This process takes the lock, binds the socket and hands both to the
    /// daemon: the listening socket as its stdin, the locked lock file as its stdout
    /// (see the module's documentation: no variable makes a daemon).
    pub(super) fn start_daemon(&self) {
        if sweep_and_count_live(&self.dir) >= MAX_DAEMONS {
            return;
        }
        let Ok(lock) = open_lock(&self.lock) else {
            return;
        };
        if lock.try_lock().is_err() || !still_at(&lock, &self.lock) {
            return; // a daemon serves or starts, or a sweep removed the file just now
        }
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        // Appended to: a daemon started concurrently (which finds the lock taken and
        // exits) must not cut the log of the one that serves.
        let Ok(log) = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.log)
        else {
            return;
        };
        if log.metadata().is_ok_and(|m| m.len() > LOG_CAP) {
            let _ = log.set_len(0);
        }
        // Fresh: a concurrent sweep leaves the files of a starting daemon alone.
        let _ = log.set_modified(std::time::SystemTime::now());
        // Locked: no daemon serves this socket; one that was killed left it behind.
        let _ = std::fs::remove_file(&self.socket);
        let listener = match std::os::unix::net::UnixListener::bind(&self.socket) {
            Ok(listener) => listener,
            Err(_) => return,
        };
        // The daemon must not hold the caller's pipes: an agent reads a hook's stdout
        // until every writer has closed it. It leaves the caller's session itself
        // (`setsid` refuses a process group leader, so no `process_group` here).
        let mut daemon = Command::new(exe);
        // Trace context is per request (sent with each one): the daemon's own
        // environment, which its command hooks start from, has none.
        for var in super::key::PER_CALL_VARS {
            daemon.env_remove(var);
        }
        daemon
            .args(std::env::args_os().skip(1))
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)))
            .stdout(Stdio::from(lock))
            .stderr(log);
        let started =
            hookhost::handlers::descendants::spawn_own(|| daemon.spawn(), |c| Some(c.id()));
        if started.is_err() {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// Opens (creating) a daemon's lock file.
pub(super) fn open_lock(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
}

/// How many daemons of `dir` are alive (hold their lock); removes the files of dead
/// ones (lock free) older than [`STALE_AFTER`].
fn sweep_and_count_live(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut live = 0;
    for entry in entries.flatten() {
        let lock_path = entry.path();
        if lock_path.extension().is_none_or(|x| x != "lock") {
            continue;
        }
        let Ok(lock) = open_lock(&lock_path) else {
            continue;
        };
        if lock.try_lock().is_err() {
            live += 1;
            continue;
        }
        // Held by this process from here: a daemon that opened the file before it is
        // unlinked finds it gone once it gets the lock, and stands down.
        let files = ["sock", "log", "lock"].map(|x| lock_path.with_extension(x));
        let fresh = files.iter().any(|file| {
            std::fs::symlink_metadata(file)
                .and_then(|m| m.modified())
                .is_ok_and(|at| {
                    at.elapsed().is_ok_and(|age| age < STALE_AFTER) || at.elapsed().is_err()
                })
        });
        if !fresh {
            for file in &files {
                let _ = std::fs::remove_file(file);
            }
        }
    }
    live
}

/// Whether `lock`, locked by this process, is still the file at `path` (a sweep may
/// have removed it between open and lock).
pub(super) fn still_at(lock: &File, path: &Path) -> bool {
    match (lock.metadata(), std::fs::metadata(path)) {
        (Ok(held), Ok(now)) => held.ino() == now.ino() && held.dev() == now.dev(),
        _ => false,
    }
}
