//! Asks the model whether a Bash command is safe to run, and denies it when the model
//! says no. Needs `capabilities.model` in the hook's config (a token budget per event);
//! without it, or when the budget is spent, the hook fails and its `onFailure` decides.
//! `config: {"votes": N}` asks N times (default 1) and denies when any answer is no.
//!
//! ```json
//! {"type": "wasm", "plugin": "model_judge.wasm", "model": "haiku",
//!  "capabilities": {"model": {"tokensPerEvent": 2000}}, "config": {"votes": 1}}
//! ```

use hookhost_guest::{Event, Hook, Info, Response, register};

/// What the model is asked, before the command.
pub const QUESTION: &str = "A coding agent wants to run this shell command. Is it safe to \
run in the user's repository (no data loss, no secrets leaving the machine, nothing \
downloaded and executed)? Answer with a JSON object only: {\"ok\": true|false, \"reason\": \
\"...\"}.\n\nThe command:\n";

#[derive(Default)]
struct ModelJudge;

#[derive(serde::Deserialize)]
struct Bash {
    command: String,
}

#[derive(serde::Deserialize, Default)]
struct Config {
    #[serde(default)]
    votes: Option<u32>,
}

/// The model's verdict.
#[derive(Debug, PartialEq, Eq, serde::Deserialize)]
pub struct Verdict {
    /// Safe to run.
    pub ok: bool,
    /// Why not.
    #[serde(default)]
    pub reason: String,
}

/// Reads a verdict from the model's answer: one JSON object, a Markdown fence around it
/// tolerated.
///
/// # Errors
///
/// The answer is not a verdict.
pub fn verdict(text: &str) -> Result<Verdict, String> {
    let text = text.trim();
    let inner = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .unwrap_or(text);
    serde_json::from_str(inner.trim()).map_err(|e| {
        let shown: String = text.chars().take(200).collect();
        format!("the model's answer is not a verdict ({e}): {shown}")
    })
}

impl Hook for ModelJudge {
    fn info() -> Info {
        Info::new("model-judge", env!("CARGO_PKG_VERSION")).events(&["PreToolUse"])
    }

    fn pre_tool_use(&mut self, event: &Event) -> hookhost_guest::Result {
        if event.tool_name() != Some("Bash") {
            return Ok(Response::none());
        }
        let bash: Bash = event.tool_input_as()?;
        let votes = event.config_as::<Config>()?.votes.unwrap_or(1).clamp(1, 5);
        // `$` in the command is literal: only the command goes to the model.
        let prompt = format!("{QUESTION}{}", bash.command.replace('$', "\\$"));
        for _ in 0..votes {
            let reply = event.ask_model(&prompt)?;
            let verdict = verdict(&reply.text)?;
            if !verdict.ok {
                let reason = if verdict.reason.trim().is_empty() {
                    "the model judged this command unsafe".to_string()
                } else {
                    verdict.reason
                };
                return Ok(Response::deny(reason));
            }
        }
        Ok(Response::none())
    }
}

register!(ModelJudge);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_the_answer() {
        assert_eq!(
            verdict(r#" {"ok": false, "reason": "deletes"} "#).unwrap(),
            Verdict {
                ok: false,
                reason: "deletes".into()
            }
        );
        assert!(verdict("```json\n{\"ok\": true}\n```").unwrap().ok);
        assert!(verdict("sure!").is_err());
    }
}
