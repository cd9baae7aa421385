//! One event being dispatched ([`Invocation`]): its spec, its input (as a value and as
//! the one-line JSON hooks get) and what scopes it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::EventSpec;

/// One event being dispatched: everything a handler may read about it.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The event's attributes.
    pub spec: Arc<EventSpec>,
    /// The input object.
    pub input: Value,
    /// The input as compact JSON on one line, as Claude Code sends it.
    pub input_json: String,
    /// `session_id` of the input (empty when absent).
    pub session_id: String,
    /// `cwd` of the input, else the project directory.
    pub cwd: PathBuf,
    /// The project directory.
    pub project_dir: PathBuf,
    /// The `CLAUDE_ENV_FILE` of the session, on the events that have one.
    pub env_file: Option<PathBuf>,
    /// The agent that called, as `hookhost dispatch --format AGENT` names it (`claude`,
    /// `codex`, …); `None` for the Outcome format and embedders that do not say.
    pub agent: Option<&'static str>,
}

impl Invocation {
    /// The invocation of the event `spec` with `input`: `hook_event_name` is added when
    /// the input lacks it, `session_id` and `cwd` are read from it (`cwd` defaults to the
    /// project directory). `env_file` is left unset: the dispatcher gives it on the events
    /// that have one. `None` when the input is not a JSON object.
    pub fn new(spec: Arc<EventSpec>, mut input: Value, project_dir: &Path) -> Option<Invocation> {
        let as_given = Invocation::keeps_as_given(&input);
        let object = input.as_object_mut()?;
        if !as_given {
            object.insert(
                "hook_event_name".into(),
                Value::String(spec.name.to_string()),
            );
        }
        let session_id = object
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let cwd = object
            .get("cwd")
            .and_then(Value::as_str)
            .map_or_else(|| project_dir.to_path_buf(), PathBuf::from);
        let input_json = crate::text::json_line(&input);
        Some(Invocation {
            spec,
            input,
            input_json,
            session_id,
            cwd,
            project_dir: project_dir.to_path_buf(),
            env_file: None,
            agent: None,
        })
    }

    /// Whether [`Invocation::new`] keeps `input` as it is (it names its event, so nothing
    /// is added): its `input_json` is then the input's own compact JSON, which the
    /// dispatch's receipt digests without writing the input a second time.
    pub fn keeps_as_given(input: &Value) -> bool {
        input.get("hook_event_name").is_some()
    }

    /// This invocation with `input` in place of its input (a transform chain's next
    /// step): the old input is neither copied nor kept, and `session_id` and `cwd` stay
    /// those the event arrived with (what a hook's rewrite may change is its tool's input
    /// or output, never what scopes the event).
    pub fn with_input(&self, input: Value) -> Invocation {
        Invocation {
            spec: self.spec.clone(),
            input_json: crate::text::json_line(&input),
            input,
            session_id: self.session_id.clone(),
            cwd: self.cwd.clone(),
            project_dir: self.project_dir.clone(),
            env_file: self.env_file.clone(),
            agent: self.agent,
        }
    }
}
