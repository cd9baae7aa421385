//! A group's regex matcher, kept as text and compiled when an event reaches it.
//!
//! What it costs: a compiled regex holds 10–20 KB however short its pattern, so 4,000
//! groups with distinct regex matchers (`Tool1.*`) held 74 MB once read (240 bytes per
//! byte of the file: near 4 GB for a file at the 16 MiB config cap). The pattern is
//! compiled when the config is read, to report a bad one (and let go), and again when an
//! event reaches it, into one cache of at most [`CACHED_REGEXES`] regexes (a few
//! megabytes, whatever the config): a config with more distinct regex matchers than that
//! compiles again those an event reaches after the cache filled.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use regex::Regex;

/// The most compiled matchers kept at once, across every config of the process.
pub const CACHED_REGEXES: usize = 256;

/// A regex matcher as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LazyRegex(Box<str>);

/// The compiled matchers, by pattern: emptied when full.
static COMPILED_REGEXES: Mutex<Option<HashMap<LazyRegex, Regex>>> = Mutex::new(None);

fn cache() -> MutexGuard<'static, Option<HashMap<LazyRegex, Regex>>> {
    COMPILED_REGEXES.lock().unwrap_or_else(|e| e.into_inner())
}

impl LazyRegex {
    /// Compiles `pattern` under the size limit ([`super::if_rule::compile_regex`]) to
    /// report a bad one, and keeps its text.
    ///
    /// # Errors
    ///
    /// The regex's error.
    pub fn new(pattern: &str) -> Result<LazyRegex, String> {
        super::if_rule::compile_regex(pattern)?;
        Ok(LazyRegex(pattern.into()))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the regex finds a match in `subject`. (A pattern that compiled when the
    /// config was read compiles again; were it not to, it would match, so that the
    /// matcher never hides an event from a hook.)
    pub fn is_match(&self, subject: &str) -> bool {
        self.compiled().is_none_or(|regex| regex.is_match(subject))
    }

    /// The compiled regex, from the cache or compiled now (outside the lock) and kept.
    fn compiled(&self) -> Option<Regex> {
        if let Some(regex) = cache().as_ref().and_then(|c| c.get(self)) {
            return Some(regex.clone());
        }
        let regex = super::if_rule::compile_regex(&self.0).ok()?;
        let mut cache = cache();
        let cache = cache.get_or_insert_with(HashMap::new);
        if cache.len() >= CACHED_REGEXES {
            cache.clear();
        }
        cache.insert(self.clone(), regex.clone());
        Some(regex)
    }

    /// How many compiled matchers the cache holds.
    #[cfg(test)]
    pub(crate) fn cached() -> usize {
        cache().as_ref().map_or(0, HashMap::len)
    }
}
