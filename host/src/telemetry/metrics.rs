//! The metrics of the hooks' runs: durations, failures and blocks by hook, fuel and
//! memory of wasm hooks, and dispatches by event and decision. Recorded into the SDK's
//! aggregation (no I/O on the dispatch path); exported by the pipeline's periodic reader
//! (delta temporality: a one-shot process reports only its own dispatch).

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};

use super::Dispatched;
use crate::outcome::HookStatus;

/// The instruments.
pub(super) struct Metrics {
    dispatches: Counter<u64>,
    duration: Histogram<f64>,
    failures: Counter<u64>,
    blocks: Counter<u64>,
    fuel: Histogram<u64>,
    memory: Histogram<u64>,
    /// Spans dropped because the export queue was full.
    pub(super) dropped: Counter<u64>,
}

impl Metrics {
    pub(super) fn new(meter: &Meter) -> Metrics {
        Metrics {
            dispatches: meter
                .u64_counter("hookhost.dispatches")
                .with_description("Events dispatched, by event and merged decision")
                .build(),
            duration: meter
                .f64_histogram("hookhost.hook.duration")
                .with_unit("ms")
                .with_description("Wall-clock time of each hook run")
                .build(),
            failures: meter
                .u64_counter("hookhost.hook.failures")
                .with_description("Hook runs that failed or timed out, by hook and failure class")
                .build(),
            blocks: meter
                .u64_counter("hookhost.hook.blocks")
                .with_description("Hook runs that blocked or denied, by hook")
                .build(),
            fuel: meter
                .u64_histogram("hookhost.hook.fuel")
                .with_description("Fuel a wasm hook used")
                .build(),
            memory: meter
                .u64_histogram("hookhost.hook.memory")
                .with_unit("By")
                .with_description("Peak memory of a wasm hook")
                .build(),
            dropped: meter
                .u64_counter("hookhost.telemetry.dropped_spans")
                .with_description("Spans dropped because the export queue was full")
                .build(),
        }
    }

    /// Records one dispatch's hooks.
    pub(super) fn record(&self, dispatched: &Dispatched<'_>) {
        let outcome = dispatched.outcome;
        let event = KeyValue::new("hookhost.event", outcome.event.clone());
        self.dispatches.add(
            1,
            &[
                event.clone(),
                KeyValue::new(
                    "hookhost.decision",
                    serde_json::to_value(outcome.decision)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                ),
            ],
        );
        for report in &outcome.hooks {
            if matches!(report.status, HookStatus::Skipped | HookStatus::Async) {
                continue;
            }
            let hook = KeyValue::new("hookhost.hook.id", report.id.clone());
            if let Some(ms) = report.duration_ms {
                self.duration.record(
                    ms,
                    &[
                        hook.clone(),
                        event.clone(),
                        KeyValue::new("hookhost.hook.source", report.source.clone()),
                        KeyValue::new("hookhost.hook.type", report.kind.clone()),
                        KeyValue::new("hookhost.hook.status", report.status.as_str()),
                    ],
                );
            }
            match report.status {
                HookStatus::Failed | HookStatus::Timeout => {
                    let failure = report
                        .failure
                        .and_then(|f| serde_json::to_value(f).ok())
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| report.status.as_str().to_string());
                    self.failures.add(
                        1,
                        &[
                            hook.clone(),
                            event.clone(),
                            KeyValue::new("hookhost.hook.failure", failure),
                        ],
                    );
                }
                HookStatus::Blocked => self.blocks.add(1, &[hook.clone(), event.clone()]),
                _ => {}
            }
            if let Some(fuel) = report.fuel {
                self.fuel.record(fuel, std::slice::from_ref(&hook));
            }
            if let Some(memory) = report.memory_bytes {
                self.memory.record(memory, std::slice::from_ref(&hook));
            }
        }
    }
}
