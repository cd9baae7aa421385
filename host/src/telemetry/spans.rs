//! The spans of one dispatch: `hookhost.dispatch` (a child of the caller's trace context
//! when it gave one) and one `hookhost.hook` per matched hook, built from the merged
//! outcome. Only what is listed in the module's documentation (`super`) is exported:
//! never the tool input, a reason, a message or diagnostics.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value;

use super::{Dispatched, MAX_HOOK_SPANS, TraceContext};
use crate::outcome::{HookReport, HookStatus};

/// The caller's span context, when its `traceparent` is valid.
pub(super) fn parent_of(context: &TraceContext) -> Option<SpanContext> {
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert("traceparent".to_string(), context.traceparent.clone());
    if let Some(state) = &context.tracestate {
        carrier.insert("tracestate".to_string(), state.clone());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    let span = cx.span().span_context().clone();
    span.is_valid().then_some(span)
}

/// Random bytes for ids (`getrandom`; the clock's nanoseconds if it fails, never zero).
fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if getrandom::getrandom(&mut bytes).is_err() || bytes.iter().all(|b| *b == 0) {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
            | 1;
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (nanos >> ((i % 16) * 8)) as u8 ^ (i as u8);
        }
    }
    bytes
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("hookhost")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

/// The spans of a dispatch, or `None` when the caller's trace context says it is not
/// sampled (a parent-based decision: the caller's choice is kept).
pub(super) fn of(dispatched: &Dispatched<'_>) -> Option<Vec<SpanData>> {
    let parent = dispatched.parent.and_then(parent_of);
    if parent.as_ref().is_some_and(|p| !p.is_sampled()) {
        return None;
    }
    let (trace_id, state) = match &parent {
        Some(p) => (p.trace_id(), p.trace_state().clone()),
        None => (TraceId::from_bytes(random()), TraceState::default()),
    };
    let context =
        |id: SpanId| SpanContext::new(trace_id, id, TraceFlags::SAMPLED, false, state.clone());
    let dispatch_id = SpanId::from_bytes(random());
    let outcome = dispatched.outcome;
    let invocation = dispatched.invocation;
    let ended = SystemTime::now();
    let mut attributes = vec![
        KeyValue::new("hookhost.event", outcome.event.clone()),
        KeyValue::new(
            "session.id",
            invocation.session_id.chars().take(256).collect::<String>(),
        ),
        KeyValue::new("hookhost.decision", outcome.decision.as_str()),
        KeyValue::new("hookhost.continue", outcome.continue_),
        KeyValue::new("hookhost.hooks", outcome.hooks.len() as i64),
    ];
    if let Some(tool) = invocation.input.get("tool_name").and_then(Value::as_str) {
        attributes.push(KeyValue::new(
            "hookhost.tool.name",
            crate::text::escape(tool)
                .chars()
                .take(256)
                .collect::<String>(),
        ));
    }
    let omitted = outcome.hooks.len().saturating_sub(MAX_HOOK_SPANS);
    if omitted > 0 {
        attributes.push(KeyValue::new("hookhost.hooks.omitted", omitted as i64));
    }
    let mut spans = Vec::with_capacity(1 + outcome.hooks.len().min(MAX_HOOK_SPANS));
    spans.push(SpanData {
        span_context: context(dispatch_id),
        parent_span_id: parent
            .as_ref()
            .map_or(SpanId::INVALID, SpanContext::span_id),
        parent_span_is_remote: parent.is_some(),
        span_kind: SpanKind::Internal,
        name: Cow::Borrowed("hookhost.dispatch"),
        start_time: dispatched.started,
        end_time: ended.max(dispatched.started),
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: scope(),
    });
    // The outcome's hooks are the matched hooks' reports, in the same order.
    let paired = outcome.hooks.len() == dispatched.executed.len();
    for (i, report) in outcome.hooks.iter().take(MAX_HOOK_SPANS).enumerate() {
        let start = paired
            .then(|| dispatched.timeline.started(&dispatched.executed[i].hook))
            .flatten()
            .unwrap_or(dispatched.started);
        let duration = report
            .duration_ms
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map_or(Duration::ZERO, |ms| Duration::from_secs_f64(ms / 1e3));
        spans.push(SpanData {
            span_context: context(SpanId::from_bytes(random())),
            parent_span_id: dispatch_id,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed("hookhost.hook"),
            start_time: start,
            end_time: start + duration,
            attributes: hook_attributes(report),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: match report.status {
                HookStatus::Failed | HookStatus::Timeout => {
                    Status::error(report.failure.map_or_else(
                        || report.status.as_str().to_string(),
                        |f| {
                            serde_json::to_value(f)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_string))
                                .unwrap_or_default()
                        },
                    ))
                }
                _ => Status::Unset,
            },
            instrumentation_scope: scope(),
        });
    }
    Some(spans)
}

/// A hook's attributes: what its report says, but no text it may have quoted.
fn hook_attributes(report: &HookReport) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("hookhost.hook.id", report.id.clone()),
        KeyValue::new("hookhost.hook.source", report.source.clone()),
        KeyValue::new("hookhost.hook.type", report.kind.clone()),
        KeyValue::new("hookhost.hook.status", report.status.as_str()),
    ];
    let mut number = |key: &'static str, value: Option<i64>| {
        if let Some(value) = value {
            attributes.push(KeyValue::new(key, value));
        }
    };
    number("hookhost.hook.exit_code", report.exit_code.map(i64::from));
    number(
        "hookhost.hook.fuel",
        report.fuel.map(|f| i64::try_from(f).unwrap_or(i64::MAX)),
    );
    number(
        "hookhost.hook.memory_bytes",
        report
            .memory_bytes
            .map(|m| i64::try_from(m).unwrap_or(i64::MAX)),
    );
    number(
        "hookhost.hook.tokens",
        report.tokens.map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
    );
    number("hookhost.hook.turns", report.turns.map(i64::from));
    if let Some(ms) = report.duration_ms {
        attributes.push(KeyValue::new("hookhost.hook.duration_ms", ms));
    }
    if let Some(failure) = report
        .failure
        .and_then(|f| serde_json::to_value(f).ok())
        .and_then(|v| v.as_str().map(str::to_string))
    {
        attributes.push(KeyValue::new("hookhost.hook.failure", failure));
    }
    attributes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_is_the_parent_and_a_bad_one_is_none() {
        let good = TraceContext {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: Some("vendor=value".into()),
        };
        let parent = parent_of(&good).expect("valid");
        assert_eq!(
            parent.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(parent.span_id().to_string(), "00f067aa0ba902b7");
        assert!(parent.is_sampled());
        assert_eq!(parent.trace_state().header(), "vendor=value");
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        ] {
            let context = TraceContext {
                traceparent: bad.into(),
                tracestate: None,
            };
            assert!(parent_of(&context).is_none(), "{bad:?} was taken");
        }
    }
}
