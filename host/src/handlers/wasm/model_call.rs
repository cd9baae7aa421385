//! `hookhost:hook/model.complete` (0.2.0): a plugin's question to the model of its hook's
//! provider.
//!
//! - **Live** only when the plugin imports `hookhost:hook/model` and the hook grants
//!   `capabilities.model` ([`crate::policy::capability::intersect`], the one check of
//!   every capability, for 0.1.0 and 0.2.0 plugins alike: a 0.1.0 plugin cannot import
//!   it). Otherwise every call answers `err` naming the missing grant.
//! - **The provider** is the hook's (its `model` / `provider`, else `modelProvider`),
//!   chosen and checked by [`crate::handlers::model::resolve`], the one check every
//!   model request passes (allowlists, managed `ceilings.models`), as a prompt hook's.
//! - **The budget** is the lower of the grant's `tokensPerEvent` and managed
//!   `ceilings.models.tokensPerEvent`, for the hook on one event: the output tokens asked
//!   for are lowered to what is left, and a spent budget answers `err` without sending.
//! - **Metered**: the store's call hook charges the call as every host call
//!   ([`super::hostcalls::meter`]); on top, the bytes of the request's text and of the
//!   answer (the reply's text, or the error) are charged
//!   [`super::hostcalls::FUEL_PER_BYTE`] each. Calls and tokens go into the hook's
//!   report (`turns`, `tokens`) and the audit log, and a line of its diagnostics.
//! - **Bounded**: a request is at most [`MAX_MODEL_REQUEST_BYTES`] in at most
//!   [`MAX_MODEL_MESSAGES`] messages; a reply at most [`MAX_MODEL_REPLY_BYTES`] (cut,
//!   `max-tokens`); a call still waiting at the hook's deadline ends the plugin's call
//!   as a timeout.

use std::sync::atomic::Ordering;

use wasmtime::StoreContextMut;
use wasmtime::component::Linker;

use super::bindings::v0_2::hookhost::hook::model::{Reply, Request, Role, StopReason};
use super::hostcalls::{charge, cost};
use super::limits::DeadlinePassed;
use super::model_budget::NOT_GRANTED;
use super::state::State;
use crate::handlers::model::{
    DEFAULT_MAX_TOKENS, ModelError, ModelReply, ModelRequest, Resolved, Turn,
};

/// Bytes of text (the system prompt and the messages) one request may carry.
pub const MAX_MODEL_REQUEST_BYTES: usize = 256 << 10;
/// Messages one request may carry.
pub const MAX_MODEL_MESSAGES: usize = 64;
/// Bytes of a reply's text handed to the plugin; a longer one is cut (at a character
/// boundary) and says `max-tokens`.
pub const MAX_MODEL_REPLY_BYTES: usize = 256 << 10;
/// The model of a run the hook's provider was not resolved for: a call outside the
/// handlers ([`super::WasmRuntime::call`], `hookhost plugin test`), which have no
/// provider to ask.
pub(super) fn unavailable() -> Result<Resolved, ModelError> {
    Err(ModelError::new(
        crate::handlers::FailureKind::CannotStart,
        "no model provider in this run: only a configured hook's plugin (dispatched \
         through hookhost's handlers) gets its provider's model",
    ))
}

/// Links `hookhost:hook/model@0.2.0`.
pub(super) fn add(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    let mut model = linker.instance("hookhost:hook/model@0.2.0")?;
    model.func_wrap_async(
        "complete",
        |mut store: StoreContextMut<'_, State>, (request,): (Request,)| {
            Box::new(async move {
                charge(&mut store, cost(request_bytes(&request)))?;
                let answer = ask(&mut store, request).await?;
                let back = match &answer {
                    Ok(reply) => reply.text.len(),
                    Err(message) => message.len(),
                };
                charge(&mut store, cost(back))?;
                Ok((answer,))
            })
        },
    )?;
    Ok(())
}

/// Bytes of text in a request, as the guest passed it.
fn request_bytes(request: &Request) -> usize {
    request
        .messages
        .iter()
        .map(|m| m.text.len())
        .fold(request.system.len(), usize::saturating_add)
}

/// One call: the answer for the guest, or a trap (the deadline passed while waiting).
async fn ask(
    store: &mut StoreContextMut<'_, State>,
    request: Request,
) -> wasmtime::Result<Result<Reply, String>> {
    let Some(model) = store.data().model.clone() else {
        return Ok(Err(NOT_GRANTED.to_string()));
    };
    model.calls.fetch_add(1, Ordering::Relaxed);
    let request = match to_request(request) {
        Ok(request) => request,
        Err(e) => {
            model.note(&e);
            return Ok(Err(e));
        }
    };
    let resolved = match &model.resolved {
        Ok(resolved) => resolved,
        Err(e) => return Ok(Err(e.message.clone())),
    };
    let deadline = store.data().http_policy.deadline;
    let asked = resolved.complete(request);
    let reply = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, asked)
            .await
            .map_err(|_| {
                model.note("the hook's deadline passed while the model was answering");
                wasmtime::Error::new(DeadlinePassed)
            })?,
        None => asked.await,
    };
    match reply {
        Ok(reply) => {
            model.answered.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                plugin = %store.data().plugin,
                tokens = reply.input_tokens + reply.output_tokens,
                "model call answered"
            );
            Ok(Ok(to_reply(reply)))
        }
        Err(e) => {
            let message = format!("{}: {}", resolved.describe(), e.message);
            model.note(&message);
            Ok(Err(message))
        }
    }
}

/// The request of the guest as the provider layer's, refused when it is too large or
/// malformed.
fn to_request(request: Request) -> Result<ModelRequest, String> {
    let bytes = request_bytes(&request);
    if bytes > MAX_MODEL_REQUEST_BYTES {
        return Err(format!(
            "the request is {bytes} bytes of text, above the cap of {MAX_MODEL_REQUEST_BYTES}; not sent"
        ));
    }
    if request.messages.len() > MAX_MODEL_MESSAGES {
        return Err(format!(
            "the request has {} messages, above the cap of {MAX_MODEL_MESSAGES}; not sent",
            request.messages.len()
        ));
    }
    let max_tokens = match request.max_tokens {
        Some(0) => return Err("`max-tokens` must be at least 1; not sent".into()),
        Some(n) => u64::from(n),
        None => DEFAULT_MAX_TOKENS,
    };
    let mut messages = request.messages.into_iter();
    let first = match messages.next() {
        Some(m) if m.role == Role::User => m,
        Some(_) => return Err("the first message must be the user's; not sent".into()),
        None => return Err("a request needs at least one message; not sent".into()),
    };
    let turns = messages
        .map(|m| match m.role {
            Role::User => Turn::User { text: m.text },
            Role::Assistant => Turn::Assistant {
                text: m.text,
                calls: Vec::new(),
            },
        })
        .collect();
    Ok(ModelRequest {
        model: None,
        system: request.system,
        prompt: first.text,
        schema: None,
        max_tokens,
        tools: Vec::new(),
        turns,
    })
}

/// The provider's answer as the guest's, its text cut to [`MAX_MODEL_REPLY_BYTES`].
fn to_reply(reply: ModelReply) -> Reply {
    let mut stop_reason = match reply.stop_reason.as_deref() {
        Some("end_turn" | "stop" | "stop_sequence") => StopReason::End,
        Some("max_tokens" | "length") => StopReason::MaxTokens,
        Some("refusal" | "content_filter") => StopReason::Refusal,
        _ => StopReason::Other,
    };
    let mut text = reply.text;
    if text.len() > MAX_MODEL_REPLY_BYTES {
        let mut cut = MAX_MODEL_REPLY_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        stop_reason = StopReason::MaxTokens;
    }
    let tokens = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Reply {
        text,
        input_tokens: tokens(reply.input_tokens),
        output_tokens: tokens(reply.output_tokens),
        stop_reason,
    }
}

#[cfg(test)]
mod tests {
    use super::super::bindings::v0_2::hookhost::hook::model::Message;
    use super::*;

    fn message(role: Role, text: &str) -> Message {
        Message {
            role,
            text: text.into(),
        }
    }

    #[test]
    fn requests_become_conversations_and_are_bounded() {
        let request = to_request(Request {
            system: "judge".into(),
            messages: vec![
                message(Role::User, "is `ls` safe?"),
                message(Role::Assistant, "{"),
                message(Role::User, "go on"),
            ],
            max_tokens: None,
        })
        .unwrap();
        assert_eq!(request.prompt, "is `ls` safe?");
        assert_eq!(request.max_tokens, DEFAULT_MAX_TOKENS);
        assert_eq!(
            request.turns,
            vec![
                Turn::Assistant {
                    text: "{".into(),
                    calls: vec![]
                },
                Turn::User {
                    text: "go on".into()
                }
            ]
        );
        let refused = |request: Request| to_request(request).unwrap_err();
        let big = "x".repeat(MAX_MODEL_REQUEST_BYTES);
        let e = refused(Request {
            system: "s".into(),
            messages: vec![message(Role::User, &big)],
            max_tokens: Some(10),
        });
        assert!(e.contains("cap"), "{e}");
        let many = (0..=MAX_MODEL_MESSAGES)
            .map(|_| message(Role::User, "a"))
            .collect();
        assert!(
            refused(Request {
                system: String::new(),
                messages: many,
                max_tokens: None
            })
            .contains("messages")
        );
        for (messages, max) in [
            (vec![], None),
            (vec![message(Role::Assistant, "a")], None),
            (vec![message(Role::User, "a")], Some(0)),
        ] {
            refused(Request {
                system: String::new(),
                messages,
                max_tokens: max,
            });
        }
    }

    #[test]
    fn replies_are_cut_at_the_cap_and_stop_reasons_normalized() {
        let reply = |text: String, stop: &str| {
            to_reply(ModelReply {
                text,
                input_tokens: u64::MAX,
                output_tokens: 3,
                tool_calls: Vec::new(),
                stop_reason: Some(stop.into()),
            })
        };
        let r = reply("ok".into(), "end_turn");
        assert_eq!((r.stop_reason, r.input_tokens), (StopReason::End, u32::MAX));
        assert_eq!(
            reply("a".into(), "length").stop_reason,
            StopReason::MaxTokens
        );
        assert_eq!(
            reply("a".into(), "content_filter").stop_reason,
            StopReason::Refusal
        );
        let long = "é".repeat(MAX_MODEL_REPLY_BYTES);
        let r = reply(long, "stop");
        assert!(r.text.len() <= MAX_MODEL_REPLY_BYTES && r.text.len() > 1000);
        assert_eq!(r.stop_reason, StopReason::MaxTokens);
    }
}
