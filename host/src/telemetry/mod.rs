//! OpenTelemetry: every dispatch as a span (`hookhost.dispatch`) with one child span per
//! matched hook (`hookhost.hook`), and metrics of the hooks' runs, exported over OTLP/HTTP
//! (protobuf) by the official `opentelemetry-otlp` exporters.
//!
//! **Off unless an endpoint is decided** ([`decide`]): then a dispatch pays one `Option`
//! check. **Where it may go**: a managed `telemetry.endpoint` wins (the environment cannot
//! move or turn it off); else the standard `OTEL_EXPORTER_OTLP_*` variables, honoured only
//! for a loopback collector or one that the user's or managed `allowedHttpHookUrls`
//! admits. A repository can set any variable for the `hookhost dispatch` Claude Code runs
//! (its project `env` block), so the environment alone never sends anything off the
//! machine. **What goes**: event, session id, decision, tool name, and per hook its id,
//! source, type, status, exit code, duration, fuel, memory, tokens and failure class;
//! never the tool input, a reason, a hook's message or diagnostics (they may quote the
//! input). **Never blocking a dispatch**: spans go into a bounded queue
//! ([`QUEUE_BATCHES`]); when it is full they are dropped, counted, and the next outcome
//! says so. A one-shot process flushes for at most [`EXIT_FLUSH`] before it exits.
//!
//! The SDK's own processors, sampler and resource detectors are not used: each reads
//! `OTEL_*` variables behind `config::env`'s back (a repository could switch the export
//! off with `OTEL_TRACES_SAMPLER=always_off`). Spans are built here (`spans`) and handed
//! to the exporter by one worker (`export`), whose HTTP client sends exactly the
//! headers decided here.

mod export;
mod metrics;
mod spans;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::handlers::Invocation;
use crate::outcome::{Executed, Outcome};
use crate::policy::Settings;

pub use export::{flush_all, warn_on_failures};

/// Dispatches whose spans may wait for export in one process; beyond, they are dropped
/// (and counted).
pub const QUEUE_BATCHES: usize = 512;
/// At most this many hook spans per dispatch (the rest are counted on the dispatch span's
/// `hookhost.hooks.omitted`).
pub const MAX_HOOK_SPANS: usize = 128;
/// How long a one-shot `hookhost dispatch` waits for its export before it exits anyway.
pub const EXIT_FLUSH: Duration = Duration::from_secs(1);
/// How long one export may take unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The caller's W3C trace context (`TRACEPARENT`, `TRACESTATE`), as given: the parent of
/// the dispatch's span. Parsed (and ignored when malformed) at export.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    /// `traceparent`: `00-<trace id>-<span id>-<flags>`.
    pub traceparent: String,
    /// `tracestate`, if any.
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// This process's `TRACEPARENT` and `TRACESTATE` (`None` without a `TRACEPARENT`).
    pub fn from_env() -> Option<TraceContext> {
        let text = |name| {
            crate::config::env::var(name)
                .and_then(|v| v.into_string().ok())
                .filter(|v| v.len() <= MAX_TRACE_CONTEXT)
        };
        Some(TraceContext {
            traceparent: text("TRACEPARENT")?,
            tracestate: text("TRACESTATE"),
        })
    }
}

/// The longest `traceparent` or `tracestate` taken (W3C: 55 and 512 characters).
pub const MAX_TRACE_CONTEXT: usize = 4096;

/// Where and how spans and metrics are exported: what [`decide`] made of the policy and
/// the environment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Config {
    /// The traces URL.
    pub traces: String,
    /// The metrics URL.
    pub metrics: String,
    /// The headers of every export.
    pub headers: BTreeMap<String, String>,
    /// `service.name` and the other resource attributes.
    pub resource: BTreeMap<String, String>,
    /// How long one export may take.
    pub timeout: Duration,
}

/// The export [`Config`] of a host, or `None` (off), with notices for what was ignored:
/// managed `telemetry` wins; else the `OTEL_*` variables (`env`), whose endpoints are
/// honoured only for a loopback host or one `key_allowed_http_hook_urls` (the user's and
/// managed `allowedHttpHookUrls`) admits, and not at all with `OTEL_SDK_DISABLED=true`.
pub fn decide(
    settings: &Settings,
    env: &crate::config::env::Otel,
) -> (Option<Config>, Vec<String>) {
    let mut notices = Vec::new();
    let mut headers: BTreeMap<String, String> = env.headers.iter().cloned().collect();
    let (traces, metrics) = match &settings.telemetry {
        Some(managed) => {
            // Managed policy names the collector and what it is sent: headers from the
            // environment (which a repository can set) could choose a tenant of that
            // collector, or hand it the user's credentials for another (red team, stop 37).
            if !headers.is_empty() {
                notices.push(
                    "telemetry: OTEL_EXPORTER_OTLP_HEADERS is not sent: managed policy sets                      the collector (`telemetry`), and only its `telemetry.headers` go to it"
                        .to_string(),
                );
            }
            headers = managed.headers.clone();
            let base = managed.endpoint.trim_end_matches('/');
            (format!("{base}/v1/traces"), format!("{base}/v1/metrics"))
        }
        None => {
            if env.disabled {
                return (None, notices);
            }
            let mut judged = |found: &Option<(String, &'static str)>| {
                let (url, var) = found.as_ref()?;
                match honoured(url, settings) {
                    Ok(()) => Some(url.clone()),
                    Err(why) => {
                        notices.push(format!(
                            "telemetry: {var} `{}` is not used: {why}",
                            crate::text::escape(url)
                        ));
                        None
                    }
                }
            };
            let (traces, metrics) = (judged(&env.traces), judged(&env.metrics));
            if traces.is_none() && metrics.is_none() {
                return (None, notices);
            }
            if let Some(why) = headers_withheld(env) {
                notices.push(why);
                headers.clear();
            }
            // One signal's URL alone: the other is not exported (an empty URL).
            (traces.unwrap_or_default(), metrics.unwrap_or_default())
        }
    };
    let mut resource = BTreeMap::new();
    resource.extend(env.resource.iter().cloned());
    resource.insert(
        "service.name".to_string(),
        env.service_name
            .clone()
            .unwrap_or_else(|| "hookhost".into()),
    );
    resource.insert(
        "service.version".to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    );
    let config = Config {
        traces,
        metrics,
        headers,
        resource,
        timeout: env
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
    };
    (Some(config), notices)
}

/// Why `OTEL_EXPORTER_OTLP_HEADERS` (often a collector's credentials) is not sent, if it is
/// not: the environment cannot say who set each variable (a repository can set any of them
/// through Claude Code's project `env` block), so the headers follow the endpoints only
/// when every endpoint variable that is set names one origin. A per-signal endpoint that
/// points elsewhere than the others keeps its export but loses the headers, rather than
/// receiving credentials meant for another collector. Managed `telemetry.headers` are not
/// judged here: managed policy names its own endpoint.
fn headers_withheld(env: &crate::config::env::Otel) -> Option<String> {
    if env.headers.is_empty() {
        return None;
    }
    let origin = |url: &str| url::Url::parse(url).ok().map(|u| u.origin());
    let mut origins = env.endpoints.iter().map(|(url, _)| origin(url));
    let first = origins.next()?;
    let agree = first.as_ref().is_some_and(|o| o.is_tuple()) && origins.all(|o| o == first);
    (!agree).then(|| {
        let named: Vec<String> = env
            .endpoints
            .iter()
            .map(|(url, var)| format!("{var}=`{}`", crate::text::escape(url)))
            .collect();
        format!(
            "telemetry: OTEL_EXPORTER_OTLP_HEADERS is not sent: the endpoint variables do not \
             name one origin ({}), so the headers could reach a collector they were not meant \
             for; set one endpoint, or have managed policy set `telemetry.headers`",
            named.join(", ")
        )
    })
}

/// Whether an endpoint from the environment may be sent to: a valid http(s) URL whose
/// host is loopback, or that the user's or managed `allowedHttpHookUrls` admits.
fn honoured(url: &str, settings: &Settings) -> Result<(), String> {
    let parsed = crate::policy::urls::parse_target(url)?;
    if crate::policy::urls::is_loopback(&parsed) {
        return Ok(());
    }
    match &settings.key_allowed_http_hook_urls {
        Some(list) if list.allows(url) => Ok(()),
        _ => Err(
            "an endpoint from the environment is honoured only for a loopback collector or \
             one that `allowedHttpHookUrls` of your own hooks.json or managed policy admits \
             (a repository can set it through Claude Code's project `env` block); managed \
             policy may set `telemetry.endpoint`"
                .into(),
        ),
    }
}

/// When each hook of a dispatch started (only kept while telemetry is on).
#[derive(Debug, Default)]
pub struct Timeline {
    starts: Mutex<Vec<(usize, SystemTime)>>,
}

impl Timeline {
    /// Notes that `hook` starts now.
    pub fn start(&self, hook: &Arc<crate::policy::Hook>) {
        let mut starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        starts.push((Arc::as_ptr(hook) as usize, SystemTime::now()));
    }

    /// When `hook` started, if it was noted.
    fn started(&self, hook: &Arc<crate::policy::Hook>) -> Option<SystemTime> {
        let starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        let key = Arc::as_ptr(hook) as usize;
        starts
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, t)| *t)
    }
}

/// One dispatch, as telemetry sees it once its outcome is merged.
pub struct Dispatched<'a> {
    /// The event's invocation.
    pub invocation: &'a Invocation,
    /// The merged outcome.
    pub outcome: &'a Outcome,
    /// The matched hooks, in the outcome's order.
    pub executed: &'a [Executed],
    /// When the dispatch started.
    pub started: SystemTime,
    /// When each hook started.
    pub timeline: &'a Timeline,
    /// The caller's trace context.
    pub parent: Option<&'a TraceContext>,
}

/// A running export pipeline (shared by every host of the process with the same
/// [`Config`]).
#[derive(Clone)]
pub struct Telemetry {
    pipeline: Arc<export::Pipeline>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("traces", &self.pipeline.config.traces)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// The pipeline of `config`: this process's, started on first use (the client `http`
    /// makes sends the exports). `None` when it cannot start (no thread); logged.
    pub fn for_config(
        config: &Config,
        http: impl FnOnce() -> reqwest::Client,
    ) -> Option<Telemetry> {
        export::pipeline(config, http).map(|pipeline| Telemetry { pipeline })
    }

    /// Records a dispatch: its spans into the queue (never waiting), its hooks into the
    /// metrics. Returns a notice when spans were dropped since the last one said so.
    pub fn record(&self, dispatched: &Dispatched<'_>) -> Option<String> {
        if let Some(spans) = spans::of(dispatched) {
            self.pipeline.enqueue(spans);
        }
        self.pipeline.metrics.record(dispatched);
        self.pipeline.drop_notice()
    }
}

#[cfg(test)]
mod tests;
