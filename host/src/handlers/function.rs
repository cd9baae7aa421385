//! In-process function hooks: closures a Rust embedder registers. They are matched,
//! limited by their timeout and merged like any other hook; their answer is Claude Code's
//! output JSON, as a command hook would print it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::output::HookOutput;
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict};
use crate::policy::Hook;

/// A function hook: takes the input JSON, answers with output JSON (`null` or `{}` for
/// no opinion) or an error message.
pub trait FunctionHandler: Send + Sync {
    /// Handles one event.
    fn call(&self, input: Value) -> BoxFuture<'static, Result<Value, String>>;
}

impl<F, Fut> FunctionHandler for F
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Value, String>> + Send + 'static,
{
    fn call(&self, input: Value) -> BoxFuture<'static, Result<Value, String>> {
        Box::pin(self(input))
    }
}

/// A registered function, shareable and printable.
#[derive(Clone)]
pub struct FunctionSpec {
    /// The function.
    pub handler: Arc<dyn FunctionHandler>,
}

impl std::fmt::Debug for FunctionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FunctionSpec(..)")
    }
}

/// Runs a function hook once, under its timeout; a panic is a failure, not a crash.
pub async fn run(spec: &FunctionSpec, hook: &Hook, invocation: &Invocation) -> HandlerRun {
    let started = Instant::now();
    let call = AssertUnwindSafe(spec.handler.call(invocation.input.clone())).catch_unwind();
    let verdict = match tokio::time::timeout(hook.timeout, call).await {
        Err(_) => Verdict::failed(
            FailureKind::Timeout,
            format!("timed out after {:?}", hook.timeout),
        ),
        Ok(Err(_)) => Verdict::failed(FailureKind::Trap, "the function hook panicked"),
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
