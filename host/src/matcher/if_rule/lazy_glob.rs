//! The globs of `if` rules (`Read(src/**)`, `Tool*`, `WebFetch(https://x/*)`), kept as
//! text and compiled when an event reaches them.
//!
//! What it costs: a compiled glob holds a regex, 10–15 KB however short the glob, so
//! 4,000 distinct `Read(./a/N/**)` rules held 50 MB once read (190 bytes per byte of the
//! file: 3 GB for a file at the 16 MiB config cap). A rule keeps its glob's text (parsed
//! when the rule is read, so that a bad glob is a load error), and the compiled globs
//! live in one cache of at most [`CACHED_GLOBS`] (a few megabytes, whatever the config):
//! a config with more distinct globs than that compiles again those an event reaches
//! after the cache filled.

use std::path::Path;
use std::sync::Arc;

use globset::{GlobBuilder, GlobMatcher};

use super::super::compiled_cache::CompiledCache;

/// The most compiled globs kept at once, across every rule of the process.
pub(super) const CACHED_GLOBS: usize = 256;

/// A glob as written, with the one option the rules set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct LazyGlob {
    pattern: Box<str>,
    /// `*` does not match `/` (path globs).
    literal_separator: bool,
}

static COMPILED: CompiledCache<LazyGlob, Arc<GlobMatcher>> = CompiledCache::new(CACHED_GLOBS);

impl LazyGlob {
    /// Parses `pattern` (an error for a bad glob), compiling nothing.
    pub(super) fn new(pattern: &str, literal_separator: bool) -> Result<LazyGlob, String> {
        GlobBuilder::new(pattern)
            .literal_separator(literal_separator)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(LazyGlob {
            pattern: pattern.into(),
            literal_separator,
        })
    }

    /// Whether the glob matches `path`. (A glob parsed when the rule was read parses
    /// again; were it not to, the glob would match, so that the filter never hides a
    /// call from a hook.)
    pub(super) fn is_match(&self, path: impl AsRef<Path>) -> bool {
        COMPILED
            .get_or_compile(self, || {
                let glob = GlobBuilder::new(&self.pattern)
                    .literal_separator(self.literal_separator)
                    .build()
                    .ok()?;
                Some(Arc::new(glob.compile_matcher()))
            })
            .is_none_or(|matcher| matcher.is_match(path.as_ref()))
    }

    /// How many compiled globs the cache holds.
    #[cfg(test)]
    pub(super) fn cached() -> usize {
        COMPILED.len()
    }
}
