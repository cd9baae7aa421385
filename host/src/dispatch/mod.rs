//! Stage 4 of the pipeline: running the hooks that match one event.
//!
//! Matching hooks run in parallel and all finish before the merge (one hook's deny does
//! not stop its siblings, as in Claude Code). A matcher group with `"sequential": true`
//! runs its hooks one after another in config order, and a block stops the rest of that
//! group. Each run has its own deadline. Command and HTTP hooks hold file descriptors
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

pub mod input;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::config::SourceKind;
use crate::handlers::{HandlerRun, Handlers, Invocation, Verdict};
use crate::matcher;
use crate::outcome::{Decision, Executed, HookResult, Outcome, merge, stops_the_rest};
use crate::policy::{Group, HandlerSpec, Hook, Policy, RunMode};
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
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the limit into the struct we pass; nothing else.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            limit.rlim_cur
        } else {
            1024
        };
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
}

/// The job a dispatch hands its detached async runner, on the runner's stdin.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AsyncJob {
    /// The format's version.
    pub version: u32,
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
        HandlerSpec::Unsupported(t) => json!({"type": t.as_str()}),
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
            .allowed_http_hook_urls
            .as_ref()
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
    pub fn invocation(&self, event: &str, input: Value) -> Result<Arc<Invocation>, DispatchError> {
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
        let mut invocation = self.invocation(event, input)?;
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
        let executed = self.run_selected(selected, &invocation).await;
        let mut outcome = merge(&invocation.spec, &executed);
        for notice in &self.policy.notices {
            outcome.host_notice(notice.clone());
        }
        for notice in notices {
            outcome.host_notice(notice);
        }
        self.deliver_async(&invocation.session_id, &mut outcome);
        self.apply_stop_cap(&invocation, &mut outcome);
        outcome.enforce_caps();
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

    /// [`Dispatcher::select`] as (sequential, hooks) pairs that do not borrow the policy.
    fn select_owned(&self, invocation: &Invocation) -> Vec<(bool, Vec<Arc<Hook>>)> {
        self.select(invocation)
            .into_iter()
            .map(|(group, hooks)| (group.sequential, hooks))
            .collect()
    }

    /// Runs the selected groups; the results come back in config order.
    async fn run_selected(
        &self,
        selected: Vec<(bool, Vec<Arc<Hook>>)>,
        invocation: &Arc<Invocation>,
    ) -> Vec<Executed> {
        use futures_util::future::{BoxFuture, FutureExt};
        let mut tasks: Vec<BoxFuture<'_, Vec<Executed>>> = Vec::new();
        // Async hooks of parallel groups start together: one detached runner for all.
        let mut background = Vec::new();
        for (sequential, hooks) in selected {
            if sequential {
                tasks.push(self.run_sequential(hooks, invocation).boxed());
                continue;
            }
            for hook in hooks {
                if hook.skip.is_none() && hook.mode != RunMode::Sync {
                    background.push(hook);
                } else {
                    tasks.push(
                        async move {
                            let result = self.run_one(&hook, invocation).await;
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
        let mut executed: Vec<Executed> = futures_util::future::join_all(tasks)
            .await
            .into_iter()
            .flatten()
            .collect();
        executed.sort_by_key(|done| done.hook.order);
        executed
    }

    async fn run_sequential(
        &self,
        hooks: Vec<Arc<Hook>>,
        invocation: &Arc<Invocation>,
    ) -> Vec<Executed> {
        let mut executed = Vec::with_capacity(hooks.len());
        let mut stopped_by: Option<String> = None;
        for hook in hooks {
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
                    let result = self.run_one(&hook, invocation).await;
                    Executed { hook, result }
                }
            };
            if stopped_by.is_none() && stops_the_rest(&invocation.spec, &done) {
                stopped_by = Some(done.hook.id.clone());
            }
            executed.push(done);
        }
        executed
    }

    /// Runs one sync hook (or reports why it is skipped), in a slot when it needs one.
    async fn run_one(&self, hook: &Arc<Hook>, invocation: &Arc<Invocation>) -> HookResult {
        if let Some(reason) = &hook.skip {
            return HookResult::Skipped(reason.clone());
        }
        HookResult::Ran(Box::new(
            run_in_slot(&self.handlers, hook, invocation, &self.policy).await,
        ))
    }

    /// Starts async hooks (none of them skipped); each is reported as started, or as
    /// skipped with the reason it could not be started.
    async fn start_async(
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
            tokio::spawn(async move {
                let run = run_in_slot(&handlers, &task_hook, &invocation, &policy).await;
                sessions.push_async(
                    &invocation.session_id,
                    async_result(&task_hook, &invocation, &run),
                );
                audit_async_run(audit.as_deref(), &task_hook, &invocation, run);
            });
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
        use tokio::io::AsyncWriteExt;
        let AsyncLauncher::Detached { program, args } = &self.launcher else {
            unreachable!("only detached launchers launch runners");
        };
        let job = AsyncJob {
            version: ASYNC_JOB_VERSION,
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
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // The caller's working directory, not the project's: relative `--settings`
            // files, and relative paths in inline `--settings` JSON, resolve against it,
            // and the runner must load the config the dispatch loaded.
            .spawn()
            .map_err(|e| format!("cannot start async runner `{shown}`: {e}"))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let written = stdin.write_all(&bytes).await;
        drop(stdin);
        written.map_err(|e| format!("cannot hand the async runner `{shown}` its hooks: {e}"))?;
        // The runner detaches itself (its own session). Waiting for it reaps it in a
        // long-lived caller; a one-shot caller exits first and its child is reparented.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        Ok(())
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

    /// After `cap` consecutive blocks of a capped event (Stop) in a session, the next block is overridden.
    /// The count is read, changed and written in one locked update of the session
    /// store, so concurrent Stops of a session never lose a block.
    fn apply_stop_cap(&self, invocation: &Invocation, outcome: &mut Outcome) {
        if !invocation.spec.caps_consecutive_blocks {
            return;
        }
        let cap = self.policy.settings.stop_block_cap;
        let blocked = outcome.decision == Decision::Block;
        let mut overridden = false;
        let updated = self
            .sessions
            .update_stop_blocks(&invocation.session_id, &mut |count| {
                overridden = false;
                if !blocked {
                    return 0;
                }
                let count = count.saturating_add(1);
                if cap != 0 && count > cap {
                    overridden = true;
                    0
                } else {
                    count
                }
            });
        if let Err(e) = updated {
            outcome.host_notice(format!(
                "the Stop loop cap could not be applied to this Stop: {e}"
            ));
            return;
        }
        if overridden {
            outcome.decision = Decision::None;
            let overridden = outcome.reason.take().unwrap_or_default();
            outcome.host_notice(format!(
                "Stop hooks blocked {cap} times in a row; this block is overridden and the agent may stop \
                 (cap: HOOKHOST_STOP_BLOCK_CAP or `stopBlockCap`, 0 = no cap). Overridden reason: {overridden}"
            ));
        }
    }
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
            if let Some(context) = answer
                .output
                .specific
                .get("additionalContext")
                .and_then(Value::as_str)
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
        Verdict::Failed(failure) => result.error = Some(cap_text(&failure.message)),
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
    /// A job that is not valid JSON of this version, or a bad input.
    pub async fn run_async_job(&self, job: &[u8]) -> Result<(), String> {
        let job: AsyncJob = serde_json::from_slice(job)
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
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_follows_the_fd_limit() {
        let slots = hook_concurrency();
        assert!((1..=MAX_CONCURRENT_HOOKS).contains(&slots), "{slots}");
    }

    #[test]
    fn differing_fields_name_what_changed() {
        let a = json!({"handler": {"command": "a"}, "id": "x", "trust": "t"});
        let b = json!({"handler": {"command": "b"}, "id": "x", "extra": 1});
        assert_eq!(differing_fields(&a, &b), ["extra", "handler", "trust"]);
        assert!(differing_fields(&a, &a).is_empty());
    }
}
