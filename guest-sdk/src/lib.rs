//! Write [hookhost] hooks in Rust.
//!
//! A hookhost plugin is a WebAssembly component that runs in a sandbox with no more
//! rights than the user granted it. This crate hides the component plumbing
//! (wit-bindgen, the `hookhost:hook@0.2.0` world): implement [`Hook`] with a method per
//! event you care about, return a [`Response`] built with its helpers, and
//! [`register!`] the type.
//!
//! # Example
//!
//! A complete plugin that denies `rm -rf /` and adds context to every other Bash call.
//! `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "no-rm-rf"
//! version = "0.1.0"
//! edition = "2024"
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! hookhost-guest = { path = "../guest-sdk" }
//! ```
//!
//! `src/lib.rs`:
//!
//! ```no_run
//! use hookhost_guest::{Event, Hook, Info, Response, register};
//!
//! #[derive(Default)]
//! struct NoRmRf;
//!
//! #[derive(serde::Deserialize)]
//! struct Bash {
//!     command: String,
//! }
//!
//! impl Hook for NoRmRf {
//!     fn info() -> Info {
//!         Info::new("no-rm-rf", env!("CARGO_PKG_VERSION")).events(&["PreToolUse"])
//!     }
//!
//!     fn pre_tool_use(&mut self, event: &Event) -> hookhost_guest::Result {
//!         if event.tool_name() != Some("Bash") {
//!             return Ok(Response::none());
//!         }
//!         let bash: Bash = event.tool_input_as()?;
//!         if bash.command.contains("rm -rf /") {
//!             return Ok(Response::deny("refusing to delete the filesystem root"));
//!         }
//!         hookhost_guest::log::info("bash allowed", &[("command", &bash.command)]);
//!         Ok(Response::none().with_context("a sandboxed hook looked at this command"))
//!     }
//! }
//!
//! register!(NoRmRf);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` and point a hook at the
//! `.wasm`:
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
//!   {"type": "wasm", "plugin": "target/wasm32-wasip2/release/no_rm_rf.wasm"}
//! ]}]}}
//! ```
//!
//! # Capabilities
//!
//! A plugin starts with nothing: no files, no environment, no network. It asks for what
//! it needs in [`Hook::info`] ([`Info::read_dir`], [`Info::write_dir`], [`Info::env`],
//! [`Info::http`]); the user grants it in the hook's `capabilities`. Only what is both
//! asked for and granted is live; anything else fails with a permission error in the
//! guest (`std::fs`, `std::env::var`, `http::post` with the `http` feature).
//!
//! # The model
//!
//! A plugin may ask the model of its hook's provider: [`Event::ask_model`] for one
//! question, [`model::complete`] for a conversation. The host gives it only when the
//! hook's config grants `capabilities.model` (`{"tokensPerEvent": N}`); otherwise, or
//! once the budget is spent, the call returns an error. A plugin that never calls it does
//! not import it, and never gets it.
//!
//! # State
//!
//! By default every event runs in a fresh instance: `self` is `Default::default()` each
//! time. With `"instance": "session"` in the hook's config, one instance serves a whole
//! session and `self` keeps its fields between events.
//!
//! [hookhost]: https://example.invalid/hookhost

#![warn(missing_docs)]

use std::cell::OnceCell;
use std::fmt;

use serde::de::DeserializeOwned;
pub use serde_json::{self, Map, Value, json};

#[doc(hidden)]
pub mod __bindings {
    wit_bindgen::generate!({
        // `plugin` and the `model` import: a plugin that never asks the model does not
        // import it (the linker drops what is not called).
        world: "plugin-with-model",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_hookhost_plugin",
        default_bindings_module: "hookhost_guest::__bindings",
    });
}

use __bindings::hookhost::hook::types as wit;

/// The `hookhost:hook` version this SDK builds plugins for.
pub const WIT_VERSION: &str = "0.2.0";

/// An error of a hook: the host reports it as a failed hook (never as a decision), and
/// the hook's `onFailure` decides what that means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(s: String) -> Error {
        Error(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Error {
        Error(s.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error(e.to_string())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error(e.to_string())
    }
}

/// What a hook method returns.
pub type Result<T = Response, E = Error> = std::result::Result<T, E>;

/// One event, as the agent sent it.
///
/// The input JSON is parsed lazily: [`Event::tool_input_as`] deserializes `tool_input`
/// straight from the JSON text, and the whole input is parsed into a [`Value`] only when
/// a method returns one. Hooks that look at the tool input alone stay cheap in fuel.
#[derive(Debug, Clone)]
pub struct Event {
    name: String,
    session_id: String,
    cwd: String,
    workspace: String,
    tool_name: Option<String>,
    input_json: String,
    input: OnceCell<Value>,
    config_json: Option<String>,
    config: OnceCell<Option<Value>>,
}

/// The top level of an input, with `tool_input` left as JSON text.
#[derive(serde::Deserialize)]
struct RawToolInput<'a> {
    #[serde(borrow, default)]
    tool_input: Option<&'a serde_json::value::RawValue>,
}

impl Event {
    /// Builds an event from its parts; the host does this for you. Useful in unit tests
    /// of a plugin's logic.
    pub fn new(name: &str, input: Value) -> Event {
        let get = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
        Event {
            name: name.to_string(),
            session_id: get("session_id").unwrap_or_default(),
            cwd: get("cwd").unwrap_or_default(),
            workspace: get("cwd").unwrap_or_default(),
            tool_name: get("tool_name"),
            input_json: input.to_string(),
            input: OnceCell::from(input),
            config_json: None,
            config: OnceCell::from(None),
        }
    }

    /// Sets the hook's `config` (for unit tests).
    pub fn with_config(mut self, config: Value) -> Event {
        self.config_json = Some(config.to_string());
        self.config = OnceCell::from(Some(config));
        self
    }

    fn from_wit(e: wit::Event) -> Event {
        Event {
            name: e.name,
            session_id: e.session_id,
            cwd: e.cwd,
            workspace: e.workspace,
            tool_name: e.tool_name,
            input_json: e.input_json,
            input: OnceCell::new(),
            config_json: e.config_json,
            config: OnceCell::new(),
        }
    }

    fn parsed(&self) -> &Value {
        // The host always sends a JSON object; `Null` only if that contract broke.
        self.input
            .get_or_init(|| serde_json::from_str(&self.input_json).unwrap_or(Value::Null))
    }

    /// The event name (`PreToolUse`, `Stop`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The session id (empty when the agent sent none).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The agent's working directory (a host path; readable only through a grant).
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// The project directory (a host path): where a `${workspace}` grant is mounted
    /// unless the grant names another guest path.
    pub fn workspace(&self) -> &str {
        &self.workspace
    }

    /// The tool name on tool events.
    pub fn tool_name(&self) -> Option<&str> {
        self.tool_name.as_deref()
    }

    /// The whole input object.
    pub fn input(&self) -> &Value {
        self.parsed()
    }

    /// The input as the compact JSON the host sent.
    pub fn input_json(&self) -> &str {
        &self.input_json
    }

    /// One field of the input.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.parsed().get(name)
    }

    /// One string field of the input.
    pub fn str_field(&self, name: &str) -> Option<&str> {
        self.parsed().get(name).and_then(Value::as_str)
    }

    /// `tool_input` (`Value::Null` when absent).
    pub fn tool_input(&self) -> &Value {
        self.parsed().get("tool_input").unwrap_or(&Value::Null)
    }

    /// `tool_input` deserialized into your type.
    ///
    /// # Errors
    ///
    /// The input does not fit `T`.
    pub fn tool_input_as<T: DeserializeOwned>(&self) -> Result<T> {
        let tool = self.tool_name().unwrap_or("?");
        let fail = |e: serde_json::Error| Error(format!("tool_input of {tool}: {e}"));
        if let Some(input) = self.input.get() {
            return T::deserialize(input.get("tool_input").unwrap_or(&Value::Null)).map_err(fail);
        }
        let raw: RawToolInput<'_> = serde_json::from_str(&self.input_json).map_err(fail)?;
        match raw.tool_input {
            Some(text) => serde_json::from_str(text.get()).map_err(fail),
            None => T::deserialize(&Value::Null).map_err(fail),
        }
    }

    /// `tool_response` on PostToolUse (`None` elsewhere).
    pub fn tool_response(&self) -> Option<&Value> {
        self.parsed().get("tool_response")
    }

    /// The hook's `config` object from the settings file.
    pub fn config(&self) -> Option<&Value> {
        self.config
            .get_or_init(|| {
                self.config_json
                    .as_deref()
                    .and_then(|c| serde_json::from_str(c).ok())
            })
            .as_ref()
    }

    /// Asks the model of the hook's provider one question and returns its answer.
    /// `$ARGUMENTS` in `prompt` is replaced by the input JSON (`\$` is a literal `$`),
    /// as in a prompt hook; nothing else of the event is sent. For instructions, several
    /// messages or a token limit, use [`model::complete`].
    ///
    /// # Errors
    ///
    /// The model is not granted to the hook (`capabilities.model`), its token budget for
    /// the event is spent, the provider is refused by policy or failed. A plugin still
    /// waiting when the hook's time is up is stopped (a timeout, not an error).
    pub fn ask_model(&self, prompt: &str) -> Result<model::Reply> {
        let prompt = model::substitute(prompt, &self.input_json);
        model::complete(&model::Request::new(prompt))
    }

    /// The hook's `config` deserialized into your type (`T::default()` when absent).
    ///
    /// # Errors
    ///
    /// The config does not fit `T`.
    pub fn config_as<T: DeserializeOwned + Default>(&self) -> Result<T> {
        let fail = |e: serde_json::Error| Error(format!("hook config: {e}"));
        match (self.config.get(), &self.config_json) {
            (Some(Some(v)), _) => T::deserialize(v).map_err(fail),
            (_, Some(text)) => serde_json::from_str(text).map_err(fail),
            (_, None) => Ok(T::default()),
        }
    }
}

/// A permission decision (PreToolUse, PermissionRequest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Run the tool without asking.
    Allow,
    /// Refuse the tool call.
    Deny,
    /// Ask the user.
    Ask,
    /// Defer (headless agents).
    Defer,
}

/// A hook's answer. [`Response::none`] means "no opinion"; the helpers build the usual
/// decisions, and the `with_*` methods add to them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    /// Permission decision.
    pub permission: Option<Permission>,
    /// Block the action.
    pub block: bool,
    /// Why.
    pub reason: Option<String>,
    /// `Some(false)` stops the agent after the hooks.
    pub continue_: Option<bool>,
    /// Shown with `continue: false`.
    pub stop_reason: Option<String>,
    /// A warning for the user.
    pub system_message: Option<String>,
    /// Context for the model.
    pub additional_context: Option<String>,
    /// Replaces the whole tool input.
    pub updated_input: Option<Value>,
    /// Replaces the tool output (PostToolUse).
    pub updated_output: Option<Value>,
    /// Further `hookSpecificOutput` fields.
    pub extras: Map<String, Value>,
}

impl Response {
    /// No opinion.
    pub fn none() -> Response {
        Response::default()
    }

    /// Allow the tool call without asking (PreToolUse, PermissionRequest).
    pub fn allow() -> Response {
        Response {
            permission: Some(Permission::Allow),
            ..Response::default()
        }
    }

    /// Deny the tool call, telling the model why (PreToolUse, PermissionRequest).
    pub fn deny(reason: impl Into<String>) -> Response {
        Response {
            permission: Some(Permission::Deny),
            reason: Some(reason.into()),
            ..Response::default()
        }
    }

    /// Ask the user, showing why (PreToolUse).
    pub fn ask(reason: impl Into<String>) -> Response {
        Response {
            permission: Some(Permission::Ask),
            reason: Some(reason.into()),
            ..Response::default()
        }
    }

    /// Defer the tool call (PreToolUse, headless agents).
    pub fn defer() -> Response {
        Response {
            permission: Some(Permission::Defer),
            ..Response::default()
        }
    }

    /// Block the action: a prompt, a stop, a tool result (the reason goes to the model),
    /// or a deny on PreToolUse.
    pub fn block(reason: impl Into<String>) -> Response {
        Response {
            block: true,
            reason: Some(reason.into()),
            ..Response::default()
        }
    }

    /// Only add context for the model.
    pub fn context(text: impl Into<String>) -> Response {
        Response::none().with_context(text)
    }

    /// Only rewrite the tool input (PreToolUse): the value replaces the whole input.
    pub fn rewrite_input(input: Value) -> Response {
        Response::none().with_updated_input(input)
    }

    /// Stop the agent after the hooks, telling the user why.
    pub fn stop(reason: impl Into<String>) -> Response {
        Response {
            continue_: Some(false),
            stop_reason: Some(reason.into()),
            ..Response::default()
        }
    }

    /// Adds context for the model (appended to any already set).
    pub fn with_context(mut self, text: impl Into<String>) -> Response {
        let text = text.into();
        self.additional_context = Some(match self.additional_context.take() {
            Some(before) => format!("{before}\n{text}"),
            None => text,
        });
        self
    }

    /// Sets the reason.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Response {
        self.reason = Some(reason.into());
        self
    }

    /// Replaces the whole tool input.
    pub fn with_updated_input(mut self, input: Value) -> Response {
        self.updated_input = Some(input);
        self
    }

    /// Replaces the tool output (PostToolUse).
    pub fn with_updated_output(mut self, output: Value) -> Response {
        self.updated_output = Some(output);
        self
    }

    /// Adds a warning shown to the user.
    pub fn with_system_message(mut self, message: impl Into<String>) -> Response {
        self.system_message = Some(message.into());
        self
    }

    /// Adds an event-specific `hookSpecificOutput` field (`sessionTitle`, ...).
    pub fn with_extra(mut self, field: impl Into<String>, value: Value) -> Response {
        self.extras.insert(field.into(), value);
        self
    }

    fn into_wit(self) -> wit::Response {
        wit::Response {
            permission: self.permission.map(|p| match p {
                Permission::Allow => wit::Permission::Allow,
                Permission::Deny => wit::Permission::Deny,
                Permission::Ask => wit::Permission::Ask,
                Permission::Defer => wit::Permission::Defer,
            }),
            block: self.block,
            reason: self.reason,
            continue_: self.continue_,
            stop_reason: self.stop_reason,
            system_message: self.system_message,
            additional_context: self.additional_context,
            updated_input_json: self.updated_input.map(|v| v.to_string()),
            updated_output_json: self.updated_output.map(|v| v.to_string()),
            extras_json: (!self.extras.is_empty()).then(|| Value::Object(self.extras).to_string()),
        }
    }
}

/// What a plugin says about itself: name, version, the events it handles and the
/// capabilities it asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    name: String,
    version: String,
    events: Vec<String>,
    dirs: Vec<(String, bool)>,
    env: Vec<String>,
    http: Vec<String>,
}

impl Info {
    /// A plugin that handles every event and asks for nothing.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Info {
        Info {
            name: name.into(),
            version: version.into(),
            ..Info::default()
        }
    }

    /// The events the plugin handles; the host does not call it for others.
    pub fn events(mut self, events: &[&str]) -> Info {
        self.events = events.iter().map(|e| e.to_string()).collect();
        self
    }

    /// Asks to read a directory: `${workspace}`, `${home}`, an absolute path, or `*` for
    /// any directory the user grants.
    pub fn read_dir(mut self, path: impl Into<String>) -> Info {
        self.dirs.push((path.into(), false));
        self
    }

    /// Asks to read and write a directory.
    pub fn write_dir(mut self, path: impl Into<String>) -> Info {
        self.dirs.push((path.into(), true));
        self
    }

    /// Asks to read an environment variable.
    pub fn env(mut self, name: impl Into<String>) -> Info {
        self.env.push(name.into());
        self
    }

    /// Asks to send HTTP requests to hosts matching a pattern (`api.example.com`,
    /// `*.example.com`, `http://127.0.0.1:8080`), or `*` for any host the user grants.
    pub fn http(mut self, pattern: impl Into<String>) -> Info {
        self.http.push(pattern.into());
        self
    }

    fn into_wit(self) -> wit::PluginInfo {
        wit::PluginInfo {
            name: self.name,
            version: self.version,
            events: self.events,
            capabilities: wit::Capabilities {
                dirs: self
                    .dirs
                    .into_iter()
                    .map(|(path, write)| wit::DirRequest { path, write })
                    .collect(),
                env: self.env,
                http: self.http,
            },
        }
    }
}

/// A hook. Implement the methods of the events you handle; the others answer "no
/// opinion". `Default` builds the state of a fresh instance.
pub trait Hook: Default + 'static {
    /// Name, version, events, capabilities.
    fn info() -> Info;

    /// Before a tool runs: allow, deny, ask, defer, rewrite the input, add context.
    fn pre_tool_use(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// When the agent would show a permission dialog: allow or deny.
    fn permission_request(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// After a tool succeeded: block (feedback to the model), add context, rewrite the
    /// output.
    fn post_tool_use(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// After a tool failed.
    fn post_tool_use_failure(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// When the user submits a prompt: block it or add context.
    fn user_prompt_submit(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// When the agent wants to stop: block to keep it working.
    fn stop(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// When a subagent wants to stop.
    fn subagent_stop(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// When a session starts or resumes: add context.
    fn session_start(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// When a session ends.
    fn session_end(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// Notifications.
    fn notification(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// Before the context is compacted.
    fn pre_compact(&mut self, event: &Event) -> Result {
        self.other(event)
    }

    /// Every other event, and the default of the methods above: no opinion.
    fn other(&mut self, event: &Event) -> Result {
        let _ = event;
        Ok(Response::none())
    }
}

/// Routes an event to the method of its name.
pub fn dispatch<H: Hook>(hook: &mut H, event: &Event) -> Result {
    match event.name() {
        "PreToolUse" => hook.pre_tool_use(event),
        "PermissionRequest" => hook.permission_request(event),
        "PostToolUse" => hook.post_tool_use(event),
        "PostToolUseFailure" => hook.post_tool_use_failure(event),
        "UserPromptSubmit" => hook.user_prompt_submit(event),
        "Stop" => hook.stop(event),
        "SubagentStop" => hook.subagent_stop(event),
        "SessionStart" => hook.session_start(event),
        "SessionEnd" => hook.session_end(event),
        "Notification" => hook.notification(event),
        "PreCompact" => hook.pre_compact(event),
        _ => hook.other(event),
    }
}

#[doc(hidden)]
pub fn __describe<H: Hook>() -> wit::PluginInfo {
    H::info().into_wit()
}

#[doc(hidden)]
pub fn __handle<H: Hook>(
    hook: &mut H,
    event: wit::Event,
) -> std::result::Result<wit::Response, String> {
    let event = Event::from_wit(event);
    dispatch(hook, &event)
        .map(Response::into_wit)
        .map_err(|e| e.0)
}

/// Structured logging to the host: records are attached to the hook's report.
pub mod log {
    use super::__bindings::hookhost::hook::host;
    use super::wit::Level;

    fn emit(level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        host::log(level, message, &fields);
    }

    /// A trace record.
    pub fn trace(message: &str, fields: &[(&str, &str)]) {
        emit(Level::Trace, message, fields);
    }

    /// A debug record.
    pub fn debug(message: &str, fields: &[(&str, &str)]) {
        emit(Level::Debug, message, fields);
    }

    /// An info record.
    pub fn info(message: &str, fields: &[(&str, &str)]) {
        emit(Level::Info, message, fields);
    }

    /// A warning.
    pub fn warn(message: &str, fields: &[(&str, &str)]) {
        emit(Level::Warn, message, fields);
    }

    /// An error record.
    pub fn error(message: &str, fields: &[(&str, &str)]) {
        emit(Level::Error, message, fields);
    }
}

/// Outgoing HTTP through wasi-http (feature `http`). Works only for hosts the plugin
/// declares with [`Info::http`] and the user grants.
#[cfg(feature = "http")]
pub mod http {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};

    /// A response: status and body.
    #[derive(Debug, Clone)]
    pub struct HttpResponse {
        /// The status code.
        pub status: u16,
        /// The body.
        pub body: Vec<u8>,
    }

    /// POSTs `body` to `url` (`http://` or `https://`) with a content type.
    ///
    /// # Errors
    ///
    /// The URL is invalid, the host refused the request (not granted), or the request
    /// failed.
    pub fn post(url: &str, content_type: &str, body: &[u8]) -> super::Result<HttpResponse> {
        request(Method::Post, url, Some((content_type, body)))
    }

    /// GETs `url`.
    ///
    /// # Errors
    ///
    /// As [`post`].
    pub fn get(url: &str) -> super::Result<HttpResponse> {
        request(Method::Get, url, None)
    }

    fn request(
        method: Method,
        url: &str,
        body: Option<(&str, &[u8])>,
    ) -> super::Result<HttpResponse> {
        let (scheme, rest) = match url.split_once("://") {
            Some(("http", rest)) => (Scheme::Http, rest),
            Some(("https", rest)) => (Scheme::Https, rest),
            _ => return Err(format!("unsupported URL `{url}`").into()),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let headers = Fields::new();
        if let Some((content_type, bytes)) = body {
            headers
                .append("content-type", content_type.as_bytes())
                .map_err(|e| format!("bad content type: {e:?}"))?;
            headers
                .append("content-length", bytes.len().to_string().as_bytes())
                .map_err(|e| format!("bad content length: {e:?}"))?;
        }
        let request = OutgoingRequest::new(headers);
        let _ = request.set_method(&method);
        let _ = request.set_scheme(Some(&scheme));
        request
            .set_authority(Some(authority))
            .map_err(|()| format!("bad authority in `{url}`"))?;
        request
            .set_path_with_query(Some(path))
            .map_err(|()| format!("bad path in `{url}`"))?;
        let outgoing = request.body().map_err(|()| "request body unavailable")?;
        let future = outgoing_handler::handle(request, None)
            .map_err(|e| format!("request to {url} refused: {e:?}"))?;
        // A request the host refuses closes the body stream; the response future then
        // says why, which is the more useful error.
        let mut body_error = None;
        {
            let stream = outgoing
                .write()
                .map_err(|()| "request body stream unavailable")?;
            if let Some((_, bytes)) = body {
                for chunk in bytes.chunks(4096) {
                    if let Err(e) = stream.blocking_write_and_flush(chunk) {
                        body_error = Some(format!("writing the request body to {url}: {e:?}"));
                        break;
                    }
                }
            }
        }
        if body_error.is_none()
            && let Err(e) = OutgoingBody::finish(outgoing, None)
        {
            body_error = Some(format!("finishing the request to {url}: {e:?}"));
        }
        future.subscribe().block();
        let response = match future.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(e))) => return Err(format!("request to {url} failed: {e:?}").into()),
            Some(Err(())) | None => return Err(format!("request to {url}: no response").into()),
        };
        if let Some(e) = body_error {
            return Err(e.into());
        }
        let status = response.status();
        let incoming = response
            .consume()
            .map_err(|()| "response body unavailable")?;
        let stream = incoming
            .stream()
            .map_err(|()| "response body stream unavailable")?;
        let mut body = Vec::new();
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(wasip2::io::streams::StreamError::Closed) => break,
                Err(e) => return Err(format!("reading the response: {e:?}").into()),
            }
        }
        Ok(HttpResponse { status, body })
    }
}

/// The model of the hook's provider (`hookhost:hook/model`): live only when the hook's
/// config grants `capabilities.model`, within its token budget for the event.
pub mod model {
    /// Who wrote a message.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Role {
        /// The plugin, speaking for the user.
        User,
        /// The model (an earlier answer, or the start of the one wanted).
        Assistant,
    }

    /// A question to the model.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Request {
        /// Instructions (empty: none).
        pub system: String,
        /// The conversation, oldest first; the first message is the user's.
        pub messages: Vec<(Role, String)>,
        /// The most output tokens (`None`: the host's default, 1024); the host lowers it
        /// to what the budget has left.
        pub max_tokens: Option<u32>,
    }

    impl Request {
        /// One user message.
        pub fn new(prompt: impl Into<String>) -> Request {
            Request {
                system: String::new(),
                messages: vec![(Role::User, prompt.into())],
                max_tokens: None,
            }
        }

        /// Sets the instructions.
        pub fn system(mut self, system: impl Into<String>) -> Request {
            self.system = system.into();
            self
        }

        /// Adds a message.
        pub fn message(mut self, role: Role, text: impl Into<String>) -> Request {
            self.messages.push((role, text.into()));
            self
        }

        /// Caps the answer's output tokens.
        pub fn max_tokens(mut self, tokens: u32) -> Request {
            self.max_tokens = Some(tokens);
            self
        }
    }

    /// Why the model stopped.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum StopReason {
        /// It finished.
        End,
        /// Out of output tokens (or cut by the host's cap): the text is incomplete.
        MaxTokens,
        /// It refused, or the provider filtered the answer.
        Refusal,
        /// The provider did not say.
        Other,
    }

    /// The model's answer.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Reply {
        /// The text.
        pub text: String,
        /// Input tokens counted.
        pub input_tokens: u32,
        /// Output tokens counted.
        pub output_tokens: u32,
        /// Why it stopped.
        pub stop_reason: StopReason,
    }

    /// Asks the model once.
    ///
    /// # Errors
    ///
    /// As [`crate::Event::ask_model`].
    pub fn complete(request: &Request) -> super::Result<Reply> {
        imp::complete(request)
    }

    /// `$ARGUMENTS` replaced by `input`; `\$` is a literal `$`.
    pub(crate) fn substitute(prompt: &str, input: &str) -> String {
        let mut out = String::with_capacity(prompt.len());
        let mut rest = prompt;
        while let Some(i) = rest.find(['\\', '$']) {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            if let Some(after) = tail.strip_prefix("\\$") {
                out.push('$');
                rest = after;
            } else if let Some(after) = tail.strip_prefix("$ARGUMENTS") {
                out.push_str(input);
                rest = after;
            } else {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
        out.push_str(rest);
        out
    }

    #[cfg(target_arch = "wasm32")]
    mod imp {
        use super::super::__bindings::hookhost::hook::model as wit;
        use super::{Reply, Request, Role, StopReason};

        pub(super) fn complete(request: &Request) -> crate::Result<Reply> {
            let request = wit::Request {
                system: request.system.clone(),
                messages: request
                    .messages
                    .iter()
                    .map(|(role, text)| wit::Message {
                        role: match role {
                            Role::User => wit::Role::User,
                            Role::Assistant => wit::Role::Assistant,
                        },
                        text: text.clone(),
                    })
                    .collect(),
                max_tokens: request.max_tokens,
            };
            let reply = wit::complete(&request).map_err(crate::Error)?;
            Ok(Reply {
                text: reply.text,
                input_tokens: reply.input_tokens,
                output_tokens: reply.output_tokens,
                stop_reason: match reply.stop_reason {
                    wit::StopReason::End => StopReason::End,
                    wit::StopReason::MaxTokens => StopReason::MaxTokens,
                    wit::StopReason::Refusal => StopReason::Refusal,
                    wit::StopReason::Other => StopReason::Other,
                },
            })
        }
    }

    /// A native build (the plugin's own unit tests) has no host to ask.
    #[cfg(not(target_arch = "wasm32"))]
    mod imp {
        use super::{Reply, Request};

        pub(super) fn complete(_: &Request) -> crate::Result<Reply> {
            Err(crate::Error(
                "the model is only available to a plugin running in hookhost".into(),
            ))
        }
    }
}

/// Exports a [`Hook`] type as the plugin's implementation. Use it once per plugin crate,
/// at the crate root.
#[macro_export]
macro_rules! register {
    ($hook:ty) => {
        const _: () = {
            struct __HookhostExport;
            ::std::thread_local! {
                static __HOOKHOST_STATE: ::core::cell::RefCell<::core::option::Option<$hook>> =
                    const { ::core::cell::RefCell::new(::core::option::Option::None) };
            }
            impl $crate::__bindings::exports::hookhost::hook::hook::Guest for __HookhostExport {
                fn describe() -> $crate::__bindings::hookhost::hook::types::PluginInfo {
                    $crate::__describe::<$hook>()
                }
                fn handle(
                    event: $crate::__bindings::hookhost::hook::types::Event,
                ) -> ::core::result::Result<$crate::__bindings::hookhost::hook::types::Response, ::std::string::String> {
                    __HOOKHOST_STATE.with(|state| {
                        let mut state = state.borrow_mut();
                        let hook = state.get_or_insert_with(<$hook as ::core::default::Default>::default);
                        $crate::__handle(hook, event)
                    })
                }
            }
            // Component exports exist only on wasm; a native build (the plugin's own unit
            // tests) keeps the logic and skips them.
            #[cfg(target_arch = "wasm32")]
            $crate::__bindings::__export_hookhost_plugin!(__HookhostExport with_types_in $crate::__bindings);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counter {
        seen: u32,
    }

    impl Hook for Counter {
        fn info() -> Info {
            Info::new("counter", "1")
                .events(&["PreToolUse"])
                .read_dir("${workspace}")
                .env("TOKEN")
                .http("*")
        }
        fn pre_tool_use(&mut self, event: &Event) -> Result {
            self.seen += 1;
            let cmd: serde_json::Map<String, Value> = event.tool_input_as()?;
            if cmd.contains_key("danger") {
                Ok(Response::deny("danger"))
            } else {
                Ok(Response::context(format!("seen {}", self.seen)))
            }
        }
    }

    #[test]
    fn dispatch_routes_by_event_name_and_defaults_to_no_opinion() {
        let mut hook = Counter::default();
        let ev = Event::new(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_input": {"danger": 1}}),
        );
        assert_eq!(dispatch(&mut hook, &ev).unwrap(), Response::deny("danger"));
        let ev = Event::new("PreToolUse", json!({"tool_name": "Bash", "tool_input": {}}));
        assert_eq!(
            dispatch(&mut hook, &ev)
                .unwrap()
                .additional_context
                .as_deref(),
            Some("seen 2")
        );
        let ev = Event::new("Stop", json!({}));
        assert_eq!(dispatch(&mut hook, &ev).unwrap(), Response::none());
    }

    #[test]
    fn responses_convert_to_the_wit_record() {
        let r = Response::deny("x")
            .with_context("a")
            .with_context("b")
            .with_extra("sessionTitle", json!("t"))
            .into_wit();
        assert_eq!(r.permission, Some(wit::Permission::Deny));
        assert_eq!(r.additional_context.as_deref(), Some("a\nb"));
        assert_eq!(r.extras_json.as_deref(), Some(r#"{"sessionTitle":"t"}"#));
        let r = Response::rewrite_input(json!({"command": "ls"})).into_wit();
        assert_eq!(r.updated_input_json.as_deref(), Some(r#"{"command":"ls"}"#));
        let info = Counter::info().into_wit();
        assert_eq!(info.capabilities.dirs[0].path, "${workspace}");
        assert!(!info.capabilities.dirs[0].write);
    }

    #[test]
    fn events_from_the_host_parse_lazily_and_agree_with_the_eager_path() {
        let wit_event = || wit::Event {
            name: "PreToolUse".into(),
            session_id: "s".into(),
            cwd: "/w".into(),
            workspace: "/w".into(),
            tool_name: Some("Bash".into()),
            input_json: r#"{"tool_name":"Bash","tool_input":{"command":"ls"},"other":[1,2]}"#
                .into(),
            config_json: Some(r#"{"globs":["a"]}"#.into()),
        };
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Bash {
            command: String,
        }
        let lazy = Event::from_wit(wit_event());
        assert!(lazy.input.get().is_none());
        assert_eq!(
            lazy.tool_input_as::<Bash>().unwrap(),
            Bash {
                command: "ls".into()
            }
        );
        assert!(
            lazy.input.get().is_none(),
            "tool_input_as does not parse the whole input"
        );
        assert_eq!(lazy.field("other"), Some(&json!([1, 2])));
        assert_eq!(
            lazy.tool_input_as::<Bash>().unwrap(),
            Bash {
                command: "ls".into()
            }
        );
        assert_eq!(lazy.config(), Some(&json!({"globs": ["a"]})));
        let wrong = lazy.tool_input_as::<Vec<u8>>().unwrap_err();
        assert!(wrong.0.contains("tool_input of Bash"), "{wrong}");
        let mut no_tool = wit_event();
        no_tool.input_json = "{}".into();
        assert_eq!(
            Event::from_wit(no_tool)
                .tool_input_as::<Option<Bash>>()
                .unwrap(),
            None
        );
    }

    #[test]
    fn ask_model_substitutes_arguments_only_where_written() {
        assert_eq!(model::substitute("judge $ARGUMENTS", "{}"), "judge {}");
        assert_eq!(model::substitute("no input", "{}"), "no input");
        assert_eq!(
            model::substitute(r"costs \$5 $ARGUMENTS$", "x"),
            "costs $5 x$"
        );
        let ev = Event::new("PreToolUse", json!({}));
        assert!(ev.ask_model("hi").unwrap_err().0.contains("only available"));
    }

    #[test]
    fn config_and_tool_input_errors_name_what_failed() {
        #[derive(serde::Deserialize, Default, Debug)]
        struct Cfg {
            #[allow(dead_code)]
            globs: Vec<String>,
        }
        let ev = Event::new("PreToolUse", json!({"tool_name": "Edit", "tool_input": 3}))
            .with_config(json!({"globs": 1}));
        assert!(ev.config_as::<Cfg>().unwrap_err().0.contains("hook config"));
        assert!(
            ev.tool_input_as::<Map<String, Value>>()
                .unwrap_err()
                .0
                .contains("Edit")
        );
        let ev = Event::new("Stop", json!({}));
        assert!(ev.config_as::<Cfg>().unwrap().globs.is_empty());
    }
}
