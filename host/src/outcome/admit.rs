//! What of a hook's answer counts: its `hookSpecificOutput` as its event's allow-list
//! admits it ([`admitted`]), the one filter the merge and a chain's hand-over share.

use serde_json::{Map, Value};

use super::Notice;
use crate::event::{Channel, EventSpec};
use crate::handlers::Answer;
use crate::handlers::output::cap_text_at;
use crate::policy::Hook;

/// Dropped keys named one notice each per hook; past this many, one notice counts the rest.
const DROPPED_NOTICES: usize = 8;

/// The hook's `hookSpecificOutput` as its event's allow-list admits it: every key of the
/// answer, every key of an object the allow-list lists keys of (`decision.…`), and every
/// key of a plugin's `extras-json` passes [`EventSpec::admit`], the one rule of what a
/// hook may say. A dropped key becomes a notice naming the hook, its config file and the
/// key. Every answer of every handler type passes here before it counts.
pub fn admitted(
    spec: &EventSpec,
    hook: &Hook,
    answer: &Answer,
    notices: &mut Vec<Notice>,
) -> Map<String, Value> {
    let mut kept = Map::new();
    let mut dropped: Vec<(String, String)> = Vec::new();
    let said = answer
        .output
        .specific
        .iter()
        .map(|kv| (kv, Channel::Answer))
        .chain(answer.extras.iter().map(|kv| (kv, Channel::Extras)));
    for ((key, value), channel) in said {
        if let Err(why) = spec.admit(key, channel, &hook.widens) {
            dropped.push((key.clone(), why));
            continue;
        }
        if kept.contains_key(key) {
            // The typed answer wins over the same key in extras.
            continue;
        }
        let value = match value {
            Value::Object(object) if spec.has_nested_outputs(key) => {
                let mut inner = Map::new();
                for (sub, v) in object {
                    let path = format!("{key}.{sub}");
                    match spec.admit(&path, channel, &hook.widens) {
                        Ok(()) => {
                            inner.insert(sub.clone(), v.clone());
                        }
                        Err(why) => dropped.push((path, why)),
                    }
                }
                Value::Object(inner)
            }
            other => other.clone(),
        };
        kept.insert(key.clone(), value);
    }
    let total = dropped.len();
    for (key, why) in dropped.into_iter().take(DROPPED_NOTICES) {
        notices.push(Notice {
            hook: hook.id.clone(),
            message: format!(
                "`hookSpecificOutput.{}` was dropped ({}): {why}",
                cap_text_at(&key, 80),
                hook.origin.location
            ),
        });
    }
    if total > DROPPED_NOTICES {
        notices.push(Notice {
            hook: hook.id.clone(),
            message: format!(
                "{} more `hookSpecificOutput` keys were dropped ({}): not in the allow-list of {}",
                total - DROPPED_NOTICES,
                hook.origin.location,
                spec.name
            ),
        });
    }
    kept
}
