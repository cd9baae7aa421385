//! Rewrites: the outputs that replace part of an event's input (`updatedInput`,
//! `updatedToolOutput`, `updatedPrompt`, `skip` with `skipResult`), how a transform
//! chain passes them on, and their provenance ([`Rewrite`]: who changed what, as an
//! RFC 6902 JSON Patch).
//!
//! One table ([`crate::policy::chain::REWRITES`]) says which output key rewrites which input field; the event's
//! allow-list ([`crate::event::EventSpec::admit`]) says on which events a key counts. The
//! merge reads a hook's rewrites through [`rewrites_of`], from what the allow-list
//! admitted; a chain hands on what the merge of each step alone kept
//! ([`super::step`], [`handed_on`]), so it never passes on a key the merge would drop.
//!
//! Several hooks rewriting the same field: the hooks of one chain compose (the last
//! rewrite of the chain is the chain's), and the chain then competes as one rewrite with
//! every other hook's or chain's: the highest `priority` (a chain's: its highest) wins,
//! then the first in config order (a chain's: its first hook's).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::policy::Hook;
use crate::policy::chain::REWRITES;

/// The outcome field a rewrite competes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    /// `updatedInput` (also PermissionRequest's `decision.updatedInput`).
    Input,
    /// `updatedToolOutput` / `updatedMCPToolOutput`.
    ToolOutput,
    /// `updatedPrompt`.
    Prompt,
    /// `skip` (its value: `skipResult`, `null` without one).
    Skip,
}

const FIELDS: [Field; 4] = [Field::Input, Field::ToolOutput, Field::Prompt, Field::Skip];

/// What one hook's rewrite changed, for the outcome's `rewrites` and the audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rewrite {
    /// The hook's id.
    pub hook: String,
    /// The output key it rewrote with (`updatedInput`, `updatedToolOutput`,
    /// `updatedMCPToolOutput`, `decision.updatedInput`, `updatedPrompt`, `skipResult`).
    pub field: String,
    /// What it changed, as an RFC 6902 JSON Patch of the event's input (paths such as
    /// `/tool_input/command`, `/tool_response`, `/prompt`): applied in order to the input,
    /// the patches of an outcome give the input its winning rewrites make (unless one
    /// was left out: `omittedBytes`).
    pub patch: json_patch::Patch,
    /// About how many bytes the patch had when it was left out (empty) because the
    /// outcome's patches were over [`REWRITES_BUDGET`] before it.
    #[serde(rename = "omittedBytes", skip_serializing_if = "Option::is_none")]
    pub omitted_bytes: Option<usize>,
}

/// Bytes the patches of one outcome's `rewrites` may hold together (about: strings and
/// keys): a long chain of hooks that each rewrite a large input cannot make an outcome of
/// megabytes per hook. Past it, a step is listed with an empty patch and its size.
pub const REWRITES_BUDGET: usize = crate::handlers::output::OUTPUT_JSON_CAP;

/// About how many bytes a JSON value takes (strings and keys counted, everything else a
/// few bytes), without serializing it.
fn approx_size(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(approx_size).sum::<usize>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 4 + approx_size(v))
                .sum::<usize>()
                + 2
        }
        _ => 8,
    }
}

/// About how many bytes a patch takes.
fn patch_size(patch: &json_patch::Patch) -> usize {
    use json_patch::PatchOperation as Op;
    patch
        .0
        .iter()
        .map(|op| {
            let value = match op {
                Op::Add(op) => approx_size(&op.value),
                Op::Replace(op) => approx_size(&op.value),
                Op::Test(op) => approx_size(&op.value),
                _ => 0,
            };
            op.path().as_str().len() + 32 + value
        })
        .sum()
}

/// One rewrite a hook proposed.
#[derive(Debug, Clone)]
pub(super) struct Proposal {
    pub field: Field,
    pub key: &'static str,
    pub value: Value,
}

/// The rewrites in a hook's admitted `hookSpecificOutput` (`specific`), with a notice
/// for each one that is malformed: `updatedPrompt` must be a string; `skipResult` counts
/// only with `skip: true`. The one reading of rewrites for the merge and the chain.
pub(super) fn rewrites_of(specific: &Map<String, Value>) -> (Vec<Proposal>, Vec<String>) {
    let mut proposals = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in specific {
        let (field, key) = match key.as_str() {
            "updatedInput" => (Field::Input, "updatedInput"),
            "updatedToolOutput" => (Field::ToolOutput, "updatedToolOutput"),
            "updatedMCPToolOutput" => (Field::ToolOutput, "updatedMCPToolOutput"),
            "updatedPrompt" if value.is_string() => (Field::Prompt, "updatedPrompt"),
            "updatedPrompt" => {
                problems.push("`updatedPrompt` must be a string; ignored".to_string());
                continue;
            }
            "skip" => match value {
                Value::Bool(true) => {
                    let result = specific.get("skipResult").cloned().unwrap_or(Value::Null);
                    proposals.push(Proposal {
                        field: Field::Skip,
                        key: "skipResult",
                        value: result,
                    });
                    continue;
                }
                Value::Bool(false) => continue,
                _ => {
                    problems.push("`skip` must be true or false; ignored".to_string());
                    continue;
                }
            },
            "skipResult" if specific.get("skip") != Some(&Value::Bool(true)) => {
                problems.push("`skipResult` without `skip: true` is ignored".to_string());
                continue;
            }
            _ => continue,
        };
        proposals.push(Proposal {
            field,
            key,
            value: value.clone(),
        });
    }
    (proposals, problems)
}

/// The input field a rewrite key replaces (PermissionRequest's `decision.updatedInput`:
/// `tool_input`, like `updatedInput`).
fn input_field(key: &str) -> &'static str {
    let key = key.strip_prefix("decision.").unwrap_or(key);
    REWRITES
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("tool_input", |(_, field)| field)
}

/// The input a chain hands the hook after one whose result alone merged into `merged`:
/// `input` with the rewrites the merge kept in their fields (`tool_input` replaced by
/// `updatedInput`, `tool_response` by `updatedToolOutput` or `skipResult`, `prompt` by
/// `updatedPrompt`; [`REWRITES`] names the fields), the rest copied; `None` when it
/// rewrote nothing.
pub(super) fn handed_on(input: &Value, merged: super::Outcome) -> Option<Value> {
    let object = input.as_object()?;
    let mut replaced: Vec<(&'static str, Value)> = Vec::with_capacity(2);
    if let Some(value) = merged.updated_input {
        replaced.push((input_field("updatedInput"), value));
    }
    // Both fields are the tool's response: the output a hook rewrote, else the result of
    // the tool it skipped.
    if let Some(value) = merged.updated_tool_output {
        replaced.push((input_field("updatedToolOutput"), value));
    } else if merged.skip {
        let value = merged.skip_result.unwrap_or(Value::Null);
        replaced.push((input_field("skipResult"), value));
    }
    if let Some(prompt) = merged.updated_prompt {
        replaced.push((input_field("updatedPrompt"), Value::String(prompt)));
    }
    if replaced.is_empty() {
        return None;
    }
    // The old values of the rewritten fields are not copied.
    let mut next = Map::with_capacity(object.len() + 1);
    for (key, value) in object {
        match replaced.iter().position(|(field, _)| field == key) {
            Some(i) => next.insert(key.clone(), replaced.swap_remove(i).1),
            None => next.insert(key.clone(), value.clone()),
        };
    }
    for (field, value) in replaced {
        next.insert(field.to_string(), value);
    }
    Some(Value::Object(next))
}

/// A proposal with the hook that made it.
#[derive(Debug, Clone)]
struct Proposed {
    hook: String,
    priority: i64,
    order: usize,
    chain: Option<usize>,
    key: &'static str,
    value: Value,
}

/// The rewrites of one event's hooks, gathered in config order.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    proposed: Vec<(Field, Proposed)>,
}

/// The winning rewrite of one field: its value and the hook that made it last.
#[derive(Debug)]
pub(super) struct Won {
    pub value: Value,
    pub by: String,
}

/// What the rewrites of an event come to.
#[derive(Debug, Default)]
pub(super) struct Resolved {
    pub input: Option<Won>,
    pub tool_output: Option<Won>,
    pub prompt: Option<Won>,
    pub skip: Option<Won>,
    /// The steps of the winning rewrites, in config order.
    pub rewrites: Vec<Rewrite>,
}

impl Gathered {
    /// Adds what `hook` proposed (in config order).
    pub fn propose(&mut self, hook: &Hook, proposals: Vec<Proposal>) {
        let mut fields: Vec<Field> = Vec::with_capacity(proposals.len());
        for p in proposals {
            // One rewrite of a field per hook: the first it said (`updatedMCPToolOutput`
            // and `updatedToolOutput` both rewrite the tool's output; in a chain the
            // second would otherwise count as a later step).
            if fields.contains(&p.field) {
                continue;
            }
            fields.push(p.field);
            self.proposed.push((
                p.field,
                Proposed {
                    hook: hook.id.clone(),
                    priority: hook.priority,
                    order: hook.order,
                    chain: hook.chain,
                    key: p.key,
                    value: p.value,
                },
            ));
        }
    }

    /// Adds the `updatedInput` of PermissionRequest's winning `decision` object, made by
    /// the hook (id, priority, order): it competes alone, never as a step of a chain.
    pub fn propose_decision_input(&mut self, hook: (String, i64, usize), value: Value) {
        let (hook, priority, order) = hook;
        self.proposed.push((
            Field::Input,
            Proposed {
                hook,
                priority,
                order,
                chain: None,
                key: "decision.updatedInput",
                value,
            },
        ));
    }

    /// Composes each chain's rewrites, picks the winner of each field (highest
    /// priority, then config order), and diffs its steps against `input` (`None`: no
    /// `rewrites`).
    pub fn resolve(self, input: Option<&Value>) -> Resolved {
        let mut resolved = Resolved::default();
        let mut steps: Vec<(usize, Rewrite)> = Vec::new();
        for field in FIELDS {
            // Units: one per hook outside a chain, one per chain (its steps in order).
            let mut units: Vec<Vec<&Proposed>> = Vec::new();
            for (_, p) in self.proposed.iter().filter(|(f, _)| *f == field) {
                match units
                    .iter_mut()
                    .find(|u| p.chain.is_some() && u[0].chain == p.chain)
                {
                    Some(unit) => unit.push(p),
                    None => units.push(vec![p]),
                }
            }
            let rank = |unit: &Vec<&Proposed>| {
                let priority = unit.iter().map(|p| p.priority).max().unwrap_or(0);
                (priority, std::cmp::Reverse(unit[0].order))
            };
            // The first of equals stays (a hook that sets both `updatedToolOutput` and
            // `updatedMCPToolOutput`: the first it said).
            let best = units.into_iter().reduce(|best, unit| {
                if rank(&unit) > rank(&best) {
                    unit
                } else {
                    best
                }
            });
            let Some(winner) = best else {
                continue;
            };
            let last = winner.last().expect("a unit has a step");
            let won = Some(Won {
                value: last.value.clone(),
                by: last.hook.clone(),
            });
            match field {
                Field::Input => resolved.input = won,
                Field::ToolOutput => resolved.tool_output = won,
                Field::Prompt => resolved.prompt = won,
                Field::Skip => resolved.skip = won,
            }
            let Some(input) = input else {
                continue;
            };
            let mut before = input.get(input_field(winner[0].key));
            for step in &winner {
                steps.push((
                    step.order,
                    Rewrite {
                        hook: step.hook.clone(),
                        field: step.key.to_string(),
                        patch: field_patch(input_field(step.key), before, &step.value),
                        omitted_bytes: None,
                    },
                ));
                before = Some(&step.value);
            }
        }
        steps.sort_by_key(|(order, _)| *order);
        let mut spent = 0usize;
        resolved.rewrites = steps
            .into_iter()
            .map(|(_, mut rewrite)| {
                let size = patch_size(&rewrite.patch);
                spent = spent.saturating_add(size);
                if spent > REWRITES_BUDGET {
                    rewrite.patch = json_patch::Patch::default();
                    rewrite.omitted_bytes = Some(size);
                }
                rewrite
            })
            .collect();
        resolved
    }
}

/// The JSON Patch of the whole input that turns its field `name` from `before` (absent:
/// `None`) into `after`: the two values diffed where they are (neither is copied into a
/// document of its own), each operation's path under `/name`.
pub(super) fn field_patch(name: &str, before: Option<&Value>, after: &Value) -> json_patch::Patch {
    use json_patch::{AddOperation, PatchOperation as Op, jsonptr::PointerBuf};
    let Some(before) = before else {
        return json_patch::Patch(vec![Op::Add(AddOperation {
            path: PointerBuf::from_tokens([name]),
            value: after.clone(),
        })]);
    };
    let mut patch = json_patch::diff(before, after);
    for op in &mut patch.0 {
        let path = match op {
            Op::Add(op) => &mut op.path,
            Op::Remove(op) => &mut op.path,
            Op::Replace(op) => &mut op.path,
            Op::Move(op) => &mut op.path,
            Op::Copy(op) => &mut op.path,
            Op::Test(op) => &mut op.path,
        };
        path.push_front(name);
    }
    patch
}

/// What Claude Code cannot do of an outcome (`updatedPrompt`, `skip`), as messages for
/// the user under `--format claude`: the prompt goes to the model as typed, and the tool
/// runs. Each names the hook that asked.
pub(super) fn unsupported_by_claude(outcome: &super::Outcome) -> Vec<String> {
    let by = |key: &str| {
        let hooks: Vec<String> = outcome
            .rewrites
            .iter()
            .filter(|r| r.field == key)
            .map(|r| format!("`{}`", r.hook))
            .collect();
        hooks.join(", ")
    };
    let mut messages = Vec::new();
    if outcome.updated_prompt.is_some() {
        messages.push(format!(
            "hookhost: hook {} rewrote the prompt (`updatedPrompt`), which Claude Code \
             cannot apply: the prompt was sent unchanged",
            by("updatedPrompt")
        ));
    }
    if outcome.skip {
        messages.push(format!(
            "hookhost: hook {} asked to answer this tool call without running it (`skip`), \
             which Claude Code cannot do: the tool runs",
            by("skipResult")
        ));
    }
    messages
}
