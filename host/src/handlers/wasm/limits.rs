//! The limits of one call: arming a store with fuel and a deadline, and after the call,
//! usage, diagnostics and a failure message that names the limit that was hit.

use std::time::Duration;

use wasmtime::{Store, Trap};

use super::OUTPUT_CAP;
use super::bindings;
use super::engine::MAX_WASM_STACK;
use super::state::State;
use crate::handlers::output::cap_text;
use crate::handlers::{FailureKind, Usage};

/// The limits of one call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) fuel: u64,
    pub(super) memory_bytes: u64,
    pub(super) timeout: Duration,
}

impl Limits {
    /// Sets fuel and the epoch deadline for the next call, and clears per-call records.
    pub(super) fn arm(&self, store: &mut Store<State>) -> Result<(), String> {
        store
            .set_fuel(self.fuel)
            .map_err(|e| format!("cannot set fuel: {e}"))?;
        // The next tick runs the store's epoch callback, which yields or interrupts.
        store.set_epoch_deadline(1);
        store.data_mut().limiter.refused = None;
        store.data_mut().http_policy.deadline = Some(tokio::time::Instant::now() + self.timeout);
        store
            .data()
            .http_policy
            .denied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        Ok(())
    }
}

/// What one call produced, before it becomes a verdict.
pub(super) struct CallOutcome {
    pub(super) result: Result<bindings::Response, (FailureKind, String)>,
    pub(super) usage: Usage,
    pub(super) diagnostics: Option<String>,
}

/// Collects usage and diagnostics after a call and classifies its error.
pub(super) fn finish(
    store: &mut Store<State>,
    limits: &Limits,
    result: wasmtime::Result<Result<bindings::Response, String>>,
) -> CallOutcome {
    let interrupted =
        matches!(&result, Err(e) if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt));
    // After an epoch interrupt the fuel counter is stale; don't report it.
    let fuel = if interrupted {
        None
    } else {
        store
            .get_fuel()
            .ok()
            .map(|left| limits.fuel.saturating_sub(left))
    };
    let usage = Usage {
        fuel,
        memory_bytes: Some(store.data().limiter.peak as u64),
    };
    let result = match result {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(message)) => match store.data().limiter.refused {
            Some(asked) => Err((
                FailureKind::Limit,
                memory_message(limits, asked, &format!("the plugin returned: {message}")),
            )),
            None => Err((FailureKind::Trap, format!("returned an error: {message}"))),
        },
        Err(e) => Err(classify_error(&e, store, limits)),
    };
    let diagnostics = collect_diagnostics(store);
    CallOutcome {
        result,
        usage,
        diagnostics,
    }
}

pub(super) fn memory_message(limits: &Limits, asked: usize, detail: &str) -> String {
    format!(
        "memory limit of {} bytes ({} MiB) reached: the plugin asked to grow its memory to {asked} bytes; {detail}",
        limits.memory_bytes,
        limits.memory_bytes >> 20
    )
}

/// Maps a wasmtime error to a failure kind and a message naming the limit hit.
pub(super) fn classify_error(
    error: &wasmtime::Error,
    store: &mut Store<State>,
    limits: &Limits,
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
    match trap {
        Some(Trap::OutOfFuel) => {
            return (
                FailureKind::Limit,
                format!("fuel exhausted after {} units", limits.fuel),
            );
        }
        Some(Trap::Interrupt) => {
            return (
                FailureKind::Timeout,
                format!(
                    "timed out after {} (wall-clock limit)",
                    human_duration(limits.timeout)
                ),
            );
        }
        Some(Trap::StackOverflow) => {
            return (
                FailureKind::Limit,
                format!("call stack exhausted (wasm stack limit of {MAX_WASM_STACK} bytes)"),
            );
        }
        _ => {}
    }
    if let Some(asked) = store.data().limiter.refused {
        return (
            FailureKind::Limit,
            memory_message(
                limits,
                asked,
                &format!("then it trapped: {}", short_error(error)),
            ),
        );
    }
    let panic = store.data().stderr.last_line_matching("panicked at");
    match (trap, panic) {
        (_, Some(line)) => (FailureKind::Trap, format!("plugin panicked: {line}")),
        (Some(trap), None) => (FailureKind::Trap, format!("trapped: {trap}")),
        (None, None) => (FailureKind::Trap, format!("failed: {}", short_error(error))),
    }
}

pub(super) fn short_error(error: &wasmtime::Error) -> String {
    match error.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{error:#}")
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

pub(super) fn human_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{secs} s")
    }
}

/// stdout, stderr, log records and refused requests of the call, capped.
pub(super) fn collect_diagnostics(store: &mut Store<State>) -> Option<String> {
    let data = store.data_mut();
    let mut parts = Vec::new();
    let denied = std::mem::take(
        &mut *data
            .http_policy
            .denied
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    );
    for target in denied {
        parts.push(format!("http: request to {target} denied (not granted)"));
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
