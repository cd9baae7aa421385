//! The limits of one call: arming a store with fuel and a deadline, bounding the whole
//! call (host calls included) by that deadline, and after the call, usage, diagnostics
//! and a failure message that names what stopped it: the limit and its value, or the
//! innermost cause of the error.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::component::ResourceTableError;
use wasmtime::{Store, Trap};

use super::OUTPUT_CAP;
use super::bindings;
use super::held::entry_bytes;
use super::hostcalls::{FUEL_PER_BYTE, FUEL_PER_HOST_CALL, HttpNotGranted};
use super::model_budget::PluginModel;
use super::state::{MAX_TABLE_ELEMENTS, Refused, State, resource_table_cap};
use super::ticker::EpochTicker;
use crate::handlers::output::cap_text;
use crate::handlers::{FailureKind, Usage};

/// Stack available to wasm code.
pub(super) const MAX_WASM_STACK: usize = 512 * 1024;

/// How long after the deadline the outer bound of a call ends it when nothing inside
/// did: a call blocked in a host call that the epoch deadline cannot interrupt.
const OUTER_GRACE: Duration = Duration::from_millis(100);

/// The limits of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Limits {
    pub(super) fuel: u64,
    pub(super) memory_bytes: u64,
    pub(super) timeout: Duration,
}

/// What one call may spend: its [`Limits`], what is left of them for this event
/// ([`EventBudget`]), and the model's tokens when the hook's `capabilities.model` grant
/// is live ([`super::model_call`]). They are put into the store before each call
/// ([`Allowance::arm`]), a kept session instance's included.
pub(super) struct Allowance {
    pub(super) limits: Limits,
    pub(super) event: EventBudget,
    pub(super) model: Option<Arc<PluginModel>>,
}

impl Allowance {
    /// Arms `store` for the next call: the fuel the event has left, its deadline, and the
    /// model budget (none when the grant is not live, whatever an earlier call of a kept
    /// instance had).
    pub(super) fn arm(&self, store: &mut Store<State>) -> Result<(), String> {
        self.limits.arm_for(store, Some(&self.event))?;
        store.data_mut().model = self.model.clone();
        Ok(())
    }
}

/// One hook's budget for one event. Everything its plugin runs for the event draws on
/// it: `describe` when the load runs it, the instance's start functions and the call. So
/// no step gets a budget of its own: one fuel limit for all of them, and one deadline,
/// the hook's timeout counted from the hook's start, which waiting (for the compile, for
/// the session's instance) counts against too.
#[derive(Debug)]
pub(super) struct EventBudget {
    /// When the hook's time is up.
    pub(super) deadline: tokio::time::Instant,
    /// Fuel spent before the call (by `describe`).
    spent: AtomicU64,
}

impl EventBudget {
    /// The budget of a hook that started at `started`, under `limits`.
    pub(super) fn new(started: std::time::Instant, limits: &Limits) -> EventBudget {
        let started = tokio::time::Instant::from_std(started);
        EventBudget {
            // A timeout past what an instant can hold is no deadline in practice.
            deadline: started
                .checked_add(limits.timeout)
                .unwrap_or_else(|| started + FAR_FUTURE),
            spent: AtomicU64::new(0),
        }
    }

    /// The fuel left for what runs next.
    pub(super) fn fuel_left(&self, limits: &Limits) -> u64 {
        limits
            .fuel
            .saturating_sub(self.spent.load(Ordering::Acquire))
    }

    /// Takes `fuel` from the budget.
    pub(super) fn spend(&self, fuel: u64) {
        self.spent.fetch_add(fuel, Ordering::AcqRel);
    }
}

/// A deadline that never comes (a year).
const FAR_FUTURE: Duration = Duration::from_secs(365 * 24 * 3600);

/// The call was still running (blocked in a host call) when its deadline passed.
#[derive(Debug)]
pub(super) struct DeadlinePassed;

impl std::fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the call's deadline passed while it waited in a host call")
    }
}

impl std::error::Error for DeadlinePassed {}

impl Limits {
    /// Sets fuel and the epoch deadline for the next call (all the fuel, the timeout from
    /// now), and clears per-call records.
    pub(super) fn arm(&self, store: &mut Store<State>) -> Result<(), String> {
        let now = tokio::time::Instant::now();
        let deadline = now.checked_add(self.timeout).unwrap_or(now + FAR_FUTURE);
        self.arm_until(store, self.fuel, deadline)
    }

    /// Arms `store` on what is left of `event`'s budget (or, outside an event, as
    /// [`Limits::arm`]); the fuel it has.
    pub(super) fn arm_for(
        &self,
        store: &mut Store<State>,
        event: Option<&EventBudget>,
    ) -> Result<u64, String> {
        let Some(event) = event else {
            self.arm(store)?;
            return Ok(self.fuel);
        };
        let fuel = event.fuel_left(self);
        self.arm_until(store, fuel, event.deadline)?;
        Ok(fuel)
    }

    /// Sets `fuel` and the epoch `deadline` for the next call, and clears per-call
    /// records.
    fn arm_until(
        &self,
        store: &mut Store<State>,
        fuel: u64,
        deadline: tokio::time::Instant,
    ) -> Result<(), String> {
        store
            .set_fuel(fuel)
            .map_err(|e| format!("cannot set fuel: {e}"))?;
        // The next tick runs the store's epoch callback, which yields or interrupts.
        store.set_epoch_deadline(1);
        let data = store.data_mut();
        data.limiter.refused = None;
        data.host_fuel = 0;
        data.host_calls = 0;
        data.git_dirs.clear();
        data.http_policy.deadline = Some(deadline);
        *data
            .http_policy
            .denied
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Default::default();
        Ok(())
    }

    /// Runs `call` (an instantiation or a call of the armed store) to its end or to the
    /// store's deadline, whichever comes first: what runs in wasm is interrupted by the
    /// epoch deadline, a sleep or an HTTP request is cut off, and anything else a host
    /// call waits for (a file read off the thread, a body that never comes) ends here.
    /// The epoch `ticker` ticks at its full rate for the whole call.
    pub(super) async fn bound<T>(
        ticker: &EpochTicker,
        deadline: Option<tokio::time::Instant>,
        call: impl Future<Output = wasmtime::Result<T>>,
    ) -> wasmtime::Result<T> {
        let _running = ticker.running();
        let Some(deadline) = deadline else {
            return call.await;
        };
        match tokio::time::timeout_at(deadline + OUTER_GRACE, call).await {
            Ok(result) => result,
            Err(_) => Err(wasmtime::Error::new(DeadlinePassed)),
        }
    }
}

/// What one call produced, before it becomes a verdict.
pub(super) struct CallOutcome {
    pub(super) result: Result<bindings::Response, (FailureKind, String)>,
    pub(super) usage: Usage,
    pub(super) diagnostics: Option<String>,
}

/// The first error of type `E` in the chain of `error`.
fn find<E: std::error::Error + 'static>(error: &wasmtime::Error) -> Option<&E> {
    error.chain().find_map(|e| e.downcast_ref::<E>())
}

/// Whether the call ended on the wall clock (then the fuel counter is stale).
fn timed_out(error: &wasmtime::Error) -> bool {
    error.downcast_ref::<Trap>() == Some(&Trap::Interrupt)
        || find::<DeadlinePassed>(error).is_some()
}

/// Which step of a run an error ended: creating the instance, or calling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The instance was being created: an error that is no trap, limit or deadline means
    /// the plugin could not start (the instance pool is exhausted, memory could not be
    /// mapped), [`FailureKind::CannotStart`].
    Instantiate,
    /// The instance was created; its `handle` was being called.
    Call,
}

/// Collects usage and diagnostics after a call and classifies its error.
pub(super) fn finish(
    store: &mut Store<State>,
    limits: &Limits,
    phase: Phase,
    result: wasmtime::Result<Result<bindings::Response, String>>,
) -> CallOutcome {
    // After an epoch interrupt the fuel counter is stale; don't report it.
    let fuel = if matches!(&result, Err(e) if timed_out(e)) {
        None
    } else {
        store
            .get_fuel()
            .ok()
            .map(|left| limits.fuel.saturating_sub(left))
    };
    // The call's model (a live grant): what it spent, and a line of diagnostics. Taken,
    // so that a kept instance holds no model between events.
    let model = store.data_mut().model.take();
    let usage = Usage {
        fuel,
        memory_bytes: Some(store.data().limiter.peak as u64),
        tokens: model.as_ref().map(|m| m.tokens_used()),
        turns: model.as_ref().map(|m| m.answered()),
        plugin_sha256: None,
    };
    let refused = store.data().limiter.refused;
    let mut notes: Vec<String> = model.iter().map(|m| m.summary()).collect();
    let result = match result {
        Ok(Ok(response)) => {
            // The guest survived a refused growth: say so, since it may have answered
            // with less than it meant to.
            if let Some(refused) = refused {
                let what = match refused {
                    Refused::Memory(_) | Refused::Table(_) => "growth",
                    Refused::Descriptor(_) | Refused::Held(_) => "request",
                };
                notes.push(format!(
                    "limit: {}; the {what} was refused and the plugin carried on",
                    refused_text(limits, refused)
                ));
            }
            Ok(response)
        }
        Ok(Err(message)) => match refused {
            Some(refused) => Err((
                FailureKind::Limit,
                format!(
                    "{}; the plugin returned: {}",
                    refused_text(limits, refused),
                    cap_text(&message)
                ),
            )),
            None => Err((
                FailureKind::PluginError,
                format!("returned an error: {}", cap_text(&message)),
            )),
        },
        Err(e) => Err(classify_error(&e, store, limits, phase)),
    };
    let diagnostics = collect_diagnostics(store, notes);
    CallOutcome {
        result,
        usage,
        diagnostics,
    }
}

/// What a refused growth was, naming the limit and its value.
fn refused_text(limits: &Limits, refused: Refused) -> String {
    match refused {
        Refused::Memory(asked) => format!(
            "memory limit of {} bytes ({} MiB) reached: the plugin asked to grow its memory to {asked} bytes",
            limits.memory_bytes,
            limits.memory_bytes >> 20
        ),
        Refused::Table(asked) => format!(
            "table limit of {MAX_TABLE_ELEMENTS} elements reached: the plugin asked to grow its tables to {asked} elements"
        ),
        Refused::Descriptor(refused) => {
            format!("{refused}: the plugin asked to open one more file")
        }
        Refused::Held(asked) => format!(
            "memory limit of {} bytes ({} MiB) reached: linear memory and the host memory its resources hold \
             (directory listings, HTTP header maps and bodies) would have been {asked} bytes",
            limits.memory_bytes,
            limits.memory_bytes >> 20
        ),
    }
}

/// Maps a wasmtime error to a failure kind and a message naming the limit hit, or the
/// innermost cause of the error.
pub(super) fn classify_error(
    error: &wasmtime::Error,
    store: &mut Store<State>,
    limits: &Limits,
    phase: Phase,
) -> (FailureKind, String) {
    let trap = error.downcast_ref::<Trap>().copied();
    let (stdout_over, stderr_over) = {
        let data = store.data();
        (data.stdout.take_overflow(), data.stderr.take_overflow())
    };
    if stdout_over || stderr_over {
        let which = if stdout_over { "stdout" } else { "stderr" };
        return (
            FailureKind::Limit,
            format!("{which} exceeded its cap of {OUTPUT_CAP} bytes"),
        );
    }
    let timeout = || timeout_message(limits);
    if find::<DeadlinePassed>(error).is_some() {
        return (
            FailureKind::Timeout,
            format!("{}, waiting in a host call", timeout()),
        );
    }
    match trap {
        Some(Trap::OutOfFuel) => {
            let (host, calls) = (store.data().host_fuel, store.data().host_calls);
            let detail = if host > 0 {
                format!(
                    " ({host} of them for host calls: {calls} calls at {FUEL_PER_HOST_CALL} units \
                     each, and {FUEL_PER_BYTE} unit per byte they move)"
                )
            } else {
                String::new()
            };
            return (
                FailureKind::Limit,
                format!("fuel exhausted after {} units{detail}", limits.fuel),
            );
        }
        Some(Trap::Interrupt) => return (FailureKind::Timeout, timeout()),
        Some(Trap::StackOverflow) => {
            return (
                FailureKind::Limit,
                format!("call stack exhausted (wasm stack limit of {MAX_WASM_STACK} bytes)"),
            );
        }
        _ => {}
    }
    if let Some(denied) = find::<HttpNotGranted>(error) {
        return (FailureKind::Refused, denied.to_string());
    }
    if let Some(ResourceTableError::Full) = find::<ResourceTableError>(error) {
        let memory = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
        return (
            FailureKind::Limit,
            format!(
                "resource limit of {} host resources reached (one per {} KiB of the {} MiB memory limit): \
                 the plugin keeps too many files, streams, pollables or HTTP objects open",
                resource_table_cap(memory),
                entry_bytes(memory) >> 10,
                limits.memory_bytes >> 20
            ),
        );
    }
    if let Some(exit) = find::<wasmtime_wasi::I32Exit>(error) {
        return (
            FailureKind::Trap,
            format!(
                "the plugin exited (exit code {}) instead of returning an answer",
                exit.0
            ),
        );
    }
    if let Some(refused) = store.data().limiter.refused {
        return (
            FailureKind::Limit,
            format!(
                "{}; then it trapped: {}",
                refused_text(limits, refused),
                root_cause(error, limits)
            ),
        );
    }
    let panic = store.data().stderr.last_line_matching("panicked at");
    match (trap, panic) {
        (_, Some(line)) => (FailureKind::Trap, format!("plugin panicked: {line}")),
        (Some(trap), None) => (FailureKind::Trap, format!("trapped: {trap}")),
        (None, None) if phase == Phase::Instantiate => (
            FailureKind::CannotStart,
            format!(
                "could not create an instance: {}",
                root_cause(error, limits)
            ),
        ),
        (None, None) => (
            FailureKind::Trap,
            format!("failed: {}", root_cause(error, limits)),
        ),
    }
}

/// The innermost message of an error's chain (wasmtime puts its backtrace in front of
/// the cause), capped, and naming wasmtime's copy cap where that is the cause.
fn root_cause(error: &wasmtime::Error, limits: &Limits) -> String {
    if let Some(trap) = error.downcast_ref::<Trap>() {
        return trap.to_string();
    }
    let cause = error.root_cause().to_string();
    let cause = cause.lines().next().unwrap_or_default();
    let mut text = cap_text(cause);
    if cause.contains("fuel allocated for hostcalls") {
        text.push_str(" (the cap on data a plugin passes to one host call: 128 MiB)");
    }
    if cause.contains("total size of fields exceeds limit") {
        let memory = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
        text.push_str(&format!(
            " (the cap on one wasi-http `fields` resource under a {} MiB memory limit: {} bytes)",
            limits.memory_bytes >> 20,
            entry_bytes(memory)
        ));
    }
    text
}

/// What a call that ran out of time says.
pub(super) fn timeout_message(limits: &Limits) -> String {
    format!(
        "timed out after {} (wall-clock limit)",
        human_duration(limits.timeout)
    )
}

fn human_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{secs} s")
    }
}

/// Notes of the sandbox, refused requests, log records, stdout and stderr of the call,
/// capped.
fn collect_diagnostics(store: &mut Store<State>, notes: Vec<String>) -> Option<String> {
    let data = store.data_mut();
    let mut parts = notes;
    let denied = std::mem::take(
        &mut *data
            .http_policy
            .denied
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    );
    for record in denied.records {
        parts.push(format!("http: {record}"));
    }
    if denied.more > 0 {
        parts.push(format!("http: {} more requests refused", denied.more));
    }
    for refused in std::mem::take(&mut data.fs_refused) {
        parts.push(format!("filesystem: {refused}"));
    }
    let more = std::mem::take(&mut data.fs_refused_more);
    if more > 0 {
        parts.push(format!("filesystem: {more} more calls refused"));
    }
    for record in data.log.take() {
        parts.push(format!("log: {record}"));
    }
    for (name, pipe) in [("stdout", &data.stdout), ("stderr", &data.stderr)] {
        let (bytes, _) = pipe.take();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_end();
        if !text.is_empty() {
            parts.push(format!("{name}: {text}"));
        }
    }
    (!parts.is_empty()).then(|| cap_text(&parts.join("\n")))
}
