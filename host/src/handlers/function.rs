//! In-process function hooks: closures a Rust embedder registers. They are matched,
//! limited by their timeout and merged like any other hook; their answer is Claude Code's
//! output JSON, as a command hook would print it.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use futures_util::FutureExt;
use serde_json::Value;

use super::output::HookOutput;
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict};
use crate::policy::{FunctionSpec, Hook};

/// Runs a function hook once, under its timeout; a panic is a failure, not a crash.
pub async fn run(spec: &FunctionSpec, hook: &Hook, invocation: &Invocation) -> HandlerRun {
    let started = Instant::now();
    // A handler can panic before its future exists (in the synchronous part of the
    // closure) as well as while it is polled: both are the hook's failure, not the host's.
    let input = invocation.input.clone();
    let call = match std::panic::catch_unwind(AssertUnwindSafe(|| spec.handler.call(input))) {
        Ok(future) => AssertUnwindSafe(future).catch_unwind(),
        Err(_) => return panicked(started),
    };
    let verdict = match tokio::time::timeout(hook.timeout, call).await {
        Err(_) => Verdict::failed(
            FailureKind::Timeout,
            format!("timed out after {:?}", hook.timeout),
        ),
        Ok(Err(_)) => return panicked(started),
        Ok(Ok(Err(message))) => Verdict::failed(
            FailureKind::Trap,
            format!("the function hook failed: {message}"),
        ),
        Ok(Ok(Ok(Value::Null))) => Verdict::Answer(Answer::default()),
        Ok(Ok(Ok(value))) => match HookOutput::from_json(value, &invocation.spec.name) {
            Ok(output) => Verdict::Answer(Answer {
                output,
                ..Answer::default()
            }),
            Err(e) => Verdict::failed(FailureKind::InvalidOutput, e),
        },
    };
    HandlerRun {
        verdict,
        exit_code: None,
        duration: started.elapsed(),
        usage: Usage::default(),
        diagnostics: None,
    }
}

fn panicked(started: Instant) -> HandlerRun {
    HandlerRun {
        verdict: Verdict::failed(FailureKind::Trap, "the function hook panicked"),
        exit_code: None,
        duration: started.elapsed(),
        usage: Usage::default(),
        diagnostics: None,
    }
}
