//! The model of one hook run, as its plugin's calls see it ([`super::model_call`]): the
//! provider resolved for the hook under the run's budget, and what the calls spent. Apart
//! from the linker's side so that the store's state and the grants hold it without
//! depending on the host call.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::handlers::model::{ModelError, Resolved};

/// Where a plugin's budget comes from, in the message when it is spent.
const GRANT: &str = "the hook's `capabilities.model.tokensPerEvent`";
/// Notes kept per call for the diagnostics.
const MAX_NOTES: usize = 4;

/// What a plugin call without a live model grant is told.
pub(super) const NOT_GRANTED: &str = "the model is not granted to this hook: its config grants it with \
`capabilities.model` (`{\"tokensPerEvent\": N}`), to a plugin that imports `hookhost:hook/model`";

/// The model of one hook run, for its plugin: the provider resolved for the hook (or why
/// none could be), under the run's budget, with what the plugin's calls spent.
pub struct PluginModel {
    pub(super) resolved: Result<Resolved, ModelError>,
    pub(super) calls: AtomicU32,
    pub(super) answered: AtomicU32,
    pub(super) notes: Mutex<Vec<String>>,
}

impl PluginModel {
    /// The model of a run whose grant is `tokens` per event: `resolved` (through
    /// [`crate::handlers::model::resolve`]) under the lower of the grant and the
    /// ceiling's budget.
    pub fn new(resolved: Result<Resolved, ModelError>, tokens: u64) -> PluginModel {
        PluginModel {
            resolved: resolved.map(|r| r.within(tokens, GRANT)),
            calls: AtomicU32::new(0),
            answered: AtomicU32::new(0),
            notes: Mutex::default(),
        }
    }

    /// Tokens (input + output) spent by the run's calls.
    pub fn tokens_used(&self) -> u64 {
        self.resolved.as_ref().map_or(0, Resolved::tokens_used)
    }

    /// Calls the model answered.
    pub fn answered(&self) -> u32 {
        self.answered.load(Ordering::Relaxed)
    }

    /// The line of the hook's diagnostics: the model, its calls and tokens, and why
    /// calls got no answer.
    pub fn summary(&self) -> String {
        let calls = self.calls.load(Ordering::Relaxed);
        let mut line = match &self.resolved {
            Ok(r) => format!(
                "model: {}: {calls} calls, {} answered, {} tokens of a budget of {}",
                r.describe(),
                self.answered(),
                r.tokens_used(),
                r.budget()
                    .map_or_else(|| "(none)".to_string(), |b| b.to_string())
            ),
            Err(e) => format!("model: {calls} calls, none possible: {}", e.message),
        };
        for note in self.notes.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            line.push_str("\nmodel: ");
            line.push_str(note);
        }
        line
    }

    pub(super) fn note(&self, note: &str) {
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        if notes.len() < MAX_NOTES {
            notes.push(crate::handlers::output::cap_text(note));
        }
    }
}
