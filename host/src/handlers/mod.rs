//! Stage 5 of the pipeline: the handler runners.
//!
//! Each runner takes one hook and one invocation and returns a [`HandlerRun`] whose
//! [`Verdict`] keeps apart "the hook answered" ([`Answer`]) and "the hook failed"
//! ([`Failure`]: could not start, timed out, exited oddly, wrote invalid output, trapped,
//! hit a limit). Runners never panic and never block the action themselves: what a
//! verdict means for the event is decided by the next stage, the outcome (merge rules).

pub mod agent;
pub mod caller;
mod capture;
pub mod command;
mod context_env;
pub mod descendants;
mod exit_code;
pub mod function;
pub mod http;
pub mod mcp;
pub mod model;
pub mod output;
pub mod prompt;
pub mod wasm;

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::Serialize;

pub use crate::event::Invocation;
pub use output::HookOutput;

use crate::policy::{HandlerSpec, Hook, Policy, Settings};

/// Why a hook failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    /// The process, plugin or connection could not start.
    CannotStart,
    /// The deadline passed.
    Timeout,
    /// The process exited with a code other than 0 or 2 and no valid JSON.
    ExitCode,
    /// The output did not fit the schema.
    InvalidOutput,
    /// The HTTP request failed or got a non-2xx status.
    Http,
    /// The plugin trapped.
    Trap,
    /// The plugin returned an error (`Err` from its `handle`).
    PluginError,
    /// The plugin hit a resource limit (fuel, memory).
    Limit,
    /// Policy refused to run it (URL not allowed, a plugin file that is not a small
    /// regular file).
    Refused,
    /// The plugin file is not one policy admits: its digest is not the hook's `sha256`
    /// pin, or managed policy's allowlist refuses it (replaced after it was admitted, or
    /// never admitted). Checked at every load, so a plugin overwritten under a config that
    /// did not change is caught at its next event; it fails closed
    /// ([`FailureKind::fails_closed`]).
    NotAdmitted,
}

impl FailureKind {
    /// Whether a failure of this kind blocks on an event that honours `onFailure` (a sync
    /// hook) whatever the hook's `onFailure` says: a guard that cannot be run as policy
    /// admitted it is no guard, and the agent is not told to go ahead.
    pub fn fails_closed(self) -> bool {
        matches!(self, FailureKind::NotAdmitted)
    }
}

/// A hook that did not produce an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// What went wrong.
    pub kind: FailureKind,
    /// A message for the user, naming the hook's command, URL or plugin.
    pub message: String,
}

/// A hook's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The parsed JSON output (default when there was none).
    pub output: HookOutput,
    /// A blocking error (exit 2): the reason.
    pub blocking_error: Option<String>,
    /// Plain-text stdout (context on some events).
    pub plain_text: Option<String>,
    /// What a plugin said through `extras-json`, unchecked: the merge admits each key by
    /// the event's allow-list ([`crate::event::EventSpec::admit`], channel `Extras`).
    pub extras: serde_json::Map<String, serde_json::Value>,
}

/// What a hook produced.
// An answer is the common case and is moved once per hook; boxing it would allocate on
// every run to save a few hundred bytes on the rarer failure.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It answered.
    Answer(Answer),
    /// It failed.
    Failed(Failure),
}

impl Verdict {
    /// A failure verdict.
    pub fn failed(kind: FailureKind, message: impl Into<String>) -> Verdict {
        Verdict::Failed(Failure {
            kind,
            message: message.into(),
        })
    }
}

/// Resource use of one run, where the handler type measures it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Fuel consumed (wasm).
    pub fuel: Option<u64>,
    /// Peak linear memory in bytes (wasm).
    pub memory_bytes: Option<u64>,
    /// Model tokens, input and output (prompt and agent hooks; wasm hooks whose plugin
    /// holds a model grant).
    pub tokens: Option<u64>,
    /// Model turns taken (agent hooks), or model calls answered (wasm hooks whose plugin
    /// holds a model grant).
    pub turns: Option<u32>,
    /// The sha256 of the plugin that ran (wasm hooks, once it was loaded and admitted):
    /// what a decision receipt names.
    pub plugin_sha256: Option<[u8; 32]>,
}

/// The result of running one hook once.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerRun {
    /// What it produced.
    pub verdict: Verdict,
    /// The process exit code (command hooks) or HTTP status (HTTP hooks).
    pub exit_code: Option<i32>,
    /// Wall-clock time.
    pub duration: Duration,
    /// Resource use.
    pub usage: Usage,
    /// Captured stderr or guest log, capped (for reports).
    pub diagnostics: Option<String>,
}

impl HandlerRun {
    /// A run that failed before it started.
    pub fn failed(kind: FailureKind, message: impl Into<String>, started: Instant) -> HandlerRun {
        HandlerRun {
            verdict: Verdict::failed(kind, message),
            exit_code: None,
            duration: started.elapsed(),
            usage: Usage::default(),
            diagnostics: None,
        }
    }
}

/// The run of a hook that could not start because `error` (an OS error) stopped its
/// process, connection or instance from being created: [`FailureKind::CannotStart`],
/// with the OS error and, for a resource the host ran out of (`EAGAIN`: processes,
/// `RLIMIT_NPROC`; `EMFILE`/`ENFILE`: descriptors, `RLIMIT_NOFILE`; `ENOMEM`: memory),
/// which one. Command and HTTP hooks report a failed start through here, at once (never
/// retried until the hook's timeout); wasm hooks report theirs (no thread, no engine, an
/// instance not created) as `CannotStart` too, and [`Handlers::run`] names any panic;
/// `onFailure: "block"` turns each into a block.
pub fn start_failed(what: &str, error: &std::io::Error, started: Instant) -> HandlerRun {
    let short = match error.raw_os_error() {
        Some(libc::EAGAIN) => " (out of processes: RLIMIT_NPROC or the system's limit)",
        Some(libc::EMFILE) => " (out of file descriptors: RLIMIT_NOFILE)",
        Some(libc::ENFILE) => " (the system is out of file descriptors)",
        Some(libc::ENOMEM) => " (out of memory)",
        _ => "",
    };
    HandlerRun::failed(
        FailureKind::CannotStart,
        format!("cannot start {what}: {error}{short}"),
        started,
    )
}

/// Whether `error` (or an error it wraps) is the OS refusing to create a process,
/// descriptor or socket for want of a resource: `EAGAIN`, `EMFILE`, `ENFILE`, `ENOMEM`,
/// `ENOBUFS`. Such a hook could not start; it did not fail.
pub fn out_of_resources<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a std::io::Error> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.raw_os_error(),
                Some(libc::EAGAIN | libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS)
            )
        {
            return Some(io);
        }
        next = e.source();
    }
    None
}

/// Something that can run wasm hooks; implemented by the sandbox.
pub trait WasmRunner: Send + Sync + std::fmt::Debug {
    /// Runs one wasm hook to completion. The future is polled by the dispatching task
    /// and must not block the thread for long: the sandbox runs wasm on a fiber that
    /// yields at every epoch tick.
    fn run<'a>(
        &'a self,
        hook: &'a Hook,
        invocation: &'a Invocation,
        policy: &'a Policy,
    ) -> BoxFuture<'a, HandlerRun>;

    /// Runs one wasm hook that grants its plugin the model (`capabilities.model`), with
    /// `model`: the hook's provider, resolved through [`model::resolve`] (or why it
    /// cannot be). A runner that offers plugins no model ignores it (the default).
    fn run_with_model<'a>(
        &'a self,
        hook: &'a Hook,
        invocation: &'a Invocation,
        policy: &'a Policy,
        model: Result<model::Resolved, model::ModelError>,
    ) -> BoxFuture<'a, HandlerRun> {
        drop(model);
        self.run(hook, invocation, policy)
    }
}

/// The shared state of the runners: one HTTP client, the wasm sandbox.
#[derive(Clone)]
pub struct Handlers {
    /// Built on the first HTTP hook: it loads the system's trusted certificates, which a
    /// one-shot `hookhost dispatch` without HTTP hooks should not pay for.
    http: Arc<OnceLock<reqwest::Client>>,
    wasm: Option<Arc<dyn WasmRunner>>,
    model: Option<Arc<dyn model::ModelClient>>,
    mcp: Arc<mcp::McpClients>,
    mcp_provider: Option<Arc<dyn mcp::McpProvider>>,
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handlers")
            .field("wasm", &self.wasm.is_some())
            .field("model", &self.model.is_some())
            .field("mcp_provider", &self.mcp_provider.is_some())
            .finish()
    }
}

impl Handlers {
    /// Runners for command and HTTP hooks, and wasm hooks when `wasm` is given.
    pub fn new(wasm: Option<Arc<dyn WasmRunner>>) -> Handlers {
        Handlers {
            http: Arc::default(),
            wasm,
            model: None,
            mcp: mcp::McpClients::shared(),
            mcp_provider: None,
        }
    }

    /// Answers model hooks whose provider is the embedder's with `client` (and those that
    /// name none when no `modelProvider` is set).
    pub fn with_model(mut self, client: Option<Arc<dyn model::ModelClient>>) -> Handlers {
        self.model = client;
        self
    }

    /// Answers `mcp_tool` hooks whose server the settings' `mcpServers` do not define
    /// with the embedder's servers that `provider` has.
    pub fn with_mcp_provider(mut self, provider: Option<Arc<dyn mcp::McpProvider>>) -> Handlers {
        self.mcp_provider = provider;
        self
    }

    /// The model a `prompt` or `agent` hook asks: through [`model::resolve`], the one
    /// check every model request passes (provider, key, URL allowlist, ceilings).
    fn model_for(
        &self,
        provider: Option<crate::config::schema::ModelProviderKind>,
        model: Option<&str>,
        hook: &Hook,
        policy: &Policy,
    ) -> Result<model::Resolved, model::ModelError> {
        let wanted = model::Wanted {
            provider,
            model,
            managed: hook.origin.kind == crate::config::SourceKind::Managed,
        };
        let settings = &policy.settings;
        model::resolve(
            wanted,
            settings,
            || self.http_client(settings).clone(),
            self.model.as_ref(),
        )
    }

    /// The HTTP client of HTTP hooks: no redirects, no proxy, and TLS with the Mozilla
    /// roots and the system's trusted certificates read from the system's fixed places.
    /// Nothing of it comes from the environment (a repository can set variables for
    /// `hookhost dispatch`): `HTTPS_PROXY`, `ALL_PROXY`, `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` are ignored ([`crate::config::env`]).
    /// Managed policy's `httpHookCaFile` adds certificates (this host's policy: a
    /// `Handlers` serves one host).
    fn http_client(&self, settings: &Settings) -> &reqwest::Client {
        self.http.get_or_init(|| http_client(settings))
    }

    /// Runs one hook. Never panics; every problem is a [`Verdict::Failed`] with a
    /// message. **The chokepoint every handler's start passes**: whatever a handler kind
    /// does, a panic (a runtime that could not spawn a thread, a client that could not be
    /// built) becomes a named failure of the hook, and a failure without a message gets
    /// one, so that no hook is ever reported as nothing; `onFailure: "block"` then turns
    /// it into a block (`outcome::merge`).
    pub async fn run(&self, hook: &Hook, invocation: &Invocation, policy: &Policy) -> HandlerRun {
        let started = Instant::now();
        let kind = hook.handler.type_name();
        let run = AssertUnwindSafe(self.run_kind(hook, invocation, policy))
            .catch_unwind()
            .await;
        let mut run = run.unwrap_or_else(|panic| {
            let what = crate::text::panic_message(panic.as_ref());
            let failure = match &hook.handler {
                HandlerSpec::Wasm(_) => FailureKind::Trap,
                _ => FailureKind::CannotStart,
            };
            HandlerRun::failed(
                failure,
                output::cap_text(&format!("the {kind} handler crashed: {what}")),
                started,
            )
        });
        if let Verdict::Failed(failure) = &mut run.verdict
            && failure.message.trim().is_empty()
        {
            failure.message = format!(
                "the {kind} hook failed ({:?}) without a message",
                failure.kind
            );
        }
        run
    }

    /// [`Handlers::run`] by handler kind.
    async fn run_kind(&self, hook: &Hook, invocation: &Invocation, policy: &Policy) -> HandlerRun {
        let started = Instant::now();
        match &hook.handler {
            HandlerSpec::Command(spec) => {
                command::run(spec, hook, invocation, &policy.settings).await
            }
            HandlerSpec::Http(spec) => {
                http::run(
                    self.http_client(&policy.settings),
                    spec,
                    hook,
                    invocation,
                    &policy.settings,
                )
                .await
            }
            HandlerSpec::Wasm(spec) => {
                let Some(wasm) = &self.wasm else {
                    return HandlerRun::failed(
                        FailureKind::CannotStart,
                        "this host runs no wasm hooks",
                        started,
                    );
                };
                if spec.capabilities.model.is_none() {
                    return wasm.run(hook, invocation, policy).await;
                }
                // The plugin's model passes the one check of every model request, as a
                // prompt hook's; the sandbox applies the grant's budget beneath it.
                let model = self.model_for(spec.provider, spec.model.as_deref(), hook, policy);
                wasm.run_with_model(hook, invocation, policy, model).await
            }
            HandlerSpec::Function(spec) => function::run(spec, hook, invocation).await,
            // A `prompt` or `agent` hook on a refuse-only event counts as a block
            // (Claude Code 2.1.332, PreSkillShellCommand).
            HandlerSpec::Prompt(_) | HandlerSpec::Agent(_) if invocation.spec.refuses_only() => {
                HandlerRun {
                    verdict: Verdict::Answer(Answer {
                        blocking_error: Some(format!(
                            "{} hooks don't run on {}; counted as a block",
                            hook.handler.type_name(),
                            invocation.spec.name
                        )),
                        ..Answer::default()
                    }),
                    exit_code: None,
                    duration: started.elapsed(),
                    usage: Usage::default(),
                    diagnostics: None,
                }
            }
            HandlerSpec::Prompt(spec) => {
                let resolved = self.model_for(spec.provider, spec.model.as_deref(), hook, policy);
                prompt::run(spec, hook, invocation, resolved).await
            }
            HandlerSpec::Agent(spec) => {
                let resolved = self.model_for(spec.provider, spec.model.as_deref(), hook, policy);
                agent::run(spec, hook, invocation, resolved, &policy.host_places).await
            }
            // Never run (it is skipped); refused should it reach here.
            HandlerSpec::Unbuilt(spec) => HandlerRun::failed(
                FailureKind::Refused,
                format!("the hook cannot be built: {}", spec.error),
                started,
            ),
            HandlerSpec::McpTool(spec) => {
                let http = self.http_client(&policy.settings);
                let embedder = self.mcp_provider.as_ref();
                mcp::run(
                    &self.mcp,
                    embedder,
                    http,
                    spec,
                    hook,
                    invocation,
                    &policy.settings,
                )
                .await
            }
        }
    }
}

/// The system's trusted certificates, from its certificate directories at their fixed
/// places (`/etc/ssl/certs`, `/etc/pki/tls/certs`, …): unlike
/// `rustls_native_certs::load_native_certs`, never from `SSL_CERT_FILE` or `SSL_CERT_DIR`.
pub(crate) fn system_roots() -> Vec<reqwest::Certificate> {
    openssl_probe::candidate_cert_dirs()
        .flat_map(|dir| rustls_native_certs::load_certs_from_paths(None, Some(dir)).certs)
        .filter_map(|der| reqwest::Certificate::from_der(&der).ok())
        .collect()
}

/// The HTTP client of HTTP hooks (and of telemetry's exports): no redirects, no proxy,
/// and TLS with the Mozilla roots, the system's trusted certificates read from the
/// system's fixed places, and managed policy's `httpHookCaFile`. Nothing of it comes from
/// the environment.
pub fn http_client(settings: &Settings) -> reqwest::Client {
    let builder = || {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .tls_built_in_native_certs(false)
            .tls_built_in_webpki_certs(true)
    };
    let managed = settings
        .http_hook_ca_file
        .as_deref()
        .map_or_else(Vec::new, |file| {
            // Managed policy's file: read as managed policy is (the one reader,
            // not writable by others, regular, capped at 1 MiB).
            let how = crate::config::file::Open::read(1 << 20).rule(
                crate::config::file::Rule::Believed(crate::config::file::Owners::MeOrRoot),
            );
            crate::config::file::read_checked(file, &how)
                .ok()
                .map(|(pem, _)| pem)
                .and_then(|pem| reqwest::Certificate::from_pem_bundle(&pem).ok())
                .unwrap_or_else(|| {
                    tracing::warn!(
                        "managed httpHookCaFile {}: no certificates read",
                        file.display()
                    );
                    Vec::new()
                })
        });
    let with = |certs: &[reqwest::Certificate]| {
        certs
            .iter()
            .fold(builder(), |b, cert| b.add_root_certificate(cert.clone()))
            .build()
    };
    // A system certificate rustls cannot take fails the build: then managed
    // policy's and the Mozilla roots alone.
    let mut all = system_roots();
    all.extend(managed.iter().cloned());
    with(&all)
        .or_else(|_| with(&managed))
        .or_else(|_| builder().build())
        .expect("an HTTP client without system certificates always builds")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that wraps another, as reqwest's and hyper's do.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error (Connect)")
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn running_out_is_found_anywhere_in_the_chain_and_only_running_out() {
        for errno in [
            libc::EAGAIN,
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOMEM,
            libc::ENOBUFS,
        ] {
            let error = Wrapped(std::io::Error::from_raw_os_error(errno));
            assert!(out_of_resources(&error).is_some(), "{errno}");
            let run = start_failed(
                "`x`",
                &std::io::Error::from_raw_os_error(errno),
                Instant::now(),
            );
            let Verdict::Failed(failure) = run.verdict else {
                panic!("a start failure is a failure")
            };
            assert_eq!(failure.kind, FailureKind::CannotStart);
            assert!(failure.message.contains("os error"), "{}", failure.message);
        }
        for errno in [libc::ECONNREFUSED, libc::ENOENT, libc::EACCES] {
            let error = Wrapped(std::io::Error::from_raw_os_error(errno));
            assert!(out_of_resources(&error).is_none(), "{errno}");
        }
    }
}
