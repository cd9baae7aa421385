//! Reloading: polling each project's config sources and rebuilding the hosts whose files
//! changed, never leaving a project less guarded than before.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::projects::Project;
use super::{RELOAD_POLL, Server};
use crate::session::SessionStore;

impl Server {
    /// Rebuilds the hosts whose config files changed. A rebuild never leaves a project
    /// less guarded: a file that fails to load keeps its last good version in force (see
    /// [`crate::HostBuilder::reload_of`]), and a rebuild that panics keeps the previous
    /// host serving, with a notice on every outcome, until the files change again (it is
    /// not retried on every poll).
    pub fn reload_changed(&self) {
        let projects: Vec<(PathBuf, Arc<Mutex<Project>>)> = self
            .projects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (dir, project) in projects {
            let (old, now, previous, dirty) = {
                let project = project.lock().unwrap_or_else(|e| e.into_inner());
                (
                    project.fingerprint.clone(),
                    project.host.fingerprint(),
                    project.host.clone(),
                    project.dirty,
                )
            };
            if now == old && !dirty {
                continue;
            }
            let sessions: Arc<dyn SessionStore> = self.sessions.clone();
            // Through the gate: a file that fails a check keeps its last good version,
            // and a build that panics keeps the previous host serving.
            let Ok(reloaded) = crate::gate::reload(&dir, Some(&previous), &self.wasm, |gate| {
                Ok((self.factory)(&dir, sessions, gate))
            }) else {
                continue;
            };
            let changed: Vec<String> = reloaded
                .fingerprint
                .changed_since(&old)
                .iter()
                .map(|path| path.display().to_string())
                .collect();
            let mut project = project.lock().unwrap_or_else(|e| e.into_inner());
            project.host = reloaded.host;
            project.fingerprint = reloaded.fingerprint;
            project.dirty = reloaded.dirty;
            if changed.is_empty() {
                // Built again only because a file was too fresh to trust its stamp.
                continue;
            }
            let errors = project.host.policy().errors.len();
            project.notice = Some(format!(
                "config reloaded ({} changed){}",
                changed.join(", "),
                if errors > 0 {
                    format!("; {errors} errors, see `hookhost validate`")
                } else {
                    String::new()
                }
            ));
        }
    }

    /// Polls for changed files and rebuilds, every reload on one thread of its own: a
    /// rebuild's allocations and the frees of the host it replaces then stay in one
    /// allocator heap (mimalloc keeps a heap per thread; with a pool thread per reload,
    /// each thread kept the memory of the configs it had built, and the peak of `serve`
    /// grew with reloads: `tests/cli/config_size.rs`). Where no thread can be started,
    /// each reload takes a pool thread as before.
    pub(super) fn spawn_reloader(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        let (ticks, rx) = std::sync::mpsc::sync_channel::<tokio::sync::oneshot::Sender<()>>(0);
        let server = self.clone();
        let thread = std::thread::Builder::new()
            .name("hookhost-reload".into())
            .spawn(move || {
                for done in rx {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        server.reload_changed()
                    }));
                    let _ = done.send(());
                }
            });
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(RELOAD_POLL);
            loop {
                tick.tick().await;
                if thread.is_ok() {
                    // The thread waits for the tick: the last reload has been answered.
                    let (done, answered) = tokio::sync::oneshot::channel();
                    if ticks.send(done).is_ok() {
                        let _ = answered.await;
                        continue;
                    }
                }
                let server = self.clone();
                // Rebuilding reads files: keep it off the async workers.
                let _ = tokio::task::spawn_blocking(move || server.reload_changed()).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::serve::{HostFactory, Server};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn a_reload_that_panics_keeps_the_old_host_and_is_not_retried_until_files_change() {
        let root = tempfile::tempdir().unwrap();
        let user = root.path().join("user");
        std::fs::create_dir_all(&user).unwrap();
        let file = user.join("hooks.json");
        let guard = r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "id": "guard", "command": "exit 2"}]}]}}"#;
        std::fs::write(&file, guard).unwrap();
        let panics = Arc::new(AtomicBool::new(false));
        let builds = Arc::new(AtomicUsize::new(0));
        let (p, b, u) = (panics.clone(), builds.clone(), user.clone());
        let factory: HostFactory = Arc::new(move |dir, sessions, gate| {
            b.fetch_add(1, Ordering::SeqCst);
            assert!(!p.load(Ordering::SeqCst), "the new config cannot be built");
            gate.apply(
                crate::HostBuilder::new(dir)
                    .user_dir(&u)
                    .session_store(sessions),
            )
            .build()
        });
        let server = Server::new(root.path().to_path_buf(), factory);
        let project = server.project(root.path());
        assert_eq!(builds.load(Ordering::SeqCst), 1);

        panics.store(true, Ordering::SeqCst);
        std::fs::write(&file, guard.replace("exit 2", "exit 1")).unwrap();
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 2);
        let host = project.lock().unwrap().host.clone();
        assert_eq!(host.policy().hooks[0].id, "guard");
        assert!(
            host.policy()
                .notices
                .iter()
                .any(|n| n.contains("config reload failed")),
            "{:?}",
            host.policy().notices
        );
        // Not rebuilt on every poll while nothing changes.
        server.reload_changed();
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 2);

        panics.store(false, Ordering::SeqCst);
        std::fs::write(&file, guard).unwrap();
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 3);
        let host = project.lock().unwrap().host.clone();
        assert!(
            host.policy().notices.is_empty(),
            "{:?}",
            host.policy().notices
        );
    }
}

#[cfg(test)]
mod dirty_tests {
    use crate::serve::{HostFactory, Server};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A host built from a file that changed while (or just before) it was read is built
    /// again at the next poll although the stamps the poll compares are unchanged (a
    /// second write within the stamp's granularity, or one between the read and the
    /// stamp, would otherwise never be read); once its files settled, polls build
    /// nothing. "Just written" is a modification time an hour ahead, so that no timing
    /// of the test decides. Checked to fail without the gate's `dirty`.
    #[test]
    fn a_file_changed_while_it_was_read_is_read_again_at_the_next_poll() {
        let root = tempfile::tempdir().unwrap();
        let user = root.path().join("user");
        std::fs::create_dir_all(&user).unwrap();
        let file = user.join("hooks.json");
        std::fs::write(&file, r#"{"hooks": {}}"#).unwrap();
        let stamp = |when: std::time::SystemTime| {
            std::fs::File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(when)
                .unwrap();
        };
        let hour = std::time::Duration::from_secs(3600);
        stamp(std::time::SystemTime::now() + hour);
        let builds = Arc::new(AtomicUsize::new(0));
        let (b, u) = (builds.clone(), user.clone());
        let factory: HostFactory = Arc::new(move |dir, sessions, gate| {
            b.fetch_add(1, Ordering::SeqCst);
            gate.apply(
                crate::HostBuilder::new(dir)
                    .user_dir(&u)
                    .session_store(sessions),
            )
            .build()
        });
        let server = Server::new(root.path().to_path_buf(), factory);
        let project = server.project(root.path());
        assert!(project.lock().unwrap().dirty);
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 2, "built again, unchanged");
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 3, "still too fresh to trust");

        // Settled (and changed, by the stamp): one build, then none. (Setting the time
        // changes the file's ctime, which must be older than the granularity too.)
        stamp(std::time::SystemTime::now() - hour);
        std::thread::sleep(
            std::time::Duration::from_secs(1) + std::time::Duration::from_millis(100),
        );
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 4);
        assert!(!project.lock().unwrap().dirty);
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 4);
    }
}
