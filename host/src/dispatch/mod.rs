//! Stage 4 of the pipeline: running the hooks that match one event.
//!
//! Matching hooks run in parallel and all finish before the merge (one hook's deny does
//! not stop its siblings, as in Claude Code). A matcher group with `"sequential": true`
//! runs its hooks one after another in config order, and a block stops the rest of that
//! group; with `"chain": true` each also gets the input as the hooks before it rewrote it
//! (`outcome::step`). Each run has its own deadline. Command and HTTP hooks hold file descriptors
//! while they run, so at most [`hook_concurrency`] of them run at once in a process; the
//! others wait for a slot (every hook still runs). Async hooks are started and reported
//! as `async`; their results join a later outcome of the same session. After the merge,
//! the Stop loop cap applies.
//!
//! An async hook that outlives a one-shot `hookhost dispatch` runs in a detached
//! `hookhost run-async` process ([`AsyncLauncher::Detached`]). That process loads the
//! config again, so it could find different hooks under the same ids (a `git checkout`
//! between the dispatch and the runner, a hook file edited in a workspace trusted for the
//! run): the dispatch therefore hands it, on its stdin (a pipe nobody else can read or
//! swap, unlike argv, the environment or a file), the admission record of every hook it
//! admitted ([`admission`]: what runs and with which rights), and the runner runs a hook
//! only when the config it loaded admits it too (not skipped: trust, `disableAllHooks`,
//! `allowManagedHooksOnly`, `enabled: false`, a ceiling) with the same record. Anything
//! else is refused, and the refusal is reported with the session's next outcome.

//!
//! The rooms: this file selects and runs the sync hooks; `background` starts async hooks
//! (in process or in a detached runner) and delivers their results; `stop_cap` applies
//! the Stop loop cap (blocks and wake-ups, the escape hatch); `depth` is the depth guard
//! (no hook runs past `maxHookDepth`); [`input`] reads an event's input.

mod background;
mod depth;
pub mod env_forward;
pub mod input;
pub mod registry;
mod stop_cap;

pub use background::{
    ASYNC_JOB_CAP, AdmittedHook, AsyncJob, AsyncLauncher, admission, async_result,
};

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio::sync::Semaphore;

use crate::handlers::{HandlerRun, Handlers, Invocation};
use crate::outcome::{
    DecisionReceipt, Executed, HookResult, Outcome, input_digest, merge_event, step,
};
use crate::policy::{Group, HandlerSpec, Hook, Policy, RunMode};
use crate::session::SessionStore;

/// An event could not be dispatched at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// The event name is not in the catalogue.
    #[error("unknown event `{0}`; `hookhost events` lists the known ones")]
    UnknownEvent(String),
    /// The input is not a JSON object.
    #[error("the input of `{0}` must be a JSON object")]
    InputNotObject(String),
    /// The host could not read its config (out of descriptors or memory): what the
    /// hooks would say is unknown. Not an answer: the CLI blocks a guarding event on it
    /// under `--format claude` (`dispatch::unanswered` of the CLI).
    #[error("hookhost could not read its config: {0}")]
    CannotGuard(String),
}

/// File descriptors a command hook may hold while it starts: three pipes (both ends
/// until the spawn), the spawn's own error pipe, and a pidfd.
const FDS_PER_HOOK: u64 = 8;
/// File descriptors left for everything else of the process (stdio, the runtime, the
/// audit log, sockets, plugin files).
const FD_RESERVE: u64 = 64;
/// The most command and HTTP hooks that run at once in one process, whatever the fd limit.
pub const MAX_CONCURRENT_HOOKS: usize = 256;

/// How many command and HTTP hooks run at once in this process:
/// `min(256, (soft RLIMIT_NOFILE − 64) / 8)`, at least 1. The limit is read once per
/// process; a hook that still finds no descriptor when it starts waits for others to
/// finish, within its own timeout.
pub fn hook_concurrency() -> usize {
    static CONCURRENCY: OnceLock<usize> = OnceLock::new();
    *CONCURRENCY.get_or_init(|| {
        let soft = crate::config::file::open_file_limit();
        let slots = soft.saturating_sub(FD_RESERVE) / FDS_PER_HOOK;
        usize::try_from(slots)
            .unwrap_or(MAX_CONCURRENT_HOOKS)
            .clamp(1, MAX_CONCURRENT_HOOKS)
    })
}

/// The process-wide slots of [`hook_concurrency`]: descriptors belong to the process,
/// so every dispatcher of it (a daemon serves many projects) shares them.
fn hook_slots() -> &'static Semaphore {
    static SLOTS: OnceLock<Semaphore> = OnceLock::new();
    SLOTS.get_or_init(|| Semaphore::new(hook_concurrency()))
}

/// Whether a hook holds file descriptors while it runs (and so takes a slot).
fn needs_slot(hook: &Hook) -> bool {
    matches!(hook.handler, HandlerSpec::Command(_) | HandlerSpec::Http(_))
}

/// Runs events against one policy.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    policy: Arc<Policy>,
    handlers: Handlers,
    sessions: Arc<dyn SessionStore>,
    launcher: AsyncLauncher,
    /// Where per-session files (`CLAUDE_ENV_FILE`) are created.
    session_files: Option<PathBuf>,
    /// Where every dispatch is recorded.
    audit: Option<Arc<crate::audit::AuditLog>>,
    /// The agent's own `CLAUDE_ENV_FILE` ([`env_forward`]), or why it was refused.
    agent_env_file: Option<Result<PathBuf, String>>,
    /// Hooks registered at runtime ([`registry`]), shared by the hosts rebuilt from one.
    registry: Arc<registry::Registry>,
    /// Where every dispatch's spans and metrics go ([`crate::telemetry`]); `None`: off.
    telemetry: Option<crate::telemetry::Telemetry>,
}

impl Dispatcher {
    /// A dispatcher over `policy`.
    pub fn new(
        policy: Arc<Policy>,
        handlers: Handlers,
        sessions: Arc<dyn SessionStore>,
        launcher: AsyncLauncher,
        session_files: Option<PathBuf>,
    ) -> Dispatcher {
        Dispatcher {
            policy,
            handlers,
            sessions,
            launcher,
            session_files,
            audit: None,
            agent_env_file: None,
            registry: Arc::default(),
            telemetry: None,
        }
    }

    /// Exports a span per dispatch and per hook, and the hooks' metrics, to `telemetry`
    /// (`None`: off, at no cost).
    pub fn with_telemetry(mut self, telemetry: Option<crate::telemetry::Telemetry>) -> Dispatcher {
        self.telemetry = telemetry;
        self
    }

    /// The same dispatcher with the hooks registered in `registry` (a rebuilt host keeps
    /// its predecessor's).
    pub fn with_registry(mut self, registry: Arc<registry::Registry>) -> Dispatcher {
        self.registry = registry;
        self
    }

    /// The runtime hook registry.
    pub fn registry(&self) -> &Arc<registry::Registry> {
        &self.registry
    }

    /// Whether async hooks start in process (a detached runner loads the config again
    /// and finds no registered hook there).
    pub fn runs_async_in_process(&self) -> bool {
        matches!(self.launcher, AsyncLauncher::InProcess)
    }

    /// Appends what the hooks of an event with `CLAUDE_ENV_FILE` write to hookhost's file
    /// to `file` too: the agent's own, which it sources before its Bash commands
    /// ([`env_forward`]). `Err` is why the agent's variable was refused, said on the
    /// outcomes of those events.
    pub fn with_agent_env_file(mut self, file: Option<Result<PathBuf, String>>) -> Dispatcher {
        self.agent_env_file = file;
        self
    }

    /// Appends a line to `log` for every dispatch (`None`: no audit log).
    pub fn with_audit(mut self, log: Option<crate::audit::AuditLog>) -> Dispatcher {
        self.audit = log.map(Arc::new);
        self
    }

    /// The audit log every dispatch is appended to, if any.
    pub fn audit_log(&self) -> Option<&crate::audit::AuditLog> {
        self.audit.as_deref()
    }

    /// The same dispatcher over another policy (a daemon that keeps serving a policy adds
    /// a notice to it).
    pub fn with_policy(&self, policy: Arc<Policy>) -> Dispatcher {
        Dispatcher {
            policy,
            ..self.clone()
        }
    }

    /// The policy this dispatcher runs.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Builds the invocation of an event.
    ///
    /// # Errors
    ///
    /// An unknown event or an input that is not an object.
    pub fn invocation(&self, event: &str, input: Value) -> Result<Arc<Invocation>, DispatchError> {
        if !self.policy.host_failures.is_empty() {
            return Err(DispatchError::CannotGuard(
                self.policy.host_failures.join("; "),
            ));
        }
        let spec = self
            .policy
            .catalogue
            .get(event)
            .ok_or_else(|| DispatchError::UnknownEvent(event.to_string()))?
            .clone();
        let mut invocation = Invocation::new(spec, input, &self.policy.project_dir)
            .ok_or_else(|| DispatchError::InputNotObject(event.to_string()))?;
        // Only the path (named by a digest of the session id, never by the id itself):
        // the dispatch creates the file when a command hook is about to run.
        if let (Some(dir), true) = (&self.session_files, invocation.spec.env_file) {
            invocation.env_file = Some(
                crate::session::DiskStore::new(dir)
                    .session_dir(&invocation.session_id)
                    .join("env"),
            );
        }
        Ok(Arc::new(invocation))
    }

    /// Dispatches one event: select, run, merge, then apply the Stop cap and deliver
    /// pending async results of the session.
    ///
    /// # Errors
    ///
    /// An unknown event or an input that is not an object; everything else (failing
    /// hooks, bad output) is part of the outcome.
    pub async fn dispatch(&self, event: &str, input: Value) -> Result<Outcome, DispatchError> {
        self.dispatch_traced(event, input, None).await
    }

    /// [`Dispatcher::dispatch`] for a caller with a W3C trace context: the dispatch's span
    /// (when telemetry is on) is a child of `parent`.
    ///
    /// # Errors
    ///
    /// As [`Dispatcher::dispatch`].
    pub async fn dispatch_traced(
        &self,
        event: &str,
        input: Value,
        parent: Option<&crate::telemetry::TraceContext>,
    ) -> Result<Outcome, DispatchError> {
        self.dispatch_from(event, input, None, None, parent).await
    }

    /// [`Dispatcher::dispatch_traced`] for a caller that read the input from bytes
    /// (`received`, as they came, before any repair): the outcome's receipt names their
    /// digest. Without them it names the digest of the input's compact JSON.
    ///
    /// # Errors
    ///
    /// As [`Dispatcher::dispatch`].
    pub async fn dispatch_received(
        &self,
        event: &str,
        input: Value,
        received: Option<&[u8]>,
        parent: Option<&crate::telemetry::TraceContext>,
    ) -> Result<Outcome, DispatchError> {
        self.dispatch_from(event, input, received, None, parent)
            .await
    }

    /// [`Dispatcher::dispatch_received`] for the agent `agent` (`claude`, `codex`, …, as
    /// `--format` names it): the audit line records it, and hooks limited to other agents
    /// (`agents`) do not run.
    ///
    /// # Errors
    ///
    /// As [`Dispatcher::dispatch`].
    pub async fn dispatch_from(
        &self,
        event: &str,
        input: Value,
        received: Option<&[u8]>,
        agent: Option<&'static str>,
        parent: Option<&crate::telemetry::TraceContext>,
    ) -> Result<Outcome, DispatchError> {
        // Only while telemetry is on: otherwise not even a clock read.
        let traced = self.telemetry.as_ref().map(|_| {
            (
                std::time::SystemTime::now(),
                crate::telemetry::Timeline::default(),
            )
        });
        let timeline = traced.as_ref().map(|(_, timeline)| timeline);
        // The receipt digests the input as received: the caller's bytes, else its compact
        // JSON, which is the `input_json` every handler gets unless the invocation adds
        // what the input lacked.
        let changed = (received.is_none() && !Invocation::keeps_as_given(&input))
            .then(|| serde_json::to_vec(&input).unwrap_or_default());
        let mut invocation = self.invocation(event, input)?;
        let input_digest = input_digest(
            received
                .or(changed.as_deref())
                .unwrap_or(invocation.input_json.as_bytes()),
        );
        if agent.is_some() {
            Arc::make_mut(&mut invocation).agent = agent;
        }
        let mut notices = Vec::new();
        if invocation.session_id.contains('\0') {
            notices.push(
                "`session_id` contains NUL bytes, which cannot reach a process: they are \
                 removed from CLAUDE_CODE_SESSION_ID and `${CLAUDE_CODE_SESSION_ID}`"
                    .to_string(),
            );
        }
        if invocation.session_id.len() > crate::handlers::command::MAX_SESSION_ID_BYTES {
            notices.push(format!(
                "`session_id` is {} bytes long: CLAUDE_CODE_SESSION_ID and \
                 `${{CLAUDE_CODE_SESSION_ID}}` get its first {} bytes (a process cannot be \
                 given more)",
                invocation.session_id.len(),
                crate::handlers::command::MAX_SESSION_ID_BYTES
            ));
        }
        let selected = self.select_owned(&invocation);
        if let Some(notice) = prepare_env_file(&mut invocation, &selected) {
            notices.push(notice);
        }
        let forward = self.agent_env_file.as_ref().and_then(|agent| {
            let own = invocation.env_file.as_ref()?;
            Some((own.clone(), env_forward::mark(own), agent.clone()))
        });
        // The depth guard (`depth`): past `maxHookDepth`, no hook runs.
        let refused = self.depth_refusal();
        let would_run = selected
            .iter()
            .flat_map(|(_, h)| h)
            .any(|h| h.skip.is_none());
        let executed = match &refused {
            None => self.run_selected(selected, &invocation, timeline).await,
            Some(why) => depth::skipped(selected, why),
        };
        // The orphans of hooks whose keeper was killed, adopted by the `hookhost` program.
        crate::handlers::descendants::end_adopted();
        match forward {
            Some((own, from, Ok(agent))) => {
                notices.extend(env_forward::forward(&own, from, &agent));
            }
            Some((_, _, Err(refused))) => notices.push(refused),
            None => {}
        }
        let mut outcome = merge_event(&invocation.spec, &invocation.input, &executed);
        let mut receipt = DecisionReceipt::new(
            input_digest,
            self.policy.digest.clone(),
            &executed,
            &outcome,
        );
        if let Some(why) = refused {
            depth::refuse(&invocation.spec, would_run, &why, &mut outcome);
        }
        for notice in &self.policy.notices {
            outcome.host_notice(notice.clone());
        }
        for notice in notices {
            outcome.host_notice(notice);
        }
        if invocation.spec.ends_session {
            self.registry.remove_session(&invocation.session_id);
        }
        self.deliver_async(&invocation.session_id, &mut outcome);
        self.apply_stop_cap(&invocation, &mut outcome);
        outcome.enforce_caps();
        // The decision as it stands after the depth guard and the Stop cap.
        receipt.decision = outcome.decision;
        receipt.continue_ = outcome.continue_;
        outcome.receipt = Some(receipt);
        if let (Some(telemetry), Some((started, timeline))) = (&self.telemetry, traced) {
            let dispatched = crate::telemetry::Dispatched {
                invocation: &invocation,
                outcome: &outcome,
                executed: &executed,
                started,
                timeline: &timeline,
                parent,
            };
            if let Some(notice) = telemetry.record(&dispatched) {
                outcome.host_notice(notice);
            }
        }
        if let Some(log) = &self.audit {
            match log.record(&invocation, &outcome) {
                Ok(seq) => {
                    if let Some(receipt) = &mut outcome.receipt {
                        receipt.seq = seq;
                    }
                }
                Err(e) => outcome.host_notice(format!("audit: {e}")),
            }
        }
        if invocation.spec.ends_session {
            self.sessions.end_session(&invocation.session_id);
        }
        Ok(outcome)
    }

    /// The configured hooks that apply to an invocation, grouped as configured. In a
    /// transform chain every hook is kept: its `if` is tested against the input as the
    /// hooks before it rewrote it, when its turn comes (`run_sequential`).
    pub fn select(&self, invocation: &Invocation) -> Vec<(&Group, Vec<Arc<Hook>>)> {
        self.policy
            .groups(&invocation.spec.name)
            .iter()
            .filter_map(|group| Some((group, registry::selected_hooks(group, invocation)?)))
            .collect()
    }

    /// [`Dispatcher::select`] as (sequential, hooks) pairs that do not borrow the policy,
    /// followed by the registered hooks that apply, from one snapshot of the registry.
    fn select_owned(&self, invocation: &Invocation) -> Vec<(bool, Vec<Arc<Hook>>)> {
        let registered = self.registry.snapshot();
        self.select(invocation)
            .into_iter()
            .map(|(group, hooks)| (group.sequential, hooks))
            .chain(registered.groups_for(invocation).filter_map(|group| {
                Some((
                    group.sequential,
                    registry::selected_hooks(group, invocation)?,
                ))
            }))
            .collect()
    }

    /// Runs the selected groups; the results come back in config order.
    async fn run_selected(
        &self,
        selected: Vec<(bool, Vec<Arc<Hook>>)>,
        invocation: &Arc<Invocation>,
        timeline: Option<&crate::telemetry::Timeline>,
    ) -> Vec<Executed> {
        use futures_util::future::{BoxFuture, FutureExt};
        let mut tasks: Vec<BoxFuture<'_, Vec<Executed>>> = Vec::new();
        // Async hooks of parallel groups start together: one detached runner for all.
        let mut background = Vec::new();
        // A skipped hook's result is known without a task: a task is the state of a whole
        // run (kilobytes), and thousands of skipped hooks (identical ones) took one each.
        let mut executed = Vec::new();
        for (sequential, hooks) in selected {
            if sequential {
                tasks.push(self.run_sequential(hooks, invocation, timeline).boxed());
                continue;
            }
            for hook in hooks {
                if let Some(reason) = &hook.skip {
                    let result = HookResult::Skipped(reason.clone());
                    executed.push(Executed { hook, result });
                } else if hook.mode != RunMode::Sync {
                    background.push(hook);
                } else {
                    tasks.push(
                        async move {
                            let result = self.run_one(&hook, invocation, timeline).await;
                            vec![Executed { hook, result }]
                        }
                        .boxed(),
                    );
                }
            }
        }
        if !background.is_empty() {
            tasks.push(self.start_async(background, invocation).boxed());
        }
        executed.extend(
            futures_util::future::join_all(tasks)
                .await
                .into_iter()
                .flatten(),
        );
        executed.sort_by_key(|done| done.hook.order);
        executed
    }

    /// Runs a sequential group in config order; a block stops the rest. In a transform
    /// chain ([`Hook::chain`]) each hook gets the input as the hooks before it rewrote
    /// it ([`step`]), and its `if` is tested against that input.
    async fn run_sequential(
        &self,
        hooks: Vec<Arc<Hook>>,
        invocation: &Arc<Invocation>,
        timeline: Option<&crate::telemetry::Timeline>,
    ) -> Vec<Executed> {
        let mut executed = Vec::with_capacity(hooks.len());
        let mut stopped_by: Option<String> = None;
        let mut invocation = invocation.clone();
        let count = hooks.len();
        for (at, hook) in hooks.into_iter().enumerate() {
            if hook.chain.is_some() && !if_matches(&hook, &invocation) {
                continue;
            }
            let invocation = &mut invocation;
            let done = match &stopped_by {
                Some(blocker) => Executed {
                    hook,
                    result: HookResult::Skipped(format!(
                        "not run: `{blocker}` blocked earlier in its sequential group"
                    )),
                },
                None if hook.skip.is_none() && hook.mode != RunMode::Sync => {
                    let started = self.start_async(vec![hook], invocation).await;
                    started.into_iter().next().expect("one hook, one result")
                }
                None => {
                    let result = self.run_one(&hook, invocation, timeline).await;
                    Executed { hook, result }
                }
            };
            // What this hook means for the hooks after it: nothing when none is left
            // (the event's merge judges the group, and composes a chain's `rewrites`,
            // on its own).
            if stopped_by.is_none() && at + 1 < count {
                let chained = done.hook.chain.is_some().then_some(&invocation.input);
                let step = step(&invocation.spec, &done, chained);
                if step.stops {
                    stopped_by = Some(done.hook.id.clone());
                } else if let Some(input) = step.input {
                    *invocation = Arc::new(invocation.with_input(input));
                }
            }
            executed.push(done);
        }
        executed
    }

    /// Runs one sync hook (or reports why it is skipped), in a slot when it needs one.
    async fn run_one(
        &self,
        hook: &Arc<Hook>,
        invocation: &Arc<Invocation>,
        timeline: Option<&crate::telemetry::Timeline>,
    ) -> HookResult {
        if let Some(reason) = &hook.skip {
            return HookResult::Skipped(reason.clone());
        }
        if let Some(timeline) = timeline {
            timeline.start(hook);
        }
        HookResult::Ran(Box::new(
            run_in_slot(&self.handlers, hook, invocation, &self.policy).await,
        ))
    }
}

/// Whether a hook's `if` lets it run on this input (a hook with `if` on an event without a
/// tool call is kept: it is reported as skipped).
fn if_matches(hook: &Hook, invocation: &Invocation) -> bool {
    // A hook for other agents than the caller does not run (`agents`).
    if let (Some(agents), Some(caller)) = (&hook.agents, invocation.agent)
        && !agents.iter().any(|a| a == caller)
    {
        return false;
    }
    let Some(rule) = &hook.if_rule else {
        return true;
    };
    if !invocation.spec.tool_event {
        return true;
    }
    let input = &invocation.input;
    let tool_name = input.get("tool_name").and_then(Value::as_str).unwrap_or("");
    let tool_input = input.get("tool_input").unwrap_or(&Value::Null);
    rule.matches(
        tool_name,
        tool_input,
        &invocation.cwd,
        &invocation.project_dir,
    )
}

/// Creates the session's `CLAUDE_ENV_FILE` (0600, in a 0700 directory) when a command
/// hook is about to run on an event that has one. A file that cannot be made private is
/// not handed to the hooks: the variable is left out, with the returned notice.
fn prepare_env_file(
    invocation: &mut Arc<Invocation>,
    selected: &[(bool, Vec<Arc<Hook>>)],
) -> Option<String> {
    let file = invocation.env_file.as_ref()?;
    let runs_a_command = selected
        .iter()
        .flat_map(|(_, hooks)| hooks)
        .any(|hook| hook.skip.is_none() && matches!(hook.handler, HandlerSpec::Command(_)));
    if !runs_a_command {
        return None;
    }
    let error = crate::session::prepare_env_file(file).err()?;
    Arc::make_mut(invocation).env_file = None;
    Some(format!(
        "CLAUDE_ENV_FILE is not set for this event's hooks: {error}"
    ))
}

/// Runs one hook, in one of the process's [`hook_concurrency`] slots when it holds file
/// descriptors. The hook's timeout counts from here, the wait for a slot included: hooks
/// that never exit hold their slots for their whole timeout, and a hook behind them
/// must not wait past its own and then run (nor make the event take the sum of the
/// timeouts instead of the longest).
async fn run_in_slot(
    handlers: &Handlers,
    hook: &Hook,
    invocation: &Invocation,
    policy: &Policy,
) -> HandlerRun {
    if !needs_slot(hook) {
        return handlers.run(hook, invocation, policy).await;
    }
    // Uncontended (the common case): no clock, no timer, the hook's own timeout.
    if let Ok(_slot) = hook_slots().try_acquire() {
        return handlers.run(hook, invocation, policy).await;
    }
    let started = std::time::Instant::now();
    let Ok(Ok(_slot)) = tokio::time::timeout(hook.timeout, hook_slots().acquire()).await else {
        // (An `Err` inside would mean the slots were closed, which they never are.)
        return HandlerRun::failed(
            crate::handlers::FailureKind::Timeout,
            format!(
                "timed out after {:?} waiting for a slot: all {} slots for command and HTTP \
                 hooks were taken by other hooks the whole time; not run",
                hook.timeout,
                hook_concurrency()
            ),
            started,
        );
    };
    // What is left of its timeout after the wait (a timeout it meets names that rest).
    let waited = started.elapsed();
    let rest = Hook {
        timeout: hook.timeout.saturating_sub(waited),
        ..hook.clone()
    };
    let mut run = handlers.run(&rest, invocation, policy).await;
    run.duration += waited;
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_follows_the_fd_limit() {
        let slots = hook_concurrency();
        assert!((1..=MAX_CONCURRENT_HOOKS).contains(&slots), "{slots}");
    }
}
