//! Stage 4 of the pipeline: running the hooks that match one event.
//!
//! Matching hooks run in parallel and all finish before the merge (one hook's deny does
//! not stop its siblings, as in Claude Code). A matcher group with `"sequential": true`
//! runs its hooks one after another in config order, and a block stops the rest of that
//! group. Each run has its own deadline. Async hooks are started and reported as `async`;
//! their results join a later outcome of the same session. After the merge, the Stop
//! loop cap applies.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use serde_json::Value;

use crate::handlers::{HandlerRun, Handlers, Invocation, Verdict};
use crate::matcher;
use crate::outcome::{Decision, Executed, HookResult, Outcome, merge, stops_the_rest};
use crate::policy::{Group, Hook, Policy, RunMode};
use crate::session::{AsyncResult, SessionStore};

/// An event could not be dispatched at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// The event name is not in the catalogue.
    #[error("unknown event `{0}`; `hookhost events` lists the known ones")]
    UnknownEvent(String),
    /// The input is not a JSON object.
    #[error("the input of `{0}` must be a JSON object")]
    InputNotObject(String),
}

/// How async hooks are started.
#[derive(Debug, Clone)]
pub enum AsyncLauncher {
    /// As tasks of the current tokio runtime (library, daemon).
    InProcess,
    /// As a detached `hookhost` process that outlives the caller (one-shot CLI): the
    /// program and its leading arguments; `--event E --hook ID` are appended and the input
    /// is written to its stdin.
    Detached {
        /// The program (the `hookhost` executable).
        program: PathBuf,
        /// Arguments before `--event`.
        args: Vec<String>,
    },
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
        }
    }

    /// Appends a line to `log` for every dispatch (`None`: no audit log).
    pub fn with_audit(mut self, log: Option<crate::audit::AuditLog>) -> Dispatcher {
        self.audit = log.map(Arc::new);
        self
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
    pub fn invocation(
        &self,
        event: &str,
        mut input: Value,
    ) -> Result<Arc<Invocation>, DispatchError> {
        let spec = self
            .policy
            .catalogue
            .get(event)
            .ok_or_else(|| DispatchError::UnknownEvent(event.to_string()))?
            .clone();
        let Some(object) = input.as_object_mut() else {
            return Err(DispatchError::InputNotObject(event.to_string()));
        };
        object
            .entry("hook_event_name")
            .or_insert_with(|| Value::String(event.to_string()));
        let session_id = object
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let project_dir = self.policy.project_dir.clone();
        let cwd = object
            .get("cwd")
            .and_then(Value::as_str)
            .map_or_else(|| project_dir.clone(), PathBuf::from);
        // Only the path: the command handler, its one user, creates the file.
        let env_file = match (&self.session_files, spec.env_file) {
            (Some(dir), true) => Some(
                crate::session::DiskStore::new(dir)
                    .session_dir(&session_id)
                    .join("env"),
            ),
            _ => None,
        };
        let input_json = input.to_string();
        Ok(Arc::new(Invocation {
            spec,
            input,
            input_json,
            session_id,
            cwd,
            project_dir,
            env_file,
        }))
    }

    /// Dispatches one event: select, run, merge, then apply the Stop cap and deliver
    /// pending async results of the session.
    ///
    /// # Errors
    ///
    /// An unknown event or an input that is not an object; everything else (failing
    /// hooks, bad output) is part of the outcome.
    pub async fn dispatch(&self, event: &str, input: Value) -> Result<Outcome, DispatchError> {
        let invocation = self.invocation(event, input)?;
        let executed = self.run_matching(&invocation).await;
        let mut outcome = merge(&invocation.spec, &executed);
        for notice in &self.policy.notices {
            outcome.host_notice(notice.clone());
        }
        self.deliver_async(&invocation.session_id, &mut outcome);
        self.apply_stop_cap(&invocation, &mut outcome);
        if let Some(log) = &self.audit
            && let Err(e) = log.record(&invocation, &outcome)
        {
            outcome.host_notice(format!("audit: {e}"));
        }
        Ok(outcome)
    }

    /// The hooks that apply to an invocation, grouped as configured.
    pub fn select(&self, invocation: &Invocation) -> Vec<(&Group, Vec<Arc<Hook>>)> {
        let spec = &invocation.spec;
        let tool_name = invocation
            .input
            .get("tool_name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let tool_input = invocation.input.get("tool_input").unwrap_or(&Value::Null);
        self.policy
            .groups(&spec.name)
            .iter()
            .filter(|group| matcher::group_applies(&group.matcher, spec, &invocation.input))
            .map(|group| {
                let hooks = group
                    .hooks
                    .iter()
                    .filter(|hook| match &hook.if_rule {
                        None => true,
                        Some(_) if !spec.tool_event => true, // reported as skipped
                        Some(rule) => rule.matches(
                            tool_name,
                            tool_input,
                            &invocation.cwd,
                            &invocation.project_dir,
                        ),
                    })
                    .cloned()
                    .collect();
                (group, hooks)
            })
            .collect()
    }

    async fn run_matching(&self, invocation: &Arc<Invocation>) -> Vec<Executed> {
        let selected = self.select(invocation);
        let mut tasks = Vec::new();
        for (group, hooks) in &selected {
            if group.sequential {
                tasks.push(futures_util::future::Either::Left(
                    self.run_sequential(hooks, invocation),
                ));
            } else {
                for hook in hooks {
                    let hook = hook.clone();
                    tasks.push(futures_util::future::Either::Right(async move {
                        let result = self.run_one(&hook, invocation).await;
                        vec![Executed { hook, result }]
                    }));
                }
            }
        }
        futures_util::future::join_all(tasks)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    async fn run_sequential(
        &self,
        hooks: &[Arc<Hook>],
        invocation: &Arc<Invocation>,
    ) -> Vec<Executed> {
        let mut executed = Vec::with_capacity(hooks.len());
        let mut stopped_by: Option<String> = None;
        for hook in hooks {
            let result = match &stopped_by {
                Some(blocker) => HookResult::Skipped(format!(
                    "not run: `{blocker}` blocked earlier in its sequential group"
                )),
                None => self.run_one(hook, invocation).await,
            };
            let done = Executed {
                hook: hook.clone(),
                result,
            };
            if stopped_by.is_none() && stops_the_rest(&invocation.spec, &done) {
                stopped_by = Some(hook.id.clone());
            }
            executed.push(done);
        }
        executed
    }

    async fn run_one(&self, hook: &Arc<Hook>, invocation: &Arc<Invocation>) -> HookResult {
        if let Some(reason) = &hook.skip {
            return HookResult::Skipped(reason.clone());
        }
        match hook.mode {
            RunMode::Sync => HookResult::Ran(Box::new(
                self.handlers.run(hook, invocation, &self.policy).await,
            )),
            RunMode::Async | RunMode::AsyncRewake => match self.start_async(hook, invocation) {
                Ok(()) => HookResult::Started,
                Err(message) => HookResult::Skipped(message),
            },
        }
    }

    fn start_async(&self, hook: &Arc<Hook>, invocation: &Arc<Invocation>) -> Result<(), String> {
        match &self.launcher {
            AsyncLauncher::InProcess => {
                let (handlers, policy, sessions, audit) = (
                    self.handlers.clone(),
                    self.policy.clone(),
                    self.sessions.clone(),
                    self.audit.clone(),
                );
                let (hook, invocation) = (hook.clone(), invocation.clone());
                tokio::spawn(async move {
                    let run = handlers.run(&hook, &invocation, &policy).await;
                    sessions.push_async(
                        &invocation.session_id,
                        async_result(&hook, &invocation, &run),
                    );
                    audit_async_run(audit.as_deref(), &hook, &invocation, run);
                });
                Ok(())
            }
            AsyncLauncher::Detached { program, args } => {
                let mut child = std::process::Command::new(program)
                    .args(args)
                    .args(["--event", &invocation.spec.name, "--hook", &hook.id])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .current_dir(&invocation.project_dir)
                    .spawn()
                    .map_err(|e| {
                        format!("cannot start async runner `{}`: {e}", program.display())
                    })?;
                if let Some(mut stdin) = child.stdin.take() {
                    use std::io::Write;
                    let _ = stdin.write_all(invocation.input_json.as_bytes());
                }
                // The runner detaches itself (its own session); reap it in the background
                // so that a long-lived caller collects no zombie.
                std::thread::spawn(move || child.wait());
                Ok(())
            }
        }
    }

    fn deliver_async(&self, session: &str, outcome: &mut Outcome) {
        for result in self.sessions.take_async(session) {
            outcome.additional_context.extend(result.additional_context);
            outcome.system_messages.extend(result.system_messages);
            if let Some(wake) = result.wake {
                outcome.additional_context.push(wake.clone());
                outcome.notices.push(crate::outcome::Notice {
                    hook: result.hook.clone(),
                    message: format!(
                        "asyncRewake: woke the session after `{}`: {wake}",
                        result.event
                    ),
                });
            }
            if let Some(error) = result.error {
                outcome.notices.push(crate::outcome::Notice {
                    hook: result.hook.clone(),
                    message: format!("async hook on `{}` failed: {error}", result.event),
                });
            }
        }
    }

    /// After `cap` consecutive Stop blocks in a session, the next block is overridden.
    fn apply_stop_cap(&self, invocation: &Invocation, outcome: &mut Outcome) {
        if invocation.spec.name != "Stop" {
            return;
        }
        let cap = self.policy.settings.stop_block_cap;
        let session = &invocation.session_id;
        if outcome.decision != Decision::Block {
            if self.sessions.stop_blocks(session) != 0 {
                self.sessions.set_stop_blocks(session, 0);
            }
            return;
        }
        let count = self.sessions.stop_blocks(session) + 1;
        if cap != 0 && count > cap {
            outcome.decision = Decision::None;
            let overridden = outcome.reason.take().unwrap_or_default();
            outcome.host_notice(format!(
                "Stop hooks blocked {cap} times in a row; this block is overridden and the agent may stop \
                 (cap: HOOKHOST_STOP_BLOCK_CAP or `stopBlockCap`, 0 = no cap). Overridden reason: {overridden}"
            ));
            self.sessions.set_stop_blocks(session, 0);
        } else {
            self.sessions.set_stop_blocks(session, count);
        }
    }
}

/// What an async run leaves for the session.
pub fn async_result(hook: &Hook, invocation: &Invocation, run: &HandlerRun) -> AsyncResult {
    let mut result = AsyncResult {
        hook: hook.id.clone(),
        event: invocation.spec.name.to_string(),
        additional_context: Vec::new(),
        system_messages: Vec::new(),
        wake: None,
        error: None,
    };
    match &run.verdict {
        Verdict::Answer(answer) => {
            if let Some(context) = answer
                .output
                .specific
                .get("additionalContext")
                .and_then(Value::as_str)
            {
                result.additional_context.push(context.to_string());
            }
            result
                .system_messages
                .extend(answer.output.system_message.clone());
            if hook.mode == RunMode::AsyncRewake {
                result.wake = answer.blocking_error.clone();
            }
        }
        Verdict::Failed(failure) => result.error = Some(failure.message.clone()),
    }
    result
}

impl Dispatcher {
    /// Runs one async hook to completion and queues its result for the session: the body
    /// of the detached runner that [`AsyncLauncher::Detached`] starts.
    ///
    /// # Errors
    ///
    /// An unknown event or hook id, or a bad input.
    pub async fn run_async_hook(
        &self,
        event: &str,
        hook_id: &str,
        input: Value,
    ) -> Result<(), String> {
        let invocation = self.invocation(event, input).map_err(|e| e.to_string())?;
        let hook = self
            .policy
            .hooks
            .iter()
            .find(|h| h.id == hook_id && h.event == event)
            .ok_or_else(|| format!("no hook `{hook_id}` on `{event}` in the current config"))?;
        let run = self.handlers.run(hook, &invocation, &self.policy).await;
        self.sessions.push_async(
            &invocation.session_id,
            async_result(hook, &invocation, &run),
        );
        audit_async_run(self.audit.as_deref(), hook, &invocation, run);
        Ok(())
    }
}

/// Appends the line of an async hook's run, which finishes after its event's line was
/// written: the run is audited on its own, marked `"async": true`. A log that cannot be
/// written is reported where an async run can report: the tracing log.
fn audit_async_run(
    audit: Option<&crate::audit::AuditLog>,
    hook: &Arc<Hook>,
    invocation: &Invocation,
    run: HandlerRun,
) {
    let Some(log) = audit else { return };
    let executed = [Executed {
        hook: hook.clone(),
        result: HookResult::Ran(Box::new(run)),
    }];
    let outcome = merge(&invocation.spec, &executed);
    let entry = crate::audit::entry(invocation, &outcome, std::time::SystemTime::now());
    if let Err(e) = log.append(&entry.of_async_run()) {
        tracing::error!(hook = %hook.id, "audit: {e}");
    }
}
