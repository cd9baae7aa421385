//! The daemon's table of project hosts: each built on first use (with the last good
//! versions of its files that other hosts keep), and bounded by evicting one not in use.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::Server;
use crate::{Host, SourcesFingerprint};

/// One project's warm host, with the fingerprint of its config sources it was built
/// from (what a reload compares against).
pub(super) struct Project {
    pub(super) host: Host,
    pub(super) fingerprint: SourcesFingerprint,
    /// A file changed while the host was built ([`crate::gate::Reloaded::dirty`]): the
    /// next poll builds again whatever the fingerprint says.
    pub(super) dirty: bool,
    /// A reload notice for the next outcome.
    pub(super) notice: Option<String>,
}

impl Server {
    /// The host of the project a request names (`None`: the daemon's), built on first
    /// use, with its pending reload notice when `take_notice`.
    ///
    /// # Errors
    ///
    /// A project that is not an absolute path (the answer's text).
    pub(super) fn project_host(
        &self,
        project: Option<std::path::PathBuf>,
        take_notice: bool,
    ) -> Result<(Host, Option<String>), String> {
        let dir = match project {
            None => self.default_project.clone(),
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => {
                return Err(format!(
                    "bad request: `project` must be an absolute path, not `{}`",
                    dir.display()
                ));
            }
        };
        if dir != self.default_project {
            self.make_room_for(&dir);
        }
        let project = self.project(&dir);
        let mut project = project.lock().unwrap_or_else(|e| e.into_inner());
        let notice = if take_notice {
            project.notice.take()
        } else {
            None
        };
        Ok((project.host.clone(), notice))
    }

    /// Before a project is built: with the table full, forgets one project host not in
    /// use (a client naming ever new projects must not grow the daemon without bound;
    /// a forgotten project is rebuilt when named again).
    pub(super) fn make_room_for(&self, dir: &Path) {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        self.make_room_in(&mut projects, dir);
    }

    /// [`Server::make_room_for`] on the table its caller holds locked: the check and the
    /// insert that follows it are one step, so requests naming new projects at once
    /// cannot each find room and together overfill the table.
    fn make_room_in(
        &self,
        projects: &mut std::collections::HashMap<PathBuf, Arc<Mutex<Project>>>,
        dir: &Path,
    ) {
        if dir == self.default_project
            || projects.len() < self.limits.projects
            || projects.contains_key(dir)
        {
            return;
        }
        let idle = projects
            .iter()
            .find(|(key, project)| {
                // Nor one with registered hooks: forgetting it would unregister them.
                Arc::strong_count(project) == 1
                    && *key != &self.default_project
                    && project
                        .lock()
                        .map(|p| p.host.registered().is_empty())
                        .unwrap_or(false)
            })
            .map(|(key, _)| key.clone());
        if let Some(key) = idle
            && let Some(project) = projects.remove(&key)
        {
            let host = project
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .host
                .clone();
            let mut forgotten = self.forgotten.lock().unwrap_or_else(|e| e.into_inner());
            *forgotten = Some(match forgotten.take() {
                Some(kept) => kept.remembering(&host),
                None => host,
            });
        }
    }

    /// How many project hosts other than `except`'s and the default project's hold
    /// registered hooks (and so are never forgotten to make room).
    pub(super) fn projects_holding_registrations(&self, except: &Path) -> usize {
        let projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        projects
            .iter()
            .filter(|(key, _)| key.as_path() != except && **key != self.default_project)
            .filter(|(_, project)| {
                project
                    .lock()
                    .map(|p| !p.host.registered().is_empty())
                    .unwrap_or(true)
            })
            .count()
    }

    /// The host of a project, built on first use (with what forgotten projects left
    /// behind as its previous version). A first build that panics is not kept (the panic
    /// is its request's answer, and the next request builds again).
    pub(super) fn project(&self, dir: &Path) -> Arc<Mutex<Project>> {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(project) = projects.get(dir) {
            return project.clone();
        }
        // The files this project shares with the others (the user's, managed policy) have
        // a last good version in the default project's host, and its own files may have
        // one in what forgotten hosts left behind.
        let default = projects
            .get(&self.default_project)
            .map(|p| p.lock().unwrap_or_else(|e| e.into_inner()).host.clone());
        let forgotten = self
            .forgotten
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let previous = match (default, forgotten) {
            (Some(default), Some(forgotten)) => Some(default.remembering(&forgotten)),
            (default, forgotten) => default.or(forgotten),
        };
        let sessions: Arc<dyn crate::session::SessionStore> = self.sessions.clone();
        let reloaded = crate::gate::reload(dir, previous.as_ref(), &self.wasm, |gate| {
            Ok((self.factory)(dir, sessions, gate))
        })
        .expect("the factory always builds");
        let project = Arc::new(Mutex::new(Project {
            host: reloaded.host,
            fingerprint: reloaded.fingerprint,
            dirty: reloaded.dirty,
            notice: None,
        }));
        self.make_room_in(&mut projects, dir);
        projects.insert(dir.to_path_buf(), project.clone());
        project
    }
}

#[cfg(test)]
mod tests {
    use crate::serve::{HostFactory, Limits, Server};
    use std::path::Path;
    use std::sync::Arc;

    /// A project built while a file is broken gets that file's last good version: the
    /// user's (shared) from the default project's host, its own from the host that was
    /// forgotten to bound the table. Checked to fail when new project hosts were built
    /// without a previous version (both guards were skipped).
    #[test]
    fn projects_built_while_a_file_is_broken_keep_its_last_good_version() {
        let root = tempfile::tempdir().unwrap();
        let user = root.path().join("user");
        std::fs::create_dir_all(&user).unwrap();
        let guard = |id: &str| {
            format!(
                r#"{{"hooks": {{"Stop": [{{"hooks": [{{"type": "command", "id": "{id}", "command": "exit 2"}}]}}]}}}}"#
            )
        };
        std::fs::write(user.join("hooks.json"), guard("user-guard")).unwrap();
        let project_a = root.path().join("a");
        std::fs::create_dir_all(project_a.join(".hookhost")).unwrap();
        std::fs::write(project_a.join(".hookhost/hooks.json"), guard("a-guard")).unwrap();
        let u = user.clone();
        let factory: HostFactory = Arc::new(move |dir, sessions, gate| {
            gate.apply(
                crate::HostBuilder::new(dir)
                    .user_dir(&u)
                    .workspace_trust(crate::WorkspaceTrust::Explicit)
                    .session_store(sessions),
            )
            .build()
        });
        let default = root.path().join("default");
        let server = Server::with_limits(
            default.clone(),
            factory,
            Limits {
                projects: 2,
                ..Limits::default()
            },
        );
        let running = |dir: &Path| -> Vec<String> {
            let project = server.project(dir);
            let host = project.lock().unwrap().host.clone();
            let mut ids: Vec<String> = host
                .policy()
                .hooks
                .iter()
                .filter(|h| h.skip.is_none())
                .map(|h| h.id.clone())
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(running(&default), ["user-guard"]);
        assert_eq!(running(&project_a), ["a-guard", "user-guard"]);
        std::fs::write(user.join("hooks.json"), "{ broken").unwrap();
        std::fs::write(project_a.join(".hookhost/hooks.json"), "{ broken").unwrap();
        // A new project: the user's guard from the default project's host.
        let b = root.path().join("b");
        server.make_room_for(&b);
        assert_eq!(running(&b), ["user-guard"]);
        assert!(!server.projects.lock().unwrap().contains_key(&project_a));
        // `a`, forgotten to make room for `b`, is built again with both guards.
        server.make_room_for(&project_a);
        assert_eq!(running(&project_a), ["a-guard", "user-guard"]);
    }
}
