//! Stage 1 of the pipeline: find the config sources and parse them into raw layers.
//!
//! This is the only stage besides the handlers that touches the filesystem. It knows
//! nothing about precedence or validation beyond "is this well-formed JSON of the right
//! shape": [`crate::policy`] decides what the layers mean together.

pub mod env;
pub mod file;
pub mod flat;
mod lenient;
mod load;
mod loaded;
pub mod lock;
pub mod nss;
mod parse;
pub mod passwd;
pub mod schema;
mod sources;

/// The password database's home of the effective user, as this program looks it up,
/// once per process ([`nss::this_user`] keeps the entry; `config/env.rs` asks it here;
/// the small client `hookhost-dispatch` defines its own, without NSS).
fn password_home_lookup() -> Option<std::path::PathBuf> {
    nss::this_user().and_then(|user| user.home.clone())
}

pub(crate) use load::is_claude_settings_file;
pub use load::{load, load_with, parse_layer};
pub use loaded::{ConfigLayer, FailedSource, GoodSource, LastGood, LoadedConfig, UnreadHook};
pub(crate) use parse::kind_of;
pub use parse::parse_settings;
pub use sources::{FLAT_FILE, Origin, SourceKind, SourceOptions};

/// A problem in a config source, with where it is: the file, the JSON path in it, and
/// what is wrong. The same shape serves both kinds of problem: a [`ConfigError`] stops the
/// hook (or the source) it is in from loading, a [`ConfigWarning`] does not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error("{location}: {path}: {message}")]
pub struct Diagnostic {
    /// The file (or `--settings` argument) the problem is in.
    pub location: String,
    /// The JSON path of the offending value (`$` for the whole document).
    pub path: String,
    /// What is wrong and what was expected, or what was ignored and why.
    pub message: String,
}

/// A problem that stops a source or a hook from loading.
pub type ConfigError = Diagnostic;

/// A problem that does not stop the source from loading (an unknown event, a field that
/// has no effect where it is).
pub type ConfigWarning = Diagnostic;
