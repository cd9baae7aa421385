//! The registry over the daemon protocol: `{"register": {"event": …, "matcher": …,
//! "hook": {…}}, "session": "…"}` registers a hook on the project's host
//! ([`crate::Host::register`]) and answers `{"id": …, "registered": {"hookId": N,
//! "warnings": […]}}`; `{"unregister": N}` answers `{"id": …, "unregistered": N}`. A
//! refusal is `{"id": …, "error": "registration refused: …"}`, naming the field.
//!
//! Who may register: whoever the daemon answers, which is only its own uid (the socket
//! checks the peer's credentials, or stdio, its own parent). That is the user, so a
//! registered hook is a **user** source for policy, with no workspace trust needed, as
//! if the user had written it into `~/.hookhost/hooks.json`; managed policy binds it as
//! it binds those.

use serde_json::json;

use super::Server;
use super::protocol::Request;
use crate::{HookId, Registration};

impl Server {
    /// Answers a `register` or `unregister` request.
    pub(super) fn answer_registry(&self, request: &mut Request) -> String {
        let id = request.id.clone();
        let fail = |message: String| json!({"id": id, "error": message}).to_string();
        if request.event.is_some() || request.input.is_some() {
            return fail(
                "bad request: `register` and `unregister` take no `event` or `input`".into(),
            );
        }
        let dir = request.project.take();
        let host = match self.project_host(dir.clone(), false) {
            Ok((host, _)) => host,
            Err(message) => return fail(message),
        };
        if let Some(number) = request.unregister {
            if request.register.is_some() {
                return fail("bad request: `register` or `unregister`, not both".into());
            }
            return if host.unregister(HookId(number)) {
                json!({"id": id, "unregistered": number}).to_string()
            } else {
                fail(format!("no hook is registered as {number} on this project"))
            };
        }
        let Some(value) = request.register.take() else {
            return fail("bad request: `register` is required".into());
        };
        let mut registration: Registration = match serde_json::from_value(value) {
            Ok(registration) => registration,
            Err(e) => return fail(format!("bad request: `register`: {e}")),
        };
        if let Some(session) = request.session.take() {
            if registration.session.as_ref().is_some_and(|s| *s != session) {
                return fail("bad request: two different sessions".into());
            }
            registration.session = Some(session);
        }
        // A project host with registered hooks is never forgotten (that would unregister
        // them), so the other projects that hold some are bounded here: beside the
        // default project's host (never forgotten either) one place in the table is
        // always left to forget when a new project is named.
        let dir = dir.unwrap_or_else(|| self.default_project.clone());
        let holding = self.projects_holding_registrations(&dir);
        if dir != self.default_project
            && host.registered().is_empty()
            && holding + 3 > self.limits.projects
        {
            return fail(format!(
                "registration refused: {holding} other projects hold registered hooks, the \
                 most this daemon keeps (it keeps {} projects warm); unregister some first",
                self.limits.projects
            ));
        }
        match host.register_with_warnings(registration) {
            Ok(receipt) => {
                let warnings: Vec<String> =
                    receipt.warnings.iter().map(ToString::to_string).collect();
                json!({"id": id, "registered": {"hookId": receipt.id.0, "warnings": warnings}})
                    .to_string()
            }
            Err(e) => fail(format!("registration refused: {e}")),
        }
    }
}
