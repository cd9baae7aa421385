//! Claude Code's "unloadable guard entry" rule for managed policy (2.1.300; 2.1.332 adds
//! PreSkillShellCommand): a hook entry (or matcher) of a guard event
//! ([`crate::event::EventSpec::is_guard`]) in a managed file that cannot be built may be
//! what guards the permissions declared beside it, so **none of that file's hooks run**
//! until it is fixed. The document's other settings (allowlists, ceilings, trust, caps)
//! are kept, and the other managed files' hooks still run. hookhost's own rule stays on
//! top: any managed entry that cannot be built makes managed policy broken, and no hook
//! outside managed policy runs ([`super::Settings::managed_broken`]).

use std::sync::Arc;

use super::spec::{Group, Hook};

/// Marks every hook of `groups` (one managed file's) as not running, naming the entry
/// at `entry` that could not be loaded; returns the marked hooks, for the policy's list.
pub(super) fn disable(groups: &mut [Group], location: &str, entry: &str) -> Vec<Arc<Hook>> {
    let reason = format!(
        "managed policy file {location} has a guard entry that cannot be loaded ({entry}); \
         none of its hooks run until it is fixed"
    );
    let mut marked = Vec::new();
    for group in groups {
        for hook in &mut group.hooks {
            let mut owned = hook.as_ref().clone();
            owned.skip = Some(reason.clone());
            *hook = Arc::new(owned);
            marked.push(hook.clone());
        }
    }
    marked
}
