//! A group's regex matcher, kept as text and compiled through the bounded cache of
//! compiled patterns ([`super::compiled_cache`]).
//!
//! What it costs: a compiled regex holds 10–20 KB however short its pattern, so 4,000
//! groups with distinct regex matchers (`Tool1.*`) held 74 MB once read (240 bytes per
//! byte of the file: near 4 GB for a file at the 16 MiB config cap). The pattern is
//! compiled when the config is read, to report a bad one, and what it compiled to goes
//! into the cache of at most [`CACHED_REGEXES`] regexes; an event that reaches a matcher
//! whose regex the cache no longer holds compiles it again.

use regex::Regex;

use super::compiled_cache::CompiledCache;

/// The most compiled matchers kept at once, across every config of the process.
pub const CACHED_REGEXES: usize = 256;

/// A regex matcher as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LazyRegex(Box<str>);

static COMPILED: CompiledCache<LazyRegex, Regex> = CompiledCache::new(CACHED_REGEXES);

impl LazyRegex {
    /// Compiles `pattern` under the size limit (`super::if_rule::compile_regex`),
    /// keeps the regex in the cache and the text in the matcher.
    ///
    /// # Errors
    ///
    /// The regex's error.
    pub fn new(pattern: &str) -> Result<LazyRegex, String> {
        let regex = super::if_rule::compile_regex(pattern)?;
        let matcher = LazyRegex(pattern.into());
        COMPILED.insert(matcher.clone(), regex);
        Ok(matcher)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the regex finds a match in `subject`. (A pattern that compiled when the
    /// config was read compiles again; were it not to, it would match, so that the
    /// matcher never hides an event from a hook.)
    pub fn is_match(&self, subject: &str) -> bool {
        COMPILED
            .get_or_compile(self, || super::if_rule::compile_regex(&self.0).ok())
            .is_none_or(|regex| regex.is_match(subject))
    }

    /// How many compiled matchers the cache holds.
    #[cfg(test)]
    pub(crate) fn cached() -> usize {
        COMPILED.len()
    }
}
