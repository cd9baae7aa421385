//! Stage 1 of the pipeline: find the config sources and parse them into raw layers.
//!
//! This is the only stage besides the handlers that touches the filesystem. It knows
//! nothing about precedence or validation beyond "is this well-formed JSON of the right
//! shape": [`crate::policy`] decides what the layers mean together.

pub mod env;
pub mod file;
mod parse;
pub mod schema;
mod sources;

pub use parse::parse_settings;
pub use sources::{
    ConfigLayer, FailedSource, GoodSource, LastGood, LoadedConfig, Origin, SourceKind,
    SourceOptions, load, load_with,
};

use std::fmt;

/// A problem in one config source that stops it from loading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {path}: {message}")]
pub struct ConfigError {
    /// The file (or `--settings` argument) the problem is in.
    pub location: String,
    /// The JSON path of the offending value (`$` for the whole document).
    pub path: String,
    /// What is wrong and what was expected.
    pub message: String,
}

/// A problem that does not stop the source from loading (an unknown event, a field
/// that has no effect where it is).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigWarning {
    /// The file (or `--settings` argument) the problem is in.
    pub location: String,
    /// The JSON path of the offending entry.
    pub path: String,
    /// What was ignored and why.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.location, self.path, self.message)
    }
}
