//! The `prompt` handler: one model judgement of the event, as Claude Code's prompt hooks.
//!
//! - the prompt's `$ARGUMENTS` is replaced by the input JSON (appended when the prompt
//!   has none; `\$` is a literal `$`);
//! - the model is asked for `{ok, reason, impossible}` as structured output
//!   ([`VERDICT_SCHEMA`]); the answer is parsed strictly (unknown keys, wrong types and
//!   text around the object are errors), and an unparseable answer is asked once more;
//! - `ok: false` does what the event table says ([`crate::event::EventSpec::model_verdict`]):
//!   nothing, feed the reason back (as exit code 2), or also end the turn
//!   (`continue: false`); `continueOnBlock` and `impossible` choose between them;
//! - a timeout, an API error, a refused endpoint and an answer unparseable twice are
//!   failures, which `onFailure` handles (fail open by default, as Claude Code).

use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

use super::model::{DEFAULT_MAX_TOKENS, ModelError, ModelRequest, Resolved};
use super::output::{HookOutput, cap_text};
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict};
use crate::event::Refusal;
use crate::policy::{Hook, PromptSpec};

/// The answer a prompt hook's model must give (Claude Code's response schema). Every
/// property is required so that OpenAI's strict structured outputs accept it.
pub fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "ok": {"type": "boolean", "description": "true to allow, false to block"},
            "reason": {"type": "string", "description": "why, when ok is false"},
            "impossible": {
                "type": "boolean",
                "description": "true when what is asked cannot be done at all"
            }
        },
        "required": ["ok", "reason", "impossible"],
        "additionalProperties": false
    })
}

/// The schema's name in docs: see [`verdict_schema`].
pub const VERDICT_SCHEMA: &str = "{ok: boolean, reason: string, impossible: boolean}";

const SYSTEM: &str = "You are a hook in a coding agent: you judge one event of the agent's \
session against the user's instructions below. Answer with a JSON object only, \
{\"ok\": true|false, \"reason\": \"…\", \"impossible\": true|false}: ok true allows the \
action; ok false blocks it and reason says why, for the agent to read; impossible true \
says the condition can never be met, so insisting is pointless.";

const RETRY: &str = "\n\nYour previous answer was not a JSON object of the form \
{\"ok\": boolean, \"reason\": string, \"impossible\": boolean}. Answer again with that \
object only.";

/// A model's verdict, parsed strictly.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelVerdict {
    /// Allow (`true`) or block.
    pub ok: bool,
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
    /// The condition can never be met (Stop, SubagentStop: the stop goes ahead).
    #[serde(default)]
    pub impossible: Option<bool>,
}

/// Parses a model's answer: one JSON object (a Markdown code fence around it is
/// tolerated), nothing else.
///
/// # Errors
///
/// Why it is not a verdict.
pub fn parse_verdict(text: &str) -> Result<ModelVerdict, String> {
    let trimmed = text.trim();
    let inner = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(trimmed);
    let value: Value =
        serde_json::from_str(inner.trim()).map_err(|e| format!("not a verdict object: {e}"))?;
    if !value.is_object() {
        return Err("not a verdict object: not a JSON object".into());
    }
    serde_json::from_value(value).map_err(|e| format!("not a verdict object: {e}"))
}

/// The prompt with `$ARGUMENTS` replaced by `input` (appended after a blank line when
/// the prompt has none); `\$` stands for a literal `$` and never starts `$ARGUMENTS`.
pub fn substitute(prompt: &str, input: &str) -> String {
    let mut out = String::with_capacity(prompt.len() + input.len());
    let mut used = false;
    let mut rest = prompt;
    while let Some(i) = rest.find(['\\', '$']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("\\$") {
            out.push('$');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("$ARGUMENTS") {
            out.push_str(input);
            used = true;
            rest = after;
        } else {
            out.push_str(&tail[..1]);
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    if !used {
        out.push_str("\n\n");
        out.push_str(input);
    }
    out
}

/// What a verdict does on the invocation's event.
pub fn answer(verdict: &ModelVerdict, continue_on_block: bool, invocation: &Invocation) -> Answer {
    if verdict.ok {
        return Answer::default();
    }
    let rule = invocation.spec.model_verdict();
    if rule.honours_impossible && verdict.impossible == Some(true) {
        return Answer::default();
    }
    let reason = cap_text(
        verdict
            .reason
            .as_deref()
            .filter(|r| !r.trim().is_empty())
            .unwrap_or("the prompt hook's model said no"),
    );
    let refusal = if continue_on_block {
        rule.refusal_continuing
    } else {
        rule.refusal
    };
    match refusal {
        Refusal::NoEffect => Answer::default(),
        Refusal::FeedBack => Answer {
            blocking_error: Some(reason),
            ..Answer::default()
        },
        Refusal::EndTurn => Answer {
            output: HookOutput {
                continue_: Some(false),
                stop_reason: Some(reason.clone()),
                ..HookOutput::default()
            },
            blocking_error: Some(reason),
            ..Answer::default()
        },
    }
}

/// Runs a prompt hook once against `model` (resolved and checked by the caller).
pub async fn run(
    spec: &PromptSpec,
    hook: &Hook,
    invocation: &Invocation,
    model: Result<Resolved, ModelError>,
) -> HandlerRun {
    let started = Instant::now();
    let model = match model {
        Ok(model) => model,
        Err(e) => return HandlerRun::failed(e.kind, e.message, started),
    };
    let request = ModelRequest {
        model: None,
        system: SYSTEM.to_string(),
        prompt: substitute(&spec.prompt, &invocation.input_json),
        schema: Some(verdict_schema()),
        max_tokens: DEFAULT_MAX_TOKENS,
        tools: Vec::new(),
        turns: Vec::new(),
    };
    let ask = async {
        let first = model.complete(request.clone()).await?;
        let problem = match parse_verdict(&first.text) {
            Ok(verdict) => return Ok(verdict),
            Err(problem) => problem,
        };
        tracing::debug!(hook = %hook.id, "prompt hook answer unparseable, asking again: {problem}");
        let mut again = request.clone();
        again.prompt.push_str(RETRY);
        let second = model.complete(again).await?;
        parse_verdict(&second.text).map_err(|e| {
            ModelError::new(
                FailureKind::InvalidOutput,
                format!("the answer was not a verdict twice ({e})"),
            )
        })
    };
    let verdict = judged(hook, &model, spec.continue_on_block, invocation, ask).await;
    HandlerRun {
        verdict,
        exit_code: None,
        duration: started.elapsed(),
        usage: Usage {
            tokens: Some(model.tokens_used()),
            ..Usage::default()
        },
        diagnostics: Some(model.describe()),
    }
}

/// The verdict `work` asks `model` for, within the hook's timeout, as the hook's
/// answer: a timeout or a model error is a failure naming the model; a refusal does what
/// [`answer`] says for the event. Prompt and agent hooks alike.
pub(super) async fn judged(
    hook: &Hook,
    model: &Resolved,
    continue_on_block: bool,
    invocation: &Invocation,
    work: impl std::future::Future<Output = Result<ModelVerdict, ModelError>>,
) -> Verdict {
    match tokio::time::timeout(hook.timeout, work).await {
        Err(_) => Verdict::failed(
            FailureKind::Timeout,
            format!(
                "{} gave no verdict within {:?}",
                model.describe(),
                hook.timeout
            ),
        ),
        Ok(Err(e)) => Verdict::failed(e.kind, format!("{}: {}", model.describe(), e.message)),
        Ok(Ok(verdict)) => Verdict::Answer(answer(&verdict, continue_on_block, invocation)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_substituted_appended_and_escaped() {
        assert_eq!(substitute("judge $ARGUMENTS now", "{}"), "judge {} now");
        assert_eq!(substitute("judge", "{\"a\":1}"), "judge\n\n{\"a\":1}");
        assert_eq!(
            substitute(r"costs \$5, \$ARGUMENTS stays", "{}"),
            "costs $5, $ARGUMENTS stays\n\n{}"
        );
        assert_eq!(substitute("$ARGUMENTS/$ARGUMENTS", "x"), "x/x");
        assert_eq!(substitute(r"a\b $HOME", "x"), "a\\b $HOME\n\nx");
    }

    /// §1.10 of the hooks reference, row by row: what `ok: false` does, without and with
    /// `continueOnBlock`, and `impossible` on the stop events.
    #[test]
    fn refusals_do_what_claude_code_does_on_each_event() {
        use crate::event::EventCatalogue;
        let catalogue = EventCatalogue::default();
        let no = |impossible: bool| ModelVerdict {
            ok: false,
            reason: Some("why".into()),
            impossible: Some(impossible),
        };
        // (event, continueOnBlock, impossible) → (blocks, ends the turn)
        let rows: &[(&str, bool, bool, bool, bool)] = &[
            ("PreToolUse", false, false, true, true),
            ("PreToolUse", true, false, true, false),
            ("PostToolUse", false, false, true, true),
            ("PostToolUse", true, false, true, false),
            ("PostToolBatch", true, false, true, true),
            ("UserPromptSubmit", false, false, true, true),
            ("UserPromptExpansion", true, false, true, true),
            ("Stop", false, false, true, false),
            ("Stop", false, true, false, false),
            ("SubagentStop", true, true, false, false),
            ("PostToolUseFailure", false, false, true, false),
            ("TaskCreated", false, false, true, false),
            ("TaskCompleted", false, false, true, false),
            ("TeammateIdle", false, false, true, true),
            ("TeammateIdle", true, false, true, false),
            ("PermissionRequest", false, false, false, false),
            ("PermissionDenied", true, false, false, false),
            // `impossible` is for the stop events only.
            ("PreToolUse", true, true, true, false),
            ("SessionStart", false, false, false, false),
            ("Notification", false, false, false, false),
        ];
        for &(event, continue_on_block, impossible, blocks, ends) in rows {
            let spec = catalogue.get(event).unwrap().clone();
            let invocation = Invocation::new(spec, json!({}), std::path::Path::new("/p")).unwrap();
            let prompt = PromptSpec {
                prompt: "p".into(),
                model: None,
                provider: None,
                continue_on_block,
            };
            let answer = answer(&no(impossible), prompt.continue_on_block, &invocation);
            let row =
                format!("{event} continueOnBlock={continue_on_block} impossible={impossible}");
            assert_eq!(answer.blocking_error.is_some(), blocks, "{row}");
            assert_eq!(answer.output.continue_ == Some(false), ends, "{row}");
            if blocks {
                assert_eq!(answer.blocking_error.as_deref(), Some("why"), "{row}");
            }
        }
        let yes = ModelVerdict {
            ok: true,
            reason: None,
            impossible: None,
        };
        let spec = catalogue.get("PreToolUse").unwrap().clone();
        let invocation = Invocation::new(spec, json!({}), std::path::Path::new("/p")).unwrap();
        let prompt = PromptSpec {
            prompt: "p".into(),
            model: None,
            provider: None,
            continue_on_block: false,
        };
        assert_eq!(
            answer(&yes, prompt.continue_on_block, &invocation),
            Answer::default()
        );
    }

    #[test]
    fn verdicts_parse_strictly() {
        assert_eq!(
            parse_verdict(r#" {"ok": false, "reason": "no", "impossible": false} "#).unwrap(),
            ModelVerdict {
                ok: false,
                reason: Some("no".into()),
                impossible: Some(false)
            }
        );
        assert!(parse_verdict("```json\n{\"ok\": true}\n```").unwrap().ok);
        for bad in [
            "",
            "yes",
            r#"{"ok": "true"}"#,
            r#"{"ok": true, "extra": 1}"#,
            r#"Sure! {"ok": true}"#,
            r#"{"reason": "x"}"#,
            "[true]",
        ] {
            assert!(parse_verdict(bad).is_err(), "{bad}");
        }
    }
}
