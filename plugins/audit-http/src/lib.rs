//! Posts every event it sees to an audit endpoint (`config.url`), as the JSON input with
//! the event name. The host must grant the endpoint's host (`capabilities.http`); the
//! plugin declares `*`, i.e. whatever host the user grants. It never decides anything; a
//! failed post is a failed hook (a notice, unless `onFailure` says block).

use hookhost_guest::{Event, Hook, Info, Response, json, register};

/// The plugin. Stateless.
#[derive(Default)]
pub struct AuditHttp;

#[derive(serde::Deserialize, Default)]
struct Config {
    url: Option<String>,
}

impl Hook for AuditHttp {
    fn info() -> Info {
        Info::new("audit-http", env!("CARGO_PKG_VERSION")).http("*")
    }

    fn other(&mut self, event: &Event) -> hookhost_guest::Result {
        let config: Config = event.config_as()?;
        let url = config.url.ok_or("audit-http needs `config.url`")?;
        let body = json!({
            "event": event.name(),
            "session": event.session_id(),
            "tool": event.tool_name(),
            "input": event.input(),
        });
        let response =
            hookhost_guest::http::post(&url, "application/json", body.to_string().as_bytes())?;
        if !(200..300).contains(&response.status) {
            return Err(format!("audit endpoint {url} answered {}", response.status).into());
        }
        hookhost_guest::log::debug(
            "audited",
            &[
                ("event", event.name()),
                ("status", &response.status.to_string()),
            ],
        );
        Ok(Response::none())
    }
}

register!(AuditHttp);
