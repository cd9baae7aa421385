//! What `hookhost validate` says about a transform chain (`"chain": true`): the config
//! warnings of a group whose chain cannot do what it says.
//!
//! Decisions: `chain` implies `sequential` (one after another in config order, a block
//! stops the rest), so `"sequential": false` beside it is ignored with a warning. An
//! `async` hook in a chain still starts in the background, but it cannot rewrite the
//! input of the hooks after it: a warning, not an error, since the group keeps working.
//! A chain on an event with no output that rewrites its input runs as `sequential`.
//! What a chain hands on is [`REWRITES`] (read by `outcome::rewrite`).

use crate::config::schema::RawMatcherGroup;
use crate::event::EventSpec;

/// The `hookSpecificOutput` keys that rewrite part of an event's input, each with the
/// input field it replaces (`skipResult` stands for the response of a tool that does not
/// run). The allow-list of each event ([`EventSpec::admit`]) says where a key counts; a
/// transform chain hands the next hook the input with these fields replaced.
pub const REWRITES: [(&str, &str); 5] = [
    ("updatedInput", "tool_input"),
    ("updatedToolOutput", "tool_response"),
    ("updatedMCPToolOutput", "tool_response"),
    ("updatedPrompt", "prompt"),
    ("skipResult", "tool_response"),
];

/// The warnings of a matcher group's `chain`, for `$.hooks.<Event>[i].chain`.
pub(super) fn warnings(group: &RawMatcherGroup, spec: &EventSpec) -> Vec<String> {
    if group.chain != Some(true) {
        return Vec::new();
    }
    let mut warnings = Vec::new();
    if group.sequential == Some(false) {
        warnings.push(
            "`chain` runs the group's hooks one after another in config order; \
             `sequential: false` is ignored"
                .to_string(),
        );
    }
    for (index, hook) in group.hooks.iter().enumerate() {
        if hook.run_async == Some(true) || hook.async_rewake == Some(true) {
            warnings.push(format!(
                "hooks[{index}] is async: in a chain it starts in the background and cannot \
                 rewrite the input of the hooks after it (they get the input as it was before it)"
            ));
        }
    }
    let rewriting: Vec<&str> = REWRITES
        .iter()
        .map(|(key, _)| *key)
        .filter(|key| spec.honours(key))
        .collect();
    if rewriting.is_empty() {
        warnings.push(format!(
            "no output of `{}` rewrites its input, so the chain has nothing to pass on: it \
             runs as `sequential`",
            spec.name
        ));
    }
    warnings
}
