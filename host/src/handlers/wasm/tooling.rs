//! What `hookhost plugin test` and embedders that call the sandbox directly need: an
//! [`Invocation`] outside any dispatcher, `--grant` parsing, and one test run.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::{PluginCall, PluginRun, WasmRuntime, block_on};
use crate::config::schema::RawCapabilities;
use crate::event::EventSpec;
use crate::handlers::{FailureKind, Invocation, Verdict};
use crate::policy::capability;

/// Builds an [`Invocation`] from an event name and input, outside any dispatcher: for
/// `hookhost plugin test` and embedders that call [`WasmRuntime::call`] directly.
///
/// # Errors
///
/// The input is not an object.
pub fn invocation(
    spec: Arc<EventSpec>,
    input: Value,
    project_dir: &Path,
) -> Result<Invocation, String> {
    Invocation::new(spec, input, project_dir)
        .ok_or_else(|| "the input must be a JSON object".into())
}

/// Adds one `--grant` of `hookhost plugin test` to `capabilities`:
/// `dir=PATH[:ro|:rw]` (PATH may start with `${workspace}` or `${home}`; add
/// `@GUEST` after it to mount it elsewhere), `env=NAME`, `http=PATTERN`.
///
/// # Errors
///
/// A message naming the grant and what is wrong with it.
pub fn parse_grant(grant: &str, capabilities: &mut RawCapabilities) -> Result<(), String> {
    use crate::config::schema::{DirMode, RawDirGrant};
    let (kind, value) = grant.split_once('=').ok_or_else(|| {
        format!("grant `{grant}` must look like dir=PATH[:ro|:rw], env=NAME or http=HOST")
    })?;
    if value.is_empty() {
        return Err(format!("grant `{grant}` has no value"));
    }
    match kind {
        "dir" => {
            let (rest, mode) = match value.rsplit_once(':') {
                Some((rest, "ro")) => (rest, DirMode::ReadOnly),
                Some((rest, "rw")) => (rest, DirMode::ReadWrite),
                _ => (value, DirMode::ReadOnly),
            };
            let (path, guest) = match rest.split_once('@') {
                Some((path, guest)) => (path, Some(guest.to_string())),
                None => (rest, None),
            };
            capabilities.dirs.push(RawDirGrant {
                path: path.to_string(),
                guest,
                mode,
            });
        }
        "env" => capabilities.env.push(value.to_string()),
        "http" => capabilities.http.push(value.to_string()),
        other => {
            return Err(format!(
                "grant `{grant}`: unknown kind `{other}` (expected dir, env or http)"
            ));
        }
    }
    capability::validate(capabilities)
        .map_err(|(field, message)| format!("grant `{grant}`: {field}: {message}"))
}

/// What `hookhost plugin test` prints: the response and the resource use of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginTestReport {
    /// `ok`, `failed` or `timeout`.
    pub status: &'static str,
    /// The failure kind, when it failed.
    pub failure: Option<FailureKind>,
    /// The failure message, when it failed.
    pub message: Option<String>,
    /// The response as Claude Code hook output JSON, when it answered.
    pub response: Option<Value>,
    /// A blocking error (a block on an event without a decision field), if any.
    pub blocking_error: Option<String>,
    /// Fuel used.
    pub fuel: Option<u64>,
    /// Fuel budget.
    pub fuel_limit: u64,
    /// Peak linear memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Memory cap in bytes.
    pub memory_limit: u64,
    /// Wall-clock time of the run, including loading the plugin.
    pub duration_ms: f64,
    /// Captured stdout / stderr / log records.
    pub diagnostics: Option<String>,
    /// Grants the plugin did not declare.
    pub warnings: Vec<String>,
}

/// Runs one plugin on one event outside any config, as `hookhost plugin test` does.
/// Blocks until done.
///
/// # Errors
///
/// An unknown event or an input that is not a JSON object.
pub fn test_plugin(
    runtime: &WasmRuntime,
    call: &PluginCall,
    event: &str,
    input: Value,
    project_dir: &Path,
) -> Result<PluginTestReport, String> {
    let catalogue = crate::event::EventCatalogue::default();
    let spec = catalogue
        .get(event)
        .ok_or_else(|| format!("unknown event `{event}`; `hookhost events` lists them"))?;
    let invocation = invocation(spec.clone(), input, project_dir)?;
    let PluginRun {
        run,
        output_json,
        warnings,
    } = block_on(runtime.call(call, &invocation))?;
    let (status, failure, message, blocking_error) = match &run.verdict {
        Verdict::Answer(answer) => ("ok", None, None, answer.blocking_error.clone()),
        Verdict::Failed(f) => (
            if f.kind == FailureKind::Timeout {
                "timeout"
            } else {
                "failed"
            },
            Some(f.kind),
            Some(f.message.clone()),
            None,
        ),
    };
    Ok(PluginTestReport {
        status,
        failure,
        message,
        response: output_json,
        blocking_error,
        fuel: run.usage.fuel,
        fuel_limit: call.fuel,
        memory_bytes: run.usage.memory_bytes,
        memory_limit: call.memory_bytes,
        duration_ms: (run.duration.as_secs_f64() * 1e6).round() / 1e3,
        diagnostics: run.diagnostics,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::schema::DirMode;

    #[test]
    fn grants_parse_from_the_command_line() {
        let mut caps = RawCapabilities::default();
        for g in [
            "dir=${workspace}",
            "dir=/data:rw",
            "dir=${home}/x@/home:ro",
            "env=TOKEN",
            "http=api.example.com",
        ] {
            parse_grant(g, &mut caps).unwrap();
        }
        assert_eq!(caps.dirs[0].path, "${workspace}");
        assert_eq!(caps.dirs[0].mode, DirMode::ReadOnly);
        assert_eq!(
            (caps.dirs[1].path.as_str(), caps.dirs[1].mode),
            ("/data", DirMode::ReadWrite)
        );
        assert_eq!(caps.dirs[2].guest.as_deref(), Some("/home"));
        assert_eq!(caps.env, ["TOKEN"]);
        assert_eq!(caps.http, ["api.example.com"]);
        for bad in ["nothing", "dir=", "dir=relative", "net=x", "http=ftp://x"] {
            assert!(
                parse_grant(bad, &mut RawCapabilities::default()).is_err(),
                "{bad}"
            );
        }
    }
}
