//! Async hooks: started as tasks of the runtime or handed to a detached `hookhost
//! run-async` runner with the admission record of each ([`AsyncJob`], [`admission`]),
//! re-admitted by that runner, and their results queued for the session
//! ([`async_result`]), audited on their own line, and delivered with the session's next
//! outcome.
//!
//! A job runs once: the dispatch gives it a random id and records the id, with the
//! sha256 of the job's bytes, in the session store before it starts the runner
//! ([`crate::session::SessionStore::issue_job`]); the runner consumes that record under
//! the session's lock before it runs anything
//! ([`crate::session::SessionStore::consume_job`]). The same job again (replayed, copied,
//! a second runner racing the first), a job no dispatch issued or one whose bytes
//! changed runs nothing: the refusal is on the runner's stderr, in the tracing log, in
//! the audit log (each known hook `skipped` with the reason) and with the session's
//! next outcome.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Dispatcher, hook_concurrency, hook_slots, prepare_env_file, run_in_slot};
use crate::config::SourceKind;
use crate::event::Channel;
use crate::handlers::{HandlerRun, Invocation, Verdict};
use crate::outcome::{Executed, HookResult, Outcome, merge};
use crate::policy::{HandlerSpec, Hook, Policy, RunMode};
use crate::session::AsyncResult;

/// How async hooks are started.
#[derive(Debug, Clone)]
pub enum AsyncLauncher {
    /// As tasks of the current tokio runtime (library, daemon).
    InProcess,
    /// As a detached `hookhost` process that outlives the caller (one-shot CLI): the
    /// program and its arguments (`run-async` and the config sources). The job (the
    /// input and the admission record of each hook, see [`AsyncJob`]) is written to its
    /// stdin; in-process function hooks still run as tasks.
    Detached {
        /// The program (the `hookhost` executable).
        program: PathBuf,
        /// Its arguments, as bytes (a project path need not be UTF-8).
        args: Vec<OsString>,
    },
}

/// The job a dispatch hands its detached async runner, on the runner's stdin.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AsyncJob {
    /// The format's version.
    pub version: u32,
    /// The job's identity: [`crate::session::JOB_ID_LEN`] random hex digits, recorded in
    /// the session store when the job is issued and consumed when it runs.
    #[serde(default)]
    pub id: String,
    /// The event.
    pub event: String,
    /// The event's input.
    pub input: Value,
    /// The hooks to run, each with the record it was admitted under.
    pub hooks: Vec<AdmittedHook>,
}

/// One hook of an [`AsyncJob`].
#[derive(Debug, Serialize, Deserialize)]
pub struct AdmittedHook {
    /// The hook's id.
    pub id: String,
    /// Its [`admission`] record at the dispatch.
    pub admitted: Value,
}

/// The version of [`AsyncJob`] this build writes and reads.
const ASYNC_JOB_VERSION: u32 = 1;

/// The largest job a runner reads from its stdin.
pub const ASYNC_JOB_CAP: u64 = 64 << 20;

/// What a hook runs and with which rights, as the policy resolved it: its id, event,
/// source, handler (command and arguments, URL and headers, plugin with its pinned
/// digest, grants and limits), `if` rule, timeout, mode, the settings its runner reads
/// (`envAllowlist`, `allowedHttpHookUrls`) and, for project and local hooks, the
/// workspace trust decision (with the plugin pins of the fingerprint). Two policies run
/// a hook the same way when its records are equal.
pub fn admission(hook: &Hook, policy: &Policy) -> Value {
    use std::os::unix::ffi::OsStrExt;
    let handler = match &hook.handler {
        HandlerSpec::Command(c) => json!({
            "type": "command",
            "command": c.command,
            "args": c.args,
            "shell": format!("{:?}", c.shell),
            "killGraceMs": c.kill_grace.as_millis() as u64,
            "contextEnv": c.context_env,
        }),
        HandlerSpec::Http(h) => json!({
            "type": "http",
            "url": h.url,
            "headers": h.headers,
            "allowedEnvVars": h.allowed_env_vars,
        }),
        HandlerSpec::Wasm(w) => json!({
            "type": "wasm",
            "plugin": hex::encode(w.plugin.as_os_str().as_bytes()),
            "sha256": w.sha256,
            "capabilities": serde_json::to_value(&w.capabilities).unwrap_or(Value::Null),
            "fuel": w.fuel,
            "memoryBytes": w.memory_bytes,
            "instance": serde_json::to_value(w.instance).unwrap_or(Value::Null),
            "config": w.config,
        }),
        HandlerSpec::Function(_) => json!({"type": "function"}),
        HandlerSpec::Prompt(p) => json!({
            "type": "prompt",
            "prompt": p.prompt,
            "model": p.model,
            "provider": p.provider,
            "continueOnBlock": p.continue_on_block,
        }),
        HandlerSpec::Agent(a) => json!({
            "type": "agent",
            "prompt": a.prompt,
            "model": a.model,
            "provider": a.provider,
            "maxTurns": a.max_turns,
            "tokenBudget": a.token_budget,
        }),
        HandlerSpec::Unbuilt(u) => json!({"type": u.kind, "unbuilt": u.error}),
        HandlerSpec::McpTool(m) => json!({
            "type": "mcp_tool",
            "server": m.server,
            "definition": policy.settings.mcp_servers.get(&m.server).map(|(s, _)| format!("{s:?}")),
            "tool": m.tool,
            "input": m.input,
        }),
    };
    let workspace = matches!(hook.origin.kind, SourceKind::Project | SourceKind::Local);
    let settings = &policy.settings;
    json!({
        "id": hook.id,
        "event": hook.event,
        "source": hook.origin.kind.as_str(),
        "location": hook.origin.location,
        "configPath": hook.config_path,
        "handler": handler,
        "if": hook.if_rule.as_ref().map(|rule| rule.as_str()),
        "timeoutMs": hook.timeout.as_millis() as u64,
        "mode": format!("{:?}", hook.mode),
        "onFailure": serde_json::to_value(hook.on_failure).unwrap_or(Value::Null),
        "envAllowlist": settings.env_allowlist,
        "allowedHttpHookUrls": settings
            .url_allowlist_for(hook.origin.kind)
            .map(|urls| urls.patterns().collect::<Vec<_>>()),
        "trust": workspace.then(|| format!("{:?}", policy.workspace_trust)),
    })
}

/// The fields of two admission records that differ, for the refusal's message.
fn differing_fields(admitted: &Value, now: &Value) -> Vec<String> {
    let (Some(a), Some(b)) = (admitted.as_object(), now.as_object()) else {
        return vec!["(the whole record)".into()];
    };
    let mut fields: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|key| a.get(*key) != b.get(*key))
        .cloned()
        .collect();
    fields.sort();
    fields.dedup();
    fields
}

impl Dispatcher {
    /// Starts async hooks (none of them skipped); each is reported as started, or as
    /// skipped with the reason it could not be started.
    pub(super) async fn start_async(
        &self,
        hooks: Vec<Arc<Hook>>,
        invocation: &Arc<Invocation>,
    ) -> Vec<Executed> {
        let (detached, in_process): (Vec<_>, Vec<_>) = hooks.into_iter().partition(|hook| {
            matches!(self.launcher, AsyncLauncher::Detached { .. })
                && !matches!(hook.handler, HandlerSpec::Function(_))
        });
        let mut executed = Vec::new();
        for hook in in_process {
            let (handlers, policy, sessions, audit) = (
                self.handlers.clone(),
                self.policy.clone(),
                self.sessions.clone(),
                self.audit.clone(),
            );
            let (task_hook, invocation) = (hook.clone(), invocation.clone());
            // The caller's model and MCP servers (`hookhost serve`) go with the hook.
            let caller = crate::handlers::caller::Caller::current();
            tokio::spawn(caller.scope(async move {
                let run = run_in_slot(&handlers, &task_hook, &invocation, &policy).await;
                sessions.push_async(
                    &invocation.session_id,
                    async_result(&task_hook, &invocation, &run),
                );
                audit_async_run(audit.as_deref(), &task_hook, &invocation, run);
            }));
            executed.push(Executed {
                hook,
                result: HookResult::Started,
            });
        }
        if !detached.is_empty() {
            let launched = self.launch_detached(&detached, invocation).await;
            executed.extend(detached.into_iter().map(|hook| Executed {
                hook,
                result: match &launched {
                    Ok(()) => HookResult::Started,
                    Err(message) => HookResult::Skipped(message.clone()),
                },
            }));
        }
        executed
    }

    /// Starts one detached runner for `hooks` and hands it their job on its stdin.
    async fn launch_detached(
        &self,
        hooks: &[Arc<Hook>],
        invocation: &Invocation,
    ) -> Result<(), String> {
        let AsyncLauncher::Detached { program, args } = &self.launcher else {
            unreachable!("only detached launchers launch runners");
        };
        let id = new_job_id()?;
        let job = AsyncJob {
            version: ASYNC_JOB_VERSION,
            id: id.clone(),
            event: invocation.spec.name.to_string(),
            input: invocation.input.clone(),
            hooks: hooks
                .iter()
                .map(|hook| AdmittedHook {
                    id: hook.id.clone(),
                    admitted: admission(hook, &self.policy),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec(&job).map_err(|e| e.to_string())?;
        let session = &invocation.session_id;
        // Recorded before the runner exists: the runner runs it only by consuming this.
        self.sessions
            .issue_job(session, &id, &job_digest(&bytes))
            .map_err(|e| format!("not started: {e}"))?;
        let launched = self.spawn_runner(program, args, hooks, &bytes).await;
        if launched.is_err() {
            self.sessions.withdraw_job(session, &id);
        }
        launched
    }

    /// Starts the detached runner `program args` and writes `bytes` (its job) to its stdin.
    async fn spawn_runner(
        &self,
        program: &std::path::Path,
        args: &[OsString],
        hooks: &[Arc<Hook>],
        bytes: &[u8],
    ) -> Result<(), String> {
        use tokio::io::AsyncWriteExt;
        let shown = program.display();
        // A slot for the spawn's descriptors, waited for no longer than these hooks'
        // timeouts (they are reported as not started otherwise).
        let patience = hooks.iter().map(|h| h.timeout).max().unwrap_or_default();
        let _slot = tokio::time::timeout(patience, hook_slots().acquire())
            .await
            .map_err(|_| {
                format!(
                    "not started: all {} slots for command and HTTP hooks were taken for \
                     {patience:?}",
                    hook_concurrency()
                )
            })?;
        let mut runner = tokio::process::Command::new(program);
        runner
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // The caller's working directory, not the project's: relative `--settings`
            // files, and relative paths in inline `--settings` JSON, resolve against it,
            // and the runner must load the config the dispatch loaded.
            ;
        let mut child = crate::handlers::descendants::spawn_own(|| runner.spawn(), |c| c.id())
            .map_err(|e| format!("cannot start async runner `{shown}`: {e}"))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let written = stdin.write_all(bytes).await;
        drop(stdin);
        written.map_err(|e| format!("cannot hand the async runner `{shown}` its hooks: {e}"))?;
        // The runner detaches itself (its own session). Waiting for it reaps it in a
        // long-lived caller; a one-shot caller exits first and its child is reparented.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        Ok(())
    }

    pub(super) fn deliver_async(&self, session: &str, outcome: &mut Outcome) {
        for result in self.sessions.take_async(session) {
            outcome.additional_context.extend(result.additional_context);
            outcome.system_messages.extend(result.system_messages);
            // A wake-up extends the session's loop: it counts against the Stop cap.
            let wake = result
                .wake
                .filter(|_| match self.admit_wake(session, &result.hook) {
                    Ok(()) => true,
                    Err(why) => {
                        outcome.notices.push(crate::outcome::Notice {
                            hook: result.hook.clone(),
                            message: why,
                        });
                        false
                    }
                });
            if let Some(wake) = wake {
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
}

/// What an async run leaves for the session (texts capped like an outcome's).
pub fn async_result(hook: &Hook, invocation: &Invocation, run: &HandlerRun) -> AsyncResult {
    use crate::handlers::output::cap_text;
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
            // The allow-list of what a hook may say holds for background hooks too.
            let admitted = invocation
                .spec
                .admit("additionalContext", Channel::Answer, &hook.widens)
                .is_ok();
            if let Some(context) = answer
                .output
                .specific
                .get("additionalContext")
                .and_then(Value::as_str)
                .filter(|_| admitted)
            {
                result.additional_context.push(cap_text(context));
            }
            result
                .system_messages
                .extend(answer.output.system_message.as_deref().map(cap_text));
            if hook.mode == RunMode::AsyncRewake {
                result.wake = answer.blocking_error.as_deref().map(cap_text);
            }
        }
        // `onFailure: "ignore"`: no notice (the run's audit line keeps the failure).
        Verdict::Failed(_) if hook.on_failure == crate::config::schema::OnFailure::Ignore => {}
        Verdict::Failed(failure) => {
            let ignored =
                crate::policy::on_failure_ignored(hook.on_failure, hook.mode, &invocation.spec);
            result.error = Some(cap_text(&match ignored {
                Some(why) => format!("{}; {why}", failure.message),
                None => failure.message.clone(),
            }));
        }
    }
    result
}

impl Dispatcher {
    /// Runs the hooks of a job that a dispatch handed its detached runner
    /// ([`AsyncLauncher::Detached`]) to completion, and queues their results for the
    /// session: the body of `hookhost run-async`.
    ///
    /// A hook runs only if this dispatcher's policy admits it with the record the
    /// dispatch admitted it under ([`admission`]); a hook that is missing, skipped or
    /// changed is refused, and the refusal is queued as its result, so the session's next
    /// outcome says so.
    ///
    /// # Errors
    ///
    /// A job that is not valid JSON of this version, or a bad input; a job that must not
    /// run (already ran, never issued, changed): nothing ran, and the refusal is also in
    /// the tracing log, the audit log and the session's next outcome.
    pub async fn run_async_job(&self, bytes: &[u8]) -> Result<(), String> {
        let job: AsyncJob = serde_json::from_slice(bytes)
            .map_err(|e| format!("the async job on stdin is not valid: {e}"))?;
        if job.version != ASYNC_JOB_VERSION {
            return Err(format!(
                "the async job is of version {}, this runner reads version {ASYNC_JOB_VERSION}",
                job.version
            ));
        }
        let mut invocation = self
            .invocation(&job.event, job.input)
            .map_err(|e| e.to_string())?;
        // Once: the record its dispatch made is consumed before anything runs.
        if let Err(why) =
            self.sessions
                .consume_job(&invocation.session_id, &job.id, &job_digest(bytes))
        {
            let ids: Vec<&str> = job.hooks.iter().map(|h| h.id.as_str()).collect();
            return Err(self.refuse_job(&invocation, &ids, &why));
        }
        let mut admitted = Vec::new();
        for AdmittedHook {
            id,
            admitted: record,
        } in &job.hooks
        {
            match self.readmit(&job.event, id, record) {
                Ok(hook) => admitted.push(hook),
                Err(why) => {
                    tracing::warn!(hook = %id, "{why}");
                    self.sessions.push_async(
                        &invocation.session_id,
                        AsyncResult {
                            hook: id.clone(),
                            event: job.event.clone(),
                            additional_context: Vec::new(),
                            system_messages: Vec::new(),
                            wake: None,
                            error: Some(why),
                        },
                    );
                }
            }
        }
        let selected = vec![(false, admitted.clone())];
        if let Some(notice) = prepare_env_file(&mut invocation, &selected) {
            tracing::warn!("{notice}");
        }
        let runs = admitted.iter().map(|hook| {
            let invocation = &invocation;
            async move {
                let run = run_in_slot(&self.handlers, hook, invocation, &self.policy).await;
                self.sessions
                    .push_async(&invocation.session_id, async_result(hook, invocation, &run));
                audit_async_run(self.audit.as_deref(), hook, invocation, run);
            }
        });
        futures_util::future::join_all(runs).await;
        crate::handlers::descendants::end_adopted();
        Ok(())
    }

    /// Reports a job that must not run (`why`) everywhere a detached runner can: the
    /// tracing log, an audit line with each hook of `ids` this policy knows as skipped,
    /// and a result per hook for the session's next outcome. Returns the message.
    fn refuse_job(&self, invocation: &Invocation, ids: &[&str], why: &str) -> String {
        let message = format!(
            "refused to run the async job of `{}`; nothing ran: {why}",
            invocation.spec.name
        );
        tracing::warn!("{message}");
        for id in ids {
            self.sessions.push_async(
                &invocation.session_id,
                AsyncResult {
                    hook: (*id).to_string(),
                    event: invocation.spec.name.to_string(),
                    additional_context: Vec::new(),
                    system_messages: Vec::new(),
                    wake: None,
                    error: Some(format!("refused to run the async hook `{id}`: {why}")),
                },
            );
        }
        let executed: Vec<Executed> = self
            .policy
            .hooks
            .iter()
            .filter(|h| h.event == invocation.spec.name.as_ref() && ids.contains(&h.id.as_str()))
            .map(|hook| Executed {
                hook: hook.clone(),
                result: HookResult::Skipped(message.clone()),
            })
            .collect();
        if let Some(log) = self.audit.as_deref()
            && !executed.is_empty()
        {
            let outcome = merge(&invocation.spec, &executed);
            let entry = crate::audit::entry(invocation, &outcome, std::time::SystemTime::now());
            if let Err(e) = log.append(&entry.with_origin(log.origin()).of_async_run()) {
                tracing::error!("audit: {e}");
            }
        }
        message
    }

    /// The hook of this policy that may run as the hook `id` that a dispatch admitted
    /// under `record`.
    fn readmit(&self, event: &str, id: &str, record: &Value) -> Result<Arc<Hook>, String> {
        let refused = |why: String| format!("refused to run the async hook `{id}`: {why}");
        let hook = self
            .policy
            .hooks
            .iter()
            .find(|h| h.id == id && h.event == event)
            .ok_or_else(|| refused("the current config has no such hook".into()))?;
        if let Some(reason) = &hook.skip {
            return Err(refused(format!("it does not run now: {reason}")));
        }
        if hook.mode == RunMode::Sync {
            return Err(refused("it is no longer an async hook".into()));
        }
        let now = admission(hook, &self.policy);
        if &now != record {
            return Err(refused(format!(
                "it changed since the dispatch admitted it (changed: {}); it runs again \
                 from the next event",
                differing_fields(record, &now).join(", ")
            )));
        }
        Ok(hook.clone())
    }
}

/// A fresh job id: [`crate::session::JOB_ID_LEN`] hex digits from the system's
/// randomness.
fn new_job_id() -> Result<String, String> {
    let mut id = [0u8; crate::session::JOB_ID_LEN / 2];
    getrandom::getrandom(&mut id)
        .map_err(|e| format!("not started: no randomness for a job id: {e}"))?;
    Ok(hex::encode(id))
}

/// The sha256 of a job's bytes, in hex: what its record holds.
fn job_digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
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
    if let Err(e) = log.append(&entry.with_origin(log.origin()).of_async_run()) {
        tracing::error!(hook = %hook.id, "audit: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_fields_name_what_changed() {
        let a = json!({"handler": {"command": "a"}, "id": "x", "trust": "t"});
        let b = json!({"handler": {"command": "b"}, "id": "x", "extra": 1});
        assert_eq!(differing_fields(&a, &b), ["extra", "handler", "trust"]);
        assert!(differing_fields(&a, &a).is_empty());
    }
}
