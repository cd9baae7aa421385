//! Required hooks (`"required": true` on a hook or its matcher group): where a
//! `required` is honoured, and the warnings for one that has no effect. What a required
//! hook that gives no verdict does to the event is the merge's rule
//! (`outcome::merge`, `outcome/required.rs`); docs/book/src/required-hooks.md has the whole picture.

use std::sync::Arc;

use super::trust::TrustDecision;
use super::{
    Group, HandlerSpec, Hook, Resolution, RunMode, UnbuiltSpec, is_workspace_source, unique_id,
};
use crate::config::schema::{HandlerType, RawEventGroup, RawHandler};
use crate::config::{ConfigLayer, ConfigWarning};
use crate::event::EventSpec;
use crate::matcher::Matcher;

impl Resolution<'_> {
    /// Whether `hook` is required where it stands, with a warning for a `required` that
    /// has no effect: in a project or local file of a workspace that is not trusted
    /// (whose hooks are skipped anyway), or on a hook that never runs (`enabled: false`,
    /// `if` on an event without a tool call: it never matches, so it never fails closed).
    /// A required hook in the background gives no verdict: it fails closed wherever it
    /// matches, which is said too.
    pub(super) fn required(
        &mut self,
        layer: &ConfigLayer,
        raw_group: &RawEventGroup,
        raw: &RawHandler,
        hook: &Hook,
        path: &str,
    ) -> bool {
        let asked = raw.required.or(raw_group.group.required) == Some(true);
        if !asked {
            return false;
        }
        let field = match raw.required {
            Some(_) => format!("{path}.required"),
            None => match path.rsplit_once(".hooks[") {
                Some((group, _)) => format!("{group}.required"),
                None => format!("{path}.required"),
            },
        };
        let problem = if !self.honours_required(layer) {
            Some(
                "`required` is ignored: the workspace is not trusted, so this file's hooks \
                 do not run (a project or local file's `required` counts only in a trusted \
                 workspace)"
                    .to_string(),
            )
        } else {
            hook.skip.as_ref().map(|never| {
                format!(
                    "`required` has no effect: this hook never runs ({never}), so it never \
                     matches an event"
                )
            })
        };
        if let Some(message) = problem {
            self.warnings.push(ConfigWarning {
                location: layer.origin.location.clone(),
                path: field,
                message,
            });
            return false;
        }
        if hook.mode != RunMode::Sync {
            self.warnings.push(ConfigWarning {
                location: layer.origin.location.clone(),
                path: field,
                message: "a required hook that runs in the background gives no verdict: \
                          every event it matches fails closed; make it synchronous"
                    .into(),
            });
        }
        true
    }

    /// Whether a `required` of `layer` counts: everywhere but in a project or local file
    /// of a workspace that is not trusted.
    fn honours_required(&self, layer: &ConfigLayer) -> bool {
        !is_workspace_source(layer.origin.kind)
            || self.workspace_trust.is_none_or(TrustDecision::is_trusted)
    }

    /// A required hook whose entry `raw` could not be built (`message`): kept as a
    /// skipped hook of type [`HandlerSpec::Unbuilt`], so that an event it would match
    /// fails closed. `None` when the entry is not required where it stands.
    pub(super) fn keep_unbuilt(
        &mut self,
        layer: &ConfigLayer,
        raw_group: &RawEventGroup,
        raw: &RawHandler,
        spec: &EventSpec,
        path: String,
        message: &str,
    ) -> Option<Arc<Hook>> {
        let asked = raw.required.or(raw_group.group.required) == Some(true);
        if !asked || raw.enabled == Some(false) {
            return None;
        }
        let id = super::hook::id_of(raw, layer, &path);
        self.unbuilt(layer, spec, path, raw.kind.as_str(), id, message)
    }

    /// The required entries of `raw_group` that could not even be read
    /// ([`RawEventGroup::unread_required`]), kept as [`keep_unbuilt`](Self::keep_unbuilt)
    /// keeps the ones that could not be built.
    pub(super) fn keep_unread(
        &mut self,
        layer: &ConfigLayer,
        raw_group: &RawEventGroup,
        spec: &EventSpec,
    ) -> Vec<Arc<Hook>> {
        let mut kept = Vec::new();
        for unread in &raw_group.unread_required {
            let kind = unread.kind.map_or("unknown", HandlerType::as_str);
            let id = super::hook::id_at(unread.id.as_deref(), layer, &unread.path);
            let path = unread.path.clone();
            if let Some(hook) = self.unbuilt(layer, spec, path, kind, id, &unread.message) {
                self.hooks.push(hook.clone());
                kept.push(hook);
            }
        }
        kept
    }

    /// The skipped, required hook `id` of type `kind` at `path`, which cannot be built
    /// (`message`); `None` where `required` does not count.
    fn unbuilt(
        &mut self,
        layer: &ConfigLayer,
        spec: &EventSpec,
        path: String,
        kind: &'static str,
        id: String,
        message: &str,
    ) -> Option<Arc<Hook>> {
        if !self.honours_required(layer) {
            return None;
        }
        let hook = Hook {
            id: unique_id(&mut self.ids, id),
            event: spec.name.to_string(),
            origin: layer.origin.clone(),
            config_path: path,
            handler: HandlerSpec::Unbuilt(UnbuiltSpec {
                kind,
                error: message.to_string(),
            }),
            if_rule: None,
            // Which agents it was meant for is unknown too: it fails closed for every one.
            agents: None,
            timeout: spec.default_timeout,
            on_failure: Default::default(),
            priority: 0,
            mode: RunMode::Sync,
            status_message: None,
            skip: Some(format!("the hook cannot be built: {message}")),
            order: self.hooks.len(),
            widens: Vec::new(),
            chain: None,
            required: true,
        };
        Some(Arc::new(hook))
    }

    /// The group of the required hooks of `raw_group`, whose matcher cannot be read
    /// (`message`): which events it was meant for is unknown, so it matches every event
    /// of its name, where each of its required hooks fails closed. `None` when none of its
    /// hooks is required.
    pub(super) fn unbuilt_group(
        &mut self,
        layer: &ConfigLayer,
        raw_group: &RawEventGroup,
        spec: &EventSpec,
        group_path: &str,
        message: &str,
    ) -> Option<Group> {
        let why = format!("its group's matcher cannot be read: {message}");
        let mut hooks = Vec::new();
        for (index, raw) in raw_group.group.hooks.iter().enumerate() {
            let path = format!("{group_path}.hooks[{index}]");
            if let Some(hook) = self.keep_unbuilt(layer, raw_group, raw, spec, path, &why) {
                self.hooks.push(hook.clone());
                hooks.push(hook);
            }
        }
        hooks.extend(self.keep_unread(layer, raw_group, spec));
        (!hooks.is_empty()).then(|| Group {
            matcher: Matcher::All,
            matcher_source: raw_group.group.matcher.clone(),
            sequential: false,
            chain: false,
            hooks,
        })
    }

    /// Completes a built `group`: its required entries that could not be read join it
    /// ([`keep_unread`](Self::keep_unread)), and a warning is given when it has a required
    /// hook and a matcher that accepts no tool of its tool event ([`matches_no_tool`]).
    pub(super) fn finish_required(
        &mut self,
        layer: &ConfigLayer,
        raw_group: &RawEventGroup,
        spec: &EventSpec,
        group_path: &str,
        group: &mut Group,
    ) {
        group.hooks.extend(self.keep_unread(layer, raw_group, spec));
        if group.hooks.iter().any(|h| h.required)
            && let Some(message) = matches_no_tool(group, spec)
        {
            self.warnings.push(ConfigWarning {
                location: layer.origin.location.clone(),
                path: format!("{group_path}.matcher"),
                message,
            });
        }
    }

    /// A required hook that policy refused to build (a ceiling, a host-owned place): kept
    /// as skipped with `message`, so that an event it matches fails closed instead of
    /// going ahead without it.
    pub(super) fn keep_refused(&mut self, mut hook: Hook, message: String) -> Arc<Hook> {
        hook.id = unique_id(&mut self.ids, hook.id);
        hook.required = true;
        hook.skip = Some(message);
        Arc::new(hook)
    }
}

/// What makes two hook entries identical, so that only the first runs: event, matcher,
/// the entry as written, whether it is required (a required hook is identical only to a
/// required one, which then carries the rule for both), and the plugin file it names
/// once resolved: a relative `plugin` is relative to its file, so a repository's copy
/// of a user's entry names another file and must not stand in for the user's guard.
pub(super) fn identity(raw_group: &RawEventGroup, raw: &RawHandler, hook: &Hook) -> String {
    let plugin = match &hook.handler {
        HandlerSpec::Wasm(spec) => spec.plugin.to_string_lossy(),
        _ => Default::default(),
    };
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{plugin}",
        raw_group.event,
        raw_group.group.matcher.as_deref().unwrap_or("*"),
        serde_json::to_string(raw).unwrap_or_default(),
        hook.required
    )
}

/// Claude Code's built-in tools, for the one check of [`matches_no_tool`] (a warning, so a
/// tool added later costs a false warning, never a missed guard).
const KNOWN_TOOLS: &[&str] = &[
    "Agent",
    "AskUserQuestion",
    "Bash",
    "BashOutput",
    "Edit",
    "ExitPlanMode",
    "Glob",
    "Grep",
    "KillShell",
    "LS",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Read",
    "SlashCommand",
    "Skill",
    "Task",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "Write",
];

/// Why a group with a required hook on a tool event can never match: its matcher accepts
/// none of Claude Code's tools (a typo: `bash`, `Bash(git *)`), so the hook never runs
/// and never fails closed. `None` when it accepts one, or names MCP tools (`mcp__…`),
/// which no list holds.
fn matches_no_tool(group: &Group, spec: &EventSpec) -> Option<String> {
    if !spec.tool_event || spec.matcher_field.is_none() {
        return None;
    }
    let source = group.matcher_source.as_deref()?;
    if source.contains("mcp__")
        || KNOWN_TOOLS
            .iter()
            .any(|tool| group.matcher.is_match(Some(tool)))
    {
        return None;
    }
    Some(format!(
        "the matcher `{source}` of this group's required hook names none of the tools of \
         `{}` ({}), so the hook never runs and never fails closed",
        spec.name,
        KNOWN_TOOLS.join(", ")
    ))
}
