//! What a resolved policy is made of: matcher groups and hooks, each with the spec of what
//! runs. Later stages read these; [`super::hook`] builds them from config.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::config::Origin;
use crate::config::schema::{InstanceMode, ModelProviderKind, OnFailure, RawCapabilities};
use crate::matcher::{IfRule, Matcher};
/// A matcher group: the hooks that share a matcher.
#[derive(Debug, Clone)]
pub struct Group {
    /// The compiled matcher.
    pub matcher: Matcher,
    /// The matcher as written (`None` when absent).
    pub matcher_source: Option<String>,
    /// Run the hooks one after another; a block stops the rest.
    pub sequential: bool,
    /// A transform chain (implies `sequential`): each hook gets the input as the hooks
    /// before it rewrote it.
    pub chain: bool,
    /// The hooks, in config order.
    pub hooks: Vec<Arc<Hook>>,
}

/// How a hook's result is awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// The dispatch waits for it and merges its answer.
    Sync,
    /// Runs in the background; its context arrives with a later outcome of the session.
    Async,
    /// Like `Async`, and exit 2 (a block) wakes the session with the hook's message.
    AsyncRewake,
}

/// Which shell runs a shell-form command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// `sh -c` (the default on Unix, as in Claude Code).
    Sh,
    /// `bash -c`.
    Bash,
}

/// A command hook.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// The shell command, or the program in exec form.
    pub command: String,
    /// Exec-form arguments (`None` = shell form).
    pub args: Option<Vec<String>>,
    /// The shell of the shell form.
    pub shell: Shell,
    /// Between the `SIGTERM` and the `SIGKILL` to the hook's process group on a timeout
    /// or a cancellation (`killGrace`).
    pub kill_grace: Duration,
    /// Whether the hook gets the event's context in its environment (`contextEnv`).
    pub context_env: bool,
}

/// `killGrace` when unset: three seconds, as the founding article's runner.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(3);

/// The longest `killGrace`, in seconds.
pub const MAX_KILL_GRACE_SECS: f64 = 60.0;

/// An HTTP hook.
#[derive(Debug, Clone)]
pub struct HttpSpec {
    /// The URL to POST to.
    pub url: String,
    /// Header templates.
    pub headers: Vec<(String, String)>,
    /// Env vars the headers may interpolate: the hook's `allowedEnvVars`, intersected with
    /// `httpHookAllowedEnvVars` when a settings file sets it.
    pub allowed_env_vars: Vec<String>,
}

/// Headers a hook's `headers` may not set, compared without case: the request's framing
/// is worked out from its body (Claude Code 2.1.326). A `Content-Length` that disagreed
/// with the body, or a `Transfer-Encoding` beside one, would make the request
/// unreadable or smuggle a second one to a proxy.
pub const FRAMING_HEADERS: [&str; 2] = ["Content-Length", "Transfer-Encoding"];

/// Whether `name` is one of [`FRAMING_HEADERS`], in any case.
pub fn is_framing_header(name: &str) -> bool {
    FRAMING_HEADERS
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name.trim()))
}

/// A wasm hook, as configured. The sandbox turns grants into live capabilities.
#[derive(Debug, Clone)]
pub struct WasmSpec {
    /// Absolute path of the component; for a plugin from a registry ([`WasmSpec::oci`]),
    /// the reference as written (the sandbox finds the file in its OCI cache).
    pub plugin: PathBuf,
    /// The registry reference when `plugin` is `oci://…`.
    pub oci: Option<Box<super::oci::OciRef>>,
    /// The project's `hookhost.lock` when it chose [`WasmSpec::oci`]'s digest (the
    /// reference as written names a tag the lock pins).
    pub locked_by: Option<String>,
    /// Expected sha256 (lowercase hex).
    pub sha256: Option<String>,
    /// Capability grants.
    pub capabilities: RawCapabilities,
    /// Fuel per call.
    pub fuel: Option<u64>,
    /// Memory cap in bytes.
    pub memory_bytes: Option<u64>,
    /// Instance lifetime.
    pub instance: InstanceMode,
    /// Plugin-specific settings.
    pub config: Option<Value>,
    /// The model its plugin asks (`capabilities.model`), as written; `None`: the
    /// provider's default.
    pub model: Option<String>,
    /// The provider its plugin's model requests go to, if the hook names one.
    pub provider: Option<ModelProviderKind>,
}

/// A prompt hook: one model judgement (`{ok, reason, impossible}`) of the input.
#[derive(Debug, Clone)]
pub struct PromptSpec {
    /// The prompt; `$ARGUMENTS` is the input JSON (appended when absent), `\$` a `$`.
    pub prompt: String,
    /// The model as written (`haiku`, `sonnet` and `opus` are aliases on Anthropic).
    pub model: Option<String>,
    /// The provider the hook names, if any.
    pub provider: Option<ModelProviderKind>,
    /// On a refusal, feed the reason back and keep the turn going instead of ending it.
    pub continue_on_block: bool,
}

/// An agent hook: a read-only, workspace-confined tool loop that ends in a verdict.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    /// The prompt; `$ARGUMENTS` as in a prompt hook.
    pub prompt: String,
    /// The model as written.
    pub model: Option<String>,
    /// The provider the hook names, if any.
    pub provider: Option<ModelProviderKind>,
    /// The most model turns.
    pub max_turns: u32,
    /// The most tokens one run may spend (besides managed ceilings).
    pub token_budget: Option<u64>,
}

/// What runs.
#[derive(Debug, Clone)]
pub enum HandlerSpec {
    /// A process.
    Command(CommandSpec),
    /// A POST.
    Http(HttpSpec),
    /// A sandboxed component.
    Wasm(WasmSpec),
    /// An in-process function registered by an embedder.
    Function(FunctionSpec),
    /// A model judgement.
    Prompt(PromptSpec),
    /// A model verifier with read-only tools.
    Agent(AgentSpec),
    /// A tool of an MCP server.
    McpTool(super::mcp::McpToolSpec),
    /// A required hook whose entry could not be built (a missing or wrong field, an
    /// `if` or a matcher that cannot be read): kept, never run (its `skip` says why), so
    /// that an event it would match fails closed instead of going ahead without it.
    Unbuilt(UnbuiltSpec),
}

/// What is known of a required hook that could not be built.
#[derive(Debug, Clone)]
pub struct UnbuiltSpec {
    /// The handler type its entry names.
    pub kind: &'static str,
    /// Why it could not be built.
    pub error: String,
}

impl HandlerSpec {
    /// The handler type as named in config.
    pub fn type_name(&self) -> &'static str {
        match self {
            HandlerSpec::Command(_) => "command",
            HandlerSpec::Http(_) => "http",
            HandlerSpec::Wasm(_) => "wasm",
            HandlerSpec::Function(_) => "function",
            HandlerSpec::Prompt(_) => "prompt",
            HandlerSpec::Agent(_) => "agent",
            HandlerSpec::McpTool(_) => "mcp_tool",
            HandlerSpec::Unbuilt(u) => u.kind,
        }
    }

    /// A one-line description for listings.
    pub fn summary(&self) -> String {
        match self {
            HandlerSpec::Command(c) => match &c.args {
                Some(args) => format!("{} {}", c.command, args.join(" ")),
                None => c.command.clone(),
            },
            HandlerSpec::Http(h) => h.url.clone(),
            HandlerSpec::Wasm(w) => match &w.oci {
                Some(reference) => reference.to_string(),
                None => w.plugin.display().to_string(),
            },
            HandlerSpec::Function(_) => "(in-process function)".into(),
            HandlerSpec::Prompt(p) => {
                let short: String = p.prompt.chars().take(60).collect();
                format!("prompt: {short}")
            }
            HandlerSpec::Agent(a) => {
                let short: String = a.prompt.chars().take(60).collect();
                format!("agent: {short}")
            }
            HandlerSpec::McpTool(m) => format!("mcp {} {}", m.server, m.tool),
            HandlerSpec::Unbuilt(u) => format!("(cannot be built: {})", u.error),
        }
    }
}

/// One resolved hook.
#[derive(Debug, Clone)]
pub struct Hook {
    /// Stable name in reports: the configured `id`, else `<source>:<Event>[group][index]`.
    pub id: String,
    /// The event.
    pub event: String,
    /// Where it was configured.
    pub origin: Origin,
    /// Its JSON path in that source.
    pub config_path: String,
    /// What runs.
    pub handler: HandlerSpec,
    /// The `if` filter.
    pub if_rule: Option<IfRule>,
    /// The agents it runs for (`agents`); `None`: every agent, and dispatches that name
    /// none.
    pub agents: Option<Vec<String>>,
    /// Deadline of one run.
    pub timeout: Duration,
    /// Fail open or closed.
    pub on_failure: OnFailure,
    /// Tie-break among input rewrites: higher wins.
    pub priority: i64,
    /// Sync or background.
    pub mode: RunMode,
    /// Spinner text.
    pub status_message: Option<String>,
    /// Why the hook never runs (`enabled: false`, governance, duplicates), if it doesn't.
    pub skip: Option<String>,
    /// Position in config order.
    pub order: usize,
    /// The `hookSpecificOutput` keys that grant, consent or widen which its config lets it
    /// set (`widens`; see [`crate::event::EventSpec::admit`]).
    pub widens: Vec<String>,
    /// The transform chain the hook belongs to, named by the config order of the chain's
    /// first hook (`None`: not in a chain). The merge composes a chain's rewrites.
    pub chain: Option<usize>,
    /// A required hook: when it matches but gives no verdict (skipped, failed, timed
    /// out, started in the background), the event fails closed
    /// (`outcome::merge`; docs/book/src/required-hooks.md). Only set where honoured: a
    /// project or local file's `required` counts in a trusted workspace only, and a
    /// hook that can never match (`enabled: false`, `if` on an event without a tool
    /// call, a duplicate of one that runs instead) is not required.
    pub required: bool,
}

/// Fields that belong to one handler type only.
/// A function hook: takes the input JSON, answers with output JSON (`null` or `{}` for
/// no opinion) or an error message.
pub trait FunctionHandler: Send + Sync {
    /// Handles one event.
    fn call(&self, input: Value) -> BoxFuture<'static, Result<Value, String>>;
}

impl<F, Fut> FunctionHandler for F
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Value, String>> + Send + 'static,
{
    fn call(&self, input: Value) -> BoxFuture<'static, Result<Value, String>> {
        Box::pin(self(input))
    }
}

/// A registered function, shareable and printable.
#[derive(Clone)]
pub struct FunctionSpec {
    /// The function.
    pub handler: Arc<dyn FunctionHandler>,
}

impl std::fmt::Debug for FunctionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FunctionSpec(..)")
    }
}
