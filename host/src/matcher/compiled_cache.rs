//! One bounded cache of compiled patterns (the regexes of matchers, the globs of `if`
//! rules), shared by every rule of the process: a rule keeps its pattern's text, and
//! what it compiles to lives here, at most `cap` entries (a few megabytes, whatever the
//! config; [`super::LazyRegex`], `if_rule::lazy_glob`). Full, the cache is emptied: a
//! config with more distinct patterns than that compiles again those an event reaches.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

/// Compiled values by pattern, at most `cap` of them.
pub(super) struct CompiledCache<K, V> {
    cap: usize,
    entries: Mutex<Option<HashMap<K, V>>>,
}

impl<K: Hash + Eq + Clone, V: Clone> CompiledCache<K, V> {
    /// An empty cache of at most `cap` entries.
    pub(super) const fn new(cap: usize) -> CompiledCache<K, V> {
        CompiledCache {
            cap,
            entries: Mutex::new(None),
        }
    }

    /// The value compiled for `key`, from the cache or by `compile` (run outside the
    /// lock) and then kept; `None` when `compile` fails.
    pub(super) fn get_or_compile(&self, key: &K, compile: impl FnOnce() -> Option<V>) -> Option<V> {
        if let Some(value) = self.lock().as_ref().and_then(|c| c.get(key)) {
            return Some(value.clone());
        }
        let value = compile()?;
        self.insert(key.clone(), value.clone());
        Some(value)
    }

    /// Keeps `value` for `key` (a value compiled anyway, when the config was read).
    pub(super) fn insert(&self, key: K, value: V) {
        let mut entries = self.lock();
        let entries = entries.get_or_insert_with(HashMap::new);
        if entries.len() >= self.cap && !entries.contains_key(&key) {
            entries.clear();
        }
        entries.insert(key, value);
    }

    /// How many values the cache holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().as_ref().map_or(0, HashMap::len)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HashMap<K, V>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}
