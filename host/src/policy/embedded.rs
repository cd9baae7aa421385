//! Hooks an embedding program registers in code: in-process functions. They join the
//! policy after every config source (last in config order), under the same matcher,
//! `if`, timeout, priority and `onFailure` rules as configured hooks.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::spec::{FunctionHandler, FunctionSpec, Group, HandlerSpec, Hook, RunMode};
use crate::config::schema::OnFailure;
use crate::config::{ConfigError, Origin, SourceKind};
use crate::event::EventCatalogue;
use crate::matcher::{IfRule, Matcher};

/// An in-process function hook, registered with
/// [`HostBuilder::function_hook`](crate::HostBuilder::function_hook).
///
/// ```
/// use hookhost::policy::FunctionHook;
/// use serde_json::{Value, json};
///
/// let deny_force_push = FunctionHook::new("PreToolUse", "no-force-push", |input: Value| async move {
///     let command = input["tool_input"]["command"].as_str().unwrap_or("");
///     if command.contains("push --force") {
///         return Ok(json!({"hookSpecificOutput": {
///             "hookEventName": "PreToolUse",
///             "permissionDecision": "deny",
///             "permissionDecisionReason": "force-push is not allowed"}}));
///     }
///     Ok(Value::Null)
/// })
/// .matcher("Bash")
/// .timeout(std::time::Duration::from_secs(2));
/// ```
#[derive(Debug, Clone)]
pub struct FunctionHook {
    event: String,
    id: String,
    matcher: Option<String>,
    if_rule: Option<String>,
    timeout: Option<Duration>,
    priority: i64,
    on_failure: OnFailure,
    chain: Option<String>,
    required: bool,
    handler: FunctionSpec,
}

impl FunctionHook {
    /// A hook on `event`, named `id` in reports, running `handler`: it gets the input JSON
    /// and answers with Claude Code's output JSON (`Value::Null` for no opinion) or an
    /// error message (a non-blocking failure, like a command hook's odd exit).
    pub fn new<F, Fut>(event: impl Into<String>, id: impl Into<String>, handler: F) -> FunctionHook
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        FunctionHook {
            event: event.into(),
            id: id.into(),
            matcher: None,
            if_rule: None,
            timeout: None,
            priority: 0,
            on_failure: OnFailure::Continue,
            chain: None,
            required: false,
            handler: FunctionSpec {
                handler: Arc::new(handler) as Arc<dyn FunctionHandler>,
            },
        }
    }

    /// Only for subjects the matcher accepts (Claude Code's matcher syntax).
    pub fn matcher(mut self, matcher: impl Into<String>) -> FunctionHook {
        self.matcher = Some(matcher.into());
        self
    }

    /// Only for tool calls the permission rule accepts (`Bash(git *)`).
    pub fn if_rule(mut self, rule: impl Into<String>) -> FunctionHook {
        self.if_rule = Some(rule.into());
        self
    }

    /// Deadline of one call (default: the event's).
    pub fn timeout(mut self, timeout: Duration) -> FunctionHook {
        self.timeout = Some(timeout);
        self
    }

    /// Rank among input rewrites: higher wins.
    pub fn priority(mut self, priority: i64) -> FunctionHook {
        self.priority = priority;
        self
    }

    /// Fail open (default) or closed.
    pub fn on_failure(mut self, on_failure: OnFailure) -> FunctionHook {
        self.on_failure = on_failure;
        self
    }

    /// A required hook (`"required": true` in config): when it matches but gives no
    /// verdict (fails, times out, is skipped by governance), the event fails closed
    /// (docs/book/src/required-hooks.md).
    pub fn required(mut self, required: bool) -> FunctionHook {
        self.required = required;
        self
    }

    /// Joins the transform chain `name` of its event (`"chain": true` in config): the
    /// function hooks of one chain run one after another in the order they were
    /// registered, each given the input as the ones before it rewrote it. The hooks of a
    /// chain share the matcher of its first hook (another matcher is an error).
    pub fn chain(mut self, name: impl Into<String>) -> FunctionHook {
        self.chain = Some(name.into());
        self
    }
}

/// Compiles registered functions into groups, after the configured hooks. `home` anchors
/// `~/` in `if` rules.
pub(super) fn build(
    functions: &[FunctionHook],
    catalogue: &EventCatalogue,
    first_order: usize,
    home: Option<&std::path::Path>,
) -> (Vec<(String, Group)>, Vec<ConfigError>) {
    let mut groups: Vec<(String, Group)> = Vec::new();
    let mut errors = Vec::new();
    // (event, chain name, index in `groups`)
    let mut chains: Vec<(&str, &str, usize)> = Vec::new();
    for (n, f) in functions.iter().enumerate() {
        let error = |message: String| ConfigError {
            location: "embedded hooks".into(),
            path: format!("function hook `{}`", f.id),
            message,
        };
        let Some(spec) = catalogue.get(&f.event) else {
            errors.push(error(format!("unknown event `{}`", f.event)));
            continue;
        };
        let matcher = match Matcher::parse(f.matcher.as_deref(), spec.matcher_syntax) {
            Ok(m) => m,
            Err(e) => {
                errors.push(error(e));
                continue;
            }
        };
        let if_rule = match f
            .if_rule
            .as_deref()
            .map(|rule| IfRule::parse(rule, home))
            .transpose()
        {
            Ok(rule) => rule,
            Err(e) => {
                errors.push(error(e));
                continue;
            }
        };
        let never_matches = (if_rule.is_some() && !spec.tool_event)
            .then(|| format!("`if` never matches on `{}`", spec.name));
        let mut hook = Hook {
            id: f.id.clone(),
            event: f.event.clone(),
            origin: Origin {
                kind: SourceKind::Embedded,
                location: "embedded hooks".into(),
            },
            config_path: format!("function hook `{}`", f.id),
            handler: HandlerSpec::Function(f.handler.clone()),
            skip: never_matches.clone(),
            // A hook that never matches never fails closed.
            required: f.required && never_matches.is_none(),
            if_rule,
            agents: None,
            timeout: f.timeout.unwrap_or(spec.default_timeout),
            on_failure: f.on_failure,
            priority: f.priority,
            mode: RunMode::Sync,
            status_message: None,
            order: first_order + n,
            widens: Vec::new(),
            chain: None,
        };
        if let Some(name) = f.chain.as_deref() {
            let joined = chains
                .iter()
                .find(|(event, chain, _)| *event == f.event && *chain == name);
            if let Some(&(_, _, index)) = joined {
                let group = &mut groups[index].1;
                if group.matcher_source != f.matcher {
                    errors.push(error(format!(
                        "joins the chain `{name}` with another matcher than its first hook's"
                    )));
                    continue;
                }
                hook.chain = group.hooks.first().map(|h| h.order);
                group.hooks.push(Arc::new(hook));
                continue;
            }
            chains.push((&f.event, name, groups.len()));
            hook.chain = Some(hook.order);
        }
        groups.push((
            f.event.clone(),
            Group {
                matcher,
                matcher_source: f.matcher.clone(),
                sequential: f.chain.is_some(),
                chain: f.chain.is_some(),
                hooks: vec![Arc::new(hook)],
            },
        ));
    }
    (groups, errors)
}
